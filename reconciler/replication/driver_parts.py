"""The typed parts of a replication driver (driver.py's `ReplicationDriver`): what it holds, grouped by what it is.

Connections  the clients and emitters the driver opens at start (`Connections.open`), closed at its end
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.contract.spec import JobSpec
from reconciler.contract.status import StatusPublisher
from reconciler.replication import clients
from reconciler.replication.delivery import DeliveryMode
from reconciler.replication.emitters import CheckpointEmitter, HeartbeatEmitter, OffsetSyncWriter
from reconciler.replication.lag import SourceEndReader
from reconciler.replication.offsets import OffsetStore
from reconciler.replication.topics import TopicManager


@dataclass
class Connections:
    """The clients and emitters a started driver uses, opened together at start (`open`) and closed together at
    its end (`close`). The producers are confluent_kafka `Producer`s, the admins `AdminClient`s."""

    source_admin: Any
    target_admin: Any
    topics: TopicManager
    source_producer: Any
    target_producer: Any
    checkpoint_producer: Any  # the checkpoint thread's own: its flush waits for checkpoints only
    offsets: OffsetStore
    heartbeats: HeartbeatEmitter
    syncs: OffsetSyncWriter
    checkpoints: CheckpointEmitter
    end_reader: SourceEndReader  # clients of its own: it reads in its own thread
    status: StatusPublisher

    @classmethod
    def open(cls, spec: JobSpec, mode: DeliveryMode, env: Mapping[str, str] | None) -> Connections:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        source_admin = AdminClient(clients.admin_config(spec.source, env))
        target_admin = AdminClient(clients.admin_config(spec.target, env))
        topics = TopicManager(spec, source_admin, target_admin)
        source_producer = Producer(clients.producer_config(spec.source, spec, environ=env))
        target_producer = Producer(clients.producer_config(spec.target, spec, environ=env))
        offsets = OffsetStore(spec, mode, env)
        heartbeats = HeartbeatEmitter(spec, source_producer if spec.heartbeats_on_source else target_producer)
        syncs = OffsetSyncWriter(spec, source_producer if spec.offset_syncs_on_source else target_producer)
        # The checkpoint thread's own producer: its flush waits for checkpoints only (MM2's checkpoint task
        # has its own producer too).
        checkpoint_producer = Producer(clients.producer_config(spec.target, spec, environ=env))
        checkpoints = CheckpointEmitter(spec, source_admin, checkpoint_producer, env)
        end_reader = SourceEndReader(spec, env)
        status = StatusPublisher(target_producer, spec.flow)
        return cls(
            source_admin=source_admin,
            target_admin=target_admin,
            topics=topics,
            source_producer=source_producer,
            target_producer=target_producer,
            checkpoint_producer=checkpoint_producer,
            offsets=offsets,
            heartbeats=heartbeats,
            syncs=syncs,
            checkpoints=checkpoints,
            end_reader=end_reader,
            status=status,
        )

    def update_spec(self, spec: JobSpec) -> None:
        """A reloaded spec (hot reload): the clients that read it as they run take it."""
        self.topics.spec = spec
        self.checkpoints.update_spec(spec)
        self.heartbeats.spec = spec

    def close(self, *, end_reader_idle: bool, checkpoints_idle: bool) -> None:
        """Close the consumers and flush the producers. A side channel's clients still in use by its thread (not
        `..._idle`: its round did not end in time) are left to the process's exit."""
        if end_reader_idle:
            self.end_reader.close()
        self.offsets.close()
        if checkpoints_idle:
            self.checkpoints.close()
        for producer in (self.source_producer, self.target_producer, self.checkpoint_producer):
            producer.flush(10)
