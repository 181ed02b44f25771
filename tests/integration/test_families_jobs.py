"""Topic families end to end: one pair split into two named flows replicates both families, two flows of the
target's engine (local deployer, real Spark, Tansu brokers); overlapping families are refused."""

from __future__ import annotations

import os

import pytest

from reconciler.deployers.local import LocalDeployer
from reconciler.jobplan.backend import read_job_status
from tests.integration.mirror_helpers import count_topic, create_topic, wait_for
from tests.integration.test_jobs_apply import Env, _produce

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]

FAMILIES = """  - {source: west, target: east, name: orders, topics: {include: ["orders"]}}
  - {source: west, target: east, name: payments, topics: {include: ["payments", "refunds"]}}"""


def test_two_families_replicate_as_two_flows_of_one_engine(fresh_clusters, tmp_path, capsys, state_dir):
    env = Env(fresh_clusters, tmp_path, capsys)
    create_topic(env.west, "orders", 2)
    create_topic(env.west, "payments", 2)
    create_topic(env.west, "refunds", 1)
    _produce(env.west, "orders", 300)
    _produce(env.west, "payments", 200)
    env.write(flows=FAMILIES)
    try:
        deploys = env.job_actions()
        assert sorted((a["kind"], a["flow"]) for a in deploys) == [
            ("deploy_job", "west->east:orders"),
            ("deploy_job", "west->east:payments"),
        ]
        out = env.apply()
        assert "+ deploy job west->east:orders (engine east, local" in out
        assert "+ deploy job west->east:payments (engine east, local" in out
        wait_for(lambda: count_topic(env.east, "west.orders", 2) >= 300, 180, what="family orders replicated")
        wait_for(lambda: count_topic(env.east, "west.payments", 2) >= 200, 180, what="family payments replicated")

        def status(flow):
            return read_job_status({"bootstrap.servers": env.east}, flow, timeout=5)

        hashes = {a["flow"]: a["spec_hash"] for a in deploys}
        for flow in hashes:
            got = wait_for(
                lambda flow=flow: s if (s := status(flow)) and s.state_name == "running" else None,
                60,
                what=f"status of {flow}",
            )
            assert got.spec_hash == hashes[flow]
        engines = {flow: LocalDeployer().engines_of(flow) for flow in hashes}
        assert engines == {"west->east:orders": ["east"], "west->east:payments": ["east"]}, engines
        assert env.plan()["code"] == 0
        code, out = env.run("status", "TOPO")
        assert "west->east:orders" in out and "west->east:payments" in out
    finally:
        LocalDeployer().stop_all()
        if os.environ.get("SHOW_OUTPUT"):
            print("\n".join(env.outputs))


def test_overlapping_families_are_refused(fresh_clusters, tmp_path, capsys, state_dir):
    env = Env(fresh_clusters, tmp_path, capsys)
    env.write(flows=FAMILIES.replace('["payments", "refunds"]', '["payments", "orders"]'))
    code, out = env.run("plan", "TOPO")
    assert code == 1
    assert "topic families west->east:orders and west->east:payments overlap" in out and "'orders'" in out
    assert "nothing was changed" in out
