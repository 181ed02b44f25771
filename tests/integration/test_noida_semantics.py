"""What Tansu cannot show, shown end to end on noida-db (issue 22): a source topic grows from 2 to 4 partitions;
the plan shows the remote topic growing, apply grows it in place (CreatePartitions), and the running job copies
into the new partitions, each record to the partition of the same number. ACL sync against a broker without an
authorizer is a finding, not a failed apply."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from reconciler import logs
from reconciler.cli.main import main
from reconciler.deployers.local import LocalDeployer
from tests.integration.mirror_helpers import create_topic, read_topic, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.jobs, pytest.mark.noida]

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: noida-it}}
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
defaults:
  refresh_interval_seconds: 10  # the job's own partition growth (MM2's) comes after apply's here
  job: {{deployer: local, master: "local[1]", parallelism: 1, max_batch_ms: 1000}}
flows:
  - {{source: west, target: east, topics: {{include: [orders]}}}}
"""


def produce(bootstrap: str, partitions: range, per_partition: int, tag: str) -> None:
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    for part in partitions:
        for i in range(per_partition):
            p.produce("orders", f"{tag}-{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0


def test_a_source_topic_grown_is_planned_grown_in_place_and_copied_into(noida_clusters, tmp_path, capsys, state_dir):
    west, east = noida_clusters
    create_topic(west.bootstrap, "orders", 2)
    path = tmp_path / "topology.yaml"
    path.write_text(TOPOLOGY.format(west=west.bootstrap, east=east.bootstrap))

    def cli(*args: str) -> tuple[int, str]:
        code = main([args[0], str(path), *args[1:]])
        out, err = capsys.readouterr()
        return code, out + err

    try:
        code, out = cli("apply", "--auto-approve")
        assert code == 0 and "+ create topic west.orders (2 partitions" in out, out
        assert "ACL" not in out or "not enabled" in out, out  # no authorizer: at most a finding
        produce(west.bootstrap, range(2), 100, "before")
        wait_for(lambda: sum(map(len, read_topic(east.bootstrap, "west.orders", 2).values())) >= 200, 120)

        admin = AdminClient(logs.client_config({"bootstrap.servers": west.bootstrap}))
        admin.create_partitions([NewPartitions("orders", 4)])["orders"].result(15)
        code, out = cli("plan", "--detailed-exitcode")
        assert code == 2 and "add partitions to west.orders: 2 -> 4" in out, out
        code, out = cli("apply", "--auto-approve")
        assert code == 0 and "add partitions to west.orders: 2 -> 4" in out, out
        remote = (
            AdminClient(logs.client_config({"bootstrap.servers": east.bootstrap}))
            .list_topics(timeout=10)
            .topics["west.orders"]
        )
        assert len(remote.partitions) == 4, "grown in place, not recreated"

        produce(west.bootstrap, range(4), 100, "after")

        def new_partitions_copied():
            got = read_topic(east.bootstrap, "west.orders", 4)
            return got if all(len(got[p]) >= 100 for p in (2, 3)) else None

        got = wait_for(new_partitions_copied, 120, what="records of the new partitions on the target")
        for p in range(4):  # each record in the partition of its number, nothing twice
            values = [r.value.decode() for r in got[p]]
            assert all(v.split("-")[1] == str(p) for v in values), values[:5]
            assert len(values) == len(set(values)) == (200 if p < 2 else 100), (p, len(values))
        code, out = cli("plan", "--detailed-exitcode")
        assert code == 0, out
    finally:
        LocalDeployer().stop_all()
