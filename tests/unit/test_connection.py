import pytest

from reconciler.topology.build import load_topology_text
from reconciler.topology.connection import check_references, client_config, redactor_for
from reconciler.topology.diagnostics import TopologyError

TOPO = """\
apiVersion: reconciler/v1
kind: Topology
clusters:
  west:
    bootstrap_servers: ${WEST_BOOTSTRAP}
    config: {security.protocol: SASL_SSL, sasl.username: mirror, sasl.password: "${WEST_PW}"}
  east: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: west, target: east}
"""


def test_validation_does_not_need_variables_but_connecting_does():
    topo = load_topology_text(TOPO, "t.yaml")  # no environment needed to validate
    diags = check_references(topo, environ={})
    [error] = diags.errors
    assert str(error.where) == "t.yaml:4:3"
    assert "WEST_BOOTSTRAP, WEST_PW" in error.message
    assert check_references(topo, ["east"], environ={}).ok


def test_client_config_resolves_and_redactor_hides_secrets():
    topo = load_topology_text(TOPO, "t.yaml")
    env = {"WEST_BOOTSTRAP": "10.0.0.1:9093", "WEST_PW": "p4ssw0rd!"}
    cfg = client_config(topo.clusters["west"], env)
    assert cfg == {
        "bootstrap.servers": "10.0.0.1:9093",
        "security.protocol": "SASL_SSL",
        "sasl.username": "mirror",
        "sasl.password": "p4ssw0rd!",
    }
    assert topo.clusters["west"].config["sasl.password"] == "${WEST_PW}", "the model keeps references"
    assert redactor_for(topo, env)(f"auth failed for {cfg}").count("p4ssw0rd!") == 0
    with pytest.raises(TopologyError):
        client_config(topo.clusters["west"], {})
