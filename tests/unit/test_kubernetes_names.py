"""Issue 45: Kubernetes names a topology sets are DNS-1123 names, refused at validation with their position; a
service account or namespace that is legal but risky is a warning."""

import pytest

from reconciler.topology.schema import schema_json
from tests.helpers import diagnose, rendered_errors, write


def doc(tmp_path, job: str, defaults: str = ""):
    return write(
        tmp_path,
        "t.yaml",
        f"""\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          west: {{bootstrap_servers: "127.0.0.1:1"}}
          east: {{bootstrap_servers: "127.0.0.1:2"}}
        {defaults}flows:
          - source: west
            target: east
            job: {{deployer: kubernetes, image: "img:1", {job}}}
        """,
    )


@pytest.mark.parametrize(
    "key, value, what",
    [
        ("namespace", "../../Kube_System!", "DNS-1123 label"),
        ("namespace", "a" * 64, "64 characters long"),
        ("namespace", "my.ns", "DNS-1123 label"),
        ("namespace", "-ns", "DNS-1123 label"),
        ("service_account", "../../Kube_System!", "DNS-1123 subdomain"),
        ("service_account", "Mirror", "DNS-1123 subdomain"),
        ("service_account", ("a" * 60 + ".") * 4 + "a" * 20, "264 characters long"),
        ("secret_name", "../../Kube_System!", "DNS-1123 subdomain"),
        ("secret_name", "", "DNS-1123 subdomain"),
    ],
)
def test_kubernetes_names_are_dns_1123_names(tmp_path, key, value, what):
    f = doc(tmp_path, f'{key}: "{value}"')
    lines = rendered_errors(diagnose(f))
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{f}:9:") and f"flows[0].job.{key}" in lines[0] and what in lines[0]


@pytest.mark.parametrize(
    "job", ['namespace: "mirror-prod"', 'service_account: "spark.mirror-driver"', 'secret_name: "a.b-c"']
)
def test_good_kubernetes_names_are_accepted(tmp_path, job):
    diags = diagnose(doc(tmp_path, job))
    assert rendered_errors(diags) == [] and not diags.warnings


@pytest.mark.parametrize(
    "job, said",
    [
        ('service_account: "default"', "the namespace's default service account"),
        ('service_account: "cluster-admin"', "cluster-admin ClusterRole"),
        ('namespace: "kube-system"', "namespace of the cluster's own components"),
        ('metrics_bind: "127.0.0.1"', "is ignored on kubernetes"),
    ],
)
def test_risky_but_legal_names_are_warnings_at_their_position(tmp_path, job, said):
    f = doc(tmp_path, job)
    diags = diagnose(f)
    assert rendered_errors(diags) == []
    [warning] = diags.warnings
    assert said in warning.message and warning.where.line == 9


def test_a_risky_name_in_defaults_is_said_once_at_its_place(tmp_path):
    defaults = 'defaults: {job: {service_account: "default"}}\n        '
    f = doc(tmp_path, 'namespace: "mirror"', defaults)
    [warning] = diagnose(f).warnings
    assert warning.where.line == 6


def test_the_schema_carries_the_rules_for_editors():
    job = schema_json()["$defs"]["flowSettings"]["properties"]["job"]["properties"]
    assert job["namespace"]["maxLength"] == 63 and job["service_account"]["maxLength"] == 253
    assert job["secret_name"]["pattern"] == job["service_account"]["pattern"]
