"""librdkafka settings for the job's clients, a per-process cache of them, and an engine's shared clients.

The flows of an engine share their producers and admin clients, one per cluster and role (`SharedClients`).
Python workers are reused across Spark tasks (`spark.python.worker.reuse`), so a worker keeps
its consumer, producers and their connections in `CACHE` (module state survives between tasks;
the pickled task function's globals do not).
"""

from __future__ import annotations

import enum
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from reconciler import logs
from reconciler.adapters.read_to_end import END_READER
from reconciler.contract.spec import ClusterSpec, JobSpec, job_group
from reconciler.topology import secrets

log = logging.getLogger(__name__)

log = logging.getLogger(__name__)

#: How often the job's clients refresh the metadata of the topics they use (librdkafka's default is 5 minutes):
#: a partition added to a source or remote topic is known within this (MM2 re-reads topics every
#: refresh.topics.interval.seconds; a producer that hits a partition it does not know yet is also replaced).
METADATA_REFRESH_MS = 10_000

#: How much longer than an admin request's own timeout (`request_timeout`) its answers are waited for: by then
#: librdkafka has answered every part of it, the parts whose broker did not answer as such (a partition's ListOffsets,
#: a broker's ListGroups) and the others with their answers. Waiting only the request's own timeout, the first
#: future's wait took all of it and every answer was lost when one broker hung (issue 47).
ANSWER_GRACE_S = 2.0

# Client settings the job owns: a cluster's own `config` may not override these.
_FORCED_CONSUMER = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,  # END_READER's, which a cluster's config must not switch off
    "auto.offset.reset": "error",  # an out-of-range offset is reported, never silently reset
}


def consumer_config(
    cluster: ClusterSpec, spec: JobSpec, *, group: str | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "group.id": group or job_group(spec),
        "isolation.level": "read_committed",
        **END_READER,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 4_194_304,
        "queued.max.messages.kbytes": 65_536,
        "socket.keepalive.enable": True,
        "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
        "client.id": f"reconciler-mirror-{spec.source.alias}-{spec.target.alias}",
    }
    conf.update(cluster.client_config(environ))
    conf.update(_FORCED_CONSUMER)
    return logs.client_config(conf, logs.JOB_CLIENT_LOGGER)


def probe_consumer_config(
    cluster: ClusterSpec, spec: JobSpec, group: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A consumer that reads one record per partition (the lag side channel's oldest-record timestamps,
    engine/lag.py): the job's consumer settings with small fetches, so it does not prefetch a backlog."""
    conf = consumer_config(cluster, spec, group=group, environ=environ)
    conf.update({"fetch.max.bytes": 1_048_576, "max.partition.fetch.bytes": 8_192, "queued.max.messages.kbytes": 1_024})
    return conf


#: How long the broker may hold the arrival watch's fetch when there is nothing to read (engine/arrivals.py): the
#: watch's idle cost against how soon it hears of a record. Measured on Tansu (which answers a held fetch within
#: ~125 ms of a record arriving), 4 partitions, a record every 370 ms, 60 records: 100 ms -> wake-up p50 16 ms,
#: max 59 ms, the idle consumer 0.14 % of a core; 250 ms -> 69/127 ms, 0.09 %; 500 ms -> 65/127 ms, 0.07 %. Through
#: the deployed job (bench/deployed.py latency) 500 ms made the first records after an idle spell wait up to
#: 270-430 ms (100 ms: 130-210 ms): the 0.07 % of a core per idle flow buys that.
WATCH_FETCH_WAIT_MS = 100

#: The arrival watch's fetch wait once it has heard nothing for `arrivals.WATCH_DEEP_QUIET_S` (librdkafka's default):
#: ~0.07 % of a core per idle source instead of ~0.14 %. Apache Kafka answers a held fetch as soon as a record
#: arrives (fetch.min.bytes 1), so the long wait delays nothing there; on Tansu it does (the figures above).
WATCH_DEEP_FETCH_WAIT_MS = 500


def watch_consumer_config(
    cluster: ClusterSpec, spec: JobSpec, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The arrival watch's consumer (engine/arrivals.py): the probe's small fetches, a short fetch wait, and no
    end-of-partition events (it listens for records; it never reads to an end)."""
    conf = probe_consumer_config(cluster, spec, job_group(spec) + ".watch", environ)
    conf.update({"fetch.wait.max.ms": WATCH_FETCH_WAIT_MS, "enable.partition.eof": False})
    return conf


def producer_config(
    cluster: ClusterSpec,
    spec: JobSpec,
    *,
    transactional_id: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    conf: dict[str, Any] = {
        # 20 ms, both modes (measured, docs/replication-job.md): against 5 ms, 15-30% less CPU per
        # record (fewer, larger produce requests for the job and for the target broker) for at
        # most 15 ms more latency in at-least-once; a round's end flushes at once (flush does not
        # wait for linger), and exactly-once records are visible at the round's commit anyway.
        "linger.ms": 20,
        "batch.size": 1_048_576,
        "batch.num.messages": 100_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "message.timeout.ms": 120_000,
        "socket.keepalive.enable": True,
        "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
        "client.id": f"reconciler-mirror-{spec.source.alias}-{spec.target.alias}",
    }
    conf.update(cluster.client_config(environ))
    conf.update({"enable.idempotence": True, "acks": "all"})
    if transactional_id:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = 60_000
        conf["message.timeout.ms"] = min(int(conf.get("message.timeout.ms", 60_000)), 60_000)
    return logs.client_config(conf, logs.JOB_CLIENT_LOGGER)


def admin_config(cluster: ClusterSpec, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    return logs.client_config(
        {
            "socket.keepalive.enable": True,
            "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
            **cluster.client_config(environ),
        },
        logs.JOB_CLIENT_LOGGER,
    )


#: How long a process trusts its last resolution of a cluster's settings (Fingerprints): a credential rotated in
#: RECONCILER_SECRETS_DIR (or anywhere `${NAME}` reads) is seen within this, and an idle engine reads its credential
#: files at most once per cluster this often, not at every task.
FINGERPRINT_TTL_S = 5.0


class Fingerprints:
    """The fingerprint (secrets.fingerprint: sha256, never the values) of each cluster's resolved client settings,
    re-resolved at most every `ttl` seconds per process. The client caches key their clients by it, so a rotated
    credential makes new clients (the old ones closed) within `ttl` of the change; each process logs a change
    once, without values ("credentials of cluster 'west' changed: reconnecting")."""

    def __init__(self, ttl: float = FINGERPRINT_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.clock = ttl, clock
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str, str, int | None], tuple[str, float]] = {}

    @staticmethod
    def _key(cluster: ClusterSpec, environ: Mapping[str, str] | None) -> tuple[str, str, str, int | None]:
        # an environment given (tests) is one of its own: the process's is None
        env = None if environ is None else id(environ)
        return cluster.alias, cluster.bootstrap_servers, json.dumps(dict(cluster.config), sort_keys=True), env

    def of(self, cluster: ClusterSpec, environ: Mapping[str, str] | None = None, fresh: bool = False) -> str:
        """The cluster's fingerprint now (at most `ttl` seconds old; `fresh`: resolved now, as the clients made next
        are). A resolution that fails keeps the last one (the client built next resolves again and says what is
        wrong); with none known it is ''."""
        key, now = self._key(cluster, environ), self.clock()
        with self._lock:
            known = self._known.get(key)
            if known is not None and now - known[1] < self.ttl and not fresh:
                return known[0]
        try:
            fp = secrets.fingerprint(cluster.client_config(environ), files=True)
        except secrets.SecretsError:
            fp = known[0] if known is not None else ""
        with self._lock:
            last = self._known.get(key)
            self._known[key] = (fp, now)
        if last is not None and last[0] and fp and last[0] != fp:
            log.info("credentials of cluster %r changed: reconnecting", cluster.alias)
        return fp


FINGERPRINTS = Fingerprints()


def process_identity() -> str:
    """Which worker process this is: a transactional producer is reused only by its own process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class ClientCache:
    """Clients of one worker process, keyed by whatever identifies their settings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple, Any] = {}

    def get(self, key: tuple, factory: Callable[[], Any]) -> Any:
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = factory()
            return client

    def keys(self) -> list[tuple]:
        return list(self._clients)

    def peek(self, key: tuple) -> Any:
        return self._clients.get(key)

    def put(self, key: tuple, client: Any) -> None:
        self._clients[key] = client

    def drop(self, key: tuple) -> None:
        with self._lock:
            client = self._clients.pop(key, None)
        if client is not None:
            close = getattr(client, "close", None)
            try:
                if close is not None:
                    close()
            except Exception:  # noqa: BLE001 - closing a broken client must not fail the task
                pass

    def clear(self) -> None:
        for key in list(self._clients):
            self.drop(key)


CACHE = ClientCache()


# --- an engine's clients, shared by its flows ---------------------------------------------------------------
class ClientFactory(Protocol):
    """Makes the librdkafka clients the flows of an engine share (KafkaClients; tests count what is made)."""

    def producer(self, conf: dict[str, Any]) -> Any: ...

    def admin(self, conf: dict[str, Any]) -> Any: ...


class KafkaClients:
    """confluent_kafka's `Producer` and `AdminClient`."""

    def producer(self, conf: dict[str, Any]) -> Any:
        from confluent_kafka import Producer

        return Producer(conf)

    def admin(self, conf: dict[str, Any]) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(conf)


class Role(enum.Enum):
    """What a shared client is for: one client per cluster and role in an engine."""

    ADMIN = "admin"  # topics, configs, ListOffsets (the idle gate's and the lag's end reads), group offsets
    PRODUCER = "producer"  # heartbeats, offset syncs, status records
    CHECKPOINTS = "checkpoint producer"  # the checkpoint rounds' own: their flush waits for checkpoints only
    WATCH = "arrival watch"  # the idle flows' arrival watches (engine/arrivals.py's ArrivalHub): one consumer
    FENCE = (
        "status tail"  # the fences' read of the target's status topic (engine/fencing.py's StatusTail): one consumer
    )


#: Settings that name a client, not how it connects: flows whose clients differ only in these share one (the watch
#: never joins its group nor commits: its `group.id` names it only).
_NAMING = ("client.id", "logger", "group.id")


def sharing_key(role: Role, conf: Mapping[str, Any]) -> tuple[Role, str]:
    """Which clients are one: the same role and the same connection settings (secrets resolved: a rotated
    credential, or a certificate file renewed in place, makes a client of its own), whatever the flow's aliases
    call the cluster (`client.id`). The key is their fingerprint (sha256), so no credential is kept in it."""
    return role, secrets.fingerprint({k: v for k, v in conf.items() if k not in _NAMING}, files=True)


class SharedClients:
    """The producers and admin clients of an engine's flows, one per cluster and role (`Role`): each librdkafka
    client runs a main thread and a thread per broker that wake up on their own timers, so an engine of N idle
    flows pays for N times fewer of them. A flow `acquire`s a client at its start and `release`s it at its end;
    the first acquire makes it (with that flow's `client.id`), the last release flushes and forgets it."""

    def __init__(self, factory: ClientFactory | None = None) -> None:
        self.factory: ClientFactory = factory if factory is not None else KafkaClients()
        self._lock = threading.Lock()
        self._clients: dict[tuple[Role, str], tuple[Any, int]] = {}

    def acquire(self, role: Role, conf: dict[str, Any], make: Callable[[], Any] | None = None) -> Any:
        """The client of `role` for these settings; `make` makes it (Role.WATCH: an ArrivalHub) where the factory
        does not."""
        key = sharing_key(role, conf)
        with self._lock:
            client, users = self._clients.get(key, (None, 0))
            if client is None:
                if make is not None:
                    client = make()
                else:
                    client = self.factory.admin(conf) if role is Role.ADMIN else self.factory.producer(conf)
            self._clients[key] = (client, users + 1)
            return client

    def release(self, client: Any, flush_timeout: float = 10.0) -> None:
        """A flow is done with `client`: its producer's messages are flushed (a neighbour's too, if it still
        shares it); the last user's release forgets it (librdkafka closes it when it is collected)."""
        with self._lock:
            key = next((k for k, (c, _) in self._clients.items() if c is client), None)
            if key is None:
                return
            _, users = self._clients[key]
            last = users <= 1
            if last:
                del self._clients[key]
            else:
                self._clients[key] = (client, users - 1)
        if key[0] in (Role.WATCH, Role.FENCE):
            if last:
                client.close()
        elif key[0] is not Role.ADMIN:
            try:
                client.flush(flush_timeout)
            except Exception as exc:  # noqa: BLE001 - a producer turned fatal (emitters.py `Renewing`): nothing to flush
                log.warning("cannot flush a producer at its release: %s", exc)

    def count(self) -> int:
        """Clients open now."""
        with self._lock:
            return len(self._clients)
