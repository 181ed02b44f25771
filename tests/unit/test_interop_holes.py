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


def test_strimzi_long_name_in_an_error_is_cut(tmp_path, capsys):
    """Every import error is printed through PropertiesError.render, which cuts quoted values (found by the long
    property run: a 100,000-character alias without bootstrapServers was echoed whole, twice)."""
    alias = "\u00e9" * 100_000
    text = _mutate("    - alias: b\n      bootstrapServers: b:9092\n", f"    - alias: {alias}\n")
    rc, out, err, src = _import(tmp_path, capsys, "strimzi", text)
    assert rc == 1 and err.startswith(f"{src}:"), err[:300]
    assert "has no bootstrapServers" in err and "(100,000 chars)" in err and len(err) < 2_000, err[:300]


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


# --- import mm2: linear, cycles, long values, the real line ---------------------------------------

MM2 = "clusters = a, b\na.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\na->b.enabled = true\n"


def _clusters(n: int) -> str:
    lines = ["clusters = " + ", ".join(f"c{i}" for i in range(n)), "topics.exclude = .*[.].*"]
    lines += [f"c{i}.bootstrap.servers = h{i}:9092" for i in range(n)]
    lines += [f"c{i}->c{i + 1}.enabled = true" for i in range(0, n - 1, 4)]
    return "\n".join(lines) + "\n"


def test_mm2_import_is_linear_in_the_number_of_clusters(tmp_path, capsys):
    """10k clusters took 9 s and 100k more than 120 s (alias matching per key, flow checks per flow)."""
    import time

    def cpu(n: int) -> float:
        start = time.process_time()
        rc, _, err, _ = _import(tmp_path, capsys, "mm2", _clusters(n))
        assert rc == 0, err[:500]
        return time.process_time() - start

    small, large = cpu(500), cpu(4000)
    assert large < 24 * max(small, 0.05), (small, large)  # linear: about 8x; quadratic: 64x


@pytest.mark.parametrize(
    "refs, line, chain",
    [
        ("a.x = ${b.y}\nb.y = ${a.x}\n", 5, "a.x (line 5) -> b.y (line 6) -> a.x"),
        ("zz = 1\nself = x${self}y\n", 6, "self (line 6) -> self"),
        ("p = ${q}\nq = ${r}, ${p}\nr = 1\n", 5, "p (line 5) -> q (line 6) -> p"),
    ],
)
def test_mm2_cyclic_reference_is_an_error_naming_keys_and_line(tmp_path, capsys, refs, line, chain):
    rc, out, err, src = _import(tmp_path, capsys, "mm2", MM2 + refs)
    assert rc == 1 and out == ""
    assert err.startswith(f"{src}:{line}: error: cyclic reference: {chain}\n"), err


def test_mm2_long_reference_chain_is_no_recursion(tmp_path, capsys):
    n = 100_000
    refs = "".join(f"k{i} = ${{k{(i + 1) % n}}}\n" for i in range(n))
    rc, _, err, src = _import(tmp_path, capsys, "mm2", MM2 + refs)
    assert rc == 1
    assert err.startswith(f"{src}:5: error: cyclic reference: k0 (line 5) -> k1 (line 6) -> "), err[:300]
    assert f"-> ... ({n - 6:,} more) -> k{n - 1} (line {n + 4}) -> k0\n" in err
    assert len(err) < 1000 and "Traceback" not in err
    assert "Traceback" not in err


def test_mm2_reference_in_client_id_is_refused(tmp_path, capsys):
    rc, _, err, src = _import(tmp_path, capsys, "mm2", MM2 + "x = 1\nclient.id = ${x}\n")
    # client.id is sent to the broker as it is: a reference there could send a secret in clear text
    assert rc == 1 and "client.id: ${" in err and "is not allowed here" in err, err


def test_mm2_long_key_is_cut_in_messages(tmp_path, capsys):
    key = "k" * 10_000_000
    rc, out, err, src = _import(tmp_path, capsys, "mm2", MM2 + f"{key} = 1\n")
    assert rc == 0
    assert f"{src}:5: warning: {'k' * 200}... (10,000,000 chars): unknown key" in err
    assert len(err) < 2000 and len(out) < 5000  # the header of the YAML lists the warning too


@pytest.mark.parametrize("key", ["a->b.tasks.max", "a->b.topics", "a.ssl.truststore.location", "unknown"])
def test_mm2_error_in_a_long_value_is_at_its_line(tmp_path, capsys, key):
    rc, out, err, src = _import(tmp_path, capsys, "mm2", MM2 + "\n\n" + f"{key} = {'9' * 10_000_000}x\n")
    assert rc == 1 and out == ""
    assert err.startswith(f"{src}:7: error: the value of {key} has 10,000,001 characters (limit 100,000"), err
    assert len(err) < 1000


def test_mm2_long_value_in_a_message_is_cut(tmp_path, capsys):
    rc, _, err, src = _import(tmp_path, capsys, "mm2", MM2 + f"a->b.tasks.max = {'9' * 50_000}x\n")
    assert rc == 1
    assert err.startswith(f"{src}:5: error: a->b.tasks.max must be an integer, not '{'9' * 200}... (50,001 chars)'")


def test_mm2_topology_error_is_at_the_line_of_the_setting(tmp_path, capsys):
    """Errors found by validating the imported topology (never written) point at the input's line."""
    text = MM2 + "\n\na->b.topics = ok, (bad\n"
    rc, out, err, src = _import(tmp_path, capsys, "mm2", text, "--out", str(tmp_path / "out"))
    assert rc == 1 and out == ""
    assert err.startswith(f"{src}:7: error: pattern '(bad' does not compile"), err
    assert "<imported topology>" not in err
    assert not (tmp_path / "out").exists()
    loop = MM2 + "replication.policy.class = IdentityReplicationPolicy\nb->a.enabled = true\n"
    rc, _, err, src = _import(tmp_path, capsys, "mm2", loop)
    assert rc == 1
    assert "replication loop" in err and f"a->b at {src}:4, b->a at {src}:6" in err, err


# --- export / import --out: written atomically, or one line naming the path and the reason ----------

UNWRITABLE = ["/proc/x", "/sys/x", "/proc/no-such-dir/x", "/sys/kernel/no-such-dir/x"]


def _demo() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2] / "topologies" / "demo")


@pytest.mark.parametrize("fmt", ["mm2", "strimzi"])
@pytest.mark.parametrize("out", UNWRITABLE)
def test_export_to_an_unwritable_path_is_one_line(capsys, fmt, out):
    assert main(["export", fmt, _demo(), "--out", out]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: cannot write {out!r}: ") and captured.err.count("\n") == 1, captured.err
    assert captured.out == ""


@pytest.mark.parametrize("out", UNWRITABLE)
def test_import_out_to_an_unwritable_directory_is_one_line(tmp_path, capsys, out):
    rc, stdout, err, _ = _import(tmp_path, capsys, "mm2", MM2, "--out", out)
    assert rc == 1 and stdout == ""
    assert err.startswith(f"error: cannot write '{out}/topology.yaml': ") and err.count("\n") == 1, err


def test_export_creates_missing_directories_and_leaves_no_temporary_file(tmp_path, capsys):
    out = tmp_path / "new" / "dir" / "mm2.properties"
    assert main(["export", "mm2", _demo(), "--out", str(out)]) == 0
    assert "clusters = " in out.read_text()
    assert [p.name for p in out.parent.iterdir()] == ["mm2.properties"]
    out.write_text("old\n")
    assert main(["export", "mm2", _demo(), "--out", str(out)]) == 0  # replaced whole
    assert out.read_text().startswith("#") and [p.name for p in out.parent.iterdir()] == ["mm2.properties"]


def test_write_that_fails_leaves_nothing_behind(tmp_path):
    from reconciler import outputs

    with pytest.raises(outputs.OutputError, match=r"^error: cannot write '.*/new/a\\x00b': embedded null byte$"):
        outputs.write_text(tmp_path / "new" / "a\0b", "text")  # `new` is created, then the write fails
    assert list(tmp_path.iterdir()) == []  # `new` removed again


@pytest.mark.skipif(__import__("os").geteuid() == 0, reason="root writes into a read-only directory")
def test_export_into_a_read_only_directory_keeps_the_old_file(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "mm2.properties").write_text("old\n")
    ro.chmod(0o555)
    try:
        assert main(["export", "mm2", _demo(), "--out", str(ro / "mm2.properties")]) == 1
        assert "Permission denied" in capsys.readouterr().err
        assert (ro / "mm2.properties").read_text() == "old\n" and len(list(ro.iterdir())) == 1
    finally:
        ro.chmod(0o755)


# --- show: a damaged saved plan is a clear error, exit 1, in both formats -------------------------


def _saved_plan(tmp_path) -> tuple[str, dict]:
    import json

    from reconciler.plan import planfile
    from tests.plan_helpers import World, topology

    world = World(topology("flows:\n  - source: west\n    target: east\n    topics: {include: [orders]}\n"))
    world["west"].add_topic("orders", 1)
    path = tmp_path / "plan.json"
    key = planfile.PlanKey("RECONCILER_PLAN_KEY", "test-plan-key-0123456789abcdef")
    planfile.save(path, world.plan(), world.topology, key, revision="abc123")
    return str(path), json.loads(path.read_text())


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_show_of_a_good_saved_plan(tmp_path, capsys, fmt):
    path, _ = _saved_plan(tmp_path)
    assert main(["show", path, "--format", fmt]) == 0
    assert "abc123" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize(
    "saved_at, shown",
    [(1e300, "1e+300"), ("yesterday", "'yesterday'"), (-5, "-5"), (True, "True"), ([1], "[1]"), (None, "None")],
)
def test_show_refuses_a_saved_at_that_is_not_a_time(tmp_path, capsys, fmt, saved_at, shown):
    import json

    path, doc = _saved_plan(tmp_path)
    doc["saved_at"] = saved_at
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    assert main(["show", path, "--format", fmt]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: plan file {path}: damaged saved plan: saved_at {shown} is not a time " + (
        "(seconds since 1970, as `plan --out` writes); plan again\n"
    )
    assert captured.out == ""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_show_of_a_plan_nested_100k_deep_is_an_error(tmp_path, capsys, fmt):
    path, _ = _saved_plan(tmp_path)
    deep = '{"kind": "reconciler-saved-plan", "plan": ' + "[" * 100_000 + "]" * 100_000 + "}"
    (tmp_path / "plan.json").write_text(deep)
    assert main(["show", path, "--format", fmt]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: plan file {path}: damaged saved plan: nested too deeply to be a plan; plan again\n"
    assert captured.out == ""


def test_show_refuses_other_damage_in_one_line(tmp_path, capsys):
    import json

    path, doc = _saved_plan(tmp_path)
    for key, value in (("revision", {"a": 1}), ("git", "x" * 1000), ("kind", "k" * 1_000_000)):
        bad = dict(doc, **{key: value})
        bad.setdefault("note", "reconciler-saved-plan")  # still looks like a plan file
        (tmp_path / "plan.json").write_text(json.dumps(bad))
        assert main(["show", path]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: plan file {path}: ") and err.count("\n") == 1 and len(err) < 500, err


def test_an_input_larger_than_any_configuration_is_one_line_not_gigabytes(tmp_path, capsys):
    """A 60 MB properties file took 1 GB to parse (the property-based run's finding); a topology of that size took
    minutes in the YAML parser. Inputs past MAX_INPUT_BYTES are refused before parsing, naming the file."""
    from reconciler.cli.main import main
    from reconciler.topology.loader import MAX_INPUT_BYTES

    big = tmp_path / "big.properties"
    big.write_bytes(b"clusters = a\n# " + b"x" * MAX_INPUT_BYTES + b"\n")
    assert main(["import", "mm2", str(big)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{big}:1: error: cannot read file: the file is larger than 16 MiB") and len(err) < 500
    topo = tmp_path / "big.yaml"
    topo.write_bytes(b"apiVersion: reconciler/v1\n# " + b"x" * MAX_INPUT_BYTES + b"\n")
    assert main(["validate", str(topo)]) == 1
    err = capsys.readouterr()
    assert "larger than 16 MiB" in err.out + err.err and len(err.out + err.err) < 2000
