"""`reconciler dev up/down` starts real Kafka-protocol brokers that answer real client requests."""

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler import logs
from reconciler.cli.main import main
from reconciler.dev.brokers import Engine, free_port, pid_alive
from tests.helpers import write

pytestmark = pytest.mark.kafka


def _topology(tmp_path, ports, host="127.0.0.1"):
    return write(
        tmp_path,
        "t.yaml",
        f"""\
        apiVersion: reconciler/v1
        kind: Topology
        clusters:
          west: {{bootstrap_servers: "{host}:{ports[0]}"}}
          east: {{bootstrap_servers: "127.0.0.1:{ports[1]}"}}
        flows:
          - {{source: west, target: east}}
        """,
    )


@pytest.mark.parametrize("engine", ["tansu", "noida"])
def test_dev_up_is_idempotent_answers_kafka_and_down_stops(tmp_path, state_dir, capsys, engine):
    ports = (free_port(), free_port())
    f = _topology(tmp_path, ports)
    try:
        assert main(["dev", "up", str(f), "--engine", engine]) == 0
        out = capsys.readouterr().out
        assert out.count("started") == 2 and out.count(f"({Engine(engine).product})") == 2, out
        records = {p.stem: json.loads(p.read_text()) for p in (state_dir / "dev").glob("*.json")}
        assert set(records) == {"west", "east"} and all(pid_alive(r["pid"]) for r in records.values())
        assert {r["engine"] for r in records.values()} == {engine}

        # a real Kafka round trip on the west broker: create, produce with key/headers/timestamp, consume
        bootstrap = f"127.0.0.1:{ports[0]}"
        topic = f"dev-{uuid.uuid4().hex[:8]}"
        admin = AdminClient(
            logs.client_config({"bootstrap.servers": bootstrap})
        )  # keep a reference: the futures need the handle
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
        producer = Producer(logs.client_config({"bootstrap.servers": bootstrap}))
        producer.produce(topic, key=b"k", value=b"v", headers=[("h", b"1")], timestamp=1234, partition=1)
        assert producer.flush(10) == 0
        consumer = Consumer(
            logs.client_config({"bootstrap.servers": bootstrap, "group.id": "t", "auto.offset.reset": "earliest"})
        )
        consumer.assign([TopicPartition(topic, 1, 0)])
        msg = consumer.poll(10)
        consumer.close()
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]) == (b"k", b"v", [("h", b"1")], 1234)

        assert main(["dev", "up", str(f)]) == 0, "second up is a no-op"
        assert capsys.readouterr().out.count("running") == 2
    finally:
        assert main(["dev", "down"]) == 0
    assert all(not pid_alive(r["pid"]) for r in records.values())
    assert not list((state_dir / "dev").glob("*.json"))
    assert not list((state_dir / "dev").glob("*.data")), "noida's data goes with the cluster"


def test_dev_up_refuses_non_loopback_and_starts_nothing(tmp_path, state_dir, capsys):
    f = _topology(tmp_path, (9092, free_port()), host="10.11.12.13")
    assert main(["dev", "up", str(f)]) == 1
    err = capsys.readouterr().err
    assert "not on loopback" in err and "west" in err
    assert not list((state_dir / "dev").glob("*.json")) if (state_dir / "dev").exists() else True
