"""Backends for the ClusterAdmin contract tests.

* `memory`: the test double with every capability (real Kafka's describe_configs dialect);
* `memory-tansu`: the double configured like Tansu (no ACLs, no CreatePartitions, stored-only configs);
* `memory-no-authorizer`: the double configured like Kafka without an authorizer (SECURITY_DISABLED);
* `tansu`, `noida`: the real adapter against an embedded Tansu / noida-db broker;
* `env`: the real adapter against any cluster: set RECONCILER_CONTRACT_BOOTSTRAP=host:port and, for
  security settings, RECONCILER_CONTRACT_CONFIG='{"security.protocol": "SASL_SSL", ...}' (librdkafka
  keys, JSON). The tests create and delete topics named `reconciler-contract-<random>.*` and, when the
  cluster supports ACLs, one ACL on such a topic.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.adapters.memory_admin import MemoryAdmin, MemoryCluster
from reconciler.dev.brokers import Engine
from reconciler.state.live import API_CREATE_PARTITIONS, API_DELETE_ACLS, AclUnavailable, Capabilities, ConfigSourceMode
from reconciler.topology.model import Cluster

BACKENDS = ["memory", "memory-tansu", "memory-no-authorizer", "tansu", "noida", "env"]


@pytest.fixture(scope="session")
def contract_tansu(broker_factory):
    return broker_factory.start(Engine.TANSU)


@pytest.fixture(scope="session")
def contract_noida(broker_factory):
    return broker_factory.start(Engine.NOIDA)


@pytest.fixture(params=BACKENDS)
def backend(request):
    kind = request.param
    if kind == "memory":
        return kind, MemoryAdmin(MemoryCluster("memory"))
    if kind == "memory-tansu":
        caps = Capabilities.all_supported().without(API_CREATE_PARTITIONS, API_DELETE_ACLS)
        return kind, MemoryAdmin(
            MemoryCluster("memory-tansu", capabilities=caps, config_mode=ConfigSourceMode.STORED_ONLY)
        )
    if kind == "memory-no-authorizer":  # Apache Kafka without an authorizer: SECURITY_DISABLED
        return kind, MemoryAdmin(MemoryCluster("memory-no-authorizer", acls_unavailable=AclUnavailable.DISABLED))
    if kind in ("tansu", "noida"):
        broker = request.getfixturevalue(f"contract_{kind}")
        return kind, KafkaAdmin(Cluster(kind, broker.bootstrap))
    bootstrap = os.environ.get("RECONCILER_CONTRACT_BOOTSTRAP")
    if not bootstrap:
        pytest.skip("set RECONCILER_CONTRACT_BOOTSTRAP (and RECONCILER_CONTRACT_CONFIG) to run against a real cluster")
    config = json.loads(os.environ.get("RECONCILER_CONTRACT_CONFIG") or "{}")
    return kind, KafkaAdmin(Cluster("env", bootstrap, {str(k): str(v) for k, v in config.items()}))


@pytest.fixture
def admin(backend):
    kind, adm = backend
    created: list[str] = []
    adm.created = created  # type: ignore[attr-defined]
    yield adm
    if created:
        adm.delete_topics([t for t in created if t in adm.list_topics()])
    adm.close()


@pytest.fixture
def prefix() -> str:
    return f"reconciler-contract-{uuid.uuid4().hex[:8]}"
