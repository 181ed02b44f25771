"""The settings registry (reconciler/topology/settings_registry.py) is the one declaration of a flow setting and
of a topology-wide one (`prune:`, `slo:`): what is derived from it is up to date, and what is written by hand (the
model, the parsing of topology/build.py, the interop's model-to-setting map) is checked against it, each check
naming the setting that is missing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from reconciler.contract.spec import HOT_RELOADABLE, ClusterSpec, JobSpec
from reconciler.interop import mm2_keys
from reconciler.interop.draft import builtin_default
from reconciler.interop.mm2_export import connector_values, export_mm2, flow_settings
from reconciler.interop.mm2_import import import_mm2_text
from reconciler.interop.strimzi import PATTERN_KEYS, export_strimzi, import_strimzi_text
from reconciler.resources import schema_path
from reconciler.topology import settings_registry as registry
from reconciler.topology.build import load_topology_text
from reconciler.topology.choices import OnRefusedRecord
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.diagnostics import TopologyError
from reconciler.topology.model import JobSettings, Topology
from reconciler.topology.settings_docs import schema_text, stale_files
from reconciler.topology.settings_registry import (
    FLOW_SETTINGS,
    NO_DEFAULT,
    TOPOLOGY_SECTIONS,
    TOPOLOGY_SETTINGS,
    Connector,
    Scope,
    Setting,
    Type,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_derived_files_are_up_to_date():
    assert stale_files(ROOT) == [], (
        "these files are out of date with reconciler/topology/settings_registry.py: "
        "run `.venv/bin/python scripts/generate_settings.py`"
    )


def test_the_schema_declares_every_setting_as_the_registry_does():
    """Setting by setting (the check above names only the file): the committed schema's leaf of each flow and
    topology setting is the generated one, and the schema has no setting leaf the registry does not declare."""
    text = schema_path().read_text(encoding="utf-8")
    committed, generated = _setting_objects(json.loads(text)), _setting_objects(json.loads(schema_text(text)))
    stale = []
    for where, node in generated.items():
        want, have = _leaves(node), _leaves(committed[where])
        stale += [f"{where}: {name}" for name in sorted(want.keys() | have.keys()) if want.get(name) != have.get(name)]
    assert stale == [], (
        "settings whose schema is not the registry's: run `.venv/bin/python scripts/generate_settings.py`"
    )


def test_every_setting_is_documented_and_its_default_is_valid():
    everything = FLOW_SETTINGS + TOPOLOGY_SETTINGS
    assert [s.name for s in everything if not s.doc.strip()] == []
    assert len({s.name for s in everything}) == len(everything), "a setting is declared twice"
    assert len(registry.BY_NAME) == len(FLOW_SETTINGS)
    assert len(registry.TOPOLOGY_BY_NAME) == len(TOPOLOGY_SETTINGS)
    invalid = [
        s.name
        for s in everything
        if s.default not in (NO_DEFAULT, None) and not Draft202012Validator(s.json_schema()).is_valid(_json(s.default))
    ]
    assert invalid == []
    bad_examples = [
        s.name for s in everything for e in s.examples if not Draft202012Validator(s.json_schema()).is_valid(e)
    ]
    assert bad_examples == []
    assert [s.name for s in TOPOLOGY_SETTINGS if len(s.path) != 2 or s.mm2 or s.hot_reload or s.spec] == [], (
        "a topology setting is `<section>.<name>`, with no MM2 key, hot reload or job spec leaf"
    )


def test_the_builtin_defaults_are_the_registry_defaults_and_valid_in_the_schema():
    """Unset-by-default settings (None: e.g. job.image) are left out, as a user would."""
    assert BUILTIN_FLOW_DEFAULTS == registry.builtin_defaults()
    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    settings = schema["$defs"]["flowSettings"]
    assert settings["properties"]["job"]["properties"]["master"]["examples"]
    validator = Draft202012Validator({**settings, "$defs": schema["$defs"]})
    defaults = _without_nones({k: v for k, v in BUILTIN_FLOW_DEFAULTS.items() if k in settings["properties"]})
    assert [e.message for e in validator.iter_errors(defaults)] == []


def test_the_model_has_a_field_for_every_setting():
    """JobSettings holds the `job.*` settings; the job spec (FlowSettings + RuntimeSettings) holds the settings a
    job runs with, each at its `spec_path`; every other spec leaf is one the reconciler derives."""
    job_fields = {f.name for f in dataclasses.fields(JobSettings)}
    job_settings = {s.path[1] for s in FLOW_SETTINGS if s.path[0] == "job"}
    assert sorted(job_settings - job_fields) == [], "settings with no JobSettings field"
    assert sorted(job_fields - job_settings) == [], "JobSettings fields with no setting in the registry"
    leaves = set(_spec().leaves())
    assert sorted(s.name for s in FLOW_SETTINGS if s.spec_path is not None and s.spec_path not in leaves) == [], (
        "settings whose spec path is not a JobSpec leaf"
    )
    covered = {s.spec_path for s in FLOW_SETTINGS} | set(registry.SPEC_ONLY_LEAVES)
    assert sorted(p for p in leaves if p.split(".")[0] in ("settings", "engine") and p not in covered) == [], (
        "JobSpec leaves no setting of the registry declares (add it, or to SPEC_ONLY_LEAVES)"
    )


def test_the_model_has_a_field_for_every_topology_setting():
    """`Topology` has a field per section (`prune`, `slo`) whose dataclass (`Prune`, `Slo`) has a field per setting
    of the section, with the registry's default."""
    topology = Topology(clusters={}, flows=())
    missing, unknown, defaults = [], [], []
    for section in TOPOLOGY_SECTIONS:
        model = getattr(topology, section, None)
        if model is None or not dataclasses.is_dataclass(model):
            missing.append(f"{section} (no dataclass field of Topology)")
            continue
        fields = {f.name: f for f in dataclasses.fields(model)}
        settings = {s.path[1]: s for s in registry.section_settings(section)}
        missing += [f"{section}.{n}" for n in settings if n not in fields]
        unknown += [f"{section}.{n}" for n in fields if n not in settings]
        defaults += [
            f"{section}.{n}: model {fields[n].default!r}, registry {s.default!r}"
            for n, s in settings.items()
            if n in fields and fields[n].default != s.default
        ]
    assert sorted(missing) == [], "topology settings with no model field"
    assert sorted(unknown) == [], f"model fields of {TOPOLOGY_SECTIONS} with no setting in the registry"
    assert defaults == [], "model defaults that are not the registry's"


def test_the_topology_build_carries_every_topology_setting_to_the_model():
    lost = []
    for s in TOPOLOGY_SETTINGS:
        value = _sample(s)
        assert _json(value) != _json(s.default), s.name
        try:
            topo = load_topology_text(yaml.safe_dump({**TOPOLOGY, s.path[0]: {s.path[1]: value}}))
        except (TopologyError, TypeError) as e:  # the schema refuses the key, the model has no field for it
            lost.append(f"{s.name}: set {value!r}, the build fails: {e}")
            continue
        got = getattr(getattr(topo, s.path[0]), s.path[1])
        if _json(got) != _json(value):
            lost.append(f"{s.name}: set {value!r}, the model holds {got!r}")
    assert lost == []


def test_the_topology_build_carries_every_setting_to_the_model():
    """Each setting set to a value other than its default, in a flow: the value reaches the model (the job spec
    leaf, or for settings the spec does not carry, the flow's own field)."""
    lost = []
    for s in FLOW_SETTINGS:
        value = _sample(s)
        assert _json(value) != _json(s.default), s.name
        topo = _topology_with(s, value)
        (flow,) = topo.flows
        if s.spec_path is not None:
            got = JobSpec.from_flow(topo, flow).leaves()[s.spec_path]
        elif s.path[0] == "job":
            got = getattr(flow.job, s.path[1])
        else:
            got = getattr(flow, s.name)
        if _json(got) != _json(value):
            lost.append(f"{s.name}: set {value!r}, the model holds {got!r}")
    assert lost == []


def test_the_hot_reload_set_is_the_registry_one():
    assert HOT_RELOADABLE == registry.hot_reloadable_spec_paths() | registry.SPEC_ONLY_HOT_RELOADABLE
    spec = _spec()
    restart = spec.restart_fields(spec.with_engine(parallelism=5, max_batch_ms=2_000))
    assert restart == {"engine.parallelism"}, "batch length is hot, parallelism is not"


def test_every_mm2_key_of_the_registry_is_mapped_by_the_interop():
    mapped = {k.key for k in mm2_keys.CONNECTOR_KEYS} | set(mm2_keys.REFRESH_KEYS) | {mm2_keys.EOS_CONNECTOR_KEY}
    assert sorted(k for s in registry.mm2_settings() if s.mm2 for k in s.mm2.keys if k not in mapped) == []
    job_ext = {s.path[1] for s in FLOW_SETTINGS if s.path[0] == "job" and s.mm2 is None and s.type is not Type.MAPPING}
    assert set(mm2_keys.JOB_FIELD_KINDS) == job_ext


def test_the_export_reads_every_mm2_setting_from_the_model():
    """`mm2_export.flow_settings` (the model -> setting map written by hand): an entry per setting with an MM2 key
    or an extension key, holding the flow's value."""
    wanted = [
        s for s in FLOW_SETTINGS if s.mm2 is not None or (s.path[0] == "job" and s.path[1] in mm2_keys.JOB_FIELD_KINDS)
    ]
    wrong = []
    for s in wanted:
        value = _sample(s)
        got = flow_settings(_topology_with(s, value).flows[0]).get(s.path, "no entry")
        if _json(got) != _json(value):
            wrong.append(f"{s.name}: set {value!r}, flow_settings holds {got!r}")
    assert wrong == []


def test_the_strimzi_export_gives_every_mm2_key_to_the_registrys_connectors():
    """Each MM2 key a flow's settings make goes to the Strimzi connectors its setting's `Mm2.connectors` name
    (a new checkpoint setting with `connectors=(Connector.CHECKPOINT,)` lands in `checkpointConnector`)."""
    field = {Connector.SOURCE: "sourceConnector", Connector.CHECKPOINT: "checkpointConnector"}
    field[Connector.HEARTBEAT] = "heartbeatConnector"
    misplaced, checked = [], set()
    for s in registry.mm2_settings():
        assert s.mm2 is not None
        topo = _topology_with(s, _sample(s))
        (mirror,) = yaml.safe_load(export_strimzi(topo, "test"))["spec"]["mirrors"]
        emitted = connector_values(topo.flows[0])
        for key in s.mm2.keys:
            if key not in emitted or key in PATTERN_KEYS or key == "tasks.max":  # mirror fields, not connector config
                continue
            checked.add(key)
            got = [c.value for c in Connector if key in mirror.get(field[c], {}).get("config", {})]
            want = [c.value for c in Connector if c in s.mm2.connectors_of(key)]
            if got != want:
                misplaced.append(f"{s.name}: {key} in the connectors {got}, the registry says {want}")
    assert misplaced == []
    config_keys = {k for s in registry.mm2_settings() if s.mm2 for k in s.mm2.keys}
    unchecked = config_keys - checked - set(PATTERN_KEYS) - {"tasks.max", mm2_keys.EOS_CONNECTOR_KEY}
    assert sorted(unchecked) == [], "MM2 keys no sample value made the export write"


def test_the_topology_settings_survive_export_and_import():
    """`reconciler.prune.*` and `reconciler.slo.*` (mm2_keys.PRUNE_KEYS, SLO_KINDS) carry every topology setting."""
    lost = []
    for s in TOPOLOGY_SETTINGS:
        value = _sample(s)
        topo = load_topology_text(
            yaml.safe_dump({**TOPOLOGY, "flows": [{"source": "west", "target": "east"}], s.path[0]: {s.path[1]: value}})
        )
        draft = import_mm2_text(export_mm2(topo, "test"), "exported.properties")
        got = getattr(draft, s.path[0]).get(s.path[1])
        if _json(got) != _json(value):
            lost.append(f"{s.name}: exported {value!r}, imported {got!r}")
    assert lost == []


@pytest.mark.parametrize("fmt", ["mm2", "strimzi"])
def test_the_flow_settings_survive_export_and_import(fmt):
    """Every flow setting, set to a value other than its default, is read back by `import` from what `export` wrote
    (MM2 properties, a Strimzi KafkaMirrorMaker2): an MM2 key where MM2 has one, else a `reconciler.` key
    (rate_limit, on_refused_record and heartbeats.location were once dropped from the MM2 properties)."""
    export, read = {
        "mm2": (export_mm2, lambda text: import_mm2_text(text, "exported.properties")),
        "strimzi": (export_strimzi, lambda text: import_strimzi_text(text, "exported.yaml")),
    }[fmt]
    lost = []
    for s in FLOW_SETTINGS:
        value = _sample(s)
        draft = read(export(_topology_with(s, value), "test"))
        (flow,) = draft.flows
        got = flow.enabled if s.path == ("enabled",) else flow.settings.get(s.path, builtin_default(s.path))
        if s.type is Type.MAPPING:  # one setting per key: ("job", "spark_conf", key)
            got = {p[-1]: v for p, v in flow.settings.items() if p[: len(s.path)] == s.path and len(p) > len(s.path)}
        if _json(got) != _json(value):
            lost.append(f"{s.name}: exported {value!r}, imported {got!r}")
    assert lost == []


# --- helpers ------------------------------------------------------------------------------------

TOPOLOGY: dict[str, Any] = {
    "apiVersion": "reconciler/v1",
    "kind": "Topology",
    "clusters": {"west": {"bootstrap_servers": "127.0.0.1:1"}, "east": {"bootstrap_servers": "127.0.0.1:2"}},
}
#: Settings a sample value of another needs (a semantic check of topology/build.py asks for them).
EXTRA: dict[str, dict[str, Any]] = {"job.deployer": {"job.master": "spark://spark-master:7077"}}


def _sample(s: Setting) -> Any:
    """A valid value other than the default."""
    if s.examples:
        return s.examples[0]
    if s.type is Type.BOOL:
        return not s.default
    if s.type is Type.CHOICE:
        return next(c for c in s.choices if c != s.default)
    if s.type in (Type.INT, Type.SECONDS, Type.NUMBER):
        return (s.default or 0) + 7
    if s.type is Type.STRING:
        return "sample-value"
    if s.type in (Type.PATTERNS, Type.STRINGS):
        return ["sample-.*"]
    return {"spark.sample": "x"}


def _topology_with(s: Setting, value: Any) -> Topology:
    """A topology of one flow west->east setting flow setting `s` to `value` (and what that value needs, EXTRA)."""
    flow_doc: dict[str, Any] = {"source": "west", "target": "east"}
    for name, v in {s.name: value, **EXTRA.get(s.name, {})}.items():
        _put(flow_doc, name.split("."), v)
    return load_topology_text(yaml.safe_dump({**TOPOLOGY, "flows": [flow_doc]}))


def _setting_objects(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The schema's objects of settings, by where they are."""
    out = {"$defs.flowSettings": schema["$defs"]["flowSettings"], "$defs.flow": schema["$defs"]["flow"]}
    return out | {f"properties.{section}": schema["properties"].get(section, {}) for section in TOPOLOGY_SECTIONS}


def _leaves(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted name -> schema of each leaf of an object of settings (a section is an object with `properties`)."""
    out: dict[str, Any] = {}
    for name, sub in node.get("properties", {}).items():
        if "properties" in sub:
            out |= _leaves(sub, f"{prefix}{name}.")
        else:
            out[prefix + name] = sub
    return out


def _put(node: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value


def _json(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in sorted(value.items())}
    return value


def _without_nones(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    return value


def _spec() -> JobSpec:
    return JobSpec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))


def test_the_keys_mm2s_checkpoint_connector_reads_are_given_to_it():
    """Kafka's MirrorCheckpointConfig reads `offset-syncs.topic.location` (where it finds the offset syncs the source
    connector wrote) and the replication policy's keys; a Strimzi export with the syncs on the target must say so
    to the checkpoint connector too."""
    by_key = {k: s.mm2 for s in registry.mm2_settings() if s.mm2 for k in s.mm2.keys}
    for key in (
        "offset-syncs.topic.location",
        "replication.policy.class",
        "replication.policy.separator",
        "replication.policy.internal.topic.separator.enabled",
    ):
        assert Connector.CHECKPOINT in by_key[key].connectors_of(key), key


# --- scopes: the lists of engine and deployment settings are derived from them --------------------------------------


def test_the_deployers_options_are_the_engine_and_deployment_settings_outside_the_spec():
    from reconciler.contract.deployers import DEPLOYMENT_OPTION_FIELDS
    from reconciler.deployer_kinds import DeployerKind

    assert set(DEPLOYMENT_OPTION_FIELDS) == {d.value for d in DeployerKind}
    assert DEPLOYMENT_OPTION_FIELDS["local"] == DEPLOYMENT_OPTION_FIELDS["spark-standalone"]
    assert DEPLOYMENT_OPTION_FIELDS["local"] == ("metrics_port", "metrics_bind", "engine")
    assert DEPLOYMENT_OPTION_FIELDS["kubernetes"] == (
        "namespace",
        "image",
        "service_account",
        "secret_name",
        "manifests_dir",
        "kubectl_apply",
        "metrics_port",
        "termination_grace_seconds",
        "engine",
    ), "the options a deployment recorded before: a change of this list restarts every kubernetes flow"
    for s in registry.scoped(Scope.ENGINE) + registry.scoped(Scope.DEPLOYMENT):
        for d in DeployerKind:
            given = s.path[-1] in DEPLOYMENT_OPTION_FIELDS[d]
            assert given == (d in s.deployers and s.spec_path is None and s.name != "job.deployer"), (s.name, d)


def test_the_engine_record_holds_the_engine_settings_the_spec_carries():
    """An engine's EngineRecord (contract/engine.py): its name, then the engine-scoped settings of the job spec."""
    from reconciler.contract.engine import EngineRecord

    fields = [f.name for f in dataclasses.fields(EngineRecord)]
    assert fields[0] == "name"
    assert (
        ["engine." + f for f in fields[1:]]
        == list(registry.engine_spec_paths())
        == [
            "engine.master",
            "engine.spark_conf",
        ]
    )


def test_what_replaces_an_engine_is_a_change_of_an_engine_setting():
    from reconciler.contract.deployers import replaces_engine
    from reconciler.deployers.kubernetes import FILE_OPTIONS

    assert replaces_engine("engine.spark_conf.spark.x", "local") and replaces_engine("engine.master", "kubernetes")
    assert replaces_engine("metrics_port", "local") and replaces_engine("metrics_bind", "spark-standalone")
    assert replaces_engine("image", "kubernetes") and replaces_engine("termination_grace_seconds", "kubernetes")
    # the flow's own settings restart it in place, in its engine, on every deployer
    for deployer in ("local", "kubernetes"):
        for change in ("engine.parallelism", "engine.offset_reset", "settings.policy.kind", "source", "engine"):
            assert not replaces_engine(change, deployer), (change, deployer)
    # the deployer's files, and a setting the deployer does not read
    assert not replaces_engine("manifests_dir", "kubernetes") and not replaces_engine("metrics_bind", "kubernetes")
    assert FILE_OPTIONS == {"manifests_dir", "kubectl_apply"}


def test_the_flows_of_an_engine_agree_on_the_settings_their_deployers_read():
    assert registry.agreed_job_fields(["local"]) == (
        "deployer",
        "master",
        "spark_conf",
        "metrics_port",
        "metrics_bind",
        "engine",
    )
    kube = registry.agreed_job_fields(["kubernetes"])
    assert {"image", "namespace", "manifests_dir", "kubectl_apply", "deployer", "master"} <= set(kube)
    assert "metrics_bind" not in kube  # ignored on kubernetes (a warning says so)
    assert set(registry.agreed_job_fields(["local", "kubernetes"])) == set(kube) | {"metrics_bind"}
    assert [s.name for s in FLOW_SETTINGS if s.scope is Scope.FLOW and s.path[-1] in kube] == []


# --- choices: one enum per choice setting ---------------------------------------------------------------------------


def _model_type(path: str) -> Any:
    """The model's type at a JobSpec path ("settings.heartbeats.location") or a JobSettings field ("job.deployer")."""
    import typing

    from reconciler.contract.spec import JobSpec

    tp: Any = JobSettings if path.startswith("job.") else JobSpec
    for part in path.split(".")[1 if path.startswith("job.") else 0 :]:
        tp = typing.get_type_hints(tp)[part]
    return tp


def test_each_choice_setting_takes_its_values_from_one_enum():
    from reconciler.topology.choices import OFFSET_RESET_ALIASES, OffsetReset

    plain = []
    for s in FLOW_SETTINGS:
        if s.type is not Type.CHOICE:
            assert s.choice_enum is None and s.choice_aliases == (), s.name
            continue
        assert s.choice_enum is not None, f"{s.name}: a choice setting names its enum (topology/choices.py)"
        values = [m.value for m in s.choice_enum]
        assert all(isinstance(v, str) for v in values) and list(s.choices) == [*values, *s.choice_aliases], s.name
        assert s.default in values, s.name
        schema_enum = s.json_schema()["enum"]
        assert schema_enum == list(s.choices), s.name
        model = _model_type(s.spec_path or s.name)
        if model is not s.choice_enum:
            plain.append(s.name)
    # the model keeps these as the strings written: the deployer's name is an option value (YAML, records), and an
    # offset_reset alias is kept as written in the spec (its hash)
    assert plain == ["job.deployer", "job.offset_reset"]
    assert {OffsetReset.of(v) for v in registry.setting("job.offset_reset").choices} == set(OffsetReset)
    assert set(OFFSET_RESET_ALIASES) == set(registry.setting("job.offset_reset").choice_aliases)


def test_a_misspelt_choice_fails_instead_of_meaning_the_other():
    from reconciler.topology.build import default_flow

    flow = default_flow()
    with pytest.raises(ValueError):
        dataclasses.replace(flow, on_refused_record="skpi")
    assert dataclasses.replace(flow, on_refused_record="skip").on_refused_record is OnRefusedRecord.SKIP
