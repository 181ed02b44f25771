"""Credentials that change while replication runs (issue 45), end to end: an engine copies an exactly-once flow
whose clusters' credentials are files of RECONCILER_SECRETS_DIR (as a mounted Kubernetes Secret is); the files are
rewritten while a producer keeps writing; the engine sees each change within a minute, without a restart of its
process (the flow restarts in place, its clients made again), and the target holds every record once, in order.

The embedded brokers enforce no authentication, so the credential is `sasl.username` (a setting a reference may
stand in, ignored by a PLAINTEXT connection): what the test observes is that the engine noticed it, reconnected and
copied on; that a broker refuses the old credential and accepts the new one needs an enforcing broker (SASL/SCRAM
or mTLS), not available here."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import reconciler.deployers.instance as instance
from reconciler.deployers.local import LocalDeployer
from tests.integration.mirror_helpers import SequencedProducer, count_topic, create_topic, wait_for
from tests.integration.test_engines import _no_duplicates, _running, _status
from tests.integration.test_jobs_apply import Env

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: rotation-it}}
clusters:
  west: {{bootstrap_servers: "{west}", config: {{sasl.username: "${{WEST_SASL_USERNAME}}"}}}}
  east: {{bootstrap_servers: "{east}", config: {{sasl.username: "${{EAST_SASL_USERNAME}}"}}}}
defaults:
  sync: {{acls: false}}
  refresh_interval_seconds: 1
  heartbeats: {{interval_seconds: 1}}
  checkpoints: {{interval_seconds: 1}}
  job: {{deployer: local, master: "local[1]", parallelism: 1, trigger_interval_ms: 100}}
flows:
  - {{source: west, target: east, topics: {{include: ["orders"]}}, delivery: exactly-once}}
"""
FLOW = "west->east"
RECONNECT = "credentials of cluster '{alias}' changed: reconnecting"


def _log(state_dir: Path) -> str:
    try:
        return (state_dir / "engines" / "east" / "job.log").read_text(errors="replace")
    except OSError:
        return ""


def _rotate(env: Env, state_dir: Path, path: Path, line: str, pid: int | None, instance_id: str | None) -> None:
    """Rewrite a credential file as the kubelet updates a mounted Secret (one rename); the engine logs `line`, the
    flow restarts in place in the same process within a minute, and copies on."""
    before, log_before = _status(env.east, FLOW), len(_log(state_dir))
    copied = count_topic(env.east, "west.orders", 2)
    staged = path.with_name(f".{path.name}.new")
    staged.write_text("mirror-2026-02\n")
    os.replace(staged, path)
    rotated_at = time.monotonic()
    wait_for(lambda: line in _log(state_dir)[log_before:], 60, what=f"the engine logs {line!r}")
    restarted = wait_for(
        lambda: (
            s if (s := _status(env.east, FLOW)).state_name == "running" and s.started_at != before.started_at else None
        ),
        60,
        what="the flow restarted in place",
    )
    assert time.monotonic() - rotated_at < 60, "reconnected within a minute"
    assert restarted.pid == pid and restarted.instance_id == instance_id, "the same engine process"
    wait_for(lambda: count_topic(env.east, "west.orders", 2) > copied, 60, what="copying on after the rotation")


def test_a_rotated_credential_file_reconnects_an_exactly_once_flow_without_restarting_the_engine(
    fresh_clusters, tmp_path, capsys, state_dir, monkeypatch
):
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "WEST_SASL_USERNAME").write_text("mirror-2026-01\n")
    (secrets_dir / "EAST_SASL_USERNAME").write_text("mirror-2026-01\n")
    monkeypatch.setenv("RECONCILER_SECRETS_DIR", str(secrets_dir))  # the CLI's and the engine's (inherited)
    env = Env(fresh_clusters, tmp_path, capsys)
    env.path.write_text(TOPOLOGY.format(west=env.west, east=env.east))
    create_topic(env.west, "orders", 2)
    deployer = LocalDeployer(root=state_dir)
    producer = SequencedProducer(env.west, "orders", 2, 6_000, 100.0)  # about a minute of records
    try:
        out = env.apply()
        assert f"+ deploy job {FLOW} (engine east, local" in out, out
        producer.start()
        first = _running(env.east, FLOW)
        assert first.delivery == "exactly-once"
        wait_for(lambda: count_topic(env.east, "west.orders", 2) >= 300, 120, what="records copied")
        pid = first.pid

        for alias, name in (("east", "EAST_SASL_USERNAME"), ("west", "WEST_SASL_USERNAME")):
            _rotate(env, state_dir, secrets_dir / name, RECONNECT.format(alias=alias), pid, first.instance_id)

        text = _log(state_dir)
        assert "mirror-2026-02" not in text and "mirror-2026-01" not in text, "no credential in the engine's log"
        producer.join(180)
        assert producer.error is None
        _no_duplicates(env.east, "west.orders", producer)  # 0 missing, 0 duplicates, in order
        assert _status(env.east, FLOW).pid == pid
    finally:
        producer.stop(5)
        deployer.stop_all()
        if os.environ.get("SHOW_OUTPUT"):
            print("\n".join(env.outputs))
            print(_log(state_dir)[-20_000:])
    assert instance.scan(under=state_dir.resolve()) == []
