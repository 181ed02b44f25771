"""The per-cluster lease: one holder at a time, clear failure, release, expiry, log-ordered contention."""

import os
import subprocess
import sys
import time

import pytest

from reconciler.adapters.memory_admin import MemoryAdmin, MemoryCluster
from reconciler.apply.lock import LEASE_TOPIC, ClusterLocks, Lease, LockHeld


def test_second_apply_is_refused_while_the_first_holds_the_lease():
    mc = MemoryCluster("east")
    first = Lease(MemoryAdmin(mc), who="alice@ci pid 1")
    first.acquire()
    second = Lease(MemoryAdmin(mc), who="bob@laptop pid 2")
    with pytest.raises(LockHeld) as exc:
        second.acquire()
    assert "alice@ci pid 1" in str(exc.value) and "east" in str(exc.value) and "expires in" in str(exc.value)
    first.release()
    second.acquire()
    assert second.held
    assert mc.topics[LEASE_TOPIC].configs == {"cleanup.policy": "compact"}


def test_expired_lease_of_a_dead_run_is_taken_over():
    mc = MemoryCluster("east")
    now = [1000.0]
    Lease(MemoryAdmin(mc), ttl=60, clock=lambda: now[0]).acquire()  # never released: the run was killed
    now[0] += 61
    late = Lease(MemoryAdmin(mc), ttl=60, clock=lambda: now[0])
    late.acquire()
    assert late.held


def test_renewal_keeps_the_lease():
    mc = MemoryCluster("east")
    now = [1000.0]
    holder = Lease(MemoryAdmin(mc), ttl=60, clock=lambda: now[0])
    holder.acquire()
    now[0] += 50
    holder.renew()
    now[0] += 50
    with pytest.raises(LockHeld):
        Lease(MemoryAdmin(mc), ttl=60, clock=lambda: now[0]).acquire()


def test_cluster_locks_renew_in_the_background():
    mc = MemoryCluster("east")
    with ClusterLocks([MemoryAdmin(mc)], ttl=0.3):
        time.sleep(0.5)  # longer than the ttl: only renewals keep it
        with pytest.raises(LockHeld):
            Lease(MemoryAdmin(mc)).acquire()
    Lease(MemoryAdmin(mc)).acquire()


def test_lease_of_a_dead_process_on_this_host_is_taken_over_at_once():
    mc = MemoryCluster("east")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ghost = Lease(MemoryAdmin(mc), ttl=600)
    ghost._value_orig = ghost._value
    ghost._value = lambda op: ghost._value_orig(op).replace(
        f'"pid": {os.getpid()}'.encode(), f'"pid": {dead.pid}'.encode()
    )
    ghost.acquire()  # "killed" right after: never released
    fresh = Lease(MemoryAdmin(mc))
    fresh.acquire()
    assert fresh.held


def test_earliest_claim_in_the_log_wins_and_the_loser_withdraws():
    mc = MemoryCluster("east")
    a, b = Lease(MemoryAdmin(mc), owner="a"), Lease(MemoryAdmin(mc), owner="b")
    a.acquire()
    with pytest.raises(LockHeld):
        b.acquire()
    keys = [(k, v is None) for k, v in mc.topics[LEASE_TOPIC].log]
    assert keys == [(b"lease/a", False), (b"lease/b", False), (b"lease/b", True)]
    a.release()
    b.acquire()


def test_cluster_locks_release_everything_when_one_is_held():
    west, east = MemoryCluster("west"), MemoryCluster("east")
    Lease(MemoryAdmin(east), owner="other").acquire()
    locks = ClusterLocks([MemoryAdmin(west), MemoryAdmin(east)])
    with pytest.raises(LockHeld):
        with locks:
            pass
    Lease(MemoryAdmin(west)).acquire()  # west was released again


def test_applied_record_is_written_next_to_the_lease():
    mc = MemoryCluster("east")
    lease = Lease(MemoryAdmin(mc))
    lease.acquire()
    lease.record_applied({"revision": "abc", "fingerprint": "sha256:x"})
    key, value = mc.topics[LEASE_TOPIC].log[-1]
    assert key == b"applied/east" and b'"revision": "abc"' in value


def test_lock_timeout_waits_for_the_holder_then_takes_the_lease():
    """Terraform's -lock-timeout: a held lease is retried until it is released or the timeout passes."""
    mc = MemoryCluster("east")
    holder = Lease(MemoryAdmin(mc), who="alice@ci pid 1")
    holder.acquire()
    now, waits = [0.0], []

    def sleep(seconds):  # the holder finishes while we wait
        now[0] += seconds
        if now[0] >= 4:
            holder.release()

    locks = ClusterLocks(
        [MemoryAdmin(mc)],
        timeout=30,
        poll=2,
        clock=lambda: now[0],
        sleep=sleep,
        on_wait=lambda held, left: waits.append((held.holder["who"], left)),
    )
    with locks:
        assert all(lease.held for lease in locks.leases)
    assert [w[0] for w in waits] == ["alice@ci pid 1", "alice@ci pid 1"] and waits[0][1] == 30


def test_lock_timeout_gives_up_with_the_holder_named():
    mc = MemoryCluster("east")
    Lease(MemoryAdmin(mc), who="alice@ci pid 1").acquire()
    now = [0.0]
    locks = ClusterLocks(
        [MemoryAdmin(mc)], timeout=5, poll=2, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    with pytest.raises(LockHeld, match="alice@ci pid 1"):
        locks.__enter__()
    assert now[0] == 5
    assert not any(lease.held for lease in locks.leases)


def test_force_unlock_withdraws_exactly_the_named_claim():
    from reconciler.apply.lock import force_unlock, live_claims

    mc = MemoryCluster("east")
    stuck = Lease(MemoryAdmin(mc), who="killed@other-host pid 9")
    stuck.acquire()  # its process died on another host: the claim would live until it expires
    assert list(live_claims(MemoryAdmin(mc))) == [stuck.owner]
    assert force_unlock(MemoryAdmin(mc), "not-an-owner") is None
    claim = force_unlock(MemoryAdmin(mc), stuck.owner)
    assert claim is not None and claim["who"] == "killed@other-host pid 9"
    assert live_claims(MemoryAdmin(mc)) == {}
    fresh = Lease(MemoryAdmin(mc))
    fresh.acquire()
    assert fresh.held
