"""An engine's flows share their producers and admin clients, one per cluster and role (engine/clients.py's
`SharedClients`, handed to each flow's `Connections.open`): issue 39, an idle engine's cost grew with the number of
librdkafka clients (each a main thread and broker threads on timers of their own)."""

from __future__ import annotations

import threading

from reconciler.contract.spec import ClusterSpec
from reconciler.engine import clients
from reconciler.engine.clients import Role, SharedClients, sharing_key
from reconciler.engine.delivery import mode_of
from reconciler.engine.driver_parts import Connections
from tests.spec_helpers import job_spec

WEST, EAST, NORTH = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"  # nothing listens: the clients are never used


class Client:
    """A producer or admin client as the factory made it: what it was made with, and its flushes."""

    def __init__(self, kind: str, conf: dict) -> None:
        self.kind, self.conf, self.flushes = kind, conf, 0

    def flush(self, timeout: float = 0.0) -> int:
        self.flushes += 1
        return 0


class CountingFactory:
    """A `ClientFactory` that records every client it makes."""

    def __init__(self) -> None:
        self.made: list[Client] = []

    def producer(self, conf: dict) -> Client:
        self.made.append(Client("producer", conf))
        return self.made[-1]

    def admin(self, conf: dict) -> Client:
        self.made.append(Client("admin", conf))
        return self.made[-1]

    def of(self, kind: str, bootstrap: str) -> list[Client]:
        return [c for c in self.made if c.kind == kind and c.conf["bootstrap.servers"] == bootstrap]


def spec(source_alias: str, source: str = WEST):
    return job_spec(f"{source_alias}->east", ClusterSpec(source_alias, source), ClusterSpec("east", EAST))


def opened(specs, shared: SharedClients) -> list[Connections]:
    return [Connections.open(s, mode_of(s), None, threading.Event(), shared) for s in specs]


def close(conns: list[Connections]) -> None:
    for c in conns:
        c.close(end_reader_idle=True, checkpoints_idle=True)


def test_an_engine_of_three_flows_opens_one_client_per_cluster_and_role():
    factory = CountingFactory()
    shared = SharedClients(factory)
    # Three flows from one source cluster (named differently by each, as the benchmark's s0..s2) into one target.
    conns = opened([spec("s0"), spec("s1"), spec("s2")], shared)
    try:
        assert len(factory.of("admin", WEST)) == 1 and len(factory.of("admin", EAST)) == 1
        assert len(factory.of("producer", WEST)) == 1  # heartbeats and offset syncs on the source
        assert len(factory.of("producer", EAST)) == 2  # status and heartbeats; the checkpoint rounds' own
        assert len(factory.made) == 5 and shared.count() == 6  # and the watch's hub
        for role in ("source_admin", "target_admin", "source_producer", "target_producer", "checkpoint_producer"):
            assert len({id(getattr(c, role)) for c in conns}) == 1, role
        assert conns[0].target_producer is not conns[0].checkpoint_producer
        # The end reads (idle gate, lag) go through the shared source admin, not an admin of their own.
        assert all(c.ends.requests.admin is c.source_admin for c in conns)  # type: ignore[attr-defined]
        # the watermarks through the flow's OffsetStore consumer, not a consumer of their own
        assert all(c.ends.requests.consumer() is c.offsets.source_consumer for c in conns)  # type: ignore[attr-defined]
        assert all(c.end_reader.ends is c.ends for c in conns)
        # and the lag's reads of committed positions through the flow's OffsetStore, not a consumer of their own
        assert all(c.end_reader._store is c.offsets for c in conns)
        assert conns[0].status.producer is conns[2].target_producer
        # One arrival watch consumer (its hub) listens for the three idle flows of the source.
        assert len({id(c.arrivals.hub) for c in conns}) == 1
        # The checkpoint rounds' admin of the target's groups is made when sync.group_offsets first syncs one (off
        # by default): none for these flows.
        assert all(c.checkpoints._target_groups is None for c in conns)
    finally:
        close(conns)
    assert shared.count() == 0


def test_a_flow_of_another_source_shares_only_the_target_clients():
    factory = CountingFactory()
    shared = SharedClients(factory)
    conns = opened([spec("s0"), spec("north", NORTH)], shared)
    try:
        assert conns[0].target_producer is conns[1].target_producer
        assert conns[0].target_admin is conns[1].target_admin
        assert conns[0].source_admin is not conns[1].source_admin
        assert conns[0].source_producer is not conns[1].source_producer
        assert len(factory.of("admin", NORTH)) == len(factory.of("producer", NORTH)) == 1
        assert len(factory.made) == 7
        assert conns[0].arrivals.hub is not conns[1].arrivals.hub
    finally:
        close(conns)


def test_a_client_lives_until_its_last_flow_lets_go():
    factory = CountingFactory()
    shared = SharedClients(factory)
    conns = opened([spec("s0"), spec("s1")], shared)
    producer = conns[0].target_producer
    close(conns[:1])
    assert shared.count() == 6  # the other flow still uses them
    assert producer.flushes == 1  # the leaving flow's records are flushed
    again = opened([spec("s2")], shared)  # a flow started later (or again) takes the same clients
    assert again[0].target_producer is producer and len(factory.made) == 5
    close(conns[1:] + again)
    assert shared.count() == 0
    fresh = opened([spec("s0")], shared)  # after the last let go, a flow gets new ones
    try:
        assert fresh[0].target_producer is not producer and len(factory.made) == 10
    finally:
        close(fresh)


def test_clients_differ_by_cluster_and_settings_not_by_name():
    east = clients.producer_config(ClusterSpec("east", EAST), spec("s0"))
    renamed = clients.producer_config(ClusterSpec("east", EAST), spec("s1"))
    assert east["client.id"] != renamed["client.id"]
    assert sharing_key(Role.PRODUCER, east) == sharing_key(Role.PRODUCER, renamed)
    assert sharing_key(Role.PRODUCER, east) != sharing_key(Role.CHECKPOINTS, east)
    tuned = clients.producer_config(ClusterSpec("east", EAST, {"compression.type": "lz4"}), spec("s0"))
    assert sharing_key(Role.PRODUCER, east) != sharing_key(Role.PRODUCER, tuned)
    other = clients.producer_config(ClusterSpec("east", NORTH), spec("s0"))
    assert sharing_key(Role.PRODUCER, east) != sharing_key(Role.PRODUCER, other)
