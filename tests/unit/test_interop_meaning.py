"""Import and export keep MirrorMaker 2's meaning (issue 35): built-in excludes, KIP-618 exactly-once values, policy
classes, Strimzi's cluster config, and every key either mapped, refused or reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.cli.main import main
from reconciler.interop import keys_doc
from reconciler.interop.draft import ImportOptions, to_yaml, validate
from reconciler.interop.mm2_export import export_mm2
from reconciler.interop.mm2_import import import_mm2_text
from reconciler.interop.properties import PropertiesError, parse_properties
from reconciler.interop.strimzi import export_strimzi, import_strimzi_text
from reconciler.mirror.filters import DEFAULT_GROUP_EXCLUDES, DEFAULT_TOPIC_EXCLUDES
from reconciler.mirror.policy import PolicyKind
from reconciler.topology.model import Delivery, Topology

ROOT = Path(__file__).resolve().parents[2]
HEAD = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"


def topo(text: str, options: ImportOptions | None = None, strimzi: bool = False) -> tuple[Topology, object]:
    draft = (import_strimzi_text if strimzi else import_mm2_text)(text, "in", options)
    topology, diags = validate(to_yaml(draft, "in"), "imported.yaml")
    assert topology is not None, diags.render()
    return topology, draft


def notes(draft) -> str:
    return "\n".join(n.render() for n in draft.notes)


def topology_text(flow: str) -> Topology:
    text = (
        "apiVersion: reconciler/v1\nkind: Topology\nclusters:\n  a: {bootstrap_servers: 'a:9092'}\n"
        f"  b: {{bootstrap_servers: 'b:9092'}}\nflows:\n- {{source: a, target: b{flow}}}\n"
    )
    topology, diags = validate(text, "t.yaml")
    assert topology is not None, diags.render()
    return topology


# --- excludes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["topics.exclude", "topics.blacklist"])
def test_mm2_topic_exclude_replaces_the_builtins(key):
    t, _ = topo(HEAD + f"{key} = foo.*\n")
    f = t.flows[0]
    assert f.topics.exclude == ("foo.*",) and f.topics.builtin_exclude == ()
    assert f.topics.matches("x.replica") and f.topics.matches("__x") and not f.topics.matches("foo1")
    assert f.groups.builtin_exclude is None  # unset: MM2's own built-ins


def test_mm2_empty_group_exclude_means_no_excludes_at_all():
    t, _ = topo(HEAD + "groups.exclude =\n")
    g = t.flows[0].groups
    assert g.exclude == () and g.builtin_exclude == ()
    assert all(g.matches(n) for n in ("connect-x", "console-consumer-1", "__y"))


def test_mm2_exclude_holding_every_builtin_keeps_them_as_builtins():
    t, _ = topo(HEAD + "a->b.topics.exclude = " + ", ".join(("tmp.*",) + DEFAULT_TOPIC_EXCLUDES).replace("\\", "\\\\"))
    assert t.flows[0].topics.exclude == ("tmp.*",) and t.flows[0].topics.builtin_exclude is None


@pytest.mark.parametrize(
    "flow, topics_key",
    [
        (", topics: {exclude: [x]}", "x, " + ", ".join(DEFAULT_TOPIC_EXCLUDES)),
        (", topics: {exclude: [x], builtin_exclude: []}", "x"),
        (", topics: {exclude: [x], builtin_exclude: [y]}", "x, y"),
        (", topics: {builtin_exclude: []}", ""),
        ("", None),
    ],
)
def test_export_writes_what_the_job_excludes_and_import_reads_it_back(flow, topics_key):
    original = topology_text(flow)
    text = export_mm2(original, "t")
    props = {p.key: p.value for p in parse_properties(text, "x")}
    assert props.get("topics.exclude") == topics_key
    back, draft = topo(text)
    assert back.flows[0].topics == original.flows[0].topics, notes(draft)
    back_s, _ = topo(export_strimzi(original, "t"), strimzi=True)
    assert back_s.flows[0].topics == original.flows[0].topics


def test_mm2_exclude_round_trips_from_mm2():
    first, _ = topo(HEAD + "groups.exclude =\ntopics.exclude = a.*, b.*\n")
    again, _ = topo(export_mm2(first, "x"))
    assert again.flows[0].groups == first.flows[0].groups and again.flows[0].topics == first.flows[0].topics
    g = first.flows[0].groups
    assert g.builtin == () and DEFAULT_GROUP_EXCLUDES  # nothing excluded, as MM2 with `groups.exclude =`


# --- exactly-once (KIP-618) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines, delivery, warned",
    [
        ("a->b.exactly.once.support = required\nb.exactly.once.source.support = enabled\n", "exactly-once", False),
        ("a->b.exactly.once.support = required\n", "exactly-once", True),  # MM2 would not start it: said
        ("exactly.once.support = requested\nb.exactly.once.source.support = enabled\n", "exactly-once", False),
        ("exactly.once.support = requested\n", "at-least-once", False),
        ("b.exactly.once.source.support = preparing\n", "at-least-once", False),
        ("exactly.once.source.support = Enabled\n", "exactly-once", False),
    ],
)
def test_exactly_once_values_follow_kip_618(lines, delivery, warned):
    t, draft = topo(HEAD + lines)
    assert t.flows[0].delivery.value == delivery
    assert ("would not start it" in notes(draft)) is warned


@pytest.mark.parametrize(
    "line, n", [("a->b.exactly.once.support = enabled\n", 5), ("b.exactly.once.source.support = true\n", 5)]
)
def test_exactly_once_other_values_are_file_line_errors(line, n):
    with pytest.raises(PropertiesError) as exc:
        import_mm2_text(HEAD + line, "mm2.properties")
    assert exc.value.render().startswith(f"mm2.properties:{n}: error: ")
    assert "KIP-618" in exc.value.message


def test_mixed_delivery_into_one_target_round_trips():
    text = (
        "apiVersion: reconciler/v1\nkind: Topology\nclusters:\n  a: {bootstrap_servers: 'a:1'}\n"
        "  c: {bootstrap_servers: 'c:1'}\n  b: {bootstrap_servers: 'b:1'}\nflows:\n"
        "- {source: a, target: b, delivery: exactly-once}\n- {source: c, target: b}\n"
    )
    original, diags = validate(text, "t.yaml")
    assert original is not None, diags.render()
    exported = export_mm2(original, "t")
    assert "b.exactly.once.source.support = enabled" in exported
    back, draft = topo(exported)
    assert [f.delivery for f in back.flows] == [Delivery.EXACTLY_ONCE, Delivery.AT_LEAST_ONCE], notes(draft)
    assert not draft.notes
    back_s, _ = topo(export_strimzi(original, "t"), strimzi=True)
    assert {f.name: f.delivery for f in back_s.flows} == {f.name: f.delivery for f in original.flows}


# --- policy classes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, kind",
    [
        ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", PolicyKind.IDENTITY),
        ("io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy", PolicyKind.IDENTITY),
        ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", PolicyKind.DEFAULT),
    ],
)
def test_known_policy_classes(cls, kind):
    t, draft = topo(HEAD + f"replication.policy.class = {cls}\n")
    assert t.flows[0].policy.kind is kind and not draft.notes


def test_unknown_policy_class_is_an_error_unless_the_user_says(tmp_path, capsys):
    f = tmp_path / "mm2.properties"
    f.write_text(HEAD + "replication.policy.class = com.acme.PrefixlessPolicy\n")
    assert main(["import", "mm2", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:5: error: replication policy class 'com.acme.PrefixlessPolicy'" in err
    assert "--policy-class com.acme.PrefixlessPolicy=identity" in err
    assert main(["import", "mm2", str(f), "--policy-class", "com.acme.PrefixlessPolicy=identity"]) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out)["defaults"]["policy"] == "identity" and "as --policy-class says" in err
    with pytest.raises(SystemExit):
        main(["import", "mm2", str(f), "--policy-class", "com.acme.PrefixlessPolicy=prefix"])


# --- Strimzi: cluster config, connectors, documents, versions -------------------------------------


def test_strimzi_export_puts_accepted_client_keys_in_cluster_config():
    text = (
        "apiVersion: reconciler/v1\nkind: Topology\nclusters:\n"
        "  a: {bootstrap_servers: 'a:1', config: {client.id: mirror, ssl.cipher.suites: TLS_AES_128_GCM_SHA256,"
        " security.protocol: SSL, sasl.kerberos.service.name: kafka}}\n"
        "  b: {bootstrap_servers: 'b:1'}\nflows:\n- {source: a, target: b}\n"
    )
    original, diags = validate(text, "t.yaml")
    assert original is not None, diags.render()
    doc = yaml.safe_load(export_strimzi(original, "t").split("\n", 3)[3])
    [a] = [c for c in doc["spec"]["clusters"] if c["alias"] == "a"]
    assert a["config"] == {"client.id": "mirror", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}
    assert "tls" in a  # security.protocol SSL is Strimzi's `tls`
    ann = doc["metadata"]["annotations"]["reconciler.dev/properties"]
    assert "a.reconciler.config.sasl.kerberos.service.name" in ann and "client.id" not in ann  # sasl.*: refused there
    back, _ = topo(export_strimzi(original, "t"), strimzi=True)
    assert back.clusters["a"].config == original.clusters["a"].config


STRIMZI = """apiVersion: v1
kind: Secret
metadata:
  name: creds
---
apiVersion: kafka.strimzi.io/v1alpha1
kind: KafkaMirrorMaker2
metadata:
  name: mm2
spec:
  connectCluster: b
  clusters:
  - alias: a
    bootstrapServers: a:9092
  - alias: b
    bootstrapServers: b:9092
  mirrors:
  - sourceCluster: a
    targetCluster: b
    sourceConnector:
      config:
        replication.policy.class: io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy
        sync.group.offsets.enabled: "true"
    checkpointConnector:
      config:
        replication.policy.class: io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy
"""


def test_strimzi_other_documents_connector_scope_and_v1alpha1_are_said():
    t, draft = topo(STRIMZI, strimzi=True)
    said = notes(draft)
    assert "in:1: warning: Secret: Secret 'creds' is not a KafkaMirrorMaker2: skipped" in said
    assert "in:23: warning: sync.group.offsets.enabled: set in sourceConnector of mirror a->b only" in said
    assert "checkpointConnector reads it too" in said and "sourceConnector ignores it" in said
    # the heartbeat connector reads the policy only to name `heartbeats`, the same under either policy
    assert "replication.policy.class: set in" not in said
    assert t.flows[0].sync.group_offsets and t.flows[0].policy.kind is PolicyKind.IDENTITY


# --- keys that were dropped or refused -----------------------------------------------------------


def test_refresh_enabled_keys_are_known():
    _, draft = topo(HEAD + "refresh.topics.enabled = true\n")
    assert not draft.notes
    _, draft = topo(HEAD + "refresh.groups.enabled = false\n")
    assert "in:5: warning: refresh.groups.enabled: flow a->b: MM2 reads the groups once at start" in notes(draft)
    with pytest.raises(PropertiesError):
        import_mm2_text(HEAD + "refresh.groups.enabled = no\n", "in")


def test_literal_placeholders_become_listed_environment_references(tmp_path, capsys):
    f = tmp_path / "mm2.properties"
    f.write_text(
        HEAD.replace("b:9092", "${B_BOOTSTRAP}") + "a.sasl.jaas.config = x.PlainLoginModule required "
        'username="${USER_A}" password="${PW_A}";\na.security.protocol = SASL_SSL\n'
    )
    assert main(["import", "mm2", str(f)]) == 0
    out, err = capsys.readouterr()
    assert f"  B_BOOTSTRAP: the literal ${{B_BOOTSTRAP}} at {f}:" in err
    for name in ("USER_A", "PW_A"):  # cluster a reads only A_* variables (topology/secrets.py)
        assert f"  A_{name}: the value of {name}, the literal ${{{name}}} at {f}:" in err
    assert f"{f}:3: warning: b.bootstrap.servers: the literal ${{B_BOOTSTRAP}} becomes" in err
    assert yaml.safe_load(out)["clusters"]["b"]["bootstrap_servers"] == "${B_BOOTSTRAP}"


def test_empty_separator_is_accepted_with_identity():
    t, draft = topo(HEAD + "replication.policy.class = IdentityReplicationPolicy\nreplication.policy.separator =\n")
    assert t.flows[0].policy.kind is PolicyKind.IDENTITY and t.flows[0].policy.separator == "."
    assert "acheckpointsinternal" in notes(draft)  # the internal topic names it shaped are said
    t, draft = topo(
        HEAD + "replication.policy.class = IdentityReplicationPolicy\nreplication.policy.separator =\n"
        "replication.policy.internal.topic.separator.enabled = false\n"
    )
    assert not draft.notes
    with pytest.raises(AssertionError, match="separator"):  # with the default policy it would shape every name
        topo(HEAD + "replication.policy.separator =\n")


def test_the_mm2_key_table_of_docs_interop_is_up_to_date():
    text = (ROOT / keys_doc.DOC).read_text(encoding="utf-8")
    assert keys_doc.doc_text(text) == text, "run `.venv/bin/python scripts/generate_settings.py`"


@pytest.mark.parametrize("value, enabled", [("false # passive", False), ("true # active", False), ("yes", False)])
def test_flow_enabled_is_read_as_mm2_reads_it(value, enabled):
    t, draft = topo(HEAD.replace("a->b.enabled = true", f"a->b.enabled = {value}"))
    assert t.flows[0].enabled is enabled
    assert "in:4: warning: a->b.enabled:" in notes(draft) and "MM2 reads it as false" in notes(draft)


def test_another_document_with_a_metadata_of_the_wrong_shape_is_named_not_a_traceback():
    """Found by the property run: a document that is not a KafkaMirrorMaker2 whose `metadata` is a string."""
    from reconciler.interop.properties import PropertiesError
    from reconciler.interop.strimzi import import_strimzi_text

    with pytest.raises(PropertiesError, match="no KafkaMirrorMaker2 resource"):
        import_strimzi_text('apiVersion: kafka.strimzi.io/v1\nkind: "(?="\nmetadata: "xx"\n', "in")
