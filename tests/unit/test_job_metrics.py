"""JobMetrics.observe on the typed task results the driver absorbs and the frozen snapshot of the flow its reporter
hands over (a real driver, not started, in the state a batch left it in): counts per target partition, exactly-once
aborts, out-of-range events counted once, family labels, the port."""

from __future__ import annotations

import dataclasses
import time

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler import settings
from reconciler.contract.spec import ClusterSpec
from reconciler.contract.status import (
    RATE_WINDOW_SECONDS,
    FaultKind,
    OutOfRange,
    PartitionFault,
    RateWindow,
    StatusState,
)
from reconciler.engine.driver import ReplicationDriver
from reconciler.engine.driver_parts import Connections
from reconciler.engine.emitters import CheckpointEmitter
from reconciler.engine.lag import LagPosition, OldestRecord, SourceEnds
from reconciler.engine.metrics import METRICS, WINDOW_SECONDS, JobMetrics, exported_series
from reconciler.engine.tasks import PartitionResult, TaskResult
from reconciler.engine.topics import PartitionPlan
from reconciler.settings import AUTO_PORT
from tests.spec_helpers import job_spec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))


def driver(exactly_once=False, spec=None, **state) -> ReplicationDriver:
    """A real driver, not started (no I/O), in the state a batch left it in: `state` sets the fields of its
    progress, or tells its parts what a batch would (`lag`: what the tasks saw; `positions`, `halted`, `source_ends`;
    `checkpoints` and `status`: its connections)."""
    spec = spec or job_spec(
        "west->east",
        ClusterSpec("west", "127.0.0.1:1"),
        ClusterSpec("east", "127.0.0.1:2"),
        delivery="exactly-once" if exactly_once else "at-least-once",
        git_revision="deadbeef",
    )
    d = ReplicationDriver(spec, executor=None, metrics=state.pop("metrics", None))  # never run: no executor needed
    d.state = StatusState.RUNNING
    d.parts.replanned(PartitionPlan(copy={("orders", 0): "west.orders"}))
    clients = {name: state.pop(name) for name in ("checkpoints", "status") if name in state}
    if clients:
        d.conn = connections(**clients)
        d.reporter.connect(d.conn)
    for tp, offset in state.pop("positions", {}).items():
        d.parts.advanced(tp, offset)
    for tp, lag in state.pop("lag", {}).items():  # a task's word: its position and the end it saw
        d.parts.advanced(tp, lag.next)
        d.parts.task_reported(PartitionResult(tp[0], tp[1], lag.remote, 0, lag.next, 0, hw=lag.end))
    for tp, fault in state.pop("halted", {}).items():
        d.parts.halt(tp, fault)
    if "source_ends" in state:
        d.reporter.ends_read(state.pop("source_ends"))
    for name, value in state.items():
        # the progress holds the field: a renamed field fails here, not silently in metrics
        assert hasattr(d.progress, name), name
        setattr(d.progress, name, value)
    return d


def connections(checkpoints=None, status=None) -> Connections:
    """The clients of a started driver, none of them connected: a checkpoint emitter and a status publisher
    (what the metrics and the status record read), None for the others."""
    given = {"checkpoints": checkpoints or emitter(), "status": status or Published()}
    return Connections(**{f.name: given.get(f.name) for f in dataclasses.fields(Connections)})


def emitter(**state) -> CheckpointEmitter:
    e = CheckpointEmitter(SPEC, source_admin=None, target_producer=None, environ={})
    for name, value in state.items():
        assert hasattr(e, name), name
        setattr(e, name, value)
    return e


def part(count, nbytes=10, **kw):
    return PartitionResult(
        topic="orders",
        partition=0,
        remote="west.orders",
        start=0,
        next=count,
        count=count,
        bytes=nbytes,
        syncs=[(0, 0)] if count else [],
        **kw,
    )


def samples(m: JobMetrics) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m, name, **labels):
    hits = [
        v for (n, ls), v in samples(m).items() if n == name and all(dict(ls).get(k) == x for k, x in labels.items())
    ]
    assert len(hits) == 1, (name, labels)
    return hits[0]


def test_counts_syncs_checkpoints_and_state():
    m = JobMetrics("west->east:payments")
    d = driver(lag={("orders", 0): LagPosition(remote="west.orders", next=5, end=12)}, checkpoints=emitter())
    m.observe(
        d.reporter.snapshot(),
        [TaskResult(slot=0, process="p", partitions=[part(5, 50, latency_ms=[10, 30])], latency_ms=[10, 30])],
    )
    d.checkpoints.emitted, d.progress.errors = 4, 1
    m.observe(
        d.reporter.snapshot(),
        [TaskResult(slot=0, process="p", partitions=[part(3, 30, latency_ms=[20])], latency_ms=[20])],
    )
    labels = dict(flow="west->east:payments", family="payments", source="west", target="east")
    assert (
        value(
            m, "kafka_connect_mirror_source_connector_record_count_total", topic="west.orders", partition="0", **labels
        )
        == 8
    )
    assert value(m, "kafka_connect_mirror_source_connector_byte_count_total", topic="west.orders") == 80
    assert value(m, "kafka_connect_mirror_source_connector_replication_latency_ms_count", topic="west.orders") == 3
    assert value(m, "kafka_connect_mirror_source_connector_replication_latency_ms_max", partition="0") == 30
    assert value(m, "mirror_partition_lag_records", topic="west.orders", partition="0") == 7
    assert value(m, "mirror_offset_syncs_total", topic="west.orders") == 2
    assert value(m, "kafka_connect_mirror_checkpoint_connector_checkpoints_total") == 4
    assert value(m, "mirror_errors_total") == 1 and value(m, "mirror_batches_total") == 2
    assert value(m, "mirror_job_state", state="running") == 1 and value(m, "mirror_job_state", state="failed") == 0
    assert value(m, "mirror_job_info", spec_hash=d.spec.spec_hash(), git_revision="deadbeef") == 1


def test_job_state_series_are_the_status_states():
    # One home for the states (StatusState): a state the enum gains gets its series, none other exists.
    m = JobMetrics("west->east")
    for state in StatusState:
        d = driver()
        d.state = state
        m.set_state(d.reporter.snapshot())
        got = {dict(ls)["state"]: v for (n, ls), v in samples(m).items() if n == "mirror_job_state"}
        assert got == {s.value: (1.0 if s is state else 0.0) for s in StatusState}, state


def test_aborted_transactions_and_out_of_range_count_once():
    m = JobMetrics("west->east")
    event = OutOfRange("orders", 0, 9, 0, 5, "offset 9 is past the end 5", "halted", 0, FaultKind.LOST_TAIL)
    fault = PartitionFault("orders", 0, FaultKind.LOST_TAIL, event.reason, 9, 0)
    d = driver(exactly_once=True, out_of_range=[event], halted={("orders", 0): fault}, batch_failures=1)
    m.observe(
        d.reporter.snapshot(), [TaskResult(slot=0, process="p", error="KafkaException: boom", partitions=[part(0)])]
    )
    m.observe(d.reporter.snapshot(), [])  # the same event is still listed: not counted again
    assert value(m, "mirror_transaction_aborts_total") == 1
    assert value(m, "mirror_out_of_range_total", topic="west.orders", partition="0", kind="lost-tail") == 1
    assert value(m, "mirror_batch_failures_total") == 2
    assert value(m, "mirror_job_state", state="degraded") == 1
    assert not any(n == "kafka_connect_mirror_source_connector_record_count_total" for n, _ in samples(m))


def test_catalog_and_port_setting():
    m = JobMetrics("a->b")
    names = {fam.name for fam in text_string_to_metric_families(generate_latest(m.registry).decode())}
    assert names == {d.family for d in METRICS}  # every family is registered, even before the first batch
    assert "kafka_connect_mirror_source_connector_record_count_total" in exported_series()
    assert settings.metrics_port({}) == 0 and settings.metrics_port({"RECONCILER_METRICS_PORT": "9404"}) == 9404
    assert settings.metrics_port({"RECONCILER_METRICS_PORT": "auto"}) == AUTO_PORT
    bad = {"RECONCILER_METRICS_PORT": "x"}
    assert settings.metrics_port(bad) == 0  # the default where it is read; the job's check() refuses it first
    assert settings.errors(bad) == [
        "RECONCILER_METRICS_PORT=x is not a port number (0-65535; 0: no metrics) or 'auto': the replication "
        "job's metrics port, default 0; set it to e.g. RECONCILER_METRICS_PORT=9404 or unset it"
    ]


def test_metrics_port_is_a_job_setting_handed_to_the_deployer(tmp_path):
    from reconciler.cli.main import main
    from reconciler.deployers.base import deployment_options
    from tests.plan_helpers import topology

    topo = topology(
        "flows:\n  - {source: west, target: east, job: {metrics_port: 9500}}\n  - {source: east, target: west}"
    )
    assert deployment_options(topo.flows[0].job, topo.flows[0].engine) == {
        "metrics_port": 9500,
        "metrics_bind": None,
        "engine": "east",
    }
    # the deployer picks the port; the engine is the target's (one per target cluster)
    assert deployment_options(topo.flows[1].job, topo.flows[1].engine) == {
        "metrics_port": None,
        "metrics_bind": None,
        "engine": "west",
    }
    bad = tmp_path / "t.yaml"
    bad.write_text(
        "apiVersion: reconciler/v1\nkind: Topology\nmetadata: {name: t}\nclusters:\n"
        '  west: {bootstrap_servers: "127.0.0.1:1"}\n  east: {bootstrap_servers: "127.0.0.1:2"}\n'
        "flows:\n  - {source: west, target: east, job: {metrics_port: 70000}}\n"
    )
    assert main(["validate", str(bad)]) == 1


class Clock:
    """Monotonic seconds the test moves (the metrics' windows and lag clocks read it)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def tp_part(partition, count, *, age_ms=(), latency_ms=(), nbytes=0):
    return PartitionResult(
        topic="orders",
        partition=partition,
        remote="west.orders",
        start=0,
        next=count,
        count=count,
        bytes=nbytes,
        age_ms=list(age_ms),
        latency_ms=list(latency_ms),
    )


def has(m, name, **labels):
    return any(n == name and all(dict(ls).get(k) == x for k, x in labels.items()) for (n, ls), _ in samples(m).items())


def test_record_age_and_latency_per_partition_with_mm2_min_max_avg_over_a_window():
    clock = Clock()
    m = JobMetrics("west->east", clock=clock)
    d = driver()
    m.observe(
        d.reporter.snapshot(),
        [
            TaskResult(
                slot=0,
                process="p",
                partitions=[
                    tp_part(0, 64, age_ms=[100, 300], latency_ms=[150, 350]),
                    tp_part(1, 64, age_ms=[5_000], latency_ms=[5_100]),
                ],
            )
        ],
    )
    clock.now += 30
    m.observe(
        d.reporter.snapshot(),
        [TaskResult(slot=0, process="p", partitions=[tp_part(0, 64, age_ms=[200], latency_ms=[260])])],
    )
    age = "kafka_connect_mirror_source_connector_record_age_ms"
    lat = "kafka_connect_mirror_source_connector_replication_latency_ms"
    assert [value(m, f"{age}_{s}", partition="0") for s in ("min", "max", "avg")] == [100, 300, 200]
    assert [value(m, f"{lat}_{s}", partition="0") for s in ("min", "max", "avg")] == [150, 350, 760 / 3]
    assert value(m, f"{age}_max", partition="1") == 5_000 and value(m, f"{lat}_min", partition="1") == 5_100
    # the histograms keep every sample, per target topic (percentiles per flow/topic)
    assert value(m, f"{age}_count", topic="west.orders") == 4 and value(m, f"{lat}_sum", topic="west.orders") == 5_860
    assert value(m, f"{lat}_bucket", topic="west.orders", le="500.0") == 3  # 150, 350, 260
    # 61 s after partition 1's only samples: its window is empty and its series are gone (MM2: NaN)
    clock.now += 31
    m.observe(d.reporter.snapshot(), [])
    assert not has(m, f"{age}_max", partition="1") and not has(m, f"{lat}_avg", partition="1")
    assert value(m, f"{age}_min", partition="0") == 200  # the later batch is still in partition 0's window


def test_record_and_byte_rates_per_partition_over_the_window():
    clock = Clock()
    m = JobMetrics("west->east", clock=clock)
    d = driver()
    m.observe(d.reporter.snapshot(), [TaskResult(slot=0, process="p", partitions=[tp_part(0, 600, nbytes=6_000)])])
    clock.now += 30
    m.observe(d.reporter.snapshot(), [TaskResult(slot=0, process="p", partitions=[tp_part(0, 300, nbytes=3_000)])])
    assert value(m, "kafka_connect_mirror_source_connector_record_rate", partition="0") == 900 / 30
    assert value(m, "kafka_connect_mirror_source_connector_byte_rate", partition="0") == 9_000 / 30
    clock.now += 45  # the first batch left the 60 s window; nothing new: the rate decays
    m.observe(d.reporter.snapshot(), [])
    assert value(m, "kafka_connect_mirror_source_connector_record_rate", partition="0") == 300 / 60


def test_the_status_record_rate_and_the_prometheus_rate_are_one_window():
    # One RateWindow class and one length: the driver's `records_per_second` (status record) and the
    # `record_rate` gauge agree for the same batches (they were 10 s and 60 s windows of two classes).
    clock = Clock()
    m = JobMetrics("west->east", clock=clock)
    d = driver()
    assert (
        type(d.progress.rate) is RateWindow and d.progress.rate.seconds == WINDOW_SECONDS == RATE_WINDOW_SECONDS == 60.0
    )
    seen = []
    for advance, count in ((0, 600), (30, 300), (45, 0)):
        clock.now += advance
        d.progress.rate.add(count, count * 10, clock.now)  # what the driver's absorb adds for the batch
        m.observe(
            d.reporter.snapshot(), [TaskResult(slot=0, process="p", partitions=[tp_part(0, count, nbytes=count * 10)])]
        )
        gauge = value(m, "kafka_connect_mirror_source_connector_record_rate", partition="0")
        assert d.progress.rate.rate(clock.now) == gauge
        assert d.progress.rate.rates(clock.now)[1] == value(
            m, "kafka_connect_mirror_source_connector_byte_rate", partition="0"
        )
        seen.append(gauge)
    assert seen == [600.0, 900 / 30, 300 / 60]  # a 10 s window would say 300/10 at 30 s


def test_lag_in_seconds_has_one_definition_per_partition_and_per_job_the_oldest_records_age():
    """A job restarted with a backlog: its oldest unreplicated record is an hour old by its timestamp, so the
    partition's figure, the job's figure and the status record all say an hour (the job's own clock said ~0)."""
    from reconciler.engine.lag import job_lag

    now_ms = 1_800_000_000_000
    copy = {("orders", 0): "west.orders", ("orders", 1): "west.orders", ("orders", 2): "west.orders"}
    positions = {("orders", 0): 100, ("orders", 1): 50, ("orders", 2): 70}
    ends = SourceEnds(
        {("orders", 0): 5_000, ("orders", 1): 60, ("orders", 2): 70},
        now_ms,
        {("orders", 0): OldestRecord(100, now_ms - 3_600_000), ("orders", 1): OldestRecord(50, now_ms - 30_000)},
    )
    lag = job_lag(copy, positions, {}, ends, now_ms)
    assert lag.partition_seconds == {("orders", 0): 3600.0, ("orders", 1): 30.0, ("orders", 2): 0.0}
    assert lag.seconds == 3600.0 == max(lag.partition_seconds.values())
    m = JobMetrics("west->east")
    m.observe_lag(lag)
    got = {p: value(m, "mirror_partition_lag_seconds", partition=p) for p in "012"}
    assert got == {"0": 3600.0, "1": 30.0, "2": 0.0}
    assert value(m, "mirror_lag_seconds") == 3600.0
    # a lagging partition whose oldest record was not read (not among those that lag most): no series, not 0
    unread = job_lag(copy, positions, {}, dataclasses.replace(ends, oldest={}), now_ms)
    m.observe_lag(unread)
    assert not has(m, "mirror_partition_lag_seconds", partition="0") and not has(m, "mirror_lag_seconds")
    assert value(m, "mirror_partition_lag_seconds", partition="2") == 0.0
    assert value(m, "mirror_partition_lag_records", partition="0") == 4_900


def test_checkpoint_latency_per_group_topic_partition_counted_once_per_round():
    from reconciler.engine.emitters import CheckpointAck
    from reconciler.mirror.records import Checkpoint

    clock = Clock()
    m = JobMetrics("west->east", clock=clock)
    spec = job_spec(
        "west->east", ClusterSpec("west", "w:9092"), ClusterSpec("east", "e:9092"), checkpoints_interval_seconds=60
    )
    cps = emitter(
        emitted=2,
        rounds=1,
        last_round=[
            CheckpointAck(Checkpoint("billing", "west.orders", 0, 10, 8), 40),
            CheckpointAck(Checkpoint("billing", "west.orders", 1, 5, 5), 70),
        ],
    )
    cps.update_spec(spec)
    d = driver(spec=spec, checkpoints=cps)
    m.observe(d.reporter.snapshot(), [])
    m.observe(d.reporter.snapshot(), [])  # the same round again: not observed twice
    cp = "kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms"
    assert value(m, f"{cp}_max", group="billing", topic="west.orders", partition="0") == 40
    assert value(m, f"{cp}_avg", group="billing", topic="west.orders", partition="1") == 70
    assert value(m, f"{cp}_count") == 2 and value(m, f"{cp}_sum") == 110
    assert value(m, "kafka_connect_mirror_checkpoint_connector_checkpoints_total") == 2
    cps.rounds, cps.emitted = 2, 3
    cps.last_round = [CheckpointAck(Checkpoint("billing", "west.orders", 0, 20, 18), 10)]
    clock.now += 100  # checkpoints come once per 60 s round (the spec's interval): the window is two rounds
    m.observe(d.reporter.snapshot(), [])
    assert [value(m, f"{cp}_{s}", group="billing", partition="0") for s in ("min", "max", "avg")] == [10, 40, 25]
    assert value(m, f"{cp}_max", group="billing", partition="1") == 70
    clock.now += 21  # 121 s after the first round: partition 1's checkpoint is out of the window
    m.observe(d.reporter.snapshot(), [])
    assert not has(m, f"{cp}_max", group="billing", partition="1")
    assert value(m, f"{cp}_max", group="billing", partition="0") == 10


def test_lag_series_of_a_partition_no_longer_copied_are_removed():
    m = JobMetrics("west->east")
    lag = {("orders", 0): LagPosition(remote="west.orders", next=5, end=9)}
    m.observe(driver(lag=lag).reporter.snapshot(), [])
    assert value(m, "mirror_partition_lag_records", partition="0") == 4
    m.observe(
        driver(lag={}).reporter.snapshot(), []
    )  # the topic was deleted: a stale lag must not keep an alert firing
    assert not has(m, "mirror_partition_lag_records") and not has(m, "mirror_partition_lag_seconds")
    m.observe(
        driver(lag={("orders", 0): LagPosition(remote="west.orders", next=0, end=3)}).reporter.snapshot(), []
    )  # created again
    assert value(m, "mirror_partition_lag_records", partition="0") == 3  # a removed series is registered anew


class Published:
    """Stands in for the driver's StatusPublisher: keeps the records published."""

    def __init__(self):
        self.records = []

    def publish(self, record):
        self.records.append(record)


def test_a_status_publish_between_batches_carries_the_source_end_read_and_the_metrics_say_the_same():
    """Workers held up: no batch ends, so no task reports a new end; the side channel's read does."""
    now_ms = int(time.time() * 1000)
    d = driver(
        lag={("orders", 0): LagPosition(remote="west.orders", next=100, end=100)},  # the last task ended caught up
        positions={("orders", 0): 100},
        source_ends=SourceEnds(
            {("orders", 0): 24_100}, now_ms - 400, {("orders", 0): OldestRecord(100, now_ms - 12_000)}
        ),
        metrics=JobMetrics("west->east"),
        status=Published(),
    )
    d.reporter.publish_status()
    record = d.conn.status.records[-1]
    assert record.lag_total == 24_000 and record.lag[0].end == 24_100 and record.lag_read_at == now_ms - 400
    assert 12.0 <= record.lag_seconds < 60
    m = d.metrics
    assert value(m, "mirror_partition_lag_records", topic="west.orders", partition="0") == 24_000
    assert value(m, "mirror_lag_seconds", flow="west->east") == record.lag_seconds
    assert value(m, "mirror_partition_lag_seconds", partition="0") == record.lag_seconds, "one definition"

    d.parts.advanced(("orders", 0), 24_100)  # a batch copied it all
    d.reporter.publish_status()
    assert d.conn.status.records[-1].lag_total == 0 and d.conn.status.records[-1].lag_seconds == 0.0
    assert value(m, "mirror_partition_lag_records", partition="0") == 0 and value(m, "mirror_lag_seconds") == 0

    d.reporter.ends_read(SourceEnds({("orders", 0): 24_200}, now_ms))  # lagging again, no timestamp read yet
    d.reporter.publish_status()
    assert d.conn.status.records[-1].lag_total == 100 and d.conn.status.records[-1].lag_seconds is None
    assert not has(m, "mirror_lag_seconds")  # unknown: no series rather than a stale one


def test_a_process_deployer_is_told_the_task_slots_of_every_flow_of_the_engine():
    """An engine is started by its first flow's deploy; the hint sizes its local[N] for the flows the same apply
    adds next (2 + 3 slots into east, 1 into west), and the plan never compares it."""
    from reconciler.jobplan.state import desired_jobs
    from tests.plan_helpers import topology

    topo = topology(
        "flows:\n"
        "  - {source: west, target: east, name: a, topics: {include: [a]}, job: {parallelism: 2}}\n"
        "  - {source: west, target: east, name: b, topics: {include: [b]}, job: {parallelism: 3}}\n"
        "  - {source: east, target: west, job: {parallelism: 1}}\n"
    )
    jobs = desired_jobs(topo)
    assert {name: dict(j.options) for name, j in jobs.items()} == {
        "west->east:a": {"metrics_port": None, "metrics_bind": None, "engine": "east", "engine_slots": 5},
        "west->east:b": {"metrics_port": None, "metrics_bind": None, "engine": "east", "engine_slots": 5},
        "east->west": {"metrics_port": None, "metrics_bind": None, "engine": "west", "engine_slots": 1},
    }


def test_an_engine_holds_a_task_thread_per_slot_of_its_flows():
    from reconciler.contract.deployers import local_slots

    assert local_slots("local[2]", 5) == "local[5]"
    assert local_slots("local[8]", 5) == "local[8]"  # more asked for: kept
    assert local_slots("spark://h:7077", 5) == "spark://h:7077"


def test_the_plan_names_the_master_the_engine_runs_not_the_flows_own():
    """A flow's `job.master` is local[2] but its engine holds 5 task slots: the plan line says local[5], as the
    engine's status and process do."""
    from reconciler.contract.deployers import ENGINE_SLOTS_HINT, LOCAL, SPARK_STANDALONE
    from reconciler.plan.job_actions import where_to_run
    from tests.integration.mirror_helpers import spec_for

    class At:
        bootstrap = "127.0.0.1:1"

    spec = spec_for(At(), At(), master="local[2]")
    assert where_to_run(LOCAL, spec, {"engine": "east", ENGINE_SLOTS_HINT: 5}) == "engine east, local local[5]"
    assert where_to_run(LOCAL, spec, {"engine": "east", ENGINE_SLOTS_HINT: 1}) == "engine east, local local[2]"
    assert where_to_run(LOCAL, spec, {"engine": "east"}) == "engine east, local local[2]"
    standalone = spec_for(At(), At(), master="spark://h:7077")
    assert where_to_run(SPARK_STANDALONE, standalone, {ENGINE_SLOTS_HINT: 5}) == "spark-standalone spark://h:7077"


class CountingMetrics(JobMetrics):
    """JobMetrics that counts the labelled series it sets (`get`: each set goes through it)."""

    def __init__(self, *a, **kw):
        self.gets: list[str] = []
        super().__init__(*a, **kw)

    def get(self, name, **extra):
        self.gets.append(name)
        return super().get(name, **extra)


def test_an_idle_flows_partition_series_are_not_set_again_while_their_figures_stand():
    """Issue 47: each snapshot of a caught-up flow set every partition's lag and rate series again (a third of an
    idle engine's CPU at 5,000 partitions); a figure that did not change is not set again, one that did is."""
    clock = Clock()
    m = CountingMetrics("west->east", clock=clock)
    lag = {("orders", p): LagPosition(remote="west.orders", next=5, end=5) for p in range(100)}
    d = driver(lag=lag)
    results = [TaskResult(slot=0, process="p", partitions=[tp_part(p, 0) for p in range(100)])]
    m.observe(d.reporter.snapshot(), results)
    per_partition = ("mirror_partition_lag_records", "kafka_connect_mirror_source_connector_record_rate")
    first = [n for n in m.gets if n in per_partition]
    assert len(first) == 200, len(first)
    m.gets.clear()
    for _ in range(5):
        clock.now += 1
        m.observe(d.reporter.snapshot(), [])
    assert [n for n in m.gets if n in per_partition] == [], "unchanged figures set again"
    moved = {**lag, ("orders", 7): LagPosition(remote="west.orders", next=5, end=9)}
    m.observe(driver(lag=moved).reporter.snapshot(), [])
    assert [n for n in m.gets if n in per_partition] == ["mirror_partition_lag_records"]
    assert value(m, "mirror_partition_lag_records", partition="7") == 4
