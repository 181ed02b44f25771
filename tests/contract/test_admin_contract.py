"""The ClusterAdmin contract: the memory double and the real adapter (Tansu, or any cluster from env) agree.

Capability-dependent tests (ACLs, CreatePartitions) run where the probe says the cluster supports
them and otherwise check that the adapter answers UNSUPPORTED without touching the wire.
"""

from __future__ import annotations

import time

import pytest

from reconciler.adapters.base import AclsUnavailableError, ConfigAlteration, NewTopicSpec, ResultCode
from reconciler.apply.lock import Lease, LockHeld
from reconciler.state.configs import detect_mode, explicit_configs
from reconciler.state.live import (
    CLUSTER_RESOURCE_NAME,
    AclBinding,
    AclOperation,
    AclPattern,
    AclPermission,
    AclResource,
    AclUnavailable,
)


def eventually(check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def create(admin, *specs):
    admin.created.extend(s.name for s in specs)
    res = admin.create_topics(list(specs))
    assert all(r.code is ResultCode.OK for r in res.values()), res
    assert eventually(lambda: all(s.name in admin.list_topics() for s in specs))


def explicit(admin, *names):
    described = admin.describe_topic_configs(list(names))
    mode = detect_mode(described)
    return {n: explicit_configs(described.get(n, []), mode) for n in names}


def test_probe_reports_config_apis(admin):
    caps = admin.capabilities()
    assert caps.describe_configs and caps.alter_configs


def test_tansu_lacks_acls_and_create_partitions(backend):
    kind, adm = backend
    if kind not in ("tansu", "memory-tansu"):
        pytest.skip("a fact about Tansu")
    caps = adm.capabilities()
    assert not caps.acls and not caps.create_partitions


def test_noida_grows_partitions_and_has_no_authorizer(backend):
    kind, adm = backend
    if kind not in ("noida", "memory-no-authorizer"):
        pytest.skip("a fact about noida-db (and Kafka without an authorizer)")
    caps = adm.capabilities()
    assert caps.acls and caps.create_partitions  # the ACL APIs answer, but SECURITY_DISABLED
    assert adm.acls_unavailable() is AclUnavailable.DISABLED


def test_create_list_and_create_again(admin, prefix):
    create(admin, NewTopicSpec(f"{prefix}.a", 3), NewTopicSpec(f"{prefix}.b", 1))
    topics = admin.list_topics()
    assert topics[f"{prefix}.a"].partitions == 3 and topics[f"{prefix}.b"].partitions == 1
    assert topics[f"{prefix}.a"].replication_factor >= 1
    again = admin.create_topics([NewTopicSpec(f"{prefix}.a", 3)])
    assert again[f"{prefix}.a"].code is ResultCode.ALREADY_DONE and again[f"{prefix}.a"].ok


def test_explicit_configs_are_exactly_what_was_set(admin, prefix):
    create(
        admin,
        NewTopicSpec(f"{prefix}.set", 1, configs={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        NewTopicSpec(f"{prefix}.plain", 1),
    )
    got = explicit(admin, f"{prefix}.set", f"{prefix}.plain")
    assert got == {f"{prefix}.set": {"retention.ms": "3600000", "cleanup.policy": "compact"}, f"{prefix}.plain": {}}


def test_incremental_alter_set_and_delete(admin, prefix):
    t = f"{prefix}.alter"
    create(admin, NewTopicSpec(t, 1, configs={"retention.ms": "3600000"}))
    res = admin.alter_configs([ConfigAlteration(t, {"segment.ms": "7200000"}, ("retention.ms",))])
    assert res[t].ok, res
    assert eventually(lambda: explicit(admin, t)[t] == {"segment.ms": "7200000"})


def test_delete_topics(admin, prefix):
    t = f"{prefix}.del"
    create(admin, NewTopicSpec(t, 1))
    assert admin.delete_topics([t])[t].ok
    assert eventually(lambda: t not in admin.list_topics())
    assert not admin.delete_topics([f"{prefix}.never-existed"])[f"{prefix}.never-existed"].ok


def test_create_partitions_or_unsupported(admin, prefix):
    t = f"{prefix}.parts"
    create(admin, NewTopicSpec(t, 2))
    res = admin.create_partitions({t: 4})[t]
    if not admin.capabilities().create_partitions:
        assert res.code is ResultCode.UNSUPPORTED and "CreatePartitions" in res.message
        return
    assert res.ok, res
    assert eventually(lambda: admin.list_topics()[t].partitions == 4)
    assert not admin.create_partitions({t: 3})[t].ok  # never fewer


def test_acls_or_unsupported(admin, prefix):
    t = f"{prefix}.acl"
    create(admin, NewTopicSpec(t, 1))
    acl = AclBinding(t, "User:reconciler-contract", "*", AclOperation.READ, AclPermission.ALLOW)
    why = admin.acls_unavailable()
    if not admin.capabilities().acls:
        assert why is AclUnavailable.NO_API
    if why in (AclUnavailable.NO_API, AclUnavailable.DISABLED):
        # no ACL APIs (Tansu), or no authorizer (SECURITY_DISABLED: Kafka without one, noida): what they are,
        # not a failed action
        for result in (admin.create_acls([acl])[acl], admin.delete_acls([acl])[acl]):
            assert result.code is ResultCode.UNSUPPORTED, result
            assert why.explain(repr(admin.alias)) in result.message, result
        with pytest.raises(AclsUnavailableError) as unreadable:
            admin.describe_acls()
        assert unreadable.value.reason is why
        return
    assert why is None, f"the principal may not manage ACLs here: {why}"
    assert admin.create_acls([acl])[acl].ok
    assert eventually(lambda: acl in admin.describe_acls())
    assert admin.delete_acls([acl])[acl].ok
    assert eventually(lambda: acl not in admin.describe_acls())


def test_acls_of_every_resource_type_are_read_with_their_type(admin, prefix):
    """The permission check (plan/permissions.py) reads group, cluster and transactional-id ACLs too (issue 45)."""
    if admin.acls_unavailable() is not None:
        pytest.skip("no ACLs to manage here (test_acls_or_unsupported says what instead)")
    acls = [
        AclBinding(
            f"{prefix}.g",
            "User:reconciler-contract",
            "*",
            AclOperation.READ,
            AclPermission.ALLOW,
            AclPattern.LITERAL,
            AclResource.GROUP,
        ),
        AclBinding(
            CLUSTER_RESOURCE_NAME,
            "User:reconciler-contract",
            "*",
            AclOperation.DESCRIBE,
            AclPermission.ALLOW,
            AclPattern.LITERAL,
            AclResource.CLUSTER,
        ),
        AclBinding(
            f"{prefix}.txn.",
            "User:reconciler-contract",
            "*",
            AclOperation.WRITE,
            AclPermission.ALLOW,
            AclPattern.PREFIXED,
            AclResource.TRANSACTIONAL_ID,
        ),
    ]
    results = admin.create_acls(acls)
    assert all(r.ok for r in results.values()), results
    assert eventually(lambda: set(acls) <= set(admin.describe_acls()))
    assert all(r.ok for r in admin.delete_acls(acls).values())
    assert eventually(lambda: not set(acls) & set(admin.describe_acls()))


def test_records_round_trip_with_tombstones(admin, prefix):
    t = f"{prefix}.internal"
    create(admin, NewTopicSpec(t, 1, configs={"cleanup.policy": "compact"}))
    first = admin.produce(t, b"k1", b"v1")
    second = admin.produce(t, b"k1", None)
    assert second > first
    got = admin.read_records(t, second)
    assert [(r.key, r.value) for r in got] == [(b"k1", b"v1"), (b"k1", None)]
    assert [(r.key, r.value) for r in admin.read_to_end(t)] == [(b"k1", b"v1"), (b"k1", None)]
    assert admin.read_to_end(f"{prefix}.missing.internal") == []


def test_lease_excludes_a_second_holder(admin):
    first = Lease(admin, ttl=30)
    first.acquire()
    try:
        with pytest.raises(LockHeld):
            Lease(admin, ttl=30).acquire()
    finally:
        first.release()
