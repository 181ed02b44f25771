"""A flow's `rate_limit` from the topology to the job spec (a flow setting: defaults, a flow's own, unset with null;
hot reload; a spec without one hashes as before), its validation errors, and the plan's warning when a backlog at
the cap outlives a source topic's retention (the pure check, the backlog read over a mirror client double, the plan
in text, JSON and Markdown). The engine's pacing: tests/unit/test_throttle.py; on real brokers:
tests/integration/test_rate_limit.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from reconciler.contract.spec import HOT_RELOADABLE, JobSpec
from reconciler.contract.status import StatusRecord, StatusState
from reconciler.mirror.mirror_client import TopicPartition
from reconciler.operations.observe import read_backlogs
from reconciler.operations.plan import plan_topology
from reconciler.plan.backlog import DEFAULT_RETENTION_MS, FlowBacklog, outrun, retention_findings
from reconciler.plan.findings import FindingKind, Severity
from reconciler.render import plan_json, plan_markdown, plan_text
from reconciler.topology.build import load_topology
from reconciler.topology.model import RateLimit
from tests.helpers import diagnose, rendered_errors, write
from tests.plan_helpers import World, topology

CLUSTERS = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {bootstrap_servers: "127.0.0.1:1"}
  east: {bootstrap_servers: "127.0.0.1:2"}
  north: {bootstrap_servers: "127.0.0.1:3"}
"""


def test_a_rate_limit_travels_from_the_topology_to_the_job_spec(tmp_path):
    path = write(
        tmp_path,
        "t.yaml",
        CLUSTERS
        + "defaults:\n"
        + "  rate_limit: {records_per_second: 20000}\n"
        + "flows:\n"
        + "  - {source: west, target: east, rate_limit: {bytes_per_second: 1048576}}\n"
        + "  - {source: west, target: north, rate_limit: {records_per_second: null}}\n",
    )
    topo, diags = load_topology([path])
    assert diags.ok, diags.render()
    east, north = topo.flows
    assert east.rate_limit == RateLimit(20_000, 1_048_576), "defaults merged key by key"
    assert north.rate_limit == RateLimit() and not north.rate_limit.limited, "null: no cap"
    spec = JobSpec.from_flow(topo, east)
    assert spec.to_dict()["settings"]["rate_limit"] == {"records_per_second": 20000, "bytes_per_second": 1048576}
    assert JobSpec.from_json(spec.to_json()) == spec
    unlimited = JobSpec.from_flow(topo, north)
    assert "rate_limit" not in unlimited.to_dict()["settings"], "a spec without a cap is what earlier releases wrote"
    assert JobSpec.from_json(unlimited.to_json()).settings.rate_limit == RateLimit()
    changed = unlimited.with_settings(rate_limit=RateLimit(records_per_second=500))
    assert unlimited.changes(changed) == {"settings.rate_limit.records_per_second": (None, 500)}
    assert unlimited.restart_fields(changed) == set(), "a running job takes a new cap in place"
    assert {"settings.rate_limit.records_per_second", "settings.rate_limit.bytes_per_second"} <= HOT_RELOADABLE


def test_a_spec_without_a_rate_limit_hashes_as_before():
    """The hash of the default flow's spec is pinned: a spec without `rate_limit` hashes as before it existed
    (main at 346d76e), so that upgrade restarted no running job. It moved once since, on purpose: the defaults of
    `heartbeats.interval_seconds`, `checkpoints.interval_seconds` and `refresh_interval_seconds` went from 5 s to
    10 s and `job.max_records_per_partition` from 1,000,000 to 5,000,000 (issue 47), all hot-reloadable, so an
    upgrade reloads a running flow's spec and restarts nothing (docs/upgrading.md)."""
    from reconciler.contract.spec import ClusterSpec

    spec = JobSpec("west->east", ClusterSpec("west", "a:1"), ClusterSpec("east", "b:1"))
    assert spec.spec_hash() == "b6c47eaad00b7616cb5d6f07709ddcaec5faa57e3762e4c93713d60b145b6867"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("0", "flows[0].rate_limit.records_per_second must be more than 0, not 0"),
        ("-5", "flows[0].rate_limit.records_per_second must be more than 0, not -5"),
        ("10MB", "flows[0].rate_limit.records_per_second must be of type ['number', 'null'], not str ('10MB')"),
    ],
)
def test_a_rate_limit_that_is_not_a_positive_number_is_an_error_at_its_line(tmp_path, value, error):
    f = write(
        tmp_path,
        "t.yaml",
        CLUSTERS
        + "flows:\n"
        + "  - source: west\n"
        + "    target: east\n"
        + "    rate_limit:\n"
        + f"      records_per_second: {value}\n",
    )
    assert rendered_errors(diagnose(f)) == [f"{f}:11:27: error: {error}"]


def test_an_unknown_rate_limit_key_is_an_error_with_a_suggestion(tmp_path):
    f = write(
        tmp_path, "t.yaml", CLUSTERS + "flows:\n  - {source: west, target: east, rate_limit: {record_per_second: 5}}\n"
    )
    diags = diagnose(f)
    assert rendered_errors(diags) == [f"{f}:8:47: error: unknown key 'record_per_second' in flows[0].rate_limit"]
    assert [d.hint for d in diags.errors] == ["did you mean 'records_per_second'?"]


# --- the plan's warning -------------------------------------------------------------------------------------------

LIMITED = """flows:
  - source: west
    target: east
    topics: {include: ["orders", "audit"]}
    rate_limit: {records_per_second: 1000}
"""


def world(retention_ms: str | None = "3600000") -> World:
    w = World(topology(LIMITED))
    w["west"].add_topic("orders", 2, {"retention.ms": retention_ms} if retention_ms else {})
    w["west"].add_topic("audit", 1, {"retention.ms": "-1"})
    return w


def test_a_backlog_the_cap_copies_after_the_retention_is_a_warning_with_the_numbers():
    w = world()
    live = w.live()
    (flow,) = w.topology.flows
    backlog = FlowBacklog(flow.name, {"orders": 5_400_000, "audit": 100_000_000})
    found = outrun(flow, backlog, live, None)
    assert found is not None and [t for t, _, _ in found.topics] == ["orders"], "audit is kept forever"
    assert found.seconds == pytest.approx(105_400)
    f = found.finding()
    assert (f.severity, f.kind, f.cluster, f.subject) == (Severity.WARNING, FindingKind.RETENTION, "west", flow.name)
    assert f.message == (
        "flow west->east has 105,400,000 records to copy; at its rate_limit (1,000 records/s) that takes 1.2 days, "
        "longer than west keeps the records of orders (5,400,000 records, retention.ms 3,600,000): records would be "
        "deleted before they are copied"
    )
    assert f.hint is not None and "records_per_second to at least 29,278" in f.hint
    assert "retention.ms to at least 105,400,000" in f.hint
    assert outrun(flow, FlowBacklog(flow.name, {"orders": 3_000_000}), live, None) is None, "copied in 50 min"


def test_a_topic_without_retention_ms_is_judged_by_kafkas_default():
    w = world(retention_ms=None)
    (flow,) = w.topology.flows
    week = DEFAULT_RETENTION_MS // 1000 * 1000  # records at 1,000/s in Kafka's seven days
    assert outrun(flow, FlowBacklog(flow.name, {"orders": week - 1}), w.live(), None) is None
    found = outrun(flow, FlowBacklog(flow.name, {"orders": week + 1000}), w.live(), None)
    assert found is not None and "Kafka's default assumed" in found.finding().message


def test_a_bytes_cap_is_judged_by_the_mean_record_size_the_job_reported():
    w = World(topology(LIMITED.replace("{records_per_second: 1000}", "{bytes_per_second: 1000000}")))
    w["west"].add_topic("orders", 1, {"retention.ms": "60000"})
    (flow,) = w.topology.flows
    backlog = FlowBacklog(flow.name, {"orders": 1_000_000})
    assert outrun(flow, backlog, w.live(), None) is None, "no record copied yet: the size is not known"
    status = StatusRecord(flow.name, StatusState.RUNNING, records=1_000, bytes=500_000)
    found = outrun(flow, backlog, w.live(), status)
    assert found is not None and found.seconds == pytest.approx(500)  # 500 MB at 1 MB/s
    assert "about 500,000,000 bytes" in found.finding().message
    assert "bytes_per_second to at least 8,333,334" in (found.finding().hint or "")


def test_a_backlog_that_could_not_be_read_is_a_note_and_flows_without_a_cap_are_not_judged():
    w = world()
    (flow,) = w.topology.flows
    notes = retention_findings(w.topology, w.live(), {flow.name: FlowBacklog(flow.name, {}, error="boom")})
    assert [(n.severity, n.kind) for n in notes] == [(Severity.INFO, FindingKind.RETENTION)]
    assert "boom" in notes[0].message
    unlimited = World(topology(LIMITED.replace("    rate_limit: {records_per_second: 1000}\n", "")))
    big = {"west->east": FlowBacklog("west->east", {"orders": 10**12})}
    assert retention_findings(unlimited.topology, unlimited.live(), big) == []


@dataclass
class Mirror:
    """One cluster as the backlog read sees it: each partition's (log start, log end), and committed offsets by
    group; the calls it was asked, counted."""

    ends: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def log_offsets(self, partitions):
        self.calls.append("log_offsets")
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    def committed_offsets(self, group, partitions):
        self.calls.append(f"committed {group}")
        mine = self.committed.get(group, {})
        return {tp: mine[tp] for tp in partitions if tp in mine}


def mirrors() -> dict[str, Mirror]:
    o0, o1, a0 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("audit", 0)
    west = Mirror(ends={o0: (100, 5_000_100), o1: (0, 3_000_000), a0: (0, 10)})
    west.committed["__reconciler.mirror.west->east"] = {o0: 50, o1: 2_000_000}  # o0: below the log start
    east = Mirror(committed={"__reconciler.mirror.west->east": {TopicPartition("west.orders", 1): 2_500_000}})
    return {"west": west, "east": east}


def test_the_backlog_is_the_log_end_less_the_jobs_committed_position_read_in_batches():
    w, clusters = world(), mirrors()
    backend = w.backend(mirror_client=lambda cluster, timeout: clusters[cluster.alias])
    backlogs = read_backlogs(w.topology, w.live(), backend)
    assert backlogs == {"west->east": FlowBacklog("west->east", {"orders": 5_000_000 + 1_000_000, "audit": 10})}
    assert clusters["west"].calls == ["log_offsets", "committed __reconciler.mirror.west->east"]
    assert clusters["east"].calls == [], "at-least-once: the job's positions are on the source"
    eos = World(topology(LIMITED.replace("rate_limit:", "delivery: exactly-once\n    rate_limit:")))
    eos["west"].add_topic("orders", 2, {"retention.ms": "3600000"})
    clusters = mirrors()
    got = read_backlogs(eos.topology, eos.live(), eos.backend(mirror_client=lambda c, t: clusters[c.alias]))
    assert got["west->east"].by_topic == {"orders": 5_000_000 + 500_000}, (
        "exactly-once: the target's group (by remote topic), the source's where it has none"
    )
    plain = World(topology(LIMITED.replace("    rate_limit: {records_per_second: 1000}\n", "")))
    plain["west"].add_topic("orders", 2)
    clusters = mirrors()
    assert (
        read_backlogs(plain.topology, plain.live(), plain.backend(mirror_client=lambda c, t: clusters[c.alias])) == {}
    )
    assert clusters["west"].calls == [], "no cap: nothing read"


def test_a_source_that_cannot_be_read_leaves_the_backlog_unknown():
    w = world()

    def down(cluster, timeout):
        raise ConnectionError(f"cluster {cluster.alias} is down")

    assert read_backlogs(w.topology, w.live(), w.backend(mirror_client=down)) == {
        "west->east": FlowBacklog("west->east", {}, error="cluster west is down")
    }


def test_the_plan_shows_the_warning_in_text_json_and_markdown():
    w, clusters = world(retention_ms="600000"), mirrors()  # 10 minutes; 6,000,010 records at 1,000/s: 100 min
    planned = plan_topology(w.topology, w.backend(mirror_client=lambda c, t: clusters[c.alias])).plan
    (warning,) = [f for f in planned.findings if f.kind is FindingKind.RETENTION]
    assert warning.message.startswith("flow west->east has 6,000,010 records to copy; at its rate_limit")
    assert "that takes 1.7 h, longer than west keeps the records of orders" in warning.message
    assert warning.message in plan_text.render(planned)
    doc = json.loads(plan_json.render(planned))
    assert {"kind": "retention", "severity": "warning", "cluster": "west", "subject": "west->east"}.items() <= next(
        f for f in doc["findings"] if f["kind"] == "retention"
    ).items()
    assert "6,000,010 records to copy" in plan_markdown.render(planned)


def test_drift_counts_the_warning_as_drift_as_it_does_a_lag_past_its_slo():
    from reconciler.drift.report.items import Level
    from reconciler.drift.report.plan_items import finding_item

    w, clusters = world(retention_ms="600000"), mirrors()
    planned = plan_topology(w.topology, w.backend(mirror_client=lambda c, t: clusters[c.alias])).plan
    (warning,) = [f for f in planned.findings if f.kind is FindingKind.RETENTION]
    item = finding_item(warning, None, w.topology)
    assert item.level is Level.DRIFT and item.message == warning.message  # drift exits 2: records are about to go
