"""The topic refresh (engine/refresh.py `TopicRefresh`) without brokers: the clusters' listings are a fake behind the
driver's `Connections` (its `topics`, `offsets` and admins), counting what each refresh asks (issue 47: an idle engine
of 1,000 topics listed both clusters, described every topic's id and read every remote topic's limit every 5 s)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from reconciler.contract.spec import ClusterSpec, JobSpec
from reconciler.engine.driver_parts import Partitions, Progress, ReachWatch
from reconciler.engine.refresh import TopicRefresh
from reconciler.engine.topics import TopicInfo, TopicManager
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
    #: topics the next listing of a cluster gives with an error and no partitions (a loaded broker, topics being
    #: created in bulk), then as they are
    unlisted: dict[str, set[str]] = field(default_factory=lambda: {"source": set(), "target": set()})
    created_unlisted: set[str] = field(default_factory=set)  # created, then not listed by the target (at once)

    def describe(self, admin: str, timeout: float, ids: bool = False) -> dict[str, TopicInfo]:
        self.asked[f"list {admin}"] += 1
        unlisted, self.unlisted[admin] = self.unlisted[admin], set()
        return {
            n: TopicInfo(n, 0, error="LEADER_NOT_AVAILABLE") if n in unlisted else TopicInfo(n, p)
            for n, p in (self.source if admin == "source" else self.target).items()
            if not (admin == "target" and n in self.created_unlisted)
        }

    def topic_ids(self, admin: str, names: list[str], timeout: float) -> dict[str, str]:
        self.ids_asked.append(sorted(names))
        return {n: self.ids[n] for n in names if n in self.ids}

    def record_limits(self, remotes: list[str]) -> dict[str, int]:
        self.asked["limits"] += 1
        return {}

    def create_remote(self, topics) -> list[str]:
        self.target.update({t.remote: t.source_partitions for t in topics})
        return []  # TOPIC_ALREADY_EXISTS answered is no error (topics.py `TopicManager._create`)

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


def refresher(
    topics: Topics, faults: Recreated | None = None, errors: list[str] | None = None
) -> tuple[TopicRefresh, Partitions]:
    parts = Partitions()
    r = TopicRefresh(
        Flow(),
        parts,
        Progress(),
        faults or Recreated(),
        ReachWatch(),
        errors.append if errors is not None else lambda e: None,
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


def topics_of(n: int) -> dict[str, int]:
    return {f"a{i:05d}": 5 for i in range(n)}


def remote_topics(source: dict[str, int]) -> dict[str, int]:
    return {f"west.{t}": p for t, p in source.items()}


def test_source_topics_listed_without_partitions_are_findings_until_listed_then_copied():
    # docs/benchmarks.md, the 2,500-partition run: 10 topics (50 partitions) never copied while the status said
    # caught up, their remote topics created by apply. A source topic its listing gave with an error (or no partition:
    # topics created in bulk on a loaded broker) was dropped from the listing without a word: no partition planned,
    # no lag, no finding. It says so now, and is copied once listed.
    source = topics_of(20)
    topics = Topics(source, target=remote_topics(source), ids={t: f"id-{t}" for t in source})
    block = {f"a{i:05d}" for i in range(9, 19)}
    topics.unlisted["source"] = set(block)
    r, parts = refresher(topics)
    progress = r.progress
    r.refresh()
    assert len(parts.plan.copy) == 50, "the topics listed are copied"
    assert sorted(f.split()[2] for f in progress.findings) == sorted(block), progress.findings
    assert all("not copied until it is listed" in f for f in progress.findings)
    r.refresh(full=False)  # the next listing gives them
    assert len(parts.plan.copy) == 100 and progress.findings == []
    assert all(tp in parts.positions for tp in parts.plan.copy)
    assert topics.ids_asked[-1] == sorted(block), "their ids asked once they are listed"


def test_a_topic_copied_that_is_listed_without_partitions_once_keeps_its_positions():
    # Before: read as deleted ("source topics disappeared", an error), its positions dropped and read again.
    errors: list[str] = []
    topics = Topics({"orders": 2, "other": 1}, ids={"orders": "id-o", "other": "id-x"})
    r, parts = refresher(topics, errors=errors)
    r.refresh()
    parts.advanced(("orders", 0), 41)
    topics.unlisted["source"] = {"orders"}
    r.refresh(full=False)
    assert errors == [] and parts.positions[("orders", 0)] == 41 and ("orders", 1) in parts.plan.copy
    assert r.progress.findings == [
        "source topic orders is listed without its partitions (LEADER_NOT_AVAILABLE): copied as last listed"
    ]
    r.refresh(full=True)
    assert r.progress.findings == [] and parts.positions[("orders", 0)] == 41


def test_a_remote_topic_listed_without_partitions_holds_its_topic_and_the_target_is_listed_again():
    source = topics_of(3)
    topics = Topics(source, target=remote_topics(source))
    topics.unlisted["target"] = {"west.a00001"}
    r, parts = refresher(topics)
    r.refresh()
    assert sorted({t for t, _ in parts.plan.copy}) == ["a00000", "a00002"]
    assert r.progress.findings == [
        "remote topic west.a00001 is listed without its partitions (LEADER_NOT_AVAILABLE): a00001 is not copied "
        "until it is listed"
    ]
    topics.asked.clear()
    topics.target["elsewhere"], topics.unlisted["target"] = 1, {"elsewhere"}  # a topic the flow does not write
    r.refresh(full=False)  # the source's listing is the same, the target is listed again all the same
    assert topics.asked["list target"] == 1 and len(parts.plan.copy) == 15 and r.progress.findings == []
    topics.asked.clear()
    topics.unlisted["target"] = {"elsewhere"}
    r.refresh(full=False)  # a topic of the target's listed so that no remote topic of the flow's: not listed again
    assert topics.asked == Counter({"list source": 1})


def test_a_remote_topic_the_target_does_not_list_after_its_creation_is_a_finding():
    topics = Topics({"orders": 1})
    topics.created_unlisted = {"west.orders"}
    r, parts = refresher(topics)
    r.refresh()
    assert parts.plan.copy == {}
    assert r.progress.findings == [
        "remote topic west.orders is not listed by the target after its creation: orders is not copied until it is "
        "listed"
    ]
    topics.created_unlisted = set()
    r.refresh(full=False)
    assert parts.plan.copy == {("orders", 0): "west.orders"} and r.progress.findings == []


@dataclass
class Meta:
    """A topic of a Metadata answer as confluent_kafka gives it (`TopicMetadata`)."""

    partitions: dict
    error: object = None


@dataclass
class Listing:
    topics: dict


@dataclass
class Admin:
    listing: Listing

    def list_topics(self, timeout: float) -> Listing:
        return self.listing


def test_the_listing_keeps_a_topic_given_with_an_error_or_without_partitions_as_not_listed():
    # Before: dropped from the listing, so a topic copied read as deleted and one not copied yet was never mentioned.
    admin = Admin(Listing({"ok": Meta({0: 0, 1: 1}), "err": Meta({}, "LEADER_NOT_AVAILABLE"), "none": Meta({})}))
    listed = TopicManager.describe(admin, 1.0)
    assert listed == {
        "ok": TopicInfo("ok", 2),
        "err": TopicInfo("err", 0, error="LEADER_NOT_AVAILABLE"),
        "none": TopicInfo("none", 0, error="no partition listed"),
    }
    assert listed["ok"].listed and not listed["err"].listed and not listed["none"].listed
