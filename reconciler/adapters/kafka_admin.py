"""The real adapter: confluent-kafka AdminClient (+ a producer/consumer for the lease topic).

Secrets: `${ENV_VAR}` references in the cluster's config are resolved here, when the client is
built, and every message this adapter returns is passed through a Redactor of those values.
Capabilities come from a raw ApiVersions probe (`probe.py`) before any call that might not be
supported: ACL calls and CreatePartitions are never sent to a cluster that lacks them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reconciler import settings
from reconciler.adapters.base import (
    ACL_ERRORS,
    AclsUnavailableError,
    AdminError,
    ConfigAlteration,
    NewTopicSpec,
    OpResult,
    Record,
    TopicMeta,
)
from reconciler.adapters.connect_errors import (
    Cause,
    ConnectionFailed,
    ErrorCollector,
    diagnose,
    explain,
    list_topics,
    message,
)
from reconciler.adapters.probe import ProbeError, probe_api_versions, tls_cause
from reconciler.adapters.read_to_end import read_to_end as read_partitions_to_end
from reconciler.adapters.read_to_end import reader_config
from reconciler.state.configs import RawConfigEntry
from reconciler.state.live import (
    API_DESCRIBE_CONFIGS,
    API_INCREMENTAL_ALTER_CONFIGS,
    AclBinding,
    AclOperation,
    AclPattern,
    AclPermission,
    AclResource,
    AclUnavailable,
    Capabilities,
)
from reconciler.topology import secrets
from reconciler.topology.model import Cluster

if TYPE_CHECKING:
    from confluent_kafka import Producer

_log = logging.getLogger("reconciler.kafka")
_log.addHandler(logging.NullHandler())
_log.propagate = False

DEFAULT_TIMEOUT = settings.admin_timeout()


def client_config(cluster: Cluster, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The resolved librdkafka config for `cluster`; raises AdminError naming unset variables (never values)."""
    try:
        return secrets.client_settings(cluster.alias, cluster.bootstrap_servers, cluster.config, environ)
    except secrets.UnresolvedReference as exc:
        raise AdminError(f"cluster {cluster.alias!r}: environment variable(s) {', '.join(exc.names)} not set") from None
    except secrets.RefusedReference as exc:
        raise AdminError(f"cluster {cluster.alias!r}: {exc}") from None


#: The binding `acls_unavailable` asks to delete: reserved names no ACL of a real deployment carries.
ACL_PROBE_TOPIC = "__reconciler-acl-probe"
ACL_PROBE_PRINCIPAL = "User:__reconciler-acl-probe"


class KafkaAdmin:
    """ClusterAdmin over a Kafka-protocol cluster."""

    def __init__(self, cluster: Cluster, timeout: float = DEFAULT_TIMEOUT, environ: Mapping[str, str] | None = None):
        from confluent_kafka.admin import AdminClient

        self.alias = cluster.alias
        self.timeout = timeout
        self._conf = client_config(cluster, environ)
        self._redact = secrets.Redactor()
        self._redact.add_from(cluster.config, environ)
        self._errors = ErrorCollector()  # librdkafka's error callbacks: why a connection failed (TLS, SASL)
        try:
            conf: dict[str, Any] = {**self._conf, "socket.timeout.ms": int(timeout * 1000), "error_cb": self._errors}
            self._admin = AdminClient(conf, logger=_log)
        except Exception as exc:  # noqa: BLE001 - e.g. an unknown or invalid client property
            raise AdminError(f"cluster {self.alias!r}: invalid client configuration: {self._msg(exc)}") from None
        self._caps: Capabilities | None = None
        self._probe_cause: Cause | None = None  # what the probe's failure said, when it says why (connect_errors)
        self._acl_probe: tuple[AclUnavailable | None] | None = None  # acls_unavailable(), asked once
        self._producer: Producer | None = None

    # --- helpers ---------------------------------------------------------------------------
    def _msg(self, exc: BaseException) -> str:
        err = exc.args[0] if exc.args else exc
        text = err.str() if hasattr(err, "str") else str(err)
        return self._redact(text)

    @staticmethod
    def _code(exc: BaseException) -> str | None:
        err = exc.args[0] if exc.args else None
        return err.name() if err is not None and hasattr(err, "name") else None

    def _wait(self, futures: Mapping, describe) -> dict:
        out = {}
        for key, fut in futures.items():
            try:
                fut.result(timeout=self.timeout)
                out[describe(key)] = OpResult.success()
            except Exception as exc:  # noqa: BLE001 - every per-item failure becomes a result
                out[describe(key)] = self._failure(exc)
        return out

    def _failure(self, exc: BaseException) -> OpResult:
        code = self._code(exc)
        if code == "TOPIC_ALREADY_EXISTS":
            return OpResult.already("topic already exists")
        if code in ("_UNSUPPORTED_FEATURE", "UNSUPPORTED_VERSION"):
            return OpResult.unsupported(self._msg(exc))
        if code in ACL_ERRORS:
            reason = ACL_ERRORS[code]
            detail = f"{reason.explain(repr(self.alias))} ({self._msg(exc)})"
            return OpResult.unsupported(detail) if reason is AclUnavailable.DISABLED else OpResult.failed(detail)
        return OpResult.failed(self._msg(exc))

    @property
    def _protocol(self) -> str:
        return str(self._conf.get("security.protocol", "PLAINTEXT"))

    def connection_cause(self) -> str | None:
        """After a failed call: the line saying why the cluster could not be talked to (an untrusted certificate,
        a client certificate required, SASL credentials refused...) from librdkafka's error callbacks, else from the
        probe's failure (e.g. a plaintext client at a TLS port: librdkafka only says "down"); or None."""
        cause = explain(self._errors, self._admin, self._protocol) or self._probe_cause
        return None if cause is None else self._redact(message(self.alias, self._conf["bootstrap.servers"], cause))

    # --- reads -----------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        if self._caps is None:
            try:
                self._caps = Capabilities(
                    probe_api_versions(self._conf["bootstrap.servers"], self._conf, timeout=min(self.timeout, 10.0))
                )
            except ProbeError as exc:
                if (cause := tls_cause(exc, self._conf)) is not None:  # the handshake failed: so will every call
                    raise AdminError(
                        self._redact(message(self.alias, self._conf["bootstrap.servers"], cause))
                    ) from None
                self._probe_cause = diagnose(exc.reasons, str(self._conf.get("security.protocol", "PLAINTEXT")))
                if exc.unreachable:
                    raise AdminError(
                        f"cluster {self.alias!r} unreachable at {self._conf['bootstrap.servers']}: "
                        f"{self._redact(str(exc))}"
                    ) from None
                # Without an answer, assume only what every Kafka since 2.3 has; never ACLs or CreatePartitions.
                self._caps = Capabilities(
                    {API_DESCRIBE_CONFIGS: (0, 0), API_INCREMENTAL_ALTER_CONFIGS: (0, 0)},
                    probe_error=self._redact(str(exc)),
                )
        return self._caps

    def list_topics(self) -> dict[str, TopicMeta]:
        from confluent_kafka import KafkaException

        try:
            md = list_topics(self._admin, self._errors, self.timeout, self._protocol)
        except ConnectionFailed as exc:
            raise AdminError(self._redact(message(self.alias, self._conf["bootstrap.servers"], exc.cause))) from None
        except KafkaException as exc:
            if (why := self.connection_cause()) is not None:  # what the probe saw, e.g. a plaintext client at TLS
                raise AdminError(why) from None
            raise AdminError(
                f"cluster {self.alias!r} unreachable at {self._conf['bootstrap.servers']}: {self._msg(exc)}"
            ) from None
        out = {}
        for name, tm in md.topics.items():
            if tm.error is not None or not tm.partitions:
                continue
            first = tm.partitions.get(0) or next(iter(tm.partitions.values()))
            out[name] = TopicMeta(len(tm.partitions), len(first.replicas))
        return out

    def describe_topic_configs(self, topics: Sequence[str]) -> dict[str, list[RawConfigEntry]]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        if not topics:
            return {}
        futures = self._admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in topics], request_timeout=self.timeout
        )
        out = {}
        for res, fut in futures.items():
            try:
                entries = fut.result(timeout=self.timeout)
            except Exception as exc:  # noqa: BLE001
                if self._code(exc) == "UNKNOWN_TOPIC_OR_PART":
                    continue  # deleted since listed
                raise AdminError(
                    f"cluster {self.alias!r}: describe configs of {res.name!r}: {self._msg(exc)}"
                ) from None
            out[res.name] = [RawConfigEntry.of(e) for e in entries.values()]
        return out

    def describe_acls(self) -> list[AclBinding]:
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )
        from confluent_kafka.admin import (
            AclOperation as KOp,
        )

        if not self.capabilities().acls:
            raise AclsUnavailableError(AclUnavailable.NO_API, repr(self.alias))
        if self.acls_unavailable() is AclUnavailable.DISABLED:  # some brokers answer DescribeAcls with [] then
            raise AclsUnavailableError(AclUnavailable.DISABLED, repr(self.alias))
        # None matches any name, principal and host (librdkafka); the type stubs only know str.
        # Every resource type: topics for ACL sync, groups, the cluster and transactional ids for the permission
        # check (plan/permissions.py); ACL sync manages topic ACLs only (ClusterState.acls_by_topic).
        flt = AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            KOp.ANY,
            AclPermissionType.ANY,
        )
        try:
            bindings = self._admin.describe_acls(flt, request_timeout=self.timeout).result(timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001
            reason = ACL_ERRORS.get(self._code(exc) or "")
            if reason is not None:
                raise AclsUnavailableError(reason, repr(self.alias), self._msg(exc)) from None
            raise AdminError(f"cluster {self.alias!r}: describe ACLs: {self._msg(exc)}") from None
        return [_from_kafka_acl(b) for b in bindings]

    def acls_unavailable(self) -> AclUnavailable | None:
        """Whether ACLs can be changed here, asked once: a DeleteAcls of a binding that cannot exist (a reserved
        topic and principal). A broker without an authorizer answers SECURITY_DISABLED (some also answer
        DescribeAcls with an empty list), a principal without ALTER on the cluster an authorization error;
        anything else is left to the changes themselves to report."""
        if not self.capabilities().acls:
            return AclUnavailable.NO_API
        if self._acl_probe is None:
            probe = AclBinding(ACL_PROBE_TOPIC, ACL_PROBE_PRINCIPAL, "*", AclOperation.READ, AclPermission.ALLOW)
            flt = _to_kafka_acl(probe, as_filter=True)
            try:
                self._admin.delete_acls([flt], request_timeout=self.timeout)[flt].result(timeout=self.timeout)
                self._acl_probe = (None,)
            except Exception as exc:  # noqa: BLE001
                self._acl_probe = (ACL_ERRORS.get(self._code(exc) or ""),)
        return self._acl_probe[0]

    # --- writes ----------------------------------------------------------------------------
    def create_topics(self, specs: Sequence[NewTopicSpec]) -> dict[str, OpResult]:
        from confluent_kafka.admin import NewTopic

        if not specs:
            return {}
        new = [NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.configs)) for s in specs]
        return self._wait(
            self._admin.create_topics(new, operation_timeout=self.timeout, request_timeout=self.timeout), lambda k: k
        )

    def create_partitions(self, totals: Mapping[str, int]) -> dict[str, OpResult]:
        from confluent_kafka.admin import NewPartitions

        if not totals:
            return {}
        if not self.capabilities().create_partitions:
            return {
                t: OpResult.unsupported(f"cluster {self.alias!r} does not support CreatePartitions") for t in totals
            }
        new = [NewPartitions(t, n) for t, n in totals.items()]
        return self._wait(
            self._admin.create_partitions(new, operation_timeout=self.timeout, request_timeout=self.timeout),
            lambda k: k,
        )

    def alter_configs(self, changes: Sequence[ConfigAlteration]) -> dict[str, OpResult]:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        if not changes:
            return {}
        if not self.capabilities().alter_configs:
            return {
                c.topic: OpResult.unsupported(f"cluster {self.alias!r} does not support IncrementalAlterConfigs")
                for c in changes
            }
        resources = []
        for c in changes:
            ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(c.set.items())]
            ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in c.delete]
            resources.append(ConfigResource(ResourceType.TOPIC, c.topic, incremental_configs=ops))
        futures = self._admin.incremental_alter_configs(resources, request_timeout=self.timeout)
        return self._wait(futures, lambda res: res.name)

    def create_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, OpResult]:
        if not acls:
            return {}
        why = self.acls_unavailable()
        if why in (AclUnavailable.NO_API, AclUnavailable.DISABLED):
            return {a: OpResult.unsupported(why.explain(repr(self.alias))) for a in acls}
        kacls = {_to_kafka_acl(a): a for a in acls}
        futures = self._admin.create_acls(list(kacls), request_timeout=self.timeout)
        return self._wait(futures, lambda k: kacls[k])

    def delete_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, OpResult]:
        if not acls:
            return {}
        why = self.acls_unavailable()
        if why in (AclUnavailable.NO_API, AclUnavailable.DISABLED):
            return {a: OpResult.unsupported(why.explain(repr(self.alias))) for a in acls}
        filters = {_to_kafka_acl(a, as_filter=True): a for a in acls}
        futures = self._admin.delete_acls(list(filters), request_timeout=self.timeout)
        return self._wait(futures, lambda k: filters[k])

    def delete_topics(self, topics: Sequence[str]) -> dict[str, OpResult]:
        if not topics:
            return {}
        return self._wait(
            self._admin.delete_topics(list(topics), operation_timeout=self.timeout, request_timeout=self.timeout),
            lambda k: k,
        )

    # --- records (lease topic) -------------------------------------------------------------
    def produce(self, topic: str, key: bytes, value: bytes | None) -> int:
        from confluent_kafka import Producer

        if self._producer is None:
            self._producer = Producer({**self._conf, "acks": "all", "linger.ms": 0}, logger=_log)
        producer = self._producer
        box: dict = {}

        def done(err, msg):
            box["err"], box["offset"] = err, (msg.offset() if msg is not None else None)

        producer.produce(topic, value=value, key=key, partition=0, on_delivery=done)
        producer.flush(self.timeout)
        if "err" not in box:
            raise AdminError(f"cluster {self.alias!r}: no delivery report from {topic!r} within {self.timeout}s")
        if box["err"] is not None:
            raise AdminError(f"cluster {self.alias!r}: write to {topic!r} failed: {self._redact(box['err'].str())}")
        return int(box["offset"])

    def read_records(self, topic: str, until_offset: int) -> list[Record]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(reader_config(self._conf, "reconciler-reader"), logger=_log)
        out: list[Record] = []
        try:
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline and (not out or out[-1].offset < until_offset):
                msg = consumer.poll(0.2)
                offset = None if msg is None or msg.error() else msg.offset()
                if msg is None or offset is None:
                    continue
                out.append(Record(offset, msg.key(), msg.value()))
        finally:
            consumer.close()
        if not out or out[-1].offset < until_offset:
            raise AdminError(f"cluster {self.alias!r}: could not read {topic!r} up to offset {until_offset}")
        return [r for r in out if r.offset <= until_offset]

    def read_to_end(self, topic: str) -> list[Record]:
        """Every record of partition 0 of `topic` (the lease topic), read without writing anything: up to
        the end-of-partition event, not the high watermark (below the true end on Tansu: engine/ends.py). []
        when the topic does not exist."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

        consumer = Consumer(reader_config(self._conf, "reconciler-reader"), logger=_log)
        out: list[Record] = []
        try:
            try:
                md = consumer.list_topics(topic, timeout=self.timeout)
            except KafkaException as exc:
                raise AdminError(f"cluster {self.alias!r}: cannot read {topic!r}: {self._msg(exc)}") from None
            meta = md.topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                return []
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            record = lambda msg: out.append(Record(msg.offset(), msg.key(), msg.value()))  # noqa: E731
            if read_partitions_to_end(consumer, self.timeout, record, partitions=[(topic, 0)]):
                raise AdminError(f"cluster {self.alias!r}: could not read {topic!r} to its end within {self.timeout}s")
        finally:
            consumer.close()
        return out

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None


#: confluent_kafka calls the CLUSTER resource type BROKER (librdkafka's RD_KAFKA_RESOURCE_BROKER, type 4).
_KAFKA_RESOURCE = {AclResource.CLUSTER: "BROKER"}
_OUR_RESOURCE = {"BROKER": AclResource.CLUSTER.value}


def _to_kafka_acl(a: AclBinding, as_filter: bool = False):
    from confluent_kafka.admin import (
        AclBinding as KBinding,
    )
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    from confluent_kafka.admin import (
        AclOperation as KOp,
    )

    cls = AclBindingFilter if as_filter else KBinding
    return cls(
        ResourceType[_KAFKA_RESOURCE.get(a.resource, a.resource.value)],
        a.topic,
        ResourcePatternType[a.pattern.value],
        a.principal,
        a.host,
        KOp[a.operation.value],
        AclPermissionType[a.permission.value],
    )


def _from_kafka_acl(b) -> AclBinding:
    def enum_or(kind, name, default):
        try:
            return kind(name)
        except ValueError:
            return default

    return AclBinding(
        b.name,
        b.principal,
        b.host,
        enum_or(AclOperation, b.operation.name, AclOperation.UNKNOWN),
        enum_or(AclPermission, b.permission_type.name, AclPermission.UNKNOWN),
        enum_or(AclPattern, b.resource_pattern_type.name, AclPattern.UNKNOWN),
        enum_or(AclResource, _OUR_RESOURCE.get(b.restype.name, b.restype.name), AclResource.UNKNOWN),
    )
