"""One verdict on a job, everywhere (issue 37), on real brokers and a real engine run by the local deployer.

A killed engine's last status record still says `running` (a process killed with SIGKILL writes no final
status); the deployment says the process is gone. `plan`, and drift's items, its flows table, its JSON and its
Prometheus output all say the job is down, from that one verdict, without waiting for the record to go stale.
A second instance of the flow's job (a leftover the reconciler did not start) is `duplicated` in each alike. Either
way the plan replaces the flow's engine (`replace_engine`), the flow listed in it with its state.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

import reconciler.deployers.instance as instance
from reconciler.deployers.instance import Role
from reconciler.deployers.local import LocalDeployer
from reconciler.deployers.process import LocalJob
from tests.integration.mirror_helpers import count_topic, create_topic, wait_for
from tests.integration.test_jobs_apply import Env, _produce
from tests.unit.test_drift_prometheus import samples

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.jobs]
FLOW = "west->east"


def _drift(env: Env) -> dict:
    """What each part of `drift` says of the flow's job, and what `plan` says."""
    code, out = env.run("drift", "TOPO", "--format", "json")
    doc = json.loads(out[: out.rindex("}") + 1])
    [flow] = [f for f in doc["flows"] if f["flow"] == FLOW]
    _, text = env.run("drift", "TOPO")
    [row] = [line for line in text.splitlines() if line.strip().startswith(FLOW + " ")]
    _, prom = env.run("drift", "TOPO", "--format", "prometheus")
    found = samples(prom[: prom.rindex("\n") + 1])
    [replace] = [a for a in env.plan()["actions"] if a["kind"] == "replace_engine"] or [None]
    return {
        "code": code,
        "job": flow["job"],
        "items": [i for i in doc["items"] if i["category"] == "job" and FLOW in i["flows"]],
        "row": row,
        "verdicts": [s.labels["verdict"] for s in found["reconciler_drift_job_verdict"] if s.labels["flow"] == FLOW],
        "up": [s.value for s in found["reconciler_drift_job_up"] if s.labels["flow"] == FLOW],
        "plan": _flow_of(replace),
    }


def _flow_of(action: dict | None) -> dict | None:
    """The flow's entry in an engine replacement (its engine holds this one flow: a killed or duplicated engine is
    replaced as a whole)."""
    if action is None:
        return None
    assert action["kind"] == "replace_engine", action
    [flow] = [e for e in action["restarts"] if e["flow"] == FLOW]
    return flow


def test_a_killed_engine_is_down_and_a_second_instance_duplicated_in_plan_and_every_part_of_drift(
    fresh_clusters, tmp_path, capsys, state_dir
):
    env = Env(fresh_clusters, tmp_path, capsys)
    create_topic(env.west, "orders", 2)
    _produce(env.west, "orders", 200)
    env.write(topics='["orders"]')
    deployer = LocalDeployer()
    stray = None
    try:
        env.apply()
        wait_for(lambda: env.status().state_name == "running", 120, what=f"the job running (log: {env.log()})")
        running = _drift(env)
        assert running["job"]["verdict"] == "running" and running["verdicts"] == ["running"] and running["up"] == [1]
        assert running["items"] == [] and running["plan"] is None, running

        # --- the engine's driver killed: down at once, from the deployment, in every part ---------------------
        driver = next(p for p in deployer._processes(FLOW) if p.role is Role.DRIVER)
        os.kill(driver.pid, signal.SIGKILL)
        wait_for(lambda: instance.scan(under=state_dir.resolve()) == [], 60, what="every process of the engine gone")
        down = _drift(env)
        assert down["code"] == 2, down
        assert down["plan"] is not None and down["plan"]["state"] == "down", down["plan"]
        assert "killed by SIGKILL" in down["plan"]["reason"], down["plan"]
        assert [_flow_of(i["action"])["state"] for i in down["items"]] == ["down"], down["items"]
        assert down["job"]["verdict"] == "down" and down["job"]["running"] is False, down["job"]
        assert down["job"]["state"] == "running", "the killed engine's last record still says running"
        assert " down (last: running" in down["row"], down["row"]
        assert down["verdicts"] == ["down"] and down["up"] == [0], down

        # --- restarted, then a second instance the reconciler did not start: duplicated in every part ---------
        env.apply()
        wait_for(
            lambda: (lambda d: d is not None and d.alive and not d.strays)(deployer.inspect(FLOW)),
            60,
            what="the restarted engine",
        )
        wait_for(lambda: _drift(env)["job"]["verdict"] == "running", 120, what=f"running again (log: {env.log()})")
        job_dir = deployer.job_dir(FLOW)
        spec = deployer.inspect(FLOW).spec
        stray = LocalJob.start(spec, job_dir, spec_path=job_dir / "spec.json", log_path=tmp_path / "stray.log")
        wait_for(lambda: stray.driver_pids(), 60, what="the second instance's driver")
        dup = _drift(env)
        assert dup["plan"] is not None and dup["plan"]["state"] == "duplicated", dup["plan"]
        assert [_flow_of(i["action"])["state"] for i in dup["items"]] == ["duplicated"], dup["items"]
        assert dup["job"]["verdict"] == "duplicated" and "instances of flow west->east run" in dup["job"]["why"]
        assert " duplicated" in dup["row"], dup["row"]
        assert dup["verdicts"] == ["duplicated"] and dup["up"] == [0], dup

        # apply ends every instance and starts one; it copies
        env.apply()
        _produce(env.west, "orders", 10)
        wait_for(lambda: count_topic(env.east, "west.orders", 2) >= 210, 120, what="replicating after the restart")
    finally:
        deployer.stop_all()
        if stray is not None:
            stray.kill()
    assert instance.scan(under=state_dir.resolve()) == []
