"""The arrival watches of an engine's flows that read one source share one consumer (engine/arrivals.py's
`ArrivalHub`, issue 39): a record wakes the flow watching its partition, and only it."""

from __future__ import annotations

import threading

from confluent_kafka import Producer

from reconciler import logs
from reconciler.contract.spec import ClusterSpec
from reconciler.engine.arrivals import ArrivalHub, ArrivalWatch, watch_config
from tests.integration.mirror_helpers import create_topic, wait_for
from tests.spec_helpers import job_spec


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 2}))
    for i in range(n):
        p.produce(topic, b"r%d" % i, partition=0)
    p.flush(10)


def test_one_consumer_wakes_only_the_flow_whose_partition_got_a_record(fresh_clusters):
    source, target = fresh_clusters
    for topic in ("quiet", "busy"):
        create_topic(source.bootstrap, topic, 1)
        _produce(source.bootstrap, topic, 3)
    specs = [
        job_spec(f"{alias}->east", ClusterSpec(alias, source.bootstrap), ClusterSpec("east", target.bootstrap))
        for alias in ("a", "b")
    ]
    made: list[dict] = []

    def consumer(conf: dict):
        from confluent_kafka import Consumer

        made.append(conf)
        return Consumer(logs.client_config(conf, logs.JOB_CLIENT_LOGGER))  # the job's watch: its logger kept

    hub = ArrivalHub(watch_config(specs[0]), "west", consumer)
    wakes = [threading.Event(), threading.Event()]
    watches = [ArrivalWatch(s, w, None, hub) for s, w in zip(specs, wakes)]
    at = [{("quiet", 0): 3}, {("busy", 0): 3}]
    try:
        for w, positions in zip(watches, at):
            w.arm(positions)
        wait_for(lambda: all(w.quiet(p) for w, p in zip(watches, at)), 30, what="both watches quiet")
        _produce(source.bootstrap, "busy", 1)
        assert wakes[1].wait(30), "the record at b's partition wakes b"
        assert watches[1].wakes == 1 and not watches[1].quiet(at[1])
        assert not wakes[0].is_set() and watches[0].wakes == 0, "a neighbour's record wakes nobody else"
        wait_for(lambda: watches[0].quiet(at[0]), 30, what="a quiet again after the hub's reassignment")
        # b armed again past the record: quiet again, on the same consumer
        watches[1].arm({("busy", 0): 4})
        wait_for(lambda: watches[1].quiet({("busy", 0): 4}), 30, what="b quiet at its new position")
        assert len(made) == 1, "one consumer for both flows"
    finally:
        for w in watches:
            w.close()
        hub.close()


def test_a_hub_quiet_for_long_fetches_with_the_long_wait_and_a_record_brings_the_short_one_back(fresh_clusters):
    """After `deep_quiet_s` without news the hub fetches with WATCH_DEEP_FETCH_WAIT_MS (a consumer made anew at the
    same positions: still quiet, still woken by a record), and the first record brings the short wait back."""
    from reconciler.engine.clients import WATCH_DEEP_FETCH_WAIT_MS, WATCH_FETCH_WAIT_MS

    source, target = fresh_clusters
    create_topic(source.bootstrap, "calm", 1)
    _produce(source.bootstrap, "calm", 2)
    spec = job_spec("a->east", ClusterSpec("a", source.bootstrap), ClusterSpec("east", target.bootstrap))
    made: list[dict] = []

    def consumer(conf: dict):
        from confluent_kafka import Consumer

        made.append(conf)
        return Consumer(logs.client_config(conf, logs.JOB_CLIENT_LOGGER))

    hub = ArrivalHub(watch_config(spec), "west", consumer, deep_quiet_s=1.0)
    wake = threading.Event()
    watch = ArrivalWatch(spec, wake, None, hub)
    at = {("calm", 0): 2}
    try:
        watch.arm(at)
        wait_for(lambda: len(made) >= 2, 30, what="a second consumer after a second without news")
        assert [c["fetch.wait.max.ms"] for c in made] == [WATCH_FETCH_WAIT_MS, WATCH_DEEP_FETCH_WAIT_MS]
        wait_for(lambda: watch.quiet(at), 30, what="quiet on the long wait's consumer, at the same position")
        assert not wake.is_set()
        _produce(source.bootstrap, "calm", 1)
        assert wake.wait(30), "the record wakes the flow through the long wait's consumer"
        assert watch.wakes == 1 and not watch.quiet(at)
        watch.arm({("calm", 0): 3})  # the flow copied the record and is idle again
        wait_for(lambda: len(made) >= 3, 30, what="the short wait back after the record")
        assert made[2]["fetch.wait.max.ms"] == WATCH_FETCH_WAIT_MS
        wait_for(lambda: watch.quiet({("calm", 0): 3}), 30, what="quiet at the new position")
    finally:
        watch.close()
        hub.close()
