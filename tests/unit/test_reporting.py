"""The reporter (engine/reporting.py `Reporter`), without brokers: the status publisher is a fake behind
`StatusSink`, the checkpoint emitter a real one never connected. Lag, the degraded state of a running flow with
faults, the stuck bound, and the status record published with the lag metrics from the same figures."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec
from reconciler.contract.status import FaultKind, PartitionFault, StatusRecord, StatusState
from reconciler.engine.driver_parts import Partitions, Progress, StuckWatch
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.engine.lag import LagPosition, SourceEnds
from reconciler.engine.metrics import JobMetrics
from reconciler.engine.reporting import STUCK_INTERVALS, Reporter
from reconciler.engine.topics import PartitionPlan
from tests.spec_helpers import job_spec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))
TPX = ("orders", 0)


@dataclass
class Sink:
    records: list[StatusRecord] = field(default_factory=list)

    def publish(self, status: StatusRecord) -> None:
        self.records.append(status)


@dataclass
class Clients:
    status: Sink
    checkpoints: CheckpointEmitter


def reporter(state=StatusState.RUNNING, clients: Clients | None = None) -> Reporter:
    parts = Partitions(plan=PartitionPlan(copy={TPX: "west.orders"}), positions={TPX: 40})
    return Reporter(
        lambda: SPEC, parts, Progress(), StuckWatch(), JobMetrics(SPEC.flow), lambda: clients, lambda: state, "i-1"
    )


def test_lag_is_the_positions_against_the_larger_end_seen():
    r = reporter()
    r.parts.lag[TPX] = LagPosition("west.orders", 40, 50)
    assert r.current_lag().total == 10
    r.parts.source_ends = SourceEnds({TPX: 70}, int(time.time() * 1000))
    assert r.current_lag().total == 30


def test_a_running_flow_with_faults_is_degraded_and_the_faults_are_sorted():
    r = reporter()
    assert r.reported_state() is StatusState.RUNNING and r.faults() == ()
    halted = PartitionFault("orders", 0, FaultKind.TRUNCATED, "gone", 40, 1)
    stuck = PartitionFault("alpha", 0, FaultKind.STUCK, "not moving", 3, 1)
    r.parts.halted[TPX] = halted
    r.stuck.stuck[("alpha", 0)] = stuck
    assert r.reported_state() is StatusState.DEGRADED and r.faults() == (stuck, halted)
    assert reporter(StatusState.STOPPED).reported_state() is StatusState.STOPPED


def test_the_stuck_bound_is_status_intervals_or_two_batch_deadlines():
    engine = SPEC.engine
    expected = max(STUCK_INTERVALS * engine.status_interval_seconds, 2 * engine.max_batch_ms / 1000)
    assert reporter().stuck_after_seconds() == expected


def test_the_status_record_is_published_with_the_lag_metrics_from_the_same_figures():
    clients = Clients(Sink(), CheckpointEmitter(SPEC, source_admin=None, target_producer=None, environ={}))
    r = reporter(clients=clients)
    assert r.checkpoints is clients.checkpoints and r.checkpoints_emitted == 0
    r.parts.source_ends = SourceEnds({TPX: 100}, int(time.time() * 1000))
    r.progress.records, r.progress.errors = 40, 2
    r.publish_status()
    (record,) = clients.status.records
    assert (record.flow, record.state, record.lag_total, record.records) == (SPEC.flow, StatusState.RUNNING, 60, 40)
    assert record.errors == 2 and record.instance_id == "i-1" and record.partitions == 1
    series = {s.name: s.value for f in r.metrics.registry.collect() for s in f.samples}
    assert series.get("mirror_partition_lag_records") == 60
    assert reporter().checkpoints is None and reporter().checkpoints_emitted == 0, "before start: no clients"
