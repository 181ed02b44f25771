"""The engine host (reconciler.engine.host): flows started, restarted, stopped and retried from the files of
an engine directory, one flow's trouble never touching its neighbours. Drivers are small fakes here (the real
ReplicationDriver runs in tests/integration/test_engines.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from reconciler.contract.engine import (
    FLOWS_DIR,
    RESTART_SUFFIX,
    EngineRecord,
    FlowRuntime,
    FlowState,
    flat_flow_file,
    flow_files,
    read_runtime,
    runtime_flows,
    write_runtime,
)
from reconciler.contract.spec import EXIT_RESTART_REQUIRED, EXIT_SUPERSEDED
from reconciler.engine.host import EngineHost


class FakeDriver:
    """Runs until stopped, or ends at once with the exit code its spec file asks for (`"exit": N`)."""

    def __init__(self, path: Path):
        data = json.loads(path.read_text())
        if data.get("broken"):
            raise ValueError("not a job spec")
        self._flow = data["flow"]
        self._hash = data.get("hash", "h1")
        self._exit = data.get("exit")
        self.stop_event = threading.Event()
        self.exit_code = 0
        self.ran = threading.Event()

    @property
    def flow(self) -> str:
        return self._flow

    @property
    def spec_hash(self) -> str:
        return self._hash

    def run(self) -> int:
        self.ran.set()
        if self._exit is not None:
            self.exit_code = self._exit
            return self._exit
        self.stop_event.wait()
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _write(engine_dir: Path, stem: str, **data) -> Path:
    path = engine_dir / FLOWS_DIR / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _settle(host: EngineHost, until, rounds: int = 100) -> list[FlowRuntime]:
    for _ in range(rounds):
        flows = host.reconcile()
        if until(flows):
            return flows
        time.sleep(0.01)
    raise AssertionError(f"not reached: {host.flows()}")


def _host(tmp_path: Path, made: list[FakeDriver], clock: Clock | None = None, changes=None) -> EngineHost:
    def make(path: Path) -> FakeDriver:
        d = FakeDriver(path)
        made.append(d)
        return d

    return EngineHost(
        tmp_path,
        make,
        on_change=changes.append if changes is not None else None,
        backoff=(2.0, 4.0),
        clock=clock or Clock(),
    )


def _by_flow(flows: list[FlowRuntime]) -> dict[str, FlowRuntime]:
    return {f.flow: f for f in flows}


def test_flows_are_added_and_removed_while_the_others_keep_running(tmp_path):
    made: list[FakeDriver] = []
    changes: list[list[FlowRuntime]] = []
    host = _host(tmp_path, made, changes=changes)
    _write(tmp_path, "a.east", flow="a->east")
    _write(tmp_path, "b.east", flow="b->east")
    flows = _settle(host, lambda fs: len(fs) == 2)
    assert {f.flow: f.state for f in flows} == {"a->east": FlowState.RUNNING, "b->east": FlowState.RUNNING}
    first_a = made[0]

    _write(tmp_path, "c.east", flow="c->east")  # added: a and b untouched
    _settle(host, lambda fs: len(fs) == 3)
    assert len(made) == 3 and not first_a.stop_event.is_set()

    (tmp_path / FLOWS_DIR / "b.east.json").unlink()  # removed: stopped gracefully, the others untouched
    flows = _settle(host, lambda fs: {f.flow for f in fs} == {"a->east", "c->east"})
    assert made[1].stop_event.is_set() and not first_a.stop_event.is_set() and not made[2].stop_event.is_set()
    assert all(f.restarts == 0 for f in flows)
    assert changes and {f.flow for f in changes[-1]} == {"a->east", "c->east"}, "runtime told of each change"
    host.shutdown(5)
    assert all(d.stop_event.is_set() for d in made)


def test_a_failing_flow_backs_off_and_retries_alone(tmp_path):
    clock = Clock()
    made: list[FakeDriver] = []
    host = _host(tmp_path, made, clock)
    _write(tmp_path, "good.east", flow="good->east")
    _write(tmp_path, "bad.east", flow="bad->east", exit=1)
    flows = _settle(
        host,
        lambda fs: (
            _by_flow(fs).get("bad->east", None) is not None and _by_flow(fs)["bad->east"].state is FlowState.BACKOFF
        ),
    )
    bad = _by_flow(flows)["bad->east"]
    assert bad.last_exit == 1 and _by_flow(flows)["good->east"].state is FlowState.RUNNING
    starts = len(made)
    host.reconcile()
    assert len(made) == starts, "not retried before its back-off ends"
    clock.now += 2.5
    _settle(host, lambda fs: len(made) > starts)
    good = [d for d in made if d.flow == "good->east"]
    assert len(good) == 1 and not good[0].stop_event.is_set(), "the neighbour never restarted"
    host.shutdown(5)


def test_an_unreadable_flow_file_is_that_flow_down_not_the_engine(tmp_path):
    made: list[FakeDriver] = []
    host = _host(tmp_path, made)
    _write(tmp_path, "ok.east", flow="ok->east")
    _write(tmp_path, "broken.east", broken=True)
    flows = _settle(host, lambda fs: len(fs) == 2)
    assert _by_flow(flows)["broken.east"].state is FlowState.BACKOFF
    assert _by_flow(flows)["ok->east"].state is FlowState.RUNNING
    host.shutdown(5)


def test_restart_required_restarts_the_flow_in_place_and_a_token_restarts_it(tmp_path):
    made: list[FakeDriver] = []
    host = _host(tmp_path, made)
    path = _write(tmp_path, "a.east", flow="a->east", hash="h1")
    _settle(host, lambda fs: len(fs) == 1)
    # the driver saw a change it cannot take: it ends with EXIT_RESTART_REQUIRED, the engine runs the new file
    _write(tmp_path, "a.east", flow="a->east", hash="h2")
    made[0].exit_code = EXIT_RESTART_REQUIRED
    made[0].stop_event.set()
    flows = _settle(host, lambda fs: fs[0].spec_hash == "h2" and fs[0].state is FlowState.RUNNING)
    assert flows[0].restarts == 1 and flows[0].last_exit == EXIT_RESTART_REQUIRED

    path.with_suffix(RESTART_SUFFIX).write_text("1\n")
    _settle(host, lambda fs: len(made) == 3 and fs[0].state is FlowState.RUNNING)
    assert made[1].stop_event.is_set(), "stopped gracefully before the new start"
    host.shutdown(5)


def test_a_superseded_flow_stays_stopped_until_its_file_changes(tmp_path):
    made: list[FakeDriver] = []
    host = _host(tmp_path, made)
    path = _write(tmp_path, "a.east", flow="a->east", exit=EXIT_SUPERSEDED)
    flows = _settle(host, lambda fs: len(fs) == 1 and fs[0].state is FlowState.SUPERSEDED)
    for _ in range(5):
        host.reconcile()
    assert len(made) == 1, "a superseded flow is not started again by itself"
    path.with_suffix(RESTART_SUFFIX).write_text("again\n")
    _settle(host, lambda fs: len(made) == 2)
    assert flows[0].last_exit == EXIT_SUPERSEDED
    host.shutdown(5)


def test_runtime_and_engine_records_round_trip(tmp_path):
    EngineRecord("east", "local[4]", {"spark.x": "1"}).write(tmp_path)
    assert EngineRecord.load(tmp_path) == EngineRecord("east", "local[4]", {"spark.x": "1"})
    flows = [FlowRuntime("a->east", FlowState.BACKOFF, "h", 12.5, 2, 1)]
    write_runtime(tmp_path, "inst1", 9000, "app-1", flows)
    data = read_runtime(tmp_path)
    assert data["instance_id"] == "inst1" and data["metrics_port"] == 9000
    assert runtime_flows(data) == {"a->east": flows[0]}
    assert flow_files(tmp_path) == {}


def _configmap(engine_dir: Path, data: dict[str, str], generation: int) -> None:
    """What the kubelet does to a mounted ConfigMap (its AtomicWriter): the keys are written to a new hidden
    directory, `..data` is swapped to it in one rename, and each key is a symlink `KEY -> ..data/KEY`."""
    new = engine_dir / f"..gen{generation}"
    new.mkdir()
    for key, text in data.items():
        (new / key).write_text(text)
    tmp = engine_dir / "..data_tmp"
    tmp.symlink_to(new.name)
    tmp.replace(engine_dir / "..data")
    for link in engine_dir.iterdir():
        if not link.name.startswith("..") and link.name not in data:
            link.unlink()
    for key in data:
        if not (engine_dir / key).is_symlink():
            (engine_dir / key).symlink_to(f"..data/{key}")


def test_flat_flow_files_of_a_mounted_configmap(tmp_path):
    """A ConfigMap has no subdirectories: the kubernetes deployer's flows are `flow.<flow>.json` keys beside
    engine.json, their restart tokens `flow.<flow>.restart`; updated the way the kubelet updates a mount."""
    made: list[FakeDriver] = []
    host = _host(tmp_path, made)
    a, b = flat_flow_file("a->east"), flat_flow_file("b->east:orders")
    assert (a, b) == ("flow.a.east.json", "flow.b.east.orders.json")
    engine = json.dumps({"name": "east", "master": "inherit", "spark_conf": {}})
    _configmap(tmp_path, {"engine.json": engine, a: json.dumps({"flow": "a->east"})}, 1)
    assert set(flow_files(tmp_path)) == {"a.east"}
    _settle(host, lambda fs: [f.flow for f in fs] == ["a->east"])

    data = {"engine.json": engine, a: json.dumps({"flow": "a->east"}), b: json.dumps({"flow": "b->east:orders"})}
    _configmap(tmp_path, data, 2)  # a flow added
    _settle(host, lambda fs: [f.flow for f in fs] == ["a->east", "b->east:orders"])
    assert len(made) == 2 and not made[0].stop_event.is_set()

    _configmap(tmp_path, {**data, "flow.a.east.restart": "1\n"}, 3)  # a restart token for a: b untouched
    _settle(host, lambda fs: len(made) == 3 and _by_flow(fs)["a->east"].state is FlowState.RUNNING)
    assert made[0].stop_event.is_set() and not made[1].stop_event.is_set()

    _configmap(tmp_path, {"engine.json": engine, b: data[b]}, 4)  # a removed
    _settle(host, lambda fs: [f.flow for f in fs] == ["b->east:orders"])
    assert made[2].stop_event.is_set() and not made[1].stop_event.is_set()
    host.shutdown(5)


def test_the_flows_of_one_engine_must_agree_on_its_spark_settings():
    from reconciler.topology.build import load_topology_text
    from reconciler.topology.diagnostics import TopologyError

    base = (
        "apiVersion: reconciler/v1\nkind: Topology\nmetadata: {name: t}\n"
        "clusters:\n  west: {bootstrap_servers: 'w:9092'}\n  north: {bootstrap_servers: 'n:9092'}\n"
        "  east: {bootstrap_servers: 'e:9092'}\n"
        "flows:\n  - {source: west, target: east, job: {master: 'local[2]'}}\n"
    )
    # local masters agree whatever their N (the engine raises it to its task slots)
    load_topology_text(base + "  - {source: north, target: east, job: {master: 'local[4]'}}\n")
    # an engine of its own is always fine
    load_topology_text(base + "  - {source: north, target: east, job: {spark_conf: {a: b}, engine: own}}\n")
    try:
        load_topology_text(base + "  - {source: north, target: east, job: {spark_conf: {spark.x: '1'}}}\n")
    except TopologyError as exc:
        assert "flow north->east runs in engine east with flow west->east" in str(exc)
        assert "spark_conf differ" in str(exc)
    else:
        raise AssertionError("two spark_conf in one engine accepted")
