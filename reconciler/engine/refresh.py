"""The topic refresh of a flow's driver: which source partitions it copies now, and where each starts.

At start and every `refresh_interval_seconds` (driver.py `step`) the refresh describes the source and target
topics, plans the partitions (topics.py `plan_partitions`: routing, remote topics to create or grow), creates and
grows what the plan asks, loads the positions of new partitions from the job's group, reports topics that vanished
or were recreated (the loss handler decides for a recreated one), and reads the remote topics' record limits. What
it finds goes to `Partitions` through its methods; the source topics known and their ids are its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from reconciler.engine.driver_parts import Cluster, Connections, FlowSpec, Partitions, Progress, ReachWatch, UsesClients
from reconciler.engine.source_faults import SourceFaults
from reconciler.engine.source_loss import recreated_topics
from reconciler.engine.topics import plan_partitions

log = logging.getLogger(__name__)


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

    def refresh(self) -> None:
        """Discover source topics/partitions, create missing remote topics, load new positions."""
        spec, conn, parts = self._flow.spec, self.clients, self.parts
        source = self.reach.call(Cluster.SOURCE, lambda: conn.topics.describe(conn.source_admin, 15, ids=True))
        target = self.reach.call(Cluster.TARGET, lambda: conn.topics.describe(conn.target_admin, 15))
        plan = plan_partitions(spec.mirror_flow, source, target)
        findings = list(plan.findings)
        if plan.create:
            findings += conn.topics.create_remote(plan.create)
            target = conn.topics.describe(conn.target_admin, 15)
            plan = plan_partitions(spec.mirror_flow, source, target)
            findings += [f for f in plan.findings if f not in findings]
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
        self.read_record_limits()

    def read_record_limits(self) -> None:
        """The largest record each remote topic takes (`Partitions.limits_read`), at each refresh: a record larger
        is refused before it is produced (`on_refused_record`), not sent to fail its whole round."""
        try:
            self.parts.limits_read(self.clients.topics.record_limits(list(set(self.parts.plan.copy.values()))))
        except Exception as exc:  # noqa: BLE001 - kept from the last read; the broker's answer decides meanwhile
            self.log.info("cannot read the remote topics' max.message.bytes: %s", exc)
