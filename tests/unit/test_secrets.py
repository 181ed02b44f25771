import pytest

from reconciler.topology import secrets


def test_secret_keys_detected():
    for key in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret", "basic.auth.user.info"):
        assert secrets.is_secret_key(key), key
    assert not secrets.is_secret_key("security.protocol")


def test_resolve_reports_every_missing_variable():
    env = {"A": "alpha"}
    assert secrets.resolve("x-${A}-y", env) == "x-alpha-y"
    with pytest.raises(secrets.UnresolvedReference) as exc:
        secrets.resolve_config({"a": "${MISSING1}", "b": "${A}", "c": "${MISSING2}"}, env)
    assert exc.value.names == ["MISSING1", "MISSING2"]


def test_redactor_hides_resolved_values():
    r = secrets.Redactor()
    r.add_from({"sasl.password": "${PW}"}, {"PW": "s3cr3t-value"})
    assert r("connect failed with s3cr3t-value") == "connect failed with ***"


# --- the reference rule (issue 44/45): where `${NAME}` may stand and which variables it may read ---------

TOPO = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west: {{bootstrap_servers: "127.0.0.1:1"}}
  east:
    bootstrap_servers: "{boot}"
    config: {config}
flows:
  - source: west
    target: east
{job}
"""


def _errors(config: str, boot: str = "127.0.0.1:2", job: str = "") -> str:
    from reconciler.topology.build import load_topology_text
    from reconciler.topology.diagnostics import TopologyError

    try:
        load_topology_text(TOPO.format(config=config, boot=boot, job=job), "t.yaml")
    except TopologyError as exc:
        return exc.diagnostics.render()
    return ""


def test_literal_secrets_are_refused_where_the_old_rule_did_not_look():
    for key in ("ssl.key.pem", "sasl.oauthbearer.config", "ssl.keystore.key", "sasl.password"):
        assert secrets.is_secret_key(key), key
        assert "is a literal secret" in _errors(f'{{{key}: "abc"}}'), key
    for key in ("sasl.username", "ssl.ca.location", "security.protocol", "client.id"):
        assert not secrets.is_secret_key(key), key


def test_a_reference_in_a_setting_sent_to_the_broker_is_refused_naming_the_key():
    err = _errors('{client.id: "${EAST_PW}", sasl.password: "${EAST_PW}"}')
    assert "t.yaml:7:" in err and "client.id: ${EAST_PW} is not allowed here" in err, err
    assert "sasl.password" not in err


def test_a_cluster_reads_only_its_own_variables():
    err = _errors('{sasl.password: "${GITHUB_TOKEN}"}')
    assert "sasl.password: ${GITHUB_TOKEN} is not allowed: this cluster reads only variables named EAST_*" in err
    assert "EAST_GITHUB_TOKEN" in err  # the hint
    assert "WEST_PW" in _errors('{sasl.password: "${WEST_PW}"}'), "another cluster's variable"
    assert "${AWS_SECRET}" in _errors("{}", boot="${AWS_SECRET}.evil.example:9092")
    assert _errors('{sasl.password: "${EAST_PW}", sasl.username: "${EAST_USER}"}', boot="${EAST_BOOTSTRAP}") == ""


def test_the_edge_refuses_what_validation_refuses():
    """A job spec or any other caller goes through `client_settings`: the rule holds whatever validated it."""
    env = {"GITHUB_TOKEN": "ghp_secret", "EAST_PW": "pw"}
    with pytest.raises(secrets.RefusedReference):
        secrets.client_settings("east", "h:1", {"client.id": "${EAST_PW}"}, env)
    with pytest.raises(secrets.RefusedReference):
        secrets.client_settings("east", "h:1", {"sasl.password": "${GITHUB_TOKEN}"}, env)
    conf = secrets.client_settings("east", "h:1", {"sasl.password": "${EAST_PW}"}, env)
    assert conf == {"sasl.password": "pw", "bootstrap.servers": "h:1"}


def test_spark_conf_follows_the_secrets_rule():
    job = "    job: {{spark_conf: {{{}}}}}"
    assert "is a literal secret" in _errors("{}", job=job.format('spark.authenticate.secret: "s3cr3t"'))
    assert "is not allowed here" in _errors("{}", job=job.format('spark.app.name: "${EAST_PW}"'))
    assert "not a variable of any cluster" in _errors("{}", job=job.format('spark.executorEnv.X: "${CI_TOKEN}"'))
    assert _errors("{}", job=job.format('spark.executorEnv.EAST_PW: "${EAST_PW}"')) == ""
    ref = "spark.kubernetes.driver.secretKeyRef.EAST_PW: 'mirror-secrets:pw'"
    assert _errors("{}", job=job.format(ref)) == ""


def test_the_engine_resolves_spark_conf_references_in_its_own_process(monkeypatch):
    from reconciler.engine.session import application_conf

    monkeypatch.setenv("EAST_PW", "pw-value")
    conf = application_conf("x", "local[1]", {"spark.executorEnv.EAST_PW": "${EAST_PW}"})
    assert conf["spark.executorEnv.EAST_PW"] == "pw-value"


def test_specs_and_engine_records_are_private(tmp_path):
    import stat

    from reconciler.contract.engine import write_json
    from reconciler.contract.spec import JobSpec
    from reconciler.topology.build import load_topology_text

    topo = load_topology_text(TOPO.format(config="{}", boot="127.0.0.1:2", job=""))
    spec = JobSpec.from_flow(topo, topo.flows[0])
    path = spec.write(tmp_path / "new" / "flow.json")
    write_json(tmp_path / "new" / "job.json", {"a": 1})
    for f in (path, tmp_path / "new" / "job.json"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
