"""The operations layer (observe, plan, apply, drift) against an in-memory Backend: memory clusters
(the admin double that passes the adapter contract suite), a status board, recording deployers, a
fixed clock. No module global is patched: every dependency comes in through the Backend."""

from __future__ import annotations

from reconciler.adapters.live_read import Connections
from reconciler.jobs.state import JobState, JobStatuses, desired_jobs, read_jobs, read_statuses
from reconciler.operations.apply import ApplyOutcome, ApplyRequest, apply
from reconciler.operations.drift import drift, drift_view
from reconciler.operations.observe import observe
from reconciler.operations.plan import make_plan, plan_of
from tests.job_helpers import FakeDeployer, StatusBoard, fake_backend
from tests.plan_helpers import World, kinds, topology

NOW = 1_800_000_000.0
FLOWS = 'flows:\n  - {source: west, target: east, topics: {include: ["orders"]}}'


def world() -> World:
    w = World(topology(FLOWS))
    w["west"].add_topic("orders", 2)
    return w


class _UI:
    """A silent console that says yes."""

    def __init__(self, answer: bool = True):
        self.answer, self.lines, self.errors = answer, [], []
        self.progress = None

    def out(self, text: str = "", end: str = "\n") -> None:
        self.lines.append(text)

    def err(self, text: str) -> None:
        self.errors.append(text)

    def confirm(self, plan) -> bool:
        return self.answer


def test_observe_reads_each_part_once_and_only_when_asked():
    w = world()
    reads: list[str] = []
    backend = w.backend(
        status_reader=lambda c: reads.append(f"status {c.alias}") or {},
        read_heartbeats=lambda c, p: reads.append(f"heartbeats {c.alias}") or {},
        clock=lambda: NOW,
    )
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        bare = observe(w.topology, conns, backend)
        assert reads == [] and bare.statuses is None and bare.now_ms == int(NOW * 1000)
        full = observe(w.topology, conns, backend, statuses=True, heartbeats=True, applied=True)
    assert sorted(reads) == ["heartbeats east", "status east"]
    assert full.desired.get("east", "west.orders") is not None and full.applied == {"west": None, "east": None}


def test_observe_records_an_unreadable_status_topic_instead_of_failing():
    w = world()

    def broken(cluster):
        raise RuntimeError("status topic not readable")

    backend = w.backend(status_reader=broken)
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        obs = observe(w.topology, conns, backend, statuses=True)
    assert obs.statuses.unreadable() == {"east": "RuntimeError: status topic not readable"}


def test_observe_plan_and_status_read_statuses_with_one_function():
    # One read_statuses (jobs/state.py), one shape (JobStatuses): observe (plan, apply, drift) and `status`
    # (read_jobs with the job backend alone) read the same records and word an unreadable cluster alike.
    w = world()
    board = StatusBoard()
    board.report("west->east")
    board.records["east"]["east->west"] = dict(board.records["east"]["west->east"], flow="east->west")  # wrong target
    jobs = fake_backend(board)
    backend = w.backend(jobs)
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        obs = observe(w.topology, conns, backend, statuses=True)
    direct = read_statuses(w.topology, jobs, {})
    assert isinstance(obs.statuses, JobStatuses) and obs.statuses == direct
    assert list(direct.records) == ["west->east"], "a status on another flow's target is not read as its own"
    live = read_jobs(w.topology, jobs, desired_jobs(w.topology))
    assert live.jobs["west->east"].status == direct.records["west->east"] and live.unreadable == {}

    def broken(cluster):
        raise RuntimeError("status topic not readable")

    jobs.read_status = broken
    unreadable = read_statuses(w.topology, jobs, {"west": "unreachable"})
    live = read_jobs(w.topology, jobs, desired_jobs(w.topology))
    assert unreadable.unreadable() == live.unreadable == {"east": "RuntimeError: status topic not readable"}
    assert live.jobs["west->east"].state is JobState.UNKNOWN


def test_plan_diffs_the_observation_and_adds_jobs_from_the_backend():
    w = world()
    assert ("east", "create_topic", "west.orders") in kinds(make_plan_of(w, w.backend()))
    board, deployer = StatusBoard(), FakeDeployer("local")
    jobs_plan = make_plan_of(w, w.backend(fake_backend(board, deployer)))
    assert ("east", "deploy_job", "west->east") in kinds(jobs_plan)


def make_plan_of(w: World, backend):
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        one = make_plan(w.topology, conns, backend)
        obs = observe(w.topology, conns, backend, statuses=backend.jobs is not None)
    assert kinds(plan_of(obs, backend)) == kinds(one)  # the same plan, whichever way it is asked for
    return one


def test_apply_executes_under_the_lease_and_records_what_it_applied():
    w = world()
    backend = w.backend()
    outcome = apply(ApplyRequest(dict(w.topology.clusters), w.topology, revision="abc"), backend, _UI())
    assert outcome.ok and outcome.report is not None and "west.orders" in w["east"].topics
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        assert make_plan(w.topology, conns, backend).actions == []
    again = apply(ApplyRequest(dict(w.topology.clusters), w.topology), backend, _UI())
    assert again == ApplyOutcome(True)  # nothing to do: nothing executed


def test_apply_does_nothing_when_not_confirmed():
    w = world()
    outcome = apply(ApplyRequest(dict(w.topology.clusters), w.topology), w.backend(), _UI(answer=False))
    assert outcome == ApplyOutcome(False) and "west.orders" not in w["east"].topics


def test_drift_is_a_view_of_the_plan_and_the_observation():
    w = world()
    backend = w.backend(clock=lambda: NOW)
    report = drift(w.topology, backend, check_jobs=False)
    assert report.has_drift and report.generated_at.startswith("2027-01-15")  # the backend's clock
    apply(ApplyRequest(dict(w.topology.clusters), w.topology), backend, _UI())
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        obs = observe(w.topology, conns, backend, statuses=True, heartbeats=True, applied=True)
    view = drift_view(obs, backend, check_jobs=False)
    assert view.status() == "in-sync", view.headline()
