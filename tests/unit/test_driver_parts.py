"""The replication driver is split into typed parts (issue 25): its clients are one `Connections` made at start,
not attributes looked up with getattr; its counters, timers and threads are dataclasses of their own; its state is a
StatusState. Its behaviours are classes of their own (issue 37: the idle gate, the topic refresh, the loss handler,
the batch shaper and absorber, the reporter), each given its dependencies (tests/unit/test_idle_gate.py,
test_source_faults.py, test_batches.py, test_reporting.py). Each piece of state has one owner (issue 49): the
partitions' `Partitions`, the pacing the idle gate's; the parts get the objects they use (the driver for the spec,
the clients at start), not getters. The parts' own logic (slots, tasks, the idle gate's caught-up mark) is tested
here without brokers; the driver's behaviour is tests/integration/test_replication_driver.py's."""

from __future__ import annotations

import dataclasses
import inspect
import re

from reconciler.contract.spec import EXIT_RESTART_REQUIRED, ClusterSpec, JobSpec, SpecFile
from reconciler.contract.status import FaultKind, PartitionFault, StatusState
from reconciler.engine import driver_parts
from reconciler.engine.batches import Absorber, BatchShaper
from reconciler.engine.driver import ReplicationDriver, Threads
from reconciler.engine.driver_parts import MAX_FINDINGS, Connections, Partitions, Progress, StuckWatch, Timers
from reconciler.engine.idle_gate import IdleGate, Pacing
from reconciler.engine.leaders import LeaderProbe
from reconciler.engine.refresh import TopicRefresh
from reconciler.engine.reporting import Reporter
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.tasks import PartitionResult
from reconciler.engine.topics import PartitionPlan
from tests.spec_helpers import job_spec, respec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))

#: What a driver holds of its own after __init__: its spec, executor and lifecycle, and its parts.
OWN = {
    "spec_file",  # the spec file re-read at each refresh (contract/spec.py SpecFile; None: a spec given as a value)
    "spec",
    "executor",
    "environ",
    "shared",  # the engine's clients (engine/clients.py SharedClients)
    "stop_event",
    "exit_code",
    "state",
    "instance_id",
    "metrics",
    "log",
    # the parts it holds
    "progress",
    "parts",
    "timers",
    "conn",
    "threads",
    # the parts that act on them (issue 37)
    "gate",
    "refresher",
    "faults",
    "leaders",
    "shaper",
    "absorber",
    "reporter",
}
PARTS = {
    "progress": Progress,
    "parts": Partitions,
    "timers": Timers,
    "threads": Threads,
    "gate": IdleGate,
    "refresher": TopicRefresh,
    "faults": SourceFaults,
    "leaders": LeaderProbe,
    "shaper": BatchShaper,
    "absorber": Absorber,
    "reporter": Reporter,
}


def test_the_driver_holds_its_parts_and_few_attributes_of_its_own():
    d = ReplicationDriver(SPEC, executor=None)
    assert set(vars(d)) == OWN and len(vars(d)) <= 23  # 22 + the leader probe (issue 47)
    for name, part in PARTS.items():
        assert type(getattr(d, name)) is part, name
    assert d.conn is None  # opened at start (_connect)
    assert type(d.reporter.stuck) is StuckWatch
    # one Partitions, and the gate (not its pacing) for the parts that read and mark what is caught up
    parts = (d.gate, d.refresher, d.faults, d.leaders, d.shaper, d.absorber, d.reporter)
    assert all(p.parts is d.parts for p in parts)
    assert (
        d.faults.gate is d.gate and d.shaper.gate is d.gate and d.absorber.gate is d.gate and d.reporter.gate is d.gate
    )
    assert d.stop_event is d.gate.stop and d.reporter.reach is d.gate.reach is d.refresher.reach
    assert d.state is StatusState.STARTING


def test_one_owner_per_state_and_no_getters():
    """Issue 49: `Pacing` is the idle gate's alone (no other part holds it; they tell the gate what happened) and
    `Partitions` is changed through its methods only (its fields are read-only outside it); the parts are given
    objects (the driver, to read the spec through; the clients, at start), not getter lambdas."""
    d = ReplicationDriver(SPEC, executor=None)
    parts = (d.gate, d.refresher, d.faults, d.shaper, d.absorber, d.reporter)
    for part in parts:
        held = vars(part).values()
        assert not any(isinstance(v, Pacing) for v in held if part is not d.gate), part
        assert not any(callable(v) and getattr(v, "__name__", "") == "<lambda>" for v in held), part
    assert sum(isinstance(v, Pacing) for v in vars(d.gate).values()) == 1
    for name in ("plan", "positions", "slots", "lag", "halted", "dead_letters", "consumer_epoch"):
        assert isinstance(inspect.getattr_static(Partitions, name), property), name
        assert inspect.getattr_static(Partitions, name).fset is None, name
    getter = re.compile(r"Callable\[\[\], (?!None\])")  # a callable that answers something (an action is fine)
    for cls in (IdleGate, SourceFaults, BatchShaper, Absorber, Reporter, TopicRefresh):
        assert not getter.search(inspect.getsource(cls.__init__)), cls


def test_no_attribute_is_looked_up_by_name():
    for cls in (ReplicationDriver, IdleGate, TopicRefresh, SourceFaults, BatchShaper, Absorber, Reporter):
        source = inspect.getsource(cls)
        assert "getattr(self" not in source and "setattr(self" not in source, cls
        assert cls.__doc__, cls


def test_the_timers_are_typed_fields_not_string_keys():
    """Pacing.next was a dict keyed by "refresh", "heartbeat", ...: now `Timers` fields (the loop's) and the gate's
    own two in its `Pacing` (idle_gate.py)."""
    assert [f.name for f in dataclasses.fields(Timers)] == ["refresh", "full_refresh", "heartbeat", "delayed_syncs"]
    assert "status" in {f.name for f in dataclasses.fields(Threads)}  # a thread of its own, not the loop's timer
    assert {"gate_recheck", "heartbeats_copy"} <= {f.name for f in dataclasses.fields(Pacing)}
    assert "next" not in {f.name for f in dataclasses.fields(Pacing)}


def test_the_parts_are_typed_dataclasses_with_a_docstring():
    for part in (Connections, Progress, Pacing, Timers, Threads):
        assert dataclasses.is_dataclass(part), part
        assert part.__doc__ and not part.__doc__.startswith(part.__name__ + "("), part  # not the generated one
        hints = inspect.get_annotations(part)
        assert set(hints) == {f.name for f in dataclasses.fields(part)}, part
    assert "getattr" not in inspect.getsource(driver_parts)


def test_connections_are_made_in_one_place():
    source = inspect.getsource(ReplicationDriver._connect)
    assert "Connections.open(" in source


def test_slots_are_sticky_and_new_partitions_go_to_the_least_loaded():
    parts = Partitions(positions={("a", 0): 0, ("a", 1): 0, ("b", 0): 5}, slots={("a", 0): 1, ("a", 1): 1})
    parts.assign_slots([("a", 0), ("a", 1), ("b", 0), ("c", 0)], parallelism=2)
    assert parts.slots == {("a", 0): 1, ("a", 1): 1, ("b", 0): 0, ("c", 0): 0}
    parts.loaded({("d", 0): (3, 7)}, parallelism=2)  # a slot past the parallelism (it went down): assigned again
    assert parts.slots[("d", 0)] == 0 and parts.positions[("d", 0)] == 3
    parts.loaded({("e", 0): (None, 0)}, parallelism=2)  # its slot kept; no committed position: from the beginning
    assert parts.slots[("e", 0)] == 0 and parts.positions[("e", 0)] == -2


def test_tasks_one_per_slot_without_the_halted_partitions():
    parts = Partitions(
        plan=PartitionPlan(copy={("a", 0): "west.a", ("a", 1): "west.a", ("b", 0): "west.b", ("c", 0): "west.c"}),
        positions={("a", 0): 3, ("a", 1): -2, ("b", 0): 9},  # ("c", 0): no position loaded yet
        slots={("a", 0): 0, ("a", 1): 1, ("b", 0): 0},
        sync_states={("a", 0): [1, 2]},
        halted={("b", 0): PartitionFault("b", 0, FaultKind.TRUNCATED, "gone", 9, 1)},
        last_owner={1: "worker-1"},
        consumer_epoch=4,
    )
    tasks = parts.tasks(batch=12)
    assert [(t.slot, t.batch, t.last_owner, t.consumer_epoch) for t in tasks] == [
        (0, 12, None, 4),
        (1, 12, "worker-1", 4),
    ]
    assert [(p.topic, p.partition, p.remote, p.start, p.sync_state) for p in tasks[0].partitions] == [
        ("a", 0, "west.a", 3, [1, 2])
    ]
    parts.forget(("a", 0))
    assert ("a", 0) not in parts.positions and ("a", 0) not in parts.slots
    parts.replanned(PartitionPlan(copy={("a", 1): "west.a"}))  # the others no longer copied: forgotten
    assert set(parts.positions) == {("a", 1)} and set(parts.slots) == {("a", 1)}


def test_one_task_holds_every_partition_in_the_lowest_slot_and_the_backlog_is_known_only_from_positions():
    parts = Partitions(
        plan=PartitionPlan(copy={("a", 0): "west.a", ("a", 1): "west.a", ("b", 0): "west.b"}),
        positions={("a", 0): 3, ("a", 1): 10, ("b", 0): 0},
        slots={("a", 0): 1, ("a", 1): 2, ("b", 0): 1},
        last_owner={1: "worker-1", 2: "worker-2"},
    )
    assert [t.slot for t in parts.tasks(batch=5)] == [1, 2]
    (one,) = parts.tasks(batch=5, one_task=True)
    assert (one.slot, one.last_owner) == (1, "worker-1")
    assert [(p.topic, p.partition, p.start) for p in one.partitions] == [("a", 0, 3), ("a", 1, 10), ("b", 0, 0)]
    assert parts.backlog({("a", 0): 13, ("a", 1): 9, ("b", 0): 5}) == 15  # an end below the position counts 0
    assert parts.backlog({("a", 0): 13, ("a", 1): 9}) is None  # ("b", 0) has no end
    parts.reloaded(("b", 0), -2)  # from the beginning: how far is not known
    assert parts.backlog({("a", 0): 13, ("a", 1): 9, ("b", 0): 5}) is None


def test_a_partition_is_caught_up_as_of_the_end_read_before_its_batch():
    pacing = Pacing(ends_before={("a", 0): 10})
    done = PartitionResult(topic="a", partition=0, remote="west.a", start=5, next=10, count=5, eof=True, hw=10)
    pacing.mark_caught_up(done)
    assert pacing.caught_up == {("a", 0): 10}
    pacing.mark_caught_up(dataclasses.replace(done, eof=False))  # stopped before the end: not caught up
    assert pacing.caught_up == {}


def test_an_idle_flow_hands_the_gates_read_to_the_lag_side_channel():
    """One read of the source's ends serves the gate and the lag while every partition is caught up at it; any
    partition not caught up, a stale read, or a flow that just copied: the side channel reads for itself."""
    import time

    copy = {("a", 0): "west.a", ("a", 1): "west.a"}
    now_ms = int(time.time() * 1000)
    pacing = Pacing(
        ends_before={("a", 0): 10, ("a", 1): 4},
        ends_read_at_ms=now_ms,
        caught_up={("a", 0): 10, ("a", 1): 4},
        idle_steps=3,
    )
    positions = {("a", 0): 10, ("a", 1): 4}
    ends = pacing.idle_ends(copy, positions, max_age_ms=1_500)
    assert ends is not None and dict(ends.ends) == {("a", 0): 10, ("a", 1): 4} and ends.read_at == now_ms
    assert dict(ends.committed) == positions
    assert dataclasses.replace(pacing, caught_up={("a", 0): 10}).idle_ends(copy, positions, 1_500) is None
    assert dataclasses.replace(pacing, ends_read_at_ms=now_ms - 5_000).idle_ends(copy, positions, 1_500) is None
    assert dataclasses.replace(pacing, idle_steps=0).idle_ends(copy, positions, 1_500) is None
    assert pacing.idle_ends(copy, {("a", 0): 10, ("a", 1): -2}, 1_500) is None  # a position not known yet


def test_errors_are_counted_redacted_and_the_lists_kept_short():
    progress = Progress()
    progress.redact.secrets.add("pa55word")
    assert progress.error("auth failed for pa55word") == "auth failed for ***"
    assert progress.errors == 1 and progress.last_error == "auth failed for ***"
    progress.found([f"finding {i}" for i in range(MAX_FINDINGS + 5)])
    assert len(progress.findings) == MAX_FINDINGS and progress.findings[-1] == f"finding {MAX_FINDINGS + 4}"


def test_a_batch_that_never_returns_does_not_keep_the_process_from_exiting():
    """The batches run in a daemon thread (`BatchRunner`): a process whose batch hangs (a cluster that does not answer)
    still exits once its driver has given up on it; a ThreadPoolExecutor's worker is joined at the interpreter's exit,
    so that process (a job, or the test session) never ended. Its results and errors come back through the Future."""
    import subprocess
    import sys

    from reconciler.engine.driver import BatchRunner

    runner = BatchRunner()
    assert runner.submit(sum, [1, 2, 3]).result(30) == 6
    failed = runner.submit(int, "x")
    assert isinstance(failed.exception(30), ValueError)
    assert runner.shutdown(timeout=30)
    hung = (
        "import threading\n"
        "from reconciler.engine.driver import Threads\n"
        "threads = Threads()\n"
        "threads.batch_runner().submit(threading.Event().wait)\n"  # never returns
        "print('exiting', flush=True)\n"
    )
    exited = subprocess.run([sys.executable, "-c", hung], capture_output=True, text=True, timeout=120)
    assert exited.returncode == 0 and exited.stdout == "exiting\n", exited.stderr[-2000:]


class CountingLoad:
    """A SpecFile's `load` that counts the files it parses."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, path) -> JobSpec:
        self.paths.append(str(path))
        return JobSpec.load(path)


def test_an_unchanged_spec_file_is_not_parsed_again(tmp_path):
    """Issue 39: each refresh re-read and parsed the spec file; now only a file that changed is parsed (its inode,
    mtime and size), and the reload goes on as before: a hot-reloadable change would be applied, a change that needs
    a restart stops the job."""
    path = SPEC.write(tmp_path / "spec.json")
    load = CountingLoad()
    d = ReplicationDriver(path, executor=None, spec_file=SpecFile(path, load))
    assert d.spec == SPEC and len(load.paths) == 1
    for _ in range(3):
        assert d.reload_spec() is True
    assert len(load.paths) == 1 and d.exit_code == 0  # unchanged: not read again
    SPEC.write(path)  # written again, the same spec: read once, nothing to apply
    assert d.reload_spec() is True and len(load.paths) == 2 and d.spec == SPEC and d.exit_code == 0
    assert d.reload_spec() is True and len(load.paths) == 2
    respec(SPEC, delivery="exactly-once").write(path)  # a change that needs a restart
    assert d.reload_spec() is False and len(load.paths) == 3
    assert d.exit_code == EXIT_RESTART_REQUIRED and d.state is StatusState.RESTART_REQUIRED


def test_a_spec_file_that_cannot_be_read_is_tried_again(tmp_path):
    path = SPEC.write(tmp_path / "spec.json")
    load = CountingLoad()
    d = ReplicationDriver(path, executor=None, spec_file=SpecFile(path, load))
    path.write_text("{not json")
    assert d.reload_spec() is True and d.errors == 1 and "cannot re-read spec" in (d.last_error or "")
    assert d.reload_spec() is True and d.errors == 2 and len(load.paths) == 3  # reported at each refresh, as before
    SPEC.write(path)
    assert d.reload_spec() is True and d.spec == SPEC and len(load.paths) == 4
    assert d.reload_spec() is True and len(load.paths) == 4 and d.errors == 2


def test_the_spec_hash_is_computed_once_and_kept_out_of_the_fields():
    spec = respec(SPEC, topics_include=("orders",))
    assert spec.spec_hash() == spec.spec_hash() == JobSpec.from_json(spec.to_json()).spec_hash()
    other = spec.with_settings(delivery=respec(SPEC, delivery="exactly-once").settings.delivery)
    assert other.spec_hash() != spec.spec_hash() and other != spec
    assert spec == JobSpec.from_json(spec.to_json())  # the kept hash is not compared
