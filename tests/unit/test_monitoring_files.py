"""deploy/monitoring/ and `reconciler export alerts`: rule files with the right structure, expressions that
name only metrics the jobs export (engine/metrics.py) or `drift --format prometheus` writes, balanced
brackets, and a Grafana dashboard whose every panel query names an exported metric."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from reconciler.cli.main import main
from reconciler.engine.metrics import METRICS, exported_series
from reconciler.render import alert_rules, drift_prometheus

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
KNOWN = exported_series() | set(drift_prometheus.FAMILIES)
FUNCTIONS = {
    "sum",
    "max",
    "min",
    "avg",
    "rate",
    "increase",
    "histogram_quantile",
    "absent",
    "time",
    "changes",
    "label_values",
    "count",
    "topk",
}
KEYWORDS = {"by", "without", "on", "ignoring", "and", "or", "unless", "bool"}


def balanced(expr: str) -> bool:
    stack: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for ch in re.sub(r'"[^"]*"', '""', expr):
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, label lists and matchers removed)."""
    e = re.sub(r'"[^"]*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # range selectors
    e = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", e)  # grouping label lists
    e = e.replace("$__rate_interval", "")
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end() :].lstrip()
        if word in KEYWORDS or (word in FUNCTIONS and rest.startswith("(")):
            continue
        names.add(word)
    return names


def check_groups(groups: list) -> list[str]:
    assert isinstance(groups, list) and groups
    exprs = []
    for g in groups:
        assert set(g) == {"name", "rules"} and isinstance(g["name"], str)
        for r in g["rules"]:
            assert set(r) == {"alert", "expr", "for", "labels", "annotations"}, r
            assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", r["alert"])
            assert re.fullmatch(r"\d+[smh]", r["for"])
            assert r["labels"]["severity"] in {"warning", "critical"} and r["annotations"]["summary"]
            exprs.append(r["expr"])
    for expr in exprs:
        assert balanced(expr), expr
        names = metric_names(expr)
        assert names and names <= KNOWN, (expr, names - KNOWN)
    return exprs


def test_static_rules_and_prometheus_rule_are_the_rendered_defaults():
    rules = yaml.safe_load((MONITORING / "prometheus-rules.yaml").read_text())
    check_groups(rules["groups"])
    assert (MONITORING / "prometheus-rules.yaml").read_text() == alert_rules.render_rules(alert_rules.DEFAULT_SLO)
    crd = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert crd["kind"] == "PrometheusRule" and crd["apiVersion"] == "monitoring.coreos.com/v1"
    assert crd["spec"]["groups"] == rules["groups"]
    assert (MONITORING / "prometheusrule.yaml").read_text() == alert_rules.render_prometheus_rule(
        alert_rules.DEFAULT_SLO
    )
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {
        "MirrorLagHigh",
        "MirrorLagAgeHigh",
        "MirrorLatencyP99High",
        "MirrorCheckpointLatencyP99High",
        "MirrorHeartbeatStale",
        "MirrorJobDown",
    } <= alerts


def test_pod_monitor_selects_the_job_pods_and_their_metrics_port():
    pm = yaml.safe_load((MONITORING / "podmonitor.yaml").read_text())
    assert pm["kind"] == "PodMonitor" and pm["apiVersion"] == "monitoring.coreos.com/v1"
    assert pm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "reconciler-mirror"
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"


def test_dashboard_queries_name_exported_metrics():
    dash = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    assert dash["panels"] and dash["uid"]
    titles = set()
    for panel in dash["panels"]:
        assert panel["targets"], panel["title"]
        titles.add(panel["title"])
        for t in panel["targets"]:
            assert balanced(t["expr"]), t["expr"]
            names = metric_names(t["expr"])
            assert names and names <= exported_series(), (panel["title"], names - exported_series())
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", var["query"]).groups()
            assert metric in exported_series() and label == "flow"
    assert {
        "Throughput: records/s per flow",
        "Lag per flow (records)",
        "Lag per flow (seconds)",
        "Replication latency percentiles",
        "Checkpoint latency percentiles",
    } <= titles


#: Catalog metrics no panel needs to graph: the min/avg beside a graphed max, and the batch clock (an alert's).
NOT_GRAPHED = {m.name for m in METRICS if m.name.endswith(("_min", "_avg"))} | {
    "mirror_job_last_batch_timestamp_seconds"
}


def test_the_dashboard_graphs_every_metric_of_the_catalog():
    """A metric added to engine/metrics.py without a panel fails here (the catalog is the one home)."""
    dash = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    named = {name for panel in dash["panels"] for t in panel["targets"] for name in metric_names(t["expr"])}
    missing = [m.name for m in METRICS if m.name not in NOT_GRAPHED and not set(m.series) & named]
    assert not missing, f"no dashboard panel graphs {missing}"
    per_partition_stats = {m.name for m in METRICS if m.name.endswith("_max")}
    assert per_partition_stats == {
        "kafka_connect_mirror_source_connector_record_age_ms_max",
        "kafka_connect_mirror_source_connector_replication_latency_ms_max",
        "kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms_max",
    }


def test_name_check_rejects_unknown_metrics():
    assert metric_names('sum by (flow) (rate(foo_total{flow=~"a->b"}[5m])) > 3') == {"foo_total"}
    assert not balanced("sum(rate(x[5m])") and balanced('x{a="(("}')


TOPO = """apiVersion: reconciler/v1
kind: Topology
metadata: {name: shop}
clusters:
  west: {bootstrap_servers: "127.0.0.1:1", replication_principal: "User:mirror"}
  east: {bootstrap_servers: "127.0.0.1:2", replication_principal: "User:mirror"}
slo: {max_lag_records: 500, max_lag_seconds: 90, max_heartbeat_age_seconds: 45}
flows:
  - {source: west, target: east, topics: {include: ["orders"]}}
  - {source: east, target: west, enabled: false, topics: {include: ["audit"]}}
"""


@pytest.mark.parametrize("to_file", [False, True])
def test_export_alerts_from_the_topology_slo(tmp_path, capsys, to_file):
    path = tmp_path / "t.yaml"
    path.write_text(TOPO)
    out = tmp_path / "rules" / "shop.yaml"
    assert main(["export", "alerts", str(path)] + (["--out", str(out)] if to_file else [])) == 0
    text = out.read_text() if to_file else capsys.readouterr().out
    doc = yaml.safe_load(text)
    exprs = check_groups(doc["groups"])
    assert [g["name"] for g in doc["groups"]] == ["shop.slo", "shop.jobs", "shop.drift"]
    assert any(e.endswith("> 500") and "mirror_partition_lag_records" in e for e in exprs)
    assert any(e.endswith("> 45") for e in exprs)
    assert "max by (flow, family, source, target) (mirror_lag_seconds) > 90" in exprs
    # one lag in seconds, on its own SLO: the heartbeat SLO bounds heartbeats only (issue 37)
    assert not any("partition_lag_seconds" in e for e in exprs)
    assert [e for e in exprs if "lag_seconds" in e] == [
        "max by (flow, family, source, target) (mirror_lag_seconds) > 90"
    ]
    assert not any("latency_ms" in e for e in exprs)  # no max_latency_p99_ms set: no latency rules
    missing = [e for e in exprs if e.startswith("absent(")]
    assert missing == ['absent(mirror_job_start_time_seconds{flow="west->east"})']  # enabled flows only


def test_docs_list_every_metric_of_the_catalog():
    doc = (ROOT / "docs" / "monitoring.md").read_text()
    missing = [m.name for m in METRICS if not re.search(rf"`{m.series[0]}[`/]", doc)]
    assert not missing, f"docs/monitoring.md does not list {missing}"


def test_docs_list_every_alert_rule():
    """docs/monitoring.md ("Alerts and dashboards") names every alert the rule file can hold: the SLO rules with
    every threshold set, the always-rendered job and drift rules, MirrorJobMissing per flow."""
    from reconciler.topology.model import Slo

    slo = Slo(max_lag_records=1, max_lag_seconds=1, max_heartbeat_age_seconds=1, max_latency_p99_ms=1)
    names = {r["alert"] for g in alert_rules.groups(slo, ["west->east"]) for r in g["rules"]}
    doc = (ROOT / "docs" / "monitoring.md").read_text()
    missing = sorted(n for n in names if f"`{n}`" not in doc)
    assert not missing, f"docs/monitoring.md does not list the alerts {missing}"
