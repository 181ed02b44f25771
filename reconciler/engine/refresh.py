"""The topic refresh of a flow's driver: which source partitions it copies now, and where each starts.

At start and every `refresh_interval_seconds` (driver.py `step`) the refresh describes the source and target
topics, plans the partitions (topics.py `plan_partitions`: routing, remote topics to create or grow), creates and
grows what the plan asks, loads the positions of new partitions from the job's group, reports topics that vanished
or were recreated (the loss handler decides for a recreated one), and reads the remote topics' record limits. What
it finds goes to `Partitions` through its methods; the source topics known and their ids are its own.

What each refresh asks (issue 47: an idle engine of 1,000 topics spent a third of its CPU listing both clusters every
5 s): the source's listing every time (a new topic or partition is found within a refresh interval); the source
topics' ids only of the topics new in that listing; the target's listing and the remote topics' record limits only
when the source's listing changed. Everything is asked again once a `FULL_REFRESH_S` (a topic deleted and created
again between two listings, a remote topic deleted or its limit changed on the target: found within that).

A topic listed without its partitions (its metadata's error, or none listed: topics created in bulk, a loaded broker;
topics.py `TopicInfo.listed`) is not a topic gone: a source topic the flow copies keeps its last listing (its positions
stay; before, it read as deleted), one never listed is not copied yet, and either says so in the findings (the status
record's) until it is listed; a remote topic so listed holds its source topic's partitions the same way, and the
target is listed again at the next refresh. A remote topic the target does not list after its creation (TOPIC_ALREADY
EXISTS answered, not listed) is a finding too: none of these waits silently (the 2,500-partition run of
docs/benchmarks.md: 50 partitions never copied while the status said caught up).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from reconciler.engine.driver_parts import Cluster, Connections, FlowSpec, Partitions, Progress, ReachWatch, UsesClients
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.source_loss import recreated_topics
from reconciler.engine.topics import TopicInfo, plan_partitions

log = logging.getLogger(__name__)

#: A refresh asks everything (the ids of every source topic, the target's listing, the record limits) this often,
#: and in between only what the source's listing says changed (the module's docstring).
FULL_REFRESH_S = 60.0


class TopicRefresh(UsesClients[Connections]):
    """Refreshes the flow's partitions (`refresh`) and the remote topics' record limits (`read_record_limits`). It is
    given the flow (`FlowSpec`: its spec now), its partitions, progress (the findings), the loss handler (a recreated
    topic), the reach watch it tells whether the clusters answer, `error` (count and log an error), its log, and the
    driver's clients when it opens them (`connect`)."""

    def __init__(
        self,
        flow: FlowSpec,
        parts: Partitions,
        progress: Progress,
        faults: SourceFaults,
        reach: ReachWatch,
        error: Callable[[str], None],
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = log,
        *,
        clients: Connections | None = None,
    ):
        self._flow, self.parts, self.progress, self.faults, self.reach = flow, parts, progress, faults, reach
        self._error, self.log, self._clients = error, log, clients
        self._known_topics: set[str] = set()  # the source topics copied as of the last refresh
        self._topic_ids: dict[str, str] = {}  # the source topics' ids, where the broker gives them
        self._source_listed: dict[str, int] = {}  # the source's last listing: each topic's partition count
        self._target: dict[str, TopicInfo] | None = None  # the target's last listing

    def refresh(self, full: bool = True) -> None:
        """Discover source topics/partitions, create missing remote topics, load new positions; `full`: ask everything
        again, else what the source's listing says changed (the module's docstring; the driver's `Timers.full_refresh`
        says when)."""
        spec, conn, parts = self._flow.spec, self.clients, self.parts
        source, target, changed, kept = self._listings(full)
        plan = plan_partitions(spec.mirror_flow, source, target)
        findings = kept + plan.findings
        if plan.create:
            findings += conn.topics.create_remote(plan.create)
            target = self._target = conn.topics.describe(conn.target_admin, 15)
            plan = plan_partitions(spec.mirror_flow, source, target)
            findings += [f for f in plan.findings if f not in findings]
            findings += [
                f"remote topic {t.remote} is not listed by the target after its creation: {t.source} is not copied "
                f"until it is listed"
                for t in plan.create
            ]
        if plan.grow:
            findings += conn.topics.grow_remote(plan.grow)
        self.progress.found(findings)
        for f in findings:
            self.log.warning("%s", f)
        new = {tp: remote for tp, remote in plan.copy.items() if tp not in parts.positions}
        if new:
            parts.loaded(conn.offsets.load(new), spec.engine.parallelism)
        vanished = sorted(self._known_topics - set(source))
        if vanished:
            parts.renew_consumers()
            self._error(
                f"source topics disappeared: {', '.join(vanished)} (their positions are dropped; a topic "
                f"created again under the same name is copied from its beginning)"
            )
        self._known_topics = {t for t, _ in plan.copy}
        ids = {name: info.topic_id for name, info in source.items() if name in self._known_topics}
        for topic in recreated_topics(self._topic_ids, ids):
            for tp in sorted(tp for tp in plan.copy if tp[0] == topic and tp in parts.positions):
                self.faults.recreated(tp, self._topic_ids[topic], ids[topic] or "")
        self._topic_ids.update({t: i for t, i in ids.items() if i is not None})
        parts.replanned(plan)  # topic deleted or no longer matching: forgotten (positions reload if it returns)
        if changed or plan.create:
            self.read_record_limits()

    def _listings(self, full: bool) -> tuple[Mapping[str, TopicInfo], Mapping[str, TopicInfo], bool, list[str]]:
        """The source's topics (with the ids asked this time: of the topics new in its listing, or of all when a
        full refresh is due), the target's (its last listing unless the source's changed, a full refresh is due or
        it listed a remote topic of the last plan without its partitions), whether either was asked in full (the
        record limits are read again then), and the findings of the source topics copied that kept their last
        listing."""
        conn, last = self.clients, self._source_listed
        listed = self.reach.call(Cluster.SOURCE, lambda: conn.topics.describe(conn.source_admin, 15))
        # A topic copied that is listed without its partitions keeps its last listing (the module's docstring).
        kept = sorted(n for n, i in listed.items() if not i.listed and last.get(n, 0) > 0)
        findings = [
            f"source topic {n} is listed without its partitions ({listed[n].error}): copied as last listed"
            for n in kept
        ]
        listed = {**listed, **{n: TopicInfo(n, last[n]) for n in kept}}
        shape = {name: info.partitions if info.listed else -1 for name, info in listed.items()}
        ask = sorted(n for n, i in listed.items() if i.listed and (full or last.get(n, -1) < 0))
        ids = self.reach.call(Cluster.SOURCE, lambda: conn.topics.topic_ids(conn.source_admin, ask, 15)) if ask else {}
        source = {n: TopicInfo(n, i.partitions, ids.get(n), i.error) for n, i in listed.items()}
        target = self._target
        changed = full or shape != last or target is None
        if changed or target is None or self.parts.plan.unlisted_remotes:
            target = self.reach.call(Cluster.TARGET, lambda: conn.topics.describe(conn.target_admin, 15))
        # Kept once every read answered: a refresh that failed half way asks again the next time.
        self._target, self._source_listed = target, shape
        return source, target, changed, findings

    def read_record_limits(self) -> None:
        """The largest record each remote topic takes (`Partitions.limits_read`), at each refresh that lists the target
        (the module's docstring): a record larger is refused before it is produced (`on_refused_record`), not sent to
        fail its whole round."""
        try:
            self.parts.limits_read(self.clients.topics.record_limits(list(set(self.parts.plan.copy.values()))))
        except Exception as exc:  # noqa: BLE001 - kept from the last read; the broker's answer decides meanwhile
            self.log.info("cannot read the remote topics' max.message.bytes: %s", exc)
