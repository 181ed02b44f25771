"""The fences of an engine's flows into one target read its status topic through one consumer (engine/fencing.py
`StatusTail`, issue 47): a round reads only if no read started since the fence's previous round, each record goes
to the fences of its flow, and a newer instance of a flow is found whichever flow's round read its record. A fake
consumer and clock behind the tail (no broker: the read against Tansu is the engine's integration tests')."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.contract.spec import STATUS_TOPIC, ClusterSpec
from reconciler.contract.status import StatusRecord, StatusState
from reconciler.engine.clients import Role, SharedClients
from reconciler.engine.fencing import InstanceFence, StatusTail, fence_config
from tests.spec_helpers import job_spec

EAST = ClusterSpec("east", "127.0.0.1:2")
A = job_spec("a->east", ClusterSpec("a", "127.0.0.1:1"), EAST)
B = job_spec("b->east", ClusterSpec("b", "127.0.0.1:3"), EAST)


@dataclass
class Msg:
    k: bytes
    v: bytes

    def error(self):
        return None

    def key(self):
        return self.k

    def value(self):
        return self.v


@dataclass
class Topic:
    partitions: dict = field(default_factory=lambda: {0: None})
    error: object = None


@dataclass
class Metadata:
    topics: dict


@dataclass
class FakeConsumer:
    """The status topic as a list of messages: each consume hands what was published since the last one."""

    published: list[Msg] = field(default_factory=list)
    read: int = 0
    consumes: int = 0
    closed: bool = False
    paused: bool = True

    def list_topics(self, topic, timeout):
        return Metadata({STATUS_TOPIC: Topic()})

    def assign(self, parts):
        pass

    def assignment(self):
        return ["p0"]

    def resume(self, parts):
        self.paused = False

    def pause(self, parts):
        self.paused = True

    def consume(self, n, timeout):
        assert not self.paused
        self.consumes += 1
        out, self.read = self.published[self.read :], len(self.published)
        return out

    def close(self):
        self.closed = True

    def publish(self, flow: str, instance: str, started_at: int, state=StatusState.RUNNING) -> None:
        record = StatusRecord(flow=flow, state=state, started_at=started_at, instance_id=instance)
        self.published.append(Msg(flow.encode(), record.to_json().encode()))


def fences():
    """Two flows of one engine into `east`, their fences on one tail (instances started at 1,000 ms)."""
    consumer, shared = FakeConsumer(), SharedClients()
    conf = fence_config(A)
    tail = StatusTail(conf, consumer=consumer)
    shared.acquire(Role.FENCE, conf, lambda: tail)  # the tail the fences then share
    a = InstanceFence(A, "ia", 1_000, shared=shared)
    b = InstanceFence(B, "ib", 1_000, shared=shared)
    return consumer, shared, tail, a, b


def test_the_flows_of_an_engine_into_one_target_share_one_status_tail_and_one_read_a_round():
    consumer, shared, tail, a, b = fences()
    assert a._tail is b._tail is tail, "one consumer of the status topic for both flows"
    assert a.newer() is None and b.newer() is None
    assert tail.reads == 1, "the first round reads; the neighbour's next round uses that read"
    for _ in range(5):  # rounds of both, one after the other, as their fencing threads run them
        a.newer()
        b.newer()
    assert tail.reads == 6, "one read a round of the engine, not one per flow"
    assert consumer.paused, "paused between reads"


def test_a_newer_instance_is_found_by_its_flow_whichever_round_read_it():
    consumer, _, tail, a, b = fences()
    a.newer(), b.newer()
    consumer.publish("a->east", "ia", 1_000)  # a's own status: not newer
    consumer.publish("b->east", "ib-older", 500)  # an older instance of b: not newer
    consumer.publish("b->east", "ib-new", 2_000)  # a newer instance of b
    assert a.newer() is None, "a's round read them: none is a newer a"
    found = b.newer()
    assert found is not None and found.instance_id == "ib-new", "b finds it through a's read"
    assert tail.reads == 2
    reason = b.superseded()  # b's next round reads (no read since its last) and finds nothing new
    assert reason is None and tail.reads == 3


def test_a_record_published_after_a_neighbours_read_is_found_by_the_second_round_at_the_latest():
    consumer, _, tail, a, b = fences()
    a.newer()  # a reads
    consumer.publish("b->east", "ib-new", 2_000, StatusState.STARTING)  # after that read
    assert b.newer() is None, "b's first round uses a's read, which did not see it"
    a.newer()  # no read since a's previous round: a reads, and b's record goes to b
    superseded = b.superseded()
    assert superseded is not None and "ib-new" in superseded, "b's second round"
    consumer.publish("a->east", "ia-new", 3_000)
    assert b.newer() is None and a.newer().instance_id == "ia-new"
    assert tail.reads == 3


def test_the_last_fence_closed_closes_the_tail():
    consumer, shared, tail, a, b = fences()
    shared.release(tail)  # the test's own hold
    a.close()
    assert not consumer.closed, "b still reads through it"
    b.newer()
    b.close()
    assert consumer.closed and shared.count() == 0
