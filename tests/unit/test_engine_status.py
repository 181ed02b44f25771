"""An engine's ReplicationEngine status (reconciler/contract/engine_status.py): a pure function from the verdict on its
flows to Ready / Progressing / Degraded conditions, the verdict being drift's (the same problems, word for word, as
drift's items for the same status record: reconciler/drift/engines.py); and the piece that writes it
(reconciler/engine/health_writer.py) against a stand-in for the Kubernetes API on the loopback interface."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from reconciler.contract.engine_status import Phase, Seen, Wanted, crd, resource
from reconciler.contract.jobstate import Deployment
from reconciler.contract.spec import JobSpec
from reconciler.contract.status import StatusRecord
from reconciler.drift.engines import engine_status as status_of
from reconciler.engine.health_writer import KubeApi, StatusWriter
from reconciler.topology.model import Slo
from tests.unit import test_drift_report as drift_cases
from tests.unit.test_drift_report import NOW, healthy, report_of

world = drift_cases.world
FLOW = "west->east"
SLO = Slo(max_lag_records=1000, max_lag_seconds=60, max_latency_p99_ms=500)


def _spec(topo, flow: str = FLOW) -> JobSpec:
    return JobSpec.from_flow(topo, topo.flow(flow))


def _seen(topo, record: dict | None, *, alive: bool | None = True, stopped: bool = False, flow: str = FLOW) -> Seen:
    dep = Deployment(flow, "kubernetes", "engine east", _spec(topo, flow), alive, (NOW - 60_000) / 1000, stopped)
    if record is not None:
        record = {"started_at": NOW - 59_000, **record}  # this driver's run
    return Seen(StatusRecord.from_dict(record) if record is not None else None, dep)


def _wanted(topo, generation: int = 1, slo: Slo = SLO, flows: tuple[str, ...] = (FLOW,)) -> Wanted:
    return Wanted(generation, {f: _spec(topo, f).spec_hash() for f in flows}, slo)


def _conditions(status: dict) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_a_flow_replicating_its_wanted_spec_within_the_slos_is_ready(world):
    topo = world.topology
    status = status_of(_wanted(topo), {FLOW: _seen(topo, healthy(topo, FLOW))}, NOW)
    assert status["phase"] == "Ready" and status["observedGeneration"] == 1
    assert _conditions(status) == {
        "Ready": ("True", "Replicating"),
        "Progressing": ("False", "Replicating"),
        "Degraded": ("False", "Replicating"),
    }
    assert status["flows"] == [{"name": FLOW, "phase": "Ready", "verdict": "running"}]
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    assert status["message"] == "1 of 1 flow replicating within the SLOs"


@pytest.mark.parametrize(
    "case,record,phase",
    [
        ("a partition fault", {"state": "degraded", "halted": ["orders:0"]}, Phase.DEGRADED),
        ("lag over the SLO", {"lag_total": 5_000}, Phase.DEGRADED),
        ("record age over the SLO", {"latency_ms": {"p50": 1, "p95": 900, "p99": 900, "samples": 9}}, Phase.DEGRADED),
        ("failed", {"state": "failed", "last_error": "boom"}, Phase.DEGRADED),
        ("an older spec than wanted", {"spec_hash": "0" * 64}, Phase.PROGRESSING),
    ],
)
def test_what_drift_reports_of_a_flow_is_what_its_engine_says_word_for_word(world, case, record, phase):
    """The engine's message for a flow is drift's item for the same record: one judgement (drift/engines.py)."""
    topo = world.topology
    rec = healthy(topo, FLOW, **record)
    status = status_of(_wanted(topo), {FLOW: _seen(topo, rec)}, NOW)
    [flow] = status["flows"]
    assert status["phase"] == phase.value == flow["phase"], case
    drift = [
        i.message
        for i in report_of(world, statuses={FLOW: rec, "east->west": healthy(topo, "east->west")}).drift
        if FLOW in i.flows
    ]
    assert drift and all(m in flow["message"] for m in drift), (case, drift, flow["message"])
    assert status["message"].startswith(f"1 of 1 flow {phase.value.lower()}: ")


def test_the_engine_takes_its_worst_flow_and_names_it(world):
    topo = world.topology
    both = (FLOW, "east->west")
    seen = {
        FLOW: _seen(topo, healthy(topo, FLOW)),
        "east->west": _seen(topo, healthy(topo, "east->west", lag_total=10_000), flow="east->west"),
    }
    status = status_of(_wanted(topo, flows=both), seen, NOW)
    assert status["phase"] == "Degraded" and _conditions(status)["Degraded"] == ("True", "Degraded")
    assert status["message"].startswith("1 of 2 flows degraded: flow east->west is 10,000 records behind")
    assert [f["phase"] for f in status["flows"]] == ["Degraded", "Ready"]


def test_starting_waiting_for_its_file_and_leaving_are_progressing(world):
    topo = world.topology
    just = Seen(None, Deployment(FLOW, "kubernetes", "engine east", _spec(topo), True, NOW / 1000 - 5))
    assert status_of(_wanted(topo), {FLOW: just}, NOW)["flows"][0]["verdict"] == "starting"
    assert status_of(_wanted(topo), {FLOW: just}, NOW)["phase"] == "Progressing"
    absent = status_of(_wanted(topo), {}, NOW)
    assert absent["phase"] == "Progressing" and "not in the engine yet" in absent["message"]
    leaving = status_of(_wanted(topo, flows=()), {FLOW: _seen(topo, healthy(topo, FLOW))}, NOW)
    assert leaving["phase"] == "Progressing" and "no longer wanted" in leaving["message"]


def test_a_flow_in_back_off_is_degraded_and_one_superseded_suspended(world):
    topo = world.topology
    backoff = status_of(_wanted(topo), {FLOW: _seen(topo, healthy(topo, FLOW, state="failed"), alive=False)}, NOW)
    assert backoff["phase"] == "Degraded"
    superseded = _seen(topo, healthy(topo, FLOW, heartbeat_at=NOW - 600_000), alive=False, stopped=True)
    status = status_of(_wanted(topo), {FLOW: superseded}, NOW)
    assert status["phase"] == "Suspended"
    assert {c["status"] for c in status["conditions"]} == {"False"} and _conditions(status)["Ready"][1] == "Suspended"


def test_an_engine_asked_to_stop_is_suspended(world):
    topo = world.topology
    status = status_of(_wanted(topo), {FLOW: _seen(topo, healthy(topo, FLOW))}, NOW, stopping=True)
    assert status["phase"] == "Suspended" and "stopping" in status["message"]


def test_a_condition_keeps_its_transition_time_while_its_status_holds(world):
    topo = world.topology
    first = status_of(_wanted(topo), {FLOW: _seen(topo, healthy(topo, FLOW))}, NOW)
    later = NOW + 30_000
    same = status_of(_wanted(topo), {FLOW: _seen(topo, healthy(topo, FLOW, heartbeat_at=later))}, later, previous=first)
    assert same == first, "nothing changed: nothing to write"
    worse = status_of(
        _wanted(topo),
        {FLOW: _seen(topo, healthy(topo, FLOW, heartbeat_at=later, lag_total=9_999))},
        later,
        previous=first,
    )
    times = {c["type"]: c["lastTransitionTime"] for c in worse["conditions"]}
    assert times["Progressing"] == first["conditions"][1]["lastTransitionTime"], "False before and after"
    assert times["Ready"] == times["Degraded"] == "2027-01-15T08:00:30Z"


def test_the_resource_reads_back_as_what_the_engine_wants():
    obj = resource("mirror-engine-east", "replication", {}, "east", "mirror-engine-east", {FLOW: "abc"}, SLO)
    obj["metadata"]["generation"] = 4
    assert Wanted.of(obj) == Wanted(4, {FLOW: "abc"}, SLO)
    assert obj["spec"]["slo"] == {"maxLagRecords": 1000, "maxLagSeconds": 60, "maxLatencyP99Ms": 500}
    assert "slo" not in resource("n", "ns", {}, "east", "n", {FLOW: None}, Slo())["spec"]
    assert crd()["spec"]["versions"][0]["subresources"] == {"status": {}}


# --- the writer ---------------------------------------------------------------------------------------------
class FakeApi(ThreadingHTTPServer):
    """The Kubernetes API of one ReplicationEngine, on the loopback interface: GET it, merge-patch its status
    subresource; `history` holds the object after each patch (what Argo CD and Flux would have read)."""

    def __init__(self, obj: dict[str, Any] | None = None):
        self.obj, self.patches, self.history, self.lock = obj, [], [], threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def start(self) -> str:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server_port}"

    def path(self) -> str | None:
        if self.obj is None:
            return None
        meta = self.obj["metadata"]
        return KubeApi("").path(meta["namespace"], meta["name"])


class _Handler(BaseHTTPRequestHandler):
    server: FakeApi

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with self.server.lock:
            if self.path != self.server.path():
                return self._send(404, {"kind": "Status", "code": 404})
            self._send(200, self.server.obj)

    def do_PATCH(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            if self.path != f"{self.server.path()}/status" or self.server.obj is None:
                return self._send(404, {"kind": "Status", "code": 404})
            assert self.headers["Content-Type"] == "application/merge-patch+json"
            self.server.patches.append(body)
            self.server.obj = {**self.server.obj, "status": body["status"]}
            self.server.history.append(json.loads(json.dumps(self.server.obj)))
            self._send(200, self.server.obj)


@pytest.fixture
def api():
    server = FakeApi(None)
    server.start()
    yield server
    server.shutdown()


def test_the_writer_writes_the_status_when_it_changes_and_only_then(world, api, caplog):
    topo = world.topology
    seen = {FLOW: _seen(topo, healthy(topo, FLOW))}
    writer = StatusWriter(
        KubeApi(f"http://127.0.0.1:{api.server_port}"),
        "replication",
        "mirror-engine-east",
        lambda: seen,
        status_of,
        clock=lambda: NOW / 1000,
    )
    assert writer.round() is None and "HTTP 404" in caplog.text and "CRD is not installed" in caplog.text
    obj = resource(
        "mirror-engine-east", "replication", {}, "east", "mirror-engine-east", dict(_wanted(topo).flows), SLO
    )
    api.obj = {**obj, "metadata": {**obj["metadata"], "generation": 1}}
    written = writer.round()
    assert written is not None and written["phase"] == "Ready" and api.patches == [{"status": written}]
    assert writer.round() is None and len(api.patches) == 1, "unchanged: not written again"
    seen[FLOW] = _seen(topo, healthy(topo, FLOW, lag_total=50_000))
    assert writer.round()["phase"] == "Degraded" and len(api.patches) == 2
    api.obj["metadata"]["generation"] = 2  # a sync changed the spec: judged against it, observedGeneration follows
    assert writer.round()["observedGeneration"] == 2
    stop = threading.Event()
    stop.set()
    writer.run(stop)
    assert api.obj["status"]["phase"] == "Suspended", "asked to stop: written as stopping"
