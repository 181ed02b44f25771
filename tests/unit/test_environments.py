"""Environments (issue 48): one topology, `environments:` binding its clusters and overriding its settings; `--env`
on every command that reads a topology; `reconciler promote`. Errors name the file, line and column.

The three plans of topologies/environments (dev, staging, prod) against the same memory clusters are golden files
(tests/golden/environments/): rewrite them with `pytest tests/unit/test_environments.py --update-golden` after a
deliberate change and review the diff (docs/contributing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.memory_admin import MemoryCluster, MemoryFactory
from reconciler.cli.main import main
from reconciler.operations.plan import plan_topology
from reconciler.plan.actions import Plan
from reconciler.render import plan_text
from reconciler.topology.build import load_topology, load_topology_text
from reconciler.topology.diagnostics import TopologyError
from reconciler.topology.environments import load_differences
from tests.helpers import rendered_errors, write
from tests.job_helpers import FakeDeployer, StatusBoard, fake_backend
from tests.plan_helpers import memory_backend

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "topologies" / "environments"
ENVS = ("dev", "staging", "prod")

BASE = """apiVersion: reconciler/v1
kind: Topology
metadata: {name: t}
clusters:
  west: {tags: {region: eu}}
  east:
    config: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN, sasl.username: "${EAST_USER}"}
defaults:
  job: {parallelism: 1}
flows:
  - source: west
    target: east
    topics: {include: ["orders\\\\..*"]}
policies:
  residency:
    - {name: eu-only, topics: ["orders\\\\..*"], tag: region, allowed: [eu]}
environments:
  dev:
    clusters:
      west: {bootstrap_servers: "127.0.0.1:1"}
      east:
        bootstrap_servers: "127.0.0.1:2"
        config: {security.protocol: PLAINTEXT, sasl.mechanism: null, sasl.username: null}
  prod:
    clusters:
      west: {bootstrap_servers: "west.prod:9092", tags: {region: us}}
      east: {bootstrap_servers: "east.prod:9092", replication_principal: "User:mirror"}
    defaults: {job: {parallelism: 4}}
    flows:
      "west->east": {replication_factor: 3, topics: {include: ["orders\\\\..*", "payments"]}}
    policies: {residency: {eu-only: {allowed: [eu, us]}}}
    prune: {topics: true}
    slo: {max_lag_records: 100}
"""


def _lines(diags) -> list[str]:
    return rendered_errors(diags)


# --- resolution --------------------------------------------------------------------------------


def test_each_environment_binds_the_clusters_and_overrides_settings():
    dev, prod = (load_topology_text(BASE, "t.yaml", env=e) for e in ("dev", "prod"))
    assert dev.environment == "dev" and prod.environment == "prod" and dev.environments == ("dev", "prod")
    assert dev.clusters["west"].bootstrap_servers == "127.0.0.1:1"
    assert dict(dev.clusters["east"].config) == {"security.protocol": "PLAINTEXT"}, "a null key removes the base's"
    assert dict(prod.clusters["east"].config) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "${EAST_USER}",
    }
    assert (dev.clusters["east"].replication_principal, prod.clusters["east"].replication_principal) == (
        None,
        "User:mirror",
    )
    assert dict(prod.clusters["west"].tags) == {"region": "us"} and dict(dev.clusters["west"].tags) == {"region": "eu"}
    d, p = dev.flows[0], prod.flows[0]
    assert (d.replication_factor, p.replication_factor) == (-1, 3)
    assert (d.topics.include, p.topics.include) == (("orders\\..*",), ("orders\\..*", "payments"))
    assert (d.job.parallelism, p.job.parallelism) == (1, 4)
    assert (dev.prune.topics, prod.prune.topics) == (False, True)
    assert (dev.slo.max_lag_records, prod.slo.max_lag_records) == (None, 100)
    assert (dev.residency[0].allowed, prod.residency[0].allowed) == (("eu",), ("eu", "us"))


def test_a_topology_without_environments_is_read_as_before(tmp_path):
    text = BASE.split("environments:")[0].replace("  west: {tags", '  west: {bootstrap_servers: "w:1", tags')
    text = text.replace("  east:\n", '  east:\n    bootstrap_servers: "e:1"\n')
    plain = load_topology_text(text, "t.yaml")
    assert plain.environment is None and plain.environments == ()
    with pytest.raises(TopologyError) as refused:
        load_topology_text(text, "t.yaml", env="dev")
    assert "t.yaml:1:1: error: --env dev: this topology declares no environments" in str(refused.value)


def test_the_environment_is_required_and_must_be_declared(tmp_path):
    f = write(tmp_path, "t.yaml", BASE)
    _, diags = load_topology([f])
    assert _lines(diags) == [
        f"{f}:17:1: error: this topology declares environments (dev, prod): choose one with --env NAME",
    ]
    _, diags = load_topology([f], env="prd")
    assert _lines(diags) == [
        f"{f}:17:1: error: --env prd: the topology declares no environment 'prd' (it declares dev, prod)"
    ]
    assert "did you mean 'prod'?" in diags.render()


def test_unknown_cluster_flow_rule_and_key_are_errors_with_file_and_line(tmp_path):
    bad = BASE.replace(
        '      west: {bootstrap_servers: "west.prod:9092", tags: {region: us}}',
        '      west: {bootstrap_servers: "west.prod:9092", tags: {region: us}}\n      wset: {bootstrap_servers: "x:1"}',
    ).replace('"west->east": {replication_factor: 3', '"west->eats": {replication_factor: 3')
    bad = bad.replace("{residency: {eu-only:", "{residency: {eu-olny:")
    f = write(tmp_path, "t.yaml", bad)
    _, diags = load_topology([f], env="dev")
    assert _lines(diags) == [
        f"{f}:27:7: error: environment 'prod': 'wset' is not a cluster of the topology",
        f"{f}:31:7: error: environment 'prod': 'west->eats' is not a flow of the topology",
        f"{f}:32:28: error: environment 'prod': 'eu-olny' is not a residency rule of the topology",
    ]
    hints = diags.render()
    assert "did you mean 'west'?" in hints and "did you mean 'west->east'?" in hints and "'eu-only'" in hints

    typo = BASE.replace("defaults: {job: {parallelism: 4}}", "defaults: {job: {paralelism: 4}}")
    typo = typo.replace("replication_factor: 3,", "replication_factr: 3,")
    f = write(tmp_path, "typo.yaml", typo)
    _, diags = load_topology([f], env="prod")
    assert _lines(diags) == [
        f"{f}:28:22: error: unknown key 'paralelism' in environments.prod.defaults.job",
        f"{f}:30:22: error: unknown key 'replication_factr' in environments.prod.flows.west->east",
    ]
    assert "did you mean 'parallelism'?" in diags.render() and "did you mean 'replication_factor'?" in diags.render()


def test_an_override_takes_the_setting_schema_of_the_registry(tmp_path):
    f = write(tmp_path, "t.yaml", BASE.replace("replication_factor: 3,", "replication_factor: 0, source: east,"))
    _, diags = load_topology([f], env="prod")
    lines = _lines(diags)
    assert any(
        line.startswith(f"{f}:30:42: error: environments.prod.flows.west->east.replication_factor") for line in lines
    )
    assert f"{f}:30:45: error: unknown key 'source' in environments.prod.flows.west->east" in lines


def test_an_error_in_an_overridden_value_names_the_environments_line(tmp_path):
    f = write(
        tmp_path,
        "t.yaml",
        BASE.replace('topics: {include: ["orders\\\\..*", "payments"]}', 'topics: {include: ["(?=x)"]}'),
    )
    _, diags = load_topology([f], env="prod")
    assert [line.split(": error: ")[0] for line in _lines(diags)] == [f"{f}:30:64"]
    assert "(?=x)" in diags.render()


def test_secret_references_follow_the_cluster_alias_in_every_environment(tmp_path):
    other_prefix = BASE.replace(
        'replication_principal: "User:mirror"}',
        'replication_principal: "User:mirror", config: {sasl.password: "${PROD_PASSWORD}"}}',
    )
    f = write(tmp_path, "t.yaml", other_prefix)
    _, diags = load_topology([f], env="prod")
    assert _lines(diags) == [
        f"{f}:27:113: error: cluster 'east': sasl.password: ${{PROD_PASSWORD}} is not allowed: this cluster reads "
        "only variables named EAST_*"
    ]
    _, diags = load_topology([f], env="dev")  # another environment's binding: checked too, and says whose
    assert _lines(diags) == [
        f"{f}:27:113: error: environment 'prod': cluster 'east': sasl.password: ${{PROD_PASSWORD}} is not allowed: "
        "this cluster reads only variables named EAST_*"
    ]
    literal = BASE.replace("sasl.username: null}", "sasl.username: null, sasl.password: hunter2}")
    f = write(tmp_path, "literal.yaml", literal)
    _, diags = load_topology([f], env="prod")
    assert _lines(diags) == [f"{f}:23:106: error: environment 'dev': cluster 'east': sasl.password is a literal secret"]
    assert load_topology_text(BASE, env="dev").clusters["east"].config == {"security.protocol": "PLAINTEXT"}


def test_a_cluster_without_endpoints_in_an_environment_and_a_binding_twice_are_errors(tmp_path):
    f = write(tmp_path, "t.yaml", BASE.replace('      west: {bootstrap_servers: "127.0.0.1:1"}\n', ""))
    _, diags = load_topology([f], env="prod")
    assert _lines(diags) == [f"{f}:18:3: error: environment 'dev' gives cluster 'west' no bootstrap_servers"]
    assert f"{f}:5:3: see also" in diags.render()

    d = tmp_path / "split"
    d.mkdir()
    write(d, "a.yaml", BASE)
    more = "apiVersion: reconciler/v1\nkind: Topology\nenvironments:\n  prod:\n    defaults: {job: {parallelism: 8}}\n"
    write(d, "b.yaml", more)
    _, diags = load_topology([d], env="prod")
    assert _lines(diags) == [f"{d / 'b.yaml'}:5:5: error: environments.prod.defaults is defined twice"]
    assert f"{d / 'a.yaml'}:28:5: see also" in diags.render()


def test_an_environment_may_be_split_across_files(tmp_path):
    d = tmp_path / "split"
    d.mkdir()
    write(d, "a.yaml", BASE.replace("    prune: {topics: true}\n", ""))
    write(d, "b.yaml", "apiVersion: reconciler/v1\nkind: Topology\nenvironments:\n  prod:\n    prune: {topics: true}\n")
    topology, diags = load_topology([d], env="prod")
    assert diags.ok and topology is not None and topology.prune.topics and topology.flows[0].replication_factor == 3


# --- the CLI ----------------------------------------------------------------------------------


def test_validate_takes_env_and_refuses_it_for_a_topology_without_environments(capsys):
    assert main(["validate", "--env", "prod", str(EXAMPLE)]) == 0
    assert capsys.readouterr().out.startswith("valid: environment prod, 2 clusters, 1 flow")
    assert main(["validate", str(EXAMPLE)]) == 0  # without --env: every environment, one line each
    assert [line.split(",")[0] for line in capsys.readouterr().out.splitlines()] == [
        "valid: environment dev",
        "valid: environment staging",
        "valid: environment prod",
    ]
    assert main(["validate", "--env", "prod", str(ROOT / "topologies" / "demo")]) == 1
    assert "--env prod: this topology declares no environments" in capsys.readouterr().err


def test_validate_without_env_finds_an_override_that_breaks_one_environment_only(tmp_path, capsys):
    text = (EXAMPLE / "orders.yaml").read_text()
    prod_east = 'replication_principal: "User:mirror"\n'
    assert prod_east in text
    # production's east is bound to a US cluster: its flow breaks the EU residency rule there only
    bad = write(tmp_path, "orders.yaml", text.replace(prod_east, prod_east + "        tags: {region: us}\n"))
    assert main(["validate", str(bad)]) == 1
    out, err = capsys.readouterr()
    assert "valid: environment dev" in out and "valid: environment staging" in out
    assert "valid: environment prod" not in out
    assert "eu-data" in err and "environment prod: not valid (the errors above)" in err
    assert main(["graph", str(bad)]) == 1  # the other commands act on one environment
    assert "choose one with --env NAME" in capsys.readouterr().err


def _world() -> MemoryFactory:
    """The same two memory clusters for every environment: source topics on west, nothing on east yet."""
    west, east = MemoryCluster("west"), MemoryCluster("east")
    for name, partitions in (("orders.eu", 3), ("orders.us", 2), ("payments.eu", 2), ("audit.log", 1), ("x.tmp", 1)):
        west.add_topic(name, partitions, {"retention.ms": "86400000"})
    return MemoryFactory({"west": west, "east": east})


def _plan(env: str) -> Plan:
    topology, diags = load_topology([EXAMPLE], env=env)
    assert topology is not None, diags.render()
    backend = memory_backend(_world(), fake_backend(StatusBoard(), FakeDeployer()))
    return plan_topology(topology, backend, git_revision=None).plan


@pytest.mark.parametrize("env", ENVS)
def test_the_three_environments_plans_are_the_golden_ones(env, golden):
    """Same clusters, same live state: the plans differ only by what each environment declares (its clusters'
    principals, the topics it replicates, replication factor, delivery, parallelism, prune)."""
    golden(f"environments/{env}.plan.txt", plan_text.render(_plan(env)))


def test_the_plans_differ_only_where_the_environments_do():
    plans = {env: _plan(env) for env in ENVS}
    topics = {env: sorted(a.subject for a in p.actions if a.KIND.value == "create_topic") for env, p in plans.items()}
    assert topics["dev"] == sorted(
        [
            "west.orders.eu",
            "west.orders.us",
            "heartbeats",
            "west.heartbeats",
            "west.checkpoints.internal",
            "mm2-offset-syncs.east.internal",
        ]
    )
    assert topics["staging"] == topics["prod"] == sorted(topics["dev"] + ["west.payments.eu"])
    specs = {env: next(a.spec for a in p.actions if a.KIND.value == "deploy_job") for env, p in plans.items()}
    assert {e: s["engine"]["parallelism"] for e, s in specs.items()} == {"dev": 1, "staging": 1, "prod": 4}
    assert {e: s["settings"]["delivery"] for e, s in specs.items()} == {
        "dev": "at-least-once",
        "staging": "at-least-once",
        "prod": "exactly-once",
    }
    assert {e: s["target"]["bootstrap_servers"] for e, s in specs.items()} == {
        "dev": "127.0.0.1:19093",
        "staging": "kafka-east.staging.example.com:9093",
        "prod": "kafka-east.prod.example.com:9093",
    }
    assert all(s["owner"] == "team-orders" for s in specs.values())
    for env, plan in plans.items():
        assert plan.environment == env and json.loads(json.dumps(plan.to_dict()))["environment"] == env
        without = [a.to_dict() for a in plan.actions if a.KIND.value != "deploy_job"]
        rf = {a["replication_factor"] for a in without if a["kind"] == "create_topic" and a["role"] == "remote"}
        assert rf == ({3} if env == "prod" else {-1})


PROMOTE = """Promote staging -> prod (orders): 8 settings differ.

  setting                              staging                                prod
  clusters.west.bootstrap_servers      "kafka-west.staging.example.com:9093"  "kafka-west.prod.example.com:9093"
  clusters.east.bootstrap_servers      "kafka-east.staging.example.com:9093"  "kafka-east.prod.example.com:9093"
  clusters.east.replication_principal  "User:mirror-staging"                  "User:mirror"
  defaults.job.parallelism             1                                      4
  flows.west->east.replication_factor  -1                                     3
  flows.west->east.delivery            "at-least-once"                        "exactly-once"
  slo.max_lag_records                  (unset)                                10000
  slo.max_lag_seconds                  (unset)                                60
"""


def test_promote_prints_exactly_the_changed_keys(capsys, monkeypatch):
    monkeypatch.setenv("EAST_PASSWORD", "the-east-password-value")
    assert main(["promote", "--from", "staging", "--to", "prod", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out == PROMOTE, "the credentials are the same references in both: not a difference"
    assert main(["promote", "--from", "dev", "--to", "staging", str(EXAMPLE), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {d["path"]: (d["from"], d["to"]) for d in doc["differences"]}
    assert rows["clusters.east.config.sasl.password"] == ("(unset)", '"${EAST_PASSWORD}"')
    assert rows["prune.topics"] == ("true", "false") and rows["prune.flows"] == ("true", "false")
    assert rows["flows.west->east.topics.include"] == ('["orders\\\\..*"]', '["orders\\\\..*", "payments\\\\..*"]')
    assert len(rows) == 14 and "the-east-password-value" not in json.dumps(doc)
    assert main(["promote", "--from", "prod", "--to", "prod", str(EXAMPLE)]) == 1
    assert main(["promote", "--from", "dev", "--to", "qa", str(EXAMPLE)]) == 1
    assert "--env qa: the topology declares no environment 'qa'" in capsys.readouterr().err


def test_promote_of_the_same_values_says_nothing_differs(tmp_path):
    text = BASE.replace('"east.prod:9092"', '"127.0.0.1:2"')
    f = write(tmp_path, "t.yaml", text)
    found, diags = load_differences([f], "prod", "prod")
    assert found == [] and diags.ok
    found, _ = load_differences([f], "dev", "prod")
    assert found is not None
    assert [d.path for d in found] == [
        "clusters.west.bootstrap_servers",
        "clusters.west.tags.region",
        "clusters.east.config.security.protocol",
        "clusters.east.config.sasl.mechanism",
        "clusters.east.config.sasl.username",
        "clusters.east.replication_principal",
        "defaults.job.parallelism",
        "flows.west->east.replication_factor",
        "flows.west->east.topics.include",
        "policies.residency.eu-only.allowed",
        "prune.topics",
        "slo.max_lag_records",
    ], "east's bootstrap_servers is the same in both: not shown"


def test_promote_with_plan_shows_what_the_target_would_change(capsys):
    backend = memory_backend(_world())
    assert main(["promote", "--from", "dev", "--to", "prod", str(EXAMPLE), "--plan"], backend) == 0
    out = capsys.readouterr().out
    assert "What applying prod would change (a plan against its clusters):" in out
    assert "Reconciler plan for topology orders, environment prod" in out
    assert "+ create topic west.payments.eu" in out


def _saved(tmp_path, monkeypatch, env: str) -> tuple[Path, MemoryFactory]:
    monkeypatch.setenv("RECONCILER_PLAN_KEY", "k" * 32)
    factory = _world()
    out = tmp_path / f"{env}.plan"
    assert main(["plan", "--env", env, str(EXAMPLE), "--out", str(out)], memory_backend(factory)) == 0
    return out, factory


def test_a_saved_plan_records_its_environment_and_apply_checks_it(tmp_path, monkeypatch, capsys):
    out, factory = _saved(tmp_path, monkeypatch, "dev")
    doc = json.loads(out.read_text())
    assert doc["topology"]["environment"] == "dev" and doc["plan"]["environment"] == "dev"
    capsys.readouterr()
    assert main(["apply", "--env", "prod", str(out), str(EXAMPLE)], memory_backend(factory)) == 1
    err = capsys.readouterr().err
    assert "planned for environment dev, the topology given is environment prod (--env)" in err
    assert main(["show", str(out)], memory_backend(factory)) == 0
    assert "for environment dev" in capsys.readouterr().out
    assert main(["apply", str(out), str(EXAMPLE)], memory_backend(factory)) == 0  # the plan's own environment
    captured = capsys.readouterr()
    assert "Using environment dev, the one the plan file was planned for." in captured.err
    assert "Apply complete" in captured.out
    assert "west.orders.eu" in factory.clusters["east"].topics


def test_a_saved_plan_applies_with_its_own_environment_given(tmp_path, monkeypatch, capsys):
    out, factory = _saved(tmp_path, monkeypatch, "staging")
    assert f"reconciler apply --env staging {out} {EXAMPLE}" in capsys.readouterr().err
    assert main(["apply", "--env", "staging", str(out), str(EXAMPLE)], memory_backend(factory)) == 0
    assert "west.payments.eu" in factory.clusters["east"].topics
