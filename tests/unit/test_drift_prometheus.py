"""`drift --format prometheus`: the drift report as Prometheus metrics, checked with prometheus_client's parser."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from reconciler.cli.main import main
from reconciler.mirror.records import Heartbeat
from reconciler.render import drift_prometheus
from tests.unit import test_drift_report as drift_cases
from tests.unit.test_drift_report import NOW, beats, healthy, report_of

# the drift report's fixtures, shared with its tests
world = drift_cases.world
cli = drift_cases.cli


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def value(found: dict, name: str, **labels) -> float:
    hits = [s.value for s in found[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, found.get(name))
    return hits[0]


def test_in_sync_report_as_metrics(world):
    applied = {"east": {"revision": "a" * 40, "at": NOW / 1000 - 60, "who": "ci@runner"}}
    found = samples(
        drift_prometheus.render(report_of(world, applied=applied, revision={"commit": "c" * 40, "short": "ccccccc"}))
    )
    assert value(found, "reconciler_drift_status", status="in-sync") == 1
    assert value(found, "reconciler_drift_status", status="drift") == 0
    assert value(found, "reconciler_drift_job_up", flow="west->east", source="west", target="east", family="") == 1
    assert value(found, "reconciler_drift_job_state", flow="east->west", state="running") == 1
    assert value(found, "reconciler_drift_job_spec_current", flow="west->east") == 1
    assert value(found, "reconciler_drift_applied_info", cluster="east", commit="a" * 40, who="ci@runner") == 1
    assert value(found, "reconciler_drift_applied_timestamp_seconds", cluster="east") == NOW / 1000 - 60
    assert value(found, "reconciler_drift_revision_info", short="ccccccc") == 1
    assert value(found, "reconciler_drift_slo_threshold", slo="max_lag_records") == 1000
    assert {s.value for s in found["reconciler_drift_slo_breach"]} == {0.0}
    assert len(found["reconciler_drift_slo_breach"]) == 8  # 2 flows x 4 SLOs
    assert value(found, "reconciler_drift_cluster_reachable", cluster="west") == 1
    assert value(found, "reconciler_drift_generated_timestamp_seconds") == NOW / 1000


def test_drift_and_slo_breaches_as_metrics(world):
    topo = world.topology
    del world["east"].topics["west.payments"]
    statuses = {
        "west->east": healthy(topo, "west->east", lag_total=5_400),
        "east->west": healthy(topo, "east->west", state="failed"),
    }
    hb = beats(topo)
    hb["east"]["west.heartbeats"] = Heartbeat("west", "east", NOW - 95_000)
    found = samples(drift_prometheus.render(report_of(world, statuses=statuses, hb=hb)))
    assert value(found, "reconciler_drift_status", status="drift") == 1
    assert value(found, "reconciler_drift_items", category="missing-topic", level="drift", cluster="east") == 1
    assert value(found, "reconciler_drift_items", category="lag", level="drift", cluster="east") == 1
    assert value(found, "reconciler_drift_slo_breach", flow="west->east", slo="max_lag_records") == 1
    assert value(found, "reconciler_drift_slo_breach", flow="west->east", slo="max_heartbeat_age_seconds") == 1
    assert value(found, "reconciler_drift_slo_breach", flow="west->east", slo="max_latency_p99_ms") == 0
    assert value(found, "reconciler_drift_job_lag_records", flow="west->east") == 5_400
    assert value(found, "reconciler_drift_heartbeat_age_seconds", flow="west->east") == 95.0
    assert value(found, "reconciler_drift_job_up", flow="east->west") == 0
    assert value(found, "reconciler_drift_job_state", flow="east->west", state="failed") == 1
    assert value(found, "reconciler_drift_flow_items", flow="west->east") == 3


def test_drift_command_writes_prometheus(cli, capsys, tmp_path):
    assert main(["drift", cli.path, "--format", "prometheus"], cli.cli) == 2
    found = samples(capsys.readouterr().out)
    assert value(found, "reconciler_drift_status", status="drift") == 1
    out = tmp_path / "textfile" / "drift.prom"
    assert main(["drift", cli.path, "--out", str(out), "--out", str(tmp_path / "drift.json")], cli.cli) == 2
    by_category = json.loads((tmp_path / "drift.json").read_text())["summary"]["by_category"]
    found = samples(out.read_text())
    assert (
        sum(
            s.value
            for s in found["reconciler_drift_items"]
            if s.labels["category"] == "missing-topic" and s.labels["level"] == "drift"
        )
        == by_category["missing-topic"]
    )
