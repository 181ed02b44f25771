"""Import from / export to MirrorMaker 2 properties and Strimzi KafkaMirrorMaker2 resources."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.analysis.hazards import witness_topics
from reconciler.cli.main import main
from reconciler.interop.draft import to_yaml, validate
from reconciler.interop.mm2_export import export_mm2
from reconciler.interop.mm2_import import import_mm2_text
from reconciler.interop.properties import PropertiesError, format_property, parse_properties
from reconciler.interop.strimzi import import_strimzi_text
from reconciler.jobplan.state import desired_jobs
from reconciler.mirror.policy import PolicyKind
from reconciler.operations.interop import EXPORTERS, IMPORTERS
from reconciler.render import plan_json
from reconciler.topology.build import load_topology
from reconciler.topology.model import Delivery, OffsetSyncsLocation, Topology
from tests.plan_helpers import World

ROOT = Path(__file__).resolve().parents[2]
FILES = Path(__file__).parent / "interop_files"
#: topologies/environments is left out: an export is of one environment (`export --env`) and MirrorMaker 2 has no
#: owner (docs/environments.md), so it does not round-trip into the same plan
EXAMPLES = sorted(p for p in (ROOT / "topologies").iterdir() if p.is_dir() and p.name != "environments")


def imported(fmt: str, text: str, file: str = "in") -> tuple[Topology, object]:
    draft = IMPORTERS[fmt](text, file)
    topology, diags = validate(to_yaml(draft, file), "imported.yaml")
    assert topology is not None, diags.render()
    return topology, draft


# --- Java properties syntax ----------------------------------------------------------------------


def test_properties_separators_continuations_comments_escapes():
    text = (
        "# comment\n"
        "  ! bang comment \\\n"
        "a=1\n"
        "b : 2\n"
        "c  3\n"
        "d\\=e\\:f\\ g = x\n"
        "list = one, \\\n"
        "       two, \\\n"
        "   three\n"
        "even = ends with two\\\\\n"
        "next = line\n"
        "uni = caf\\u00e9\\tx\\n\n"
        "\r\n"
        "crlf = yes\r\n"
        "empty\n"
        "lead = \\  space\n"
    )
    props = parse_properties(text, "f.properties")
    got = {p.key: (p.value, p.line) for p in props}
    assert got["a"] == ("1", 3)
    assert got["b"] == ("2", 4)
    assert got["c"] == ("3", 5)
    assert got["d=e:f g"] == ("x", 6)
    assert got["list"] == ("one, two, three", 7)
    assert got["even"] == ("ends with two\\", 10)
    assert got["next"] == ("line", 11)
    assert got["uni"] == ("café\tx\n", 12)
    assert got["crlf"] == ("yes", 14)
    assert got["empty"] == ("", 15)
    assert got["lead"] == ("  space", 16)
    assert "bang" not in " ".join(got)  # a comment ending in a backslash does not continue


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("a = 1\nb = \\u12G4\n", 2, "malformed \\uXXXX"),
        ("a = 1\n\n= value\n", 3, "no key"),
        ("x = \\u00", 1, "malformed"),
    ],
)
def test_properties_malformed_lines_name_file_and_line(text, line, message):
    with pytest.raises(PropertiesError) as exc:
        parse_properties(text, "mm2.properties")
    assert exc.value.render().startswith(f"mm2.properties:{line}: error: ")
    assert message in exc.value.message


@pytest.mark.parametrize(
    "key, value",
    [
        ("a->b.topics", r"orders, payments\..*"),
        ("k:=", " lead and trail "),
        ("#x", "!y"),
        ("u", "café\t\n"),
        ("sasl.jaas.config", 'x required username="a" password="${env:P}";'),
    ],
)
def test_format_property_reads_back(key, value):
    [p] = parse_properties(format_property(key, value) + "\n", "f")
    assert (p.key, p.value) == (key, value)


# --- MM2 import ----------------------------------------------------------------------------------


def test_import_full_mm2_file_maps_every_key():
    topo, draft = imported("mm2", (FILES / "full.properties").read_text(), "full.properties")
    assert list(topo.clusters) == ["primary", "backup", "analytics"]  # `clusters` continued over two lines
    primary = topo.clusters["primary"]
    assert primary.bootstrap_servers == "kafka-1.primary:9092,kafka-2.primary:9092"
    assert primary.config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "mirror",
        "sasl.password": "${PRIMARY_SASL_PASSWORD}",
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }
    # `:` and whitespace separators; ${env:VAR} mapped to ${VAR}
    assert topo.clusters["backup"].config == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "mm2",
        "sasl.password": "${BACKUP_PW}",
    }
    # ${file:...} becomes a generated variable, reported
    assert topo.clusters["analytics"].config["ssl.keystore.password"] == "${ANALYTICS_SSL_KEYSTORE_PASSWORD}"
    assert [v.name for v in draft.env_vars] == ["PRIMARY_SASL_PASSWORD", "BACKUP_PW", "ANALYTICS_SSL_KEYSTORE_PASSWORD"]
    assert "s3cr3t" not in to_yaml(draft, "full.properties")
    assert "full.properties:12" in draft.env_vars[0].source

    flows = {f.name: f for f in topo.flows}
    assert set(flows) == {"primary->backup", "primary->analytics", "backup->primary"}
    pb = flows["primary->backup"]
    assert pb.enabled and not flows["backup->primary"].enabled
    assert pb.topics.include == ("orders", r"payments\..*", "café")  # \\ and \u escapes
    assert pb.topics.exclude == (r".*\.tmp",)  # legacy topics.blacklist
    assert pb.groups.include == ("billing-.*",) and pb.groups.exclude == ("billing-test",)
    assert pb.policy.kind is PolicyKind.IDENTITY and pb.policy.separator == "_"
    assert pb.replication_factor == 3
    assert (pb.sync.topic_configs, pb.sync.acls, pb.sync.group_offsets) == (False, False, True)
    assert pb.sync.group_offsets_interval_seconds == 20
    assert (pb.heartbeats.enabled, pb.heartbeats.interval_seconds) == (True, 10)
    assert (pb.checkpoints.enabled, pb.checkpoints.interval_seconds) == (True, 30)
    assert pb.refresh_interval_seconds == 15
    assert pb.offset_syncs_location is OffsetSyncsLocation.TARGET and pb.offset_lag_max == 500
    assert pb.config_properties.exclude == (r"min\.insync\.replicas", r"retention\.bytes")
    assert pb.job.parallelism == 4
    assert pb.delivery is Delivery.EXACTLY_ONCE  # backup.exactly.once.source.support
    pa = flows["primary->analytics"]  # flow-level beats top-level
    assert pa.topics.include == ("clicks",) and pa.groups.exclude == ("analytics-tmp-.*",)
    assert not pa.checkpoints.enabled and pa.job.parallelism == 2
    assert pa.policy.kind is PolicyKind.DEFAULT and pa.policy.separator == "."
    assert pa.delivery is Delivery.EXACTLY_ONCE  # exactly.once.support = required
    assert flows["backup->primary"].delivery is Delivery.AT_LEAST_ONCE
    notes = {n.key: n for n in draft.notes}
    assert notes["checkpoints.topic.replication.factor"].where == "full.properties:50"
    assert notes["some.unknown.key"].where == "full.properties:51"
    assert "unknown key" in notes["some.unknown.key"].message


def test_import_unset_keys_take_mm2_defaults_and_ours_are_left_out():
    text = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
    topo, draft = imported("mm2", text)
    [flow] = topo.flows
    # MM2's defaults where they differ from ours: the import behaves as the MM2 file did
    assert (flow.replication_factor, flow.refresh_interval_seconds, flow.job.parallelism) == (2, 600, 1)
    assert (flow.heartbeats.interval_seconds, flow.checkpoints.interval_seconds) == (1, 60)
    yaml_text = to_yaml(draft, "in")
    assert "sync" not in yaml_text and "topics" not in yaml_text  # same as our defaults: left out
    assert not draft.notes and not draft.env_vars


def test_import_precedence_and_spellings():
    text = (
        "\n".join(
            [
                "clusters = a, b",
                "security.protocol = SASL_SSL",  # top-level client setting: every cluster
                "sasl.mechanism = PLAIN",
                "a.bootstrap.servers = a:9092",
                "b.bootstrap.servers = b:9092",
                "b.security.protocol = SASL_PLAINTEXT",  # cluster-level beats top-level
                "topics = x",
                "topics.exclude = new",
                "topics.blacklist = old",  # the new spelling wins
                "a.emit.heartbeats.enabled = false",  # MM2 ignores connector keys at cluster level
                "a->b.enabled = true",
                "a->b.topics = y",  # flow-level beats top-level
                "a.producer.linger.ms = 5",
                "c->a.enabled = true",  # unknown cluster
                "config.properties.blacklist = x\\.y",  # legacy spelling
            ]
        )
        + "\n"
    )
    topo, draft = imported("mm2", text, "p.properties")
    assert topo.clusters["a"].config["security.protocol"] == "SASL_SSL"
    assert topo.clusters["b"].config == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"}
    [flow] = topo.flows
    assert flow.topics.include == ("y",) and flow.topics.exclude == ("new",)
    assert flow.heartbeats.enabled
    assert flow.config_properties.exclude == ("x.y",)  # Java reads `\.` as `.`
    where = {n.key: n.where for n in draft.notes}
    assert where["a.emit.heartbeats.enabled"] == "p.properties:10"
    assert where["a.producer.linger.ms"] == "p.properties:13"
    assert where["c->a.enabled"] == "p.properties:14"


@pytest.mark.parametrize(
    "text, line, message",
    [
        (
            "clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\na->b.enabled = true\n"
            "a->b.sync.topic.acls.enabled = yes\n",
            5,
            "a->b.sync.topic.acls.enabled must be true or false",
        ),
        (
            "clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\na->b.enabled = true\ntasks.max = many\n",
            5,
            "tasks.max must be an integer",
        ),
        ("clusters = a, b\na.bootstrap.servers = a:1\n", 1, "no b.bootstrap.servers"),
        ("a.bootstrap.servers = a:1\n", 1, "no `clusters` key"),
        ("clusters = a.b\n", 1, "cannot be a topology cluster name"),
        (
            "clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\na->b.enabled = true\n"
            "offset-syncs.topic.location = elsewhere\n",
            5,
            "source or target",
        ),
    ],
)
def test_import_malformed_mm2_is_file_line_error(text, line, message):
    with pytest.raises(PropertiesError) as exc:
        import_mm2_text(text, "m.properties")
    assert exc.value.render().startswith(f"m.properties:{line}: error: ")
    assert message in exc.value.message


def test_cli_import_malformed_exits_1_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "mm2.properties"
    src.write_text(
        "clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\n"
        "a->b.enabled = true\nemit.heartbeats.enabled = maybe\n"
    )
    out = tmp_path / "out"
    assert main(["import", "mm2", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{src}:5: error: emit.heartbeats.enabled must be true or false")
    assert not out.exists()


def test_cli_import_writes_a_topology_that_validates(tmp_path, capsys):
    out = tmp_path / "topo"
    assert main(["import", "mm2", str(FILES / "full.properties"), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "PRIMARY_SASL_PASSWORD" in err and "full.properties:51: warning: some.unknown.key" in err
    assert main(["validate", str(out)]) == 0
    assert "3 flows" in capsys.readouterr().out


def test_import_refuses_a_result_that_does_not_validate(tmp_path, capsys):
    src = tmp_path / "loop.properties"
    src.write_text(
        "clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\n"
        "replication.policy.class = IdentityReplicationPolicy\na->b.enabled = true\nb->a.enabled = true\n"
    )
    assert main(["import", "mm2", str(src)]) == 1
    err = capsys.readouterr().err
    assert "replication loop" in err and "nothing was written" in err


# --- Strimzi import ------------------------------------------------------------------------------


def test_import_strimzi_v1beta2():
    topo, draft = imported("strimzi", (FILES / "strimzi_v1beta2.yaml").read_text(), "mm2.yaml")
    a = topo.clusters["cluster-a"]
    assert a.bootstrap_servers == "cluster-a-kafka-bootstrap:9093"
    assert a.config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "mm2-user",
        "sasl.password": "${CLUSTER_A_SASL_PASSWORD}",
        "ssl.ca.pem": "${CLUSTER_A_SSL_CA_PEM}",
    }
    sources = {v.name: v.source for v in draft.env_vars}
    assert sources["CLUSTER_A_SASL_PASSWORD"] == "key 'password' of Kubernetes Secret 'mm2-user'"
    assert "cluster-a-cluster-ca-cert" in sources["CLUSTER_A_SSL_CA_PEM"]
    [flow] = topo.flows
    assert flow.name == "cluster-a->cluster-b"
    assert flow.topics.include == (r"orders|payments\..*",) and flow.topics.exclude == (".*-tmp",)
    assert flow.groups.exclude == ("console-.*",)  # groupsBlacklistPattern
    assert flow.job.parallelism == 3 and flow.replication_factor == -1
    assert not flow.sync.acls and flow.sync.group_offsets
    assert flow.refresh_interval_seconds == 60 and flow.checkpoints.interval_seconds == 10
    assert flow.heartbeats.interval_seconds == 5
    assert flow.delivery is Delivery.EXACTLY_ONCE  # connect cluster's worker config
    keys = {n.key for n in draft.notes}
    assert {
        "cluster-b.config.storage.replication.factor",
        "spec.replicas",
        "spec.version",
        "cluster-a->cluster-b.checkpointConnector.tasksMax",
    } <= keys


def test_import_strimzi_newer_shape_target_given_once():
    topo, draft = imported("strimzi", (FILES / "strimzi_v1.yaml").read_text(), "mm2.yaml")
    assert list(topo.clusters) == ["cluster-c", "cluster-a", "cluster-b"]
    flows = {f.name: f for f in topo.flows}
    assert set(flows) == {"cluster-a->cluster-c", "cluster-b->cluster-c"}
    assert flows["cluster-a->cluster-c"].topics.include == (r"a\..*",)
    assert not flows["cluster-b->cluster-c"].enabled  # sourceConnector.state: stopped
    assert topo.clusters["cluster-a"].config == {
        "security.protocol": "SSL",
        "ssl.certificate.pem": "${CLUSTER_A_SSL_CERTIFICATE_PEM}",
        "ssl.key.pem": "${CLUSTER_A_SSL_KEY_PEM}",
    }
    assert any(n.key == "cluster-c.groupId" for n in draft.notes)


def test_import_strimzi_malformed_is_file_line_error():
    text = "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nspec:\n  clusters:\n    - alias: a\n  mirrors: []\n"
    with pytest.raises(PropertiesError) as exc:
        import_strimzi_text(text, "mm2.yaml")
    assert exc.value.render().startswith("mm2.yaml:5: error: cluster 'a' has no bootstrapServers")
    with pytest.raises(PropertiesError) as exc:
        import_strimzi_text("kind: Kafka\n", "k.yaml")
    assert "no KafkaMirrorMaker2" in exc.value.message


# --- round trip on every example topology --------------------------------------------------------


def _seeded_world(topology: Topology) -> World:
    world = World(topology)
    for alias, names in witness_topics(topology).items():
        for i, name in enumerate(names):
            world[alias].add_topic(
                name, partitions=1 + i % 3, configs={"retention.ms": "86400000", "min.insync.replicas": "2"}
            )
    return world


def _jobs(topology: Topology) -> dict:
    return {
        name: (j.cluster, j.deployer, dict(j.options), j.spec.spec_hash()) for name, j in desired_jobs(topology).items()
    }


@pytest.mark.parametrize("fmt", sorted(set(EXPORTERS) & set(IMPORTERS)))  # formats that round-trip (not alerts)
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_export_then_import_plans_identically(example, fmt):
    original, diags = load_topology([example])
    assert original is not None, diags.render()
    exported = EXPORTERS[fmt](original, str(example))
    back, draft = imported(fmt, exported, f"exported.{fmt}")
    if fmt == "mm2":
        assert not draft.notes, [n.render() for n in draft.notes]  # every exported key is read back
    world = _seeded_world(original)
    before, after = world.plan(original), world.plan(back)
    assert before.actions, "the seeded clusters must give the plan something to do"
    assert plan_json.render(after) == plan_json.render(before)
    assert _jobs(back) == _jobs(original)
    assert (back.residency, back.prune, back.slo, back.name) == (
        original.residency,
        original.prune,
        original.slo,
        original.name,
    )
    assert {
        a: (c.bootstrap_servers, dict(c.config), dict(c.tags), c.replication_principal)
        for a, c in back.clusters.items()
    } == {
        a: (c.bootstrap_servers, dict(c.config), dict(c.tags), c.replication_principal)
        for a, c in original.clusters.items()
    }


def test_export_mm2_says_what_mm2_needs():
    original, _ = load_topology([ROOT / "topologies" / "dr-active-passive"])
    text = export_mm2(original, "dr")
    props = {p.key: p.value for p in parse_properties(text, "x")}
    assert props["clusters"] == "primary, dr"
    assert props["primary.bootstrap.servers"] == "${env:PRIMARY_BOOTSTRAP}"
    assert props["config.providers.env.class"].endswith("EnvVarConfigProvider")
    assert 'password="${env:PRIMARY_MIRROR_PASSWORD}"' in props["primary.sasl.jaas.config"]
    assert props["dr.exactly.once.source.support"] == "enabled"
    assert props["primary->dr.enabled"] == "true"
    # MM2's exclude replaces its built-ins: they are written after the topology's own
    assert props["topics.exclude"] == r".*\.tmp, scratch-.*, .*[\-\.]internal, .*\.replica, __.*"
    assert props["tasks.max"] == "8" and props["replication.factor"] == "3"


def test_cli_export_writes_files(tmp_path, capsys):
    for fmt in ("mm2", "strimzi"):
        out = tmp_path / f"out.{fmt}"
        assert main(["export", fmt, str(ROOT / "topologies" / "demo"), "--out", str(out)]) == 0
        assert out.read_text()
    assert main(["import", "strimzi", str(tmp_path / "out.strimzi"), "--out", str(tmp_path / "back")]) == 0
    assert main(["validate", str(tmp_path / "back")]) == 0
