"""The topic refresh (engine/refresh.py `TopicRefresh`) without brokers: the clusters' listings are a fake behind the
driver's `Connections` (its `topics`, `offsets` and admins), counting what each refresh asks (issue 47: an idle engine
of 1,000 topics listed both clusters, described every topic's id and read every remote topic's limit every 5 s)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.engine.driver_parts import Partitions, Progress, ReachWatch
from reconciler.engine.refresh import TopicRefresh
from reconciler.engine.topics import TopicInfo
from tests.spec_helpers import job_spec

SPEC = job_spec("west->east", ClusterSpec("west", "127.0.0.1:1"), ClusterSpec("east", "127.0.0.1:2"))


@dataclass
class Topics:
    """The clusters' topics (name -> partitions) and ids, and what was asked of them."""

    source: dict[str, int]
    target: dict[str, int] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    asked: Counter = field(default_factory=Counter)
    ids_asked: list[list[str]] = field(default_factory=list)

    def describe(self, admin: str, timeout: float, ids: bool = False) -> dict[str, TopicInfo]:
        self.asked[f"list {admin}"] += 1
        return {n: TopicInfo(n, p) for n, p in (self.source if admin == "source" else self.target).items()}

    def topic_ids(self, admin: str, names: list[str], timeout: float) -> dict[str, str]:
        self.ids_asked.append(sorted(names))
        return {n: self.ids[n] for n in names if n in self.ids}

    def record_limits(self, remotes: list[str]) -> dict[str, int]:
        self.asked["limits"] += 1
        return {}

    def create_remote(self, topics) -> list[str]:
        self.target.update({t.remote: t.source_partitions for t in topics})
        return []

    def grow_remote(self, grow) -> list[str]:
        return []


class Offsets:
    def load(self, new):
        return {tp: (None, None) for tp in new}


@dataclass
class Conn:
    topics: Topics
    offsets: Offsets = field(default_factory=Offsets)
    source_admin: str = "source"
    target_admin: str = "target"


@dataclass
class Flow:
    spec: JobSpec = SPEC


@dataclass
class Recreated:
    seen: list = field(default_factory=list)

    def recreated(self, tp, before: str, now: str) -> None:
        self.seen.append((tp, before, now))


def refresher(topics: Topics, faults: Recreated | None = None) -> tuple[TopicRefresh, Partitions]:
    parts = Partitions()
    r = TopicRefresh(
        Flow(),
        parts,
        Progress(),
        faults or Recreated(),
        ReachWatch(),
        lambda e: None,
        clients=Conn(topics),
    )
    return r, parts


def test_a_refresh_that_finds_the_source_unchanged_lists_the_source_alone():
    topics = Topics({f"t{i}": 5 for i in range(200)}, ids={f"t{i}": f"id{i}" for i in range(200)})
    r, parts = refresher(topics)
    r.refresh()  # the first: everything
    assert len(parts.plan.copy) == 1000 and len(topics.target) == 200
    assert topics.asked == Counter({"list source": 1, "list target": 2, "limits": 1}), topics.asked
    assert topics.ids_asked == [sorted(topics.source)]
    topics.asked.clear()
    for _ in range(10):  # ten refreshes within a full refresh's interval (the driver's Timers), nothing changed
        r.refresh(full=False)
    assert topics.asked == Counter({"list source": 10}), "the target listed or the limits read without a change"
    assert topics.ids_asked == [sorted(topics.source)], "ids asked of topics already known"

    # A new topic: its id alone is asked, the target listed (its remote topic created) and the limits read.
    topics.asked.clear()
    topics.source["fresh"], topics.ids["fresh"] = 2, "id-fresh"
    r.refresh(full=False)
    assert topics.ids_asked[-1] == ["fresh"] and ("fresh", 1) in parts.plan.copy
    assert topics.asked["list target"] >= 1 and topics.asked["limits"] == 1

    # Once a FULL_REFRESH_S (the driver's Timers.full_refresh) everything is asked again.
    topics.asked.clear()
    r.refresh(full=True)
    assert topics.asked == Counter({"list source": 1, "list target": 1, "limits": 1})
    assert topics.ids_asked[-1] == sorted(topics.source)


def test_a_topic_recreated_between_two_listings_is_found_by_the_next_full_refresh():
    topics = Topics({"orders": 1}, ids={"orders": "id-old"})
    faults = Recreated()
    r, parts = refresher(topics, faults)
    r.refresh()
    parts.loaded({("orders", 0): (7, None)}, 1)
    topics.ids["orders"] = "id-new"  # deleted and created again between two refreshes: the listing is the same
    r.refresh(full=False)
    assert faults.seen == []
    r.refresh(full=True)
    assert faults.seen == [(("orders", 0), "id-old", "id-new")]


def test_a_topic_that_vanished_and_came_back_has_its_id_asked_at_once():
    topics = Topics({"orders": 1, "other": 1}, ids={"orders": "id-old", "other": "id-o"})
    faults = Recreated()
    r, parts = refresher(topics, faults)
    r.refresh()
    del topics.source["orders"]
    r.refresh(full=False)
    topics.source["orders"], topics.ids["orders"] = 1, "id-new"
    parts.loaded({("orders", 0): (3, None)}, 1)
    r.refresh(full=False)
    assert topics.ids_asked[-1] == ["orders"]
    assert faults.seen == [(("orders", 0), "id-old", "id-new")]
