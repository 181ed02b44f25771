"""Issue 24, import/export/show: every bad input is a one-line error naming the file (and line), exit 1,
nothing written, within seconds. Run through the CLI entry point, as a user runs it."""

from __future__ import annotations

import pytest

from reconciler.cli.main import main

# --- import strimzi: a field of the wrong shape is an error at its line, never dropped ------------

STRIMZI = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: m
  annotations:
    other: x
spec:
  connectCluster: b
  clusters:
    - alias: a
      bootstrapServers: a:9093
      tls:
        trustedCertificates:
          - secretName: ca
            certificate: ca.crt
      authentication:
        type: scram-sha-512
        username: u
        passwordSecret:
          secretName: s
          password: p
      config:
        client.id: x
    - alias: b
      bootstrapServers: b:9092
  mirrors:
    - sourceCluster: a
      targetCluster: b
      topicsPattern: "t.*"
      sourceConnector:
        tasksMax: 2
        config:
          replication.factor: 1
      checkpointConnector:
        config:
          emit.checkpoints.interval.seconds: 10
"""


def _mutate(old: str, new: str) -> str:
    assert STRIMZI.count(old) == 1, old
    return STRIMZI.replace(old, new)


def _import(tmp_path, capsys, fmt: str, text: str, *extra: str) -> tuple[int, str, str, str]:
    src = tmp_path / "in.yaml"
    src.write_text(text, encoding="utf-8")
    rc = main(["import", fmt, str(src), *extra])
    out, err = capsys.readouterr()
    return rc, out, err, str(src)


def test_strimzi_base_resource_imports(tmp_path, capsys):
    rc, out, err, _ = _import(tmp_path, capsys, "strimzi", STRIMZI)
    assert rc == 0, err
    assert "bootstrap_servers: a:9093" in out


@pytest.mark.parametrize(
    "old, new, line, message",
    [
        # a list or a string where a mapping belongs (AttributeError before)
        (
            "      config:\n        client.id: x\n",
            "      config: [client.id]\n",
            22,
            "spec.clusters[0].config must be a mapping",
        ),
        ("      config:\n        client.id: x\n", "      config: client.id\n", 22, "not the string 'client.id'"),
        ("metadata:\n  name: m\n  annotations:\n    other: x\n", "metadata: [m]\n", 3, "metadata must be a mapping"),
        ("  annotations:\n    other: x\n", "  annotations: x\n", 5, "metadata.annotations must be a mapping"),
        (
            "        passwordSecret:\n          secretName: s\n          password: p\n",
            "        passwordSecret: [s, p]\n",
            19,
            "spec.clusters[0].authentication.passwordSecret must be a mapping (secretName: ..., password: ...)",
        ),
        (
            "        trustedCertificates:\n          - secretName: ca\n            certificate: ca.crt\n",
            "        trustedCertificates: ca.crt\n",
            13,
            "spec.clusters[0].tls.trustedCertificates must be a list",
        ),
        (
            "          - secretName: ca\n            certificate: ca.crt\n",
            "          - ca.crt\n",
            14,
            "spec.clusters[0].tls.trustedCertificates[0] must be a mapping",
        ),
        (
            "        config:\n          replication.factor: 1\n",
            "        config: [1]\n",
            32,
            "sourceConnector.config must",
        ),
        ("  clusters:\n", "  clusters: {}\n  old_clusters:\n", 9, "spec.clusters must be a list"),
        ("  mirrors:\n", "  mirrors: x\n  old_mirrors:\n", 26, "spec.mirrors must be a list"),
        # a list where a mapping belongs was dropped silently (credentials, CAs, connector settings lost)
        (
            "      authentication:\n        type: scram-sha-512\n        username: u\n",
            "      authentication:\n        - type: scram-sha-512\n          username: u\n      old:\n",
            17,
            "spec.clusters[0].authentication must be a mapping",
        ),
        (
            "      tls:\n        trustedCertificates:\n",
            "      tls:\n        - trustedCertificates:\n",
            13,
            "spec.clusters[0].tls must be a mapping",
        ),
        (
            "      sourceConnector:\n        tasksMax: 2\n        config:\n          replication.factor: 1\n",
            "      sourceConnector:\n        - tasksMax: 2\n          config:\n            replication.factor: 1\n",
            31,
            "spec.mirrors[0].sourceConnector must be a mapping",
        ),
        (
            "      checkpointConnector:\n",
            "      checkpointConnector: []\n      old:\n",
            34,
            "checkpointConnector must be",
        ),
        # scalars of the wrong shape, and what a reference needs
        (
            "      bootstrapServers: a:9093\n",
            "      bootstrapServers: [a:9093]\n",
            11,
            "bootstrapServers must be a string",
        ),
        ('      topicsPattern: "t.*"\n', "      topicsPattern: [t1, t2]\n", 29, "topicsPattern must be a string"),
        ("        tasksMax: 2\n", "        tasksMax: two\n", 31, "tasksMax must be an integer"),
        (
            "          replication.factor: 1\n",
            "          replication.factor: {a: 1}\n",
            33,
            "must be a string, a number",
        ),
        ("          password: p\n", "", 19, "passwordSecret needs `password`"),
        ("        username: u\n", "", 16, "authentication needs `username`"),
        ("        type: scram-sha-512\n", "", 16, "authentication needs `type`"),
        ("            certificate: ca.crt\n", "", 14, "trustedCertificates[0] needs `certificate`"),
        ("spec:\n  connectCluster: b\n", "spec:\n  target: b-cluster\n  connectCluster: b\n", 8, "spec.target must be"),
        ("    - sourceCluster: a\n", "    - source: a\n      sourceCluster: a\n", 27, "spec.mirrors[0].source must be"),
    ],
)
def test_strimzi_wrong_shape_is_an_error_at_its_line(tmp_path, capsys, old, new, line, message):
    rc, out, err, src = _import(tmp_path, capsys, "strimzi", _mutate(old, new), "--out", str(tmp_path / "out"))
    assert rc == 1
    assert err.startswith(f"{src}:{line}: error: "), err
    assert message in err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "out").exists()


def test_strimzi_tls_auth_needs_its_secret(tmp_path, capsys):
    text = _mutate(
        "        type: scram-sha-512\n        username: u\n        passwordSecret:\n"
        "          secretName: s\n          password: p\n",
        "        type: tls\n        certificateAndKey: {secretName: s, certificate: c}\n",
    )
    rc, _, err, src = _import(tmp_path, capsys, "strimzi", text)
    assert rc == 1
    assert err.startswith(f"{src}:18: error: spec.clusters[0].authentication.certificateAndKey needs `key`"), err


def test_strimzi_fields_not_read_are_warnings_not_dropped(tmp_path, capsys):
    text = _mutate("        tasksMax: 2\n", "        tasksMax: 2\n        autoRestart: {enabled: true}\n")
    rc, _, err, src = _import(tmp_path, capsys, "strimzi", text)
    assert rc == 0, err
    assert f"{src}:32: warning: a->b.sourceConnector.autoRestart" in err
