"""A lease per cluster, so two applies against the same clusters never interleave.

The lease lives in `reconciler.lease.internal` (1 partition, compacted; `.internal` so it is
never replicated nor pruned). To acquire, a run appends a claim keyed `lease/<owner-id>` with an
expiry, then reads the partition up to its own claim: it holds the lease iff no other live
(unexpired, unreleased) claim comes before its own, so the log orders contenders and exactly
one wins. A loser withdraws its claim (tombstone) and fails saying who holds the lease. The
holder renews from a background thread every ttl/3 and releases with a tombstone, so compaction
keeps the topic small. A run killed with SIGKILL holds the lease until it expires (`ttl`,
default 60 s), except that a claim of a dead process on this same host is ignored at once.

The same topic carries `applied/<cluster>` records: the plan fingerprint, the git revision the
topology came from (commit, author, time, dirty flag), the clusters applied together, and the time
and owner of the last successful apply. `read_applied` reads the latest one back without writing
anything (drift reports it as the revision the live state was last reconciled to).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reconciler import settings
from reconciler.adapters.base import AdminError, ClusterAdmin, NewTopicSpec
from reconciler.contract.spec import LEASE_TOPIC
from reconciler.dev.brokers import pid_alive

DEFAULT_TTL = settings.lease_ttl()


class LockHeld(Exception):
    def __init__(self, cluster: str, holder: dict):
        self.cluster, self.holder = cluster, holder
        left = max(0, int(holder.get("expires_at", 0) - time.time()))
        super().__init__(
            f"cluster {cluster!r} is locked by another apply: {holder.get('who', '?')} (owner {holder.get('owner', '?')}), "
            f"since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(holder.get('acquired_at', 0)))}, "
            f"expires in {left}s unless renewed. Wait for that apply to finish (a dead one's lease expires by itself; "
            f"`apply --lock-timeout 2m` waits for it; if it was killed, `reconciler force-unlock PATH... --cluster "
            f"{cluster} {holder.get('owner', '?')}` removes it now)."
        )


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001
        return "unknown"


def ensure_lease_topic(admin: ClusterAdmin) -> None:
    res = admin.create_topics([NewTopicSpec(LEASE_TOPIC, 1, -1, {"cleanup.policy": "compact"})])[LEASE_TOPIC]
    if not res.ok:
        raise AdminError(f"cluster {admin.alias!r}: cannot create lease topic {LEASE_TOPIC}: {res.message}")


def _dead_local_process(claim: dict) -> bool:
    return (
        claim.get("host") == socket.gethostname()
        and isinstance(claim.get("pid"), int)
        and claim["pid"] != os.getpid()
        and not pid_alive(claim["pid"])
    )


@dataclass
class Lease:
    admin: ClusterAdmin
    ttl: float = DEFAULT_TTL
    owner: str = ""
    who: str = ""
    clock: Callable[[], float] = time.time
    held: bool = False
    _mutex: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.owner = self.owner or uuid.uuid4().hex
        self.who = self.who or f"{_user()}@{socket.gethostname()} pid {os.getpid()}"
        self._key = f"lease/{self.owner}".encode()
        self._acquired_at = 0.0

    def _value(self, op: str) -> bytes:
        now = self.clock()
        return json.dumps(
            {
                "op": op,
                "owner": self.owner,
                "who": self.who,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "acquired_at": self._acquired_at or now,
                "expires_at": now + self.ttl,
            }
        ).encode()

    def acquire(self) -> None:
        ensure_lease_topic(self.admin)
        now = self._acquired_at = self.clock()
        mine = self.admin.produce(LEASE_TOPIC, self._key, self._value("claim"))
        claims: dict[bytes, dict] = {}
        for r in self.admin.read_records(LEASE_TOPIC, mine):
            if not r.key or not r.key.startswith(b"lease/"):
                continue
            if r.value is None:
                claims.pop(r.key, None)
            else:
                claims[r.key] = json.loads(r.value)
        rivals = [
            v
            for k, v in claims.items()
            if k != self._key and v.get("expires_at", 0) > now and not _dead_local_process(v)
        ]
        if rivals:
            self.admin.produce(LEASE_TOPIC, self._key, None)
            raise LockHeld(self.admin.alias, min(rivals, key=lambda v: v.get("acquired_at", 0)))
        self.held = True

    def renew(self) -> None:
        with self._mutex:
            if self.held:
                self.admin.produce(LEASE_TOPIC, self._key, self._value("renew"))

    def release(self) -> None:
        with self._mutex:
            if self.held:
                self.held = False
                self.admin.produce(LEASE_TOPIC, self._key, None)

    def record_applied(self, info: dict) -> None:
        self.admin.produce(
            LEASE_TOPIC,
            f"applied/{self.admin.alias}".encode(),
            json.dumps({**info, "owner": self.owner, "who": self.who, "at": self.clock()}).encode(),
        )


APPLIED_PREFIX = b"applied/"


def read_applied(admin: ClusterAdmin) -> dict | None:
    """The latest `applied/<cluster>` record on the cluster, or None (never applied, or compacted away).

    Read-only: takes no lease and creates nothing (a cluster without the lease topic was never applied to).
    """
    latest: dict | None = None
    for r in admin.read_to_end(LEASE_TOPIC):
        if r.key != APPLIED_PREFIX + admin.alias.encode():
            continue
        if r.value is None:
            latest = None
            continue
        try:
            value = json.loads(r.value)
        except ValueError:
            continue
        if isinstance(value, dict):
            latest = value
    return latest


def live_claims(admin: ClusterAdmin, now: float | None = None) -> dict[str, dict]:
    """The unexpired lease claims on the cluster, by owner id (the LOCK_ID of `force-unlock`). Read-only."""
    now = time.time() if now is None else now
    claims: dict[str, dict] = {}
    for r in admin.read_to_end(LEASE_TOPIC):
        if not r.key or not r.key.startswith(b"lease/"):
            continue
        owner = r.key[len(b"lease/") :].decode(errors="replace")
        if r.value is None:
            claims.pop(owner, None)
            continue
        try:
            claim = json.loads(r.value)
        except ValueError:
            continue
        if isinstance(claim, dict):
            claims[owner] = claim
    return {o: c for o, c in claims.items() if c.get("expires_at", 0) > now}


def force_unlock(admin: ClusterAdmin, owner: str) -> dict | None:
    """Withdraw the lease claim `owner` on the cluster (a tombstone, as its holder would on release) and
    return the claim, or None when no live claim has that id. For a lease left by a killed apply on
    another host; an apply that is still running loses its exclusivity, so check first (Terraform's
    force-unlock carries the same warning)."""
    claim = live_claims(admin).get(owner)
    if claim is not None:
        admin.produce(LEASE_TOPIC, f"lease/{owner}".encode(), None)
    return claim


class ClusterLocks:
    """Leases on several clusters, taken in alias order (all released if any one is held elsewhere)
    and renewed by a background thread while the `with` block runs.

    With `timeout` > 0 a lease held elsewhere is waited for (retried every `poll` seconds, `on_wait`
    told who holds it and how long is left) instead of failing at once: Terraform's `-lock-timeout`."""

    def __init__(
        self,
        admins: Sequence[ClusterAdmin],
        ttl: float = DEFAULT_TTL,
        *,
        timeout: float = 0.0,
        poll: float = 2.0,
        on_wait: Callable[[LockHeld, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        owner = uuid.uuid4().hex
        self.ttl = ttl
        self.timeout, self.poll, self.on_wait, self._clock, self._sleep = timeout, poll, on_wait, clock, sleep
        self.leases = [Lease(a, ttl, owner) for a in sorted(admins, key=lambda a: a.alias)]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _acquire_all(self) -> None:
        try:
            for lease in self.leases:
                lease.acquire()
        except BaseException:
            for lease in self.leases:
                try:
                    lease.release()
                except AdminError:
                    pass
            raise

    def __enter__(self) -> ClusterLocks:
        deadline = self._clock() + max(0.0, self.timeout)
        while True:
            try:
                self._acquire_all()
                break
            except LockHeld as held:
                left = deadline - self._clock()
                if left <= 0:
                    raise
                if self.on_wait is not None:
                    self.on_wait(held, left)
                self._sleep(min(self.poll, left))
        self._thread = threading.Thread(target=self._renew_loop, name="reconciler-lease", daemon=True)
        self._thread.start()
        return self

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            for lease in self.leases:
                try:
                    lease.renew()
                except AdminError:
                    pass  # retried next round; the lease outlives a few missed renewals

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for lease in self.leases:
            try:
                lease.release()
            except AdminError:
                pass  # it expires on its own

    def __exit__(self, *exc) -> None:
        self.release()
