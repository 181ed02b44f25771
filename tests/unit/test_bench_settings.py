"""bench/common.py `parse_settings`: the benchmarks' KEY=VALUE options (`--job`, `bench/mesh.py --set`) as topology
settings, and the mesh's topology built with them."""

from __future__ import annotations

import yaml

from bench.common import parse_job, parse_settings
from bench.mesh import topology


def test_dotted_keys_nest_and_values_read_as_yaml():
    got = parse_settings(["heartbeats.interval_seconds=10", "sync.group_offsets=true", "job.master=local[2]"])
    assert got == {
        "heartbeats": {"interval_seconds": 10},
        "sync": {"group_offsets": True},
        "job": {"master": "local[2]"},
    }


def test_job_settings_stay_flat():
    assert parse_job(["parallelism=2", "trigger_interval_ms=-1", "master=local[2]"]) == {
        "parallelism": 2,
        "trigger_interval_ms": -1,
        "master": "local[2]",
    }


def test_the_mesh_merges_a_set_job_setting_into_its_own():
    doc = yaml.safe_load(topology({"r0": "127.0.0.1:1", "r1": "127.0.0.1:2"}, ["job.master=local[2]", "x.y=1"]))
    assert doc["defaults"]["job"] == {"deployer": "local", "master": "local[2]"}
    assert doc["defaults"]["x"] == {"y": 1}
    assert doc["defaults"]["replication_factor"] == 1
