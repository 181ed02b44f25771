"""The driver's reads of the offset-syncs topic (CheckpointEmitter.read_syncs) against a real Tansu broker.

Every checkpoint round reads the syncs written since the last round. A read must get to the end of
the topic whether or not anything new was written: a read that waits for an end-of-partition event
the client already gave would time out and hold the driver's thread (and every batch's end) for it."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from reconciler import logs
from reconciler.contract.spec import offset_syncs_topic_name
from reconciler.engine.emitters import CheckpointEmitter, OffsetSyncWriter
from tests.integration.mirror_helpers import create_topic, spec_for

pytestmark = [pytest.mark.kafka]


def test_every_read_of_the_offset_syncs_reaches_the_end_with_or_without_new_syncs(fresh_clusters):
    source, target = fresh_clusters
    spec = spec_for(source, target)
    syncs_topic = offset_syncs_topic_name(spec)
    create_topic(source.bootstrap, syncs_topic, 1)
    producer = Producer(logs.client_config({"bootstrap.servers": source.bootstrap}))
    writer = OffsetSyncWriter(spec, producer)
    writer.write("orders", 0, [(0, 0), (100, 100)])
    writer.flush()
    emitter = CheckpointEmitter(spec, source_admin=None, target_producer=None, environ={})
    try:
        first = emitter.read_syncs(timeout=20)
        assert (first.count, first.reached_end) == (2, True)
        assert emitter.store.read_to_end  # the start-up replay is over

        again = emitter.read_syncs(timeout=5)  # nothing new written
        assert (again.count, again.reached_end) == (0, True)

        writer.write("orders", 0, [(250, 240)])
        writer.flush()
        newer = emitter.read_syncs(timeout=20)
        assert (newer.count, newer.reached_end) == (1, True)
        assert emitter.store.translate_downstream("orders", 0, 260) == 241  # the new sync is in the store
        assert emitter.read_syncs(timeout=5).reached_end
    finally:
        emitter.close()
        del writer, producer  # a client left behind logs its broker's shutdown


def test_the_start_up_replay_of_an_empty_offset_syncs_topic_reaches_its_end(fresh_clusters):
    """A flow's first start finds its offset-syncs topic just created and empty: the replay that start() does before
    the first batch (MM2's OffsetSyncStore.start()) must see the end at once, not wait out its timeout."""
    source, target = fresh_clusters
    spec = spec_for(source, target)
    create_topic(source.bootstrap, offset_syncs_topic_name(spec), 1)
    emitter = CheckpointEmitter(spec, source_admin=None, target_producer=None, environ={})
    try:
        replay = emitter.read_syncs(timeout=20)
        assert (replay.count, replay.reached_end) == (0, True)
        assert emitter.store.read_to_end  # checkpoints may be emitted from the first round on
    finally:
        emitter.close()
