"""The operations layer (observe, plan, apply, drift) against an in-memory Backend: memory clusters
(the admin double that passes the adapter contract suite), a status board, recording deployers, a
fixed clock. No module global is patched: every dependency comes in through the Backend."""

from __future__ import annotations

import collections.abc

import pytest

from reconciler.adapters.base import OpResult
from reconciler.adapters.live_read import Connections
from reconciler.adapters.probe import Unreachable
from reconciler.apply.lock import Lease
from reconciler.dev.brokers import DevClusterError, Engine
from reconciler.dev.clusters import DevClusterStatus
from reconciler.jobplan.state import JobState, JobStatuses, desired_jobs, read_jobs, read_statuses
from reconciler.mirror.mirror_client import GroupState, TopicPartition
from reconciler.mirror.records import Checkpoint, Heartbeat
from reconciler.operations import offsets
from reconciler.operations.apply import ApplyOutcome, ApplyRequest, apply
from reconciler.operations.backend import HEARTBEAT_READ_TIMEOUT
from reconciler.operations.dev import dev_down, dev_status, dev_up
from reconciler.operations.drift import drift, drift_view
from reconciler.operations.lock import LeaseClaim, UnlockOutcome, remove_lease
from reconciler.operations.observe import observe
from reconciler.operations.offsets import GroupMove
from reconciler.operations.plan import make_plan, plan_of, plan_topology
from reconciler.operations.status import status
from reconciler.topology.build import load_topology_text
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
        heartbeat_reader=lambda c, p: reads.append(f"heartbeats {c.alias}") or {},
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
    # One read_statuses (jobplan/state.py), one shape (JobStatuses): observe (plan, apply, drift) and `status`
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
    planned = plan_topology(w.topology, backend)  # `reconciler plan`: connects, observes, plans
    assert kinds(planned.plan) == kinds(one) and planned.observation.live.cluster("east").reachable
    return one


def test_apply_executes_under_the_lease_and_records_what_it_applied():
    w = world()
    backend = w.backend()
    outcome = apply(ApplyRequest(w.topology, revision="abc"), backend, _UI())
    assert outcome.ok and outcome.report is not None and "west.orders" in w["east"].topics
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        assert make_plan(w.topology, conns, backend).actions == []
    again = apply(ApplyRequest(w.topology), backend, _UI())
    assert again == ApplyOutcome(True)  # nothing to do: nothing executed


def test_apply_does_nothing_when_not_confirmed():
    w = world()
    outcome = apply(ApplyRequest(w.topology), w.backend(), _UI(answer=False))
    assert outcome == ApplyOutcome(False) and "west.orders" not in w["east"].topics


def test_drift_is_a_view_of_the_plan_and_the_observation():
    w = world()
    backend = w.backend(clock=lambda: NOW)
    report = drift(w.topology, backend, check_jobs=False)
    assert report.has_drift and report.generated_at.startswith("2027-01-15")  # the backend's clock
    apply(ApplyRequest(w.topology), backend, _UI())
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        obs = observe(w.topology, conns, backend, statuses=True, heartbeats=True, applied=True)
    view = drift_view(obs, backend, check_jobs=False)
    assert view.status() == "in-sync", view.headline()


# --- status, and git read once per command ---------------------------------------------------------------


def test_status_reports_typed_rows_at_the_backends_clock():
    w = world()
    board, deployer = StatusBoard(), FakeDeployer("local")
    backend = w.backend(fake_backend(board, deployer), clock=lambda: NOW)
    [row] = status(w.topology, backend).rows
    assert (row.flow, row.wanted, row.state, row.in_sync, row.desired_hash is not None) == (
        "west->east",
        True,
        "not deployed",
        False,
        True,
    )
    apply(ApplyRequest(w.topology), backend, _UI())
    board.report("west->east", deployer.jobs["west->east"].spec, lag_total=7)
    report = status(w.topology, w.backend(fake_backend(board, deployer)))  # the wall clock: the board's
    [row] = report.rows
    assert (row.state, row.in_sync, row.lag_total, row.latency_ms) == (
        "running",
        True,
        7,
        {"p50": 40.0, "p95": 80.0, "p99": 120.0},
    )
    assert not report.out_of_sync and report.unreadable == {}
    assert report.to_dict()["jobs"] == [row.to_dict()] and list(row.to_dict())[:3] == ["flow", "wanted", "deployer"]


def test_status_names_a_cluster_whose_statuses_cannot_be_read():
    w = world()

    def broken(cluster):
        raise RuntimeError("status topic not readable")

    jobs = fake_backend(StatusBoard())
    jobs.read_status = broken
    report = status(w.topology, w.backend(jobs))
    assert report.unreadable == {"east": "RuntimeError: status topic not readable"}
    assert report.rows[0].unreadable == "RuntimeError: status topic not readable"


def test_git_is_read_once_per_command_by_the_backend_and_planned_as_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    """plan, apply, drift and status read the revision through `backend.git` at most once; the job plan
    (`with_jobs`) takes it as data and the desired job specs carry it."""
    from reconciler.cli.main import main

    w = world()
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY_FILE)
    git = RecordingGit({"commit": "c0ffee", "dirty": True})
    calls = git.calls
    board, deployer = StatusBoard(), FakeDeployer("local")
    backend = w.backend(fake_backend(board, deployer), git=git)
    out = tmp_path / "plan.json"
    for argv, reads in (
        (["plan", str(path), "--format", "json"], 1),
        (["plan", str(path), "--out", str(out)], 1),
        (["apply", str(path), "--auto-approve"], 1),
        (["drift", str(path)], 1),
        (["status", str(path)], 0),
    ):
        calls.clear()
        main(argv, backend)
        assert calls == [((str(path),), None)] * reads, argv
    assert deployer.jobs["west->east"].spec.git_revision == "c0ffee-dirty"
    capsys.readouterr()
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        assert make_plan(w.topology, conns, backend).actions == []
    assert calls == [], "the operations never read git themselves"


class RecordingGit:
    """A git repository double: every revision read, and one answer; a topology "at a revision" is the files'
    text now, and a comparison with a base says nothing changed."""

    def __init__(self, info: dict | None):
        self.info, self.calls, self.reads = info, [], []

    def revision(self, paths, revision=None):
        self.calls.append((tuple(paths), revision))
        return self.info

    def topology_at(self, paths, revision, env=None):
        from reconciler.topology.build import load_topology

        self.reads.append(("topology_at", tuple(paths), revision))
        return load_topology(paths, env=env)

    def compare(self, paths, base, head, env=None):
        from reconciler.gitops import RevisionError

        self.reads.append(("compare", tuple(paths), base, head))
        raise RevisionError(f"unknown revision {base!r} (a test's repository)")


def test_a_topology_at_a_revision_and_plan_base_are_read_through_the_backends_git(tmp_path, capsys):
    """`--revision` (plan, drift) and `plan --base` read git through `backend.git`, never around it."""
    from reconciler.cli.main import main

    w = world()
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY_FILE)
    git = RecordingGit({"commit": "c0ffee", "dirty": False})
    backend = w.backend(fake_backend(StatusBoard(), FakeDeployer("local")), git=git)
    assert main(["plan", str(path), "--revision", "v1", "--format", "json"], backend) in (0, 2)
    assert main(["drift", str(path), "--revision", "v1"], backend) in (0, 2)
    assert git.reads == [("topology_at", (str(path),), "v1")] * 2
    git.reads.clear()
    assert main(["plan", str(path), "--base", "main"], backend) == 1
    assert git.reads == [("compare", (str(path),), "main", None)]
    assert "error: --base main: unknown revision 'main' (a test's repository)" in capsys.readouterr().err


def test_the_backends_outside_world_is_typed():
    """Each Backend dependency has a type a fake is checked against (mypy): no `Any` and no loose
    `Callable[..., Any]` (git was one: callers now name what they read, `git.revision(paths, rev)`)."""
    import typing

    from reconciler.operations.backend import Backend, GitRepository, LocalGit

    hints = typing.get_type_hints(Backend)
    loose = sorted(
        name
        for name, hint in hints.items()
        if hint is typing.Any
        or (typing.get_origin(hint) is collections.abc.Callable and typing.get_args(hint)[0] is Ellipsis)
    )
    assert loose == []
    assert hints["git"] is GitRepository and isinstance(Backend().git, LocalGit)


TOPOLOGY_FILE = """apiVersion: reconciler/v1
kind: Topology
metadata: {name: test}
clusters:
  west: {bootstrap_servers: "127.0.0.1:1", replication_principal: "User:mirror"}
  east: {bootstrap_servers: "127.0.0.1:2", replication_principal: "User:mirror"}
flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
"""


# --- offsets translate, failover, reachability: over the Backend's mirror client factory ------------------


class MirrorDouble:
    """One cluster as the offset operations read it: in-memory topics ({topic: [partition records]}) and the
    consumer groups' state and committed offsets."""

    def __init__(self, topics, state=("EMPTY", 0), committed=None):
        self._topics, self.state, self.committed = topics, state, dict(committed or {})
        self.commits: list[dict] = []

    def topics(self):
        return {t: len(ps) for t, ps in self._topics.items()}

    def read_all(self, topic, partitions):
        return [r for p in self._topics[topic][:partitions] for r in p]

    def read_tail(self, topic, partitions, per_partition):
        return [r for p in self._topics[topic][:partitions] for r in p[-per_partition:]]

    def group_state(self, group):
        return GroupState(group, *self.state)

    def committed_offsets(self, group, partitions):
        return {tp: self.committed[tp] for tp in partitions if tp in self.committed}

    def commit_offsets(self, group, offsets):
        self.commits.append(dict(offsets))
        self.committed.update(offsets)


def _checkpoint(partition, upstream, downstream):
    c = Checkpoint("billing", "west.orders", partition, upstream, downstream, "")
    return c.record_key(), c.record_value()


def _mirror_world(**double):
    beat = Heartbeat("west", "east", int(NOW * 1000) - 3000)
    east = MirrorDouble(
        {
            "west.checkpoints.internal": [[_checkpoint(0, 10, 8), _checkpoint(1, 4, 4)]],
            "west.orders": [[], []],
            "west.heartbeats": [[(beat.record_key(), beat.record_value())]],
        },
        **double,
    )
    asked: list[tuple[str, float]] = []

    def factory(cluster, timeout):
        asked.append((cluster.alias, timeout))
        return east

    return east, asked, factory


MOVE = GroupMove("billing", "west", "east", timeout=5.0)


def test_translate_reads_the_checkpoints_on_the_target_through_the_backend():
    w = world()
    east, asked, factory = _mirror_world()
    t = offsets.translate(w.topology, MOVE, w.backend(mirror_client=factory))
    assert asked == [("east", 5.0)]
    assert t.scan.offsets() == {TopicPartition("west.orders", 0): 8, TopicPartition("west.orders", 1): 4}
    with pytest.raises(offsets.Refused, match="has not committed offsets on 'west' yet"):
        offsets.translate(w.topology, GroupMove("other", "west", "east"), w.backend(mirror_client=factory))
    with pytest.raises(offsets.Refused, match="cluster 'north' is not in the topology"):
        offsets.translate(w.topology, GroupMove("billing", "west", "north"), w.backend(mirror_client=factory))

    def down(cluster, timeout):
        raise Unreachable(f"cannot connect to cluster {cluster.alias!r}")

    with pytest.raises(offsets.Refused, match="cannot connect to cluster 'east'"):
        offsets.translate(w.topology, MOVE, w.backend(mirror_client=down))


def test_failover_plans_and_commits_only_when_asked_and_not_refused():
    w = world()
    east, _, factory = _mirror_world()
    dry = offsets.failover(w.topology, MOVE, w.backend(mirror_client=factory))
    assert dry.refusal is None and not dry.applied and east.commits == []
    assert dry.plan.commits == {TopicPartition("west.orders", 0): 8, TopicPartition("west.orders", 1): 4}
    done = offsets.failover(w.topology, MOVE, w.backend(mirror_client=factory), apply=True)
    assert done.applied and east.commits == [dry.plan.commits]
    busy, _, factory = _mirror_world(state=("STABLE", 2))
    refused = offsets.failover(w.topology, MOVE, w.backend(mirror_client=factory), apply=True)
    assert not refused.applied and busy.commits == [] and "is active on 'east'" in (refused.refusal or "")


def test_failover_warns_through_the_callback_when_no_flow_joins_the_clusters():
    w = world()
    _, _, factory = _mirror_world()
    warnings: list[str] = []
    with pytest.raises(offsets.Refused, match="has no topic east.checkpoints.internal"):
        offsets.failover(w.topology, GroupMove("billing", "east", "west"), w.backend(mirror_client=factory),
                         warn=warnings.append)  # fmt: skip
    assert warnings == ["warning: no flow east->west in the topology; assuming the default replication policy"]


def test_reachability_ages_heartbeats_at_the_backends_clock():
    w = world()
    _, asked, factory = _mirror_world()
    report = offsets.reachability(w.topology, "east", w.backend(mirror_client=factory, clock=lambda: NOW), 7.0)
    [up] = report.upstream
    assert asked == [("east", 7.0)] and (up.alias, up.hops, up.age_seconds) == ("west", 1, 3.0)


# --- force-unlock: the lease store through the Backend's admin factory -----------------------------------


def test_remove_lease_asks_then_withdraws_exactly_the_named_claim():
    w = world()
    stuck = Lease(w.factory(w.topology.clusters["east"]), ttl=60)
    stuck.acquire()  # never released: the apply was killed
    backend = w.backend()
    asked: list[LeaseClaim] = []
    no = remove_lease(w.topology, "east", stuck.owner, backend, lambda c: asked.append(c) is not None)
    assert no == UnlockOutcome(False, asked[0]) and asked[0].lock_id == stuck.owner and asked[0].who != "?"
    missing = remove_lease(w.topology, "east", "not-an-owner", backend, lambda c: True)
    assert not missing.removed and f"has no live lease 'not-an-owner' (live leases: {stuck.owner} by" in (
        missing.error or ""
    )
    assert remove_lease(w.topology, "north", stuck.owner, backend, lambda c: True).error == (
        "no cluster 'north' in the topology (clusters: east, west)"
    )
    done = remove_lease(w.topology, "east", stuck.owner, backend, lambda c: True)
    assert done.removed and done.claim is not None
    assert remove_lease(w.topology, "east", stuck.owner, backend, lambda c: True).error is not None, "gone"


def test_force_unlock_command_renders_the_operation(tmp_path, capsys):
    from reconciler.cli.main import main

    w = world()
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY_FILE)
    stuck = Lease(w.factory(w.topology.clusters["east"]), ttl=60)
    stuck.acquire()
    refused = w.backend(ask=lambda question: None)  # no terminal: nobody can answer
    assert main(["force-unlock", str(path), "--cluster", "east", stuck.owner], refused) == 1
    out, err = capsys.readouterr()
    assert out.startswith(f"Lease {stuck.owner} on east: held by ") and "refusing to ask" in err
    assert main(["force-unlock", str(path), "--cluster", "east", stuck.owner, "--force"], w.backend()) == 0
    assert capsys.readouterr().out.endswith(f"Removed the lease {stuck.owner} on east.\n")


def test_import_and_export_are_operations_with_typed_outcomes():
    """`import` and `export` call one operation each (operations/interop.py) and render its outcome: a validated
    topology with the draft's notes, or the errors at the input's lines; nothing is written by the operation."""
    from reconciler.operations.interop import export_topology, import_topology

    good = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
    imported = import_topology("mm2", good, "mm2.properties")
    assert imported.errors is None and imported.topology is not None and imported.draft is not None
    assert [f.name for f in imported.topology.flows] == ["a->b"] and "a->b" not in imported.yaml_text.split("#")[0]
    assert "source: a" in imported.yaml_text
    bad = import_topology("mm2", good + "a->b.topics = ok, (bad\n", "mm2.properties")
    assert bad.topology is None and bad.errors is not None and bad.errors.startswith("mm2.properties:5: error:")
    assert "nothing was written" in bad.errors
    exported = export_topology("mm2", imported.topology, "t.yaml")
    assert "a->b.enabled = true" in exported


class _DevBrokers:
    """Dev brokers in memory: what `dev up/down/status` asked, in order."""

    def __init__(self, calls: list[str], fail: str | None = None):
        self.calls, self.fail, self.running = calls, fail, {}

    def up(self, topology, engine=None):
        self.calls.append(f"up {engine.value if engine else None}")
        if self.fail:
            raise DevClusterError(self.fail)
        out = []
        for alias in sorted(topology.clusters):
            state = "running" if alias in self.running else "started"
            self.running[alias] = DevClusterStatus(alias, topology.clusters[alias].bootstrap_servers, 7, state)
            out.append(DevClusterStatus(alias, topology.clusters[alias].bootstrap_servers, 7, state, Engine.TANSU))
        return out

    def down(self):
        self.calls.append("down brokers")
        out = [DevClusterStatus(s.alias, s.bootstrap, s.pid, "stopped", Engine.TANSU) for s in self.running.values()]
        self.running = {}
        return out

    def status(self):
        self.calls.append("status")
        return list(self.running.values())


class _LocalJobs:
    def __init__(self, calls: list[str], tmp_path):
        self.calls, self.dir = calls, tmp_path / "engines"

    def stop_all(self):
        self.calls.append("stop jobs")
        return [("engine east", OpResult.success("stopped"))]


def _dev_backend(calls: list[str], tmp_path, fail: str | None = None):
    brokers, jobs = _DevBrokers(calls, fail), _LocalJobs(calls, tmp_path)
    return world().backend(dev_brokers=lambda: brokers, local_jobs=lambda: jobs)


def test_dev_up_down_and_status_are_operations_over_the_backend(tmp_path):
    calls: list[str] = []
    backend = _dev_backend(calls, tmp_path)
    topo = world().topology
    first = dev_up(topo, backend, Engine.NOIDA)
    assert first.ok and [(s.alias, s.state) for s in first.clusters] == [("east", "started"), ("west", "started")]
    assert [s.state for s in dev_up(topo, backend).clusters] == ["running", "running"]
    assert [s.alias for s in dev_status(backend)] == ["east", "west"]
    down = dev_down(backend)
    assert down.jobs == [("engine east", OpResult.success("stopped"))]
    assert [(s.alias, s.state) for s in down.clusters] == [("east", "stopped"), ("west", "stopped")]
    # the jobs stop before the brokers (they would only retry against stopped brokers)
    assert calls == ["up noida", "up None", "status", "stop jobs", "down brokers"]


def test_dev_up_says_why_nothing_started(tmp_path, monkeypatch):
    calls: list[str] = []
    failed = dev_up(world().topology, _dev_backend(calls, tmp_path, fail="not on loopback"))
    assert not failed.ok and failed.error == "not on loopback" and failed.clusters == []
    monkeypatch.delenv("WEST_DEV_SECRET", raising=False)
    text = TOPOLOGY_FILE.replace(
        'replication_principal: "User:mirror"}', 'config: {sasl.password: "${WEST_DEV_SECRET}"}}', 1
    )
    unresolved = dev_up(load_topology_text(text), _dev_backend(calls, tmp_path))
    assert unresolved.unresolved is not None and "WEST_DEV_SECRET" in unresolved.unresolved.render()
    assert calls == ["up None"], "nothing starts when a reference is unset"


def test_the_dev_commands_use_the_backends_brokers_and_jobs(tmp_path, capsys):
    """`dev up/down/status` parse, call the operation with the Backend, and render: no broker of their own."""
    from reconciler.cli.main import main

    calls: list[str] = []
    backend = _dev_backend(calls, tmp_path)
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY_FILE)
    assert main(["dev", "up", str(path), "--engine", "noida"], backend) == 0
    assert capsys.readouterr().out.count("started") == 2
    assert main(["dev", "status"], backend) == 0
    assert capsys.readouterr().out.count("started") == 2
    assert main(["dev", "down"], backend) == 0
    out = capsys.readouterr().out
    assert out.startswith("engine east: stopped\n") and out.count("stopped") == 3
    assert main(["dev", "down"], backend) == 0
    assert capsys.readouterr().out.endswith("no dev clusters running\n")
    assert calls == ["up noida", "status", "stop jobs", "down brokers", "stop jobs", "down brokers"]
    failing = _dev_backend([], tmp_path, fail="127.0.0.1:1 for cluster 'west' is in use by something that is not Kafka")
    assert main(["dev", "up", str(path)], failing) == 1
    assert "error: 127.0.0.1:1 for cluster 'west' is in use" in capsys.readouterr().err


def test_heartbeats_are_read_through_the_backends_mirror_client():
    """One home for the one-cluster client: plan's and drift's heartbeat reads get theirs from
    `Backend.mirror_client` (a test's double here), not a MirrorKafka of their own."""
    w = world()
    east, asked, factory = _mirror_world()
    backend = w.backend(mirror_client=factory, heartbeat_reader=None, clock=lambda: NOW)
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        obs = observe(w.topology, conns, backend, heartbeats=True)
    assert asked == [("east", HEARTBEAT_READ_TIMEOUT)]
    assert obs.heartbeat_errors == {} and obs.heartbeats["east"] == {
        "west.heartbeats": Heartbeat("west", "east", int(NOW * 1000) - 3000)
    }

    def down(cluster, timeout):
        raise Unreachable(f"cannot connect to cluster {cluster.alias!r}")

    backend = w.backend(mirror_client=down, heartbeat_reader=None)
    with Connections(dict(w.topology.clusters), backend.admin_factory) as conns:
        obs = observe(w.topology, conns, backend, heartbeats=True)
    assert "cannot connect to cluster 'east'" in obs.heartbeat_errors["east"]
