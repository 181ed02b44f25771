"""`reconciler cutover`: the planned migration of consumer groups from a flow's source to its target, as one
operation (`cutover` -> `CutoverOutcome`).

1. Refuses while any group is active on the source (its consumers must be stopped first).
2. Waits until the flow's job reports every partition caught up: a status record written after the cutover
   began, with a lag of 0 on each partition (progress through `progress`); after `wait_seconds` it refuses,
   listing the partitions that are not.
3. Waits for a checkpoint of each group newer than its last commit on the source and than the final offset
   syncs: its upstream offset is the group's committed offset on every partition, and its downstream offset is
   what the offset syncs (read where the job writes them, up to each partition's last record) translate that to. A cluster cannot be asked to checkpoint now; waiting is the
   command's way of forcing a final one.
4. Commits the translated offsets on the target with `failover`'s rules (offsets.failover: refused while the
   group is active there, offsets only move forward).
The outcome (`to_dict`) is the record a rollback needs; the command writes it as a JSON file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconciler.analysis.expansion import checkpoint_route
from reconciler.contract.spec import offset_syncs_place
from reconciler.contract.status import StatusRecord
from reconciler.mirror import mirror_client as mc
from reconciler.mirror.offset_translation import OffsetSyncStore
from reconciler.mirror.records import Checkpoint, OffsetSync, RecordFormatError
from reconciler.operations import offsets
from reconciler.operations.backend import Backend
from reconciler.operations.offsets import GroupMove, Refused, cluster_errors, connect, find_flow
from reconciler.topology.model import Topology

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CutoverRequest:
    flow: str
    groups: tuple[str, ...]  # empty: every group with a checkpoint of the flow on the target
    dry_run: bool = False
    wait_seconds: float = 300.0  # for the lag to reach 0 and for the final checkpoints
    timeout: float = 30.0  # per cluster request
    poll_seconds: float = 1.0


@dataclass(frozen=True)
class GroupCutover:
    group: str
    source_offsets: dict[mc.TopicPartition, int]  # committed on the source, as named there
    outcome: offsets.FailoverOutcome


@dataclass(frozen=True)
class CutoverOutcome:
    flow: str
    source: str
    target: str
    dry_run: bool
    started_ms: int
    source_ends: dict[mc.TopicPartition, int]  # the job's caught-up positions: where a failback starts
    groups: tuple[GroupCutover, ...]

    @property
    def refusals(self) -> list[str]:
        return [f"{g.group}: {g.outcome.refusal}" for g in self.groups if g.outcome.refusal]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "reconciler-cutover",
            "version": 1,
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "dry_run": self.dry_run,
            "started_ms": self.started_ms,
            "source_ends": [
                {"topic": tp.topic, "partition": tp.partition, "offset": o}
                for tp, o in sorted(self.source_ends.items())
            ],
            "groups": [
                {
                    "group": g.group,
                    "source_offsets": [
                        {"topic": tp.topic, "partition": tp.partition, "offset": o}
                        for tp, o in sorted(g.source_offsets.items())
                    ],
                    "target_offsets": [
                        {
                            "topic": p.partition.topic,
                            "partition": p.partition.partition,
                            "translated": p.translated,
                            "committed_before": p.committed,
                            "action": p.action.value,
                        }
                        for p in g.outcome.plan.partitions
                    ],
                    "applied": g.outcome.applied,
                    "refusal": g.outcome.refusal,
                }
                for g in self.groups
            ],
        }


def _caught_up(record: StatusRecord | None, since_ms: int) -> tuple[bool, list[str]]:
    """Whether the job reported, after `since_ms`, every partition at its end; and the ones that are not."""
    if record is None or record.heartbeat_at is None or record.heartbeat_at < since_ms:
        return False, ["no status record of the job since the cutover began"]
    behind = [f"{p.topic}-{p.partition} (lag {p.lag})" for p in record.lag if p.lag != 0]
    return not behind and record.lag_total == 0, behind


def cutover(topology: Topology, request: CutoverRequest, backend: Backend, progress: Progress) -> CutoverOutcome:
    flow = find_flow(topology, request.flow)
    started = int(backend.clock() * 1000)
    with cluster_errors():
        source = connect(topology, flow.source, backend, request.timeout)
        target = connect(topology, flow.target, backend, request.timeout)
        groups = request.groups or _checkpointed_groups(target, flow)
        if not groups:
            raise Refused(f"no group of {flow.source} has a checkpoint on {flow.target}: name them with --group")
        active = [(g, s) for g in groups if (s := source.group_state(g)).active]
        if active:
            raise Refused(
                "; ".join(
                    f"group {g!r} is active on {flow.source!r} ({s.state}, {s.members} member(s))" for g, s in active
                )
                + ": stop its consumers there before the cutover"
            )
        record = _wait_caught_up(topology, flow, request, backend, started, progress)
        routed = {t: n for t, n in source.topics().items() if checkpoint_route(flow, t) is not None}
        all_parts = [mc.TopicPartition(t, p) for t, n in sorted(routed.items()) for p in range(n)]
        committed = source.committed_offsets_of(groups, all_parts)
        syncs_alias, syncs_topic = offset_syncs_place(flow, flow.source, flow.target)
        syncs_cluster = source if syncs_alias == flow.source else target
        ends = {mc.TopicPartition(p.topic, p.partition): p.end for p in record.lag if p.end is not None}
        _wait_checkpoints(flow, target, committed, request, (syncs_cluster, syncs_topic), ends, progress)
        outcomes = tuple(
            GroupCutover(
                g,
                committed[g],
                offsets.failover(
                    topology,
                    GroupMove(g, flow.source, flow.target, request.timeout),
                    backend,
                    apply=not request.dry_run,
                ),
            )
            for g in groups
        )
    return CutoverOutcome(str(flow.name), flow.source, flow.target, request.dry_run, started, ends, outcomes)


def _checkpointed_groups(target: Any, flow: Any) -> tuple[str, ...]:
    topic = flow.policy.checkpoints_topic(flow.source)
    parts = target.topics().get(topic, 0)
    found = set()
    for key, value in target.read_all(topic, parts) if parts else []:
        try:
            found.add(Checkpoint.deserialize(key, value).consumer_group_id)
        except RecordFormatError:  # not a checkpoint: skipped, as translate does
            continue
    return tuple(sorted(g for g in found if flow.groups.matches(g)))


def _wait_caught_up(
    topology: Topology, flow, request: CutoverRequest, backend: Backend, started: int, progress: Progress
) -> StatusRecord:
    deadline = time.monotonic() + request.wait_seconds
    cluster = topology.clusters[flow.target]
    while True:
        raw = backend.read_status(cluster).get(str(flow.name))
        record = StatusRecord.of(raw) if raw is not None else None
        done, behind = _caught_up(record, started)
        if done and record is not None:
            progress(f"{flow.name}: every partition caught up (lag 0)")
            return record
        if time.monotonic() >= deadline:
            raise Refused(
                f"{flow.name} did not catch up within {request.wait_seconds:.0f}s: {', '.join(behind)}; "
                "nothing was changed"
            )
        progress(
            f"{flow.name}: waiting for lag 0: " + (", ".join(behind) or f"lag {record.lag_total if record else '?'}")
        )
        time.sleep(request.poll_seconds)


def _final_syncs(cluster, topic: str) -> OffsetSyncStore:
    store = OffsetSyncStore()
    parts = cluster.topics().get(topic, 0)
    for key, value in cluster.read_all(topic, parts) if parts else []:
        try:
            store.add(OffsetSync.deserialize(key, value))
        except RecordFormatError:
            continue
    return store


def _wait_checkpoints(flow, target, committed, request: CutoverRequest, syncs_at, ends, progress: Progress) -> None:
    """Until each group's checkpoint is at its last commit AND translated through the final offset syncs (the
    job publishes the last record's sync once caught up): a checkpoint written before those syncs arrived
    translates coarsely, and the job writes a newer one when they do."""
    deadline = time.monotonic() + request.wait_seconds
    while True:
        waiting = []
        store = _final_syncs(*syncs_at)
        for tp, end in sorted(ends.items()):
            held = store.syncs(tp.topic, tp.partition)
            if end > 0 and (not held or held[0].upstream_offset < end - 1):
                waiting.append(f"the offset sync of {tp} at {end - 1}")
        for group, offs in committed.items():
            try:
                scan = mc.translate_offsets(target, flow.source, group, flow.policy)
            except mc.NoCheckpointsTopic:
                scan = mc.CheckpointScan({})
            for tp, offset in sorted(offs.items()):
                remote = checkpoint_route(flow, tp.topic)
                cp = scan.checkpoints.get(mc.TopicPartition(remote, tp.partition)) if remote else None
                exact = store.translate_downstream(tp.topic, tp.partition, offset)
                if cp is None or cp.upstream_offset != offset or (exact is not None and cp.downstream_offset != exact):
                    waiting.append(f"{group} {tp} (committed {offset}, checkpoint {cp.upstream_offset if cp else '-'})")
        if not waiting:
            progress(f"{flow.name}: a checkpoint at every group's last commit")
            return
        if time.monotonic() >= deadline:
            raise Refused(
                f"no final checkpoint within {request.wait_seconds:.0f}s for: {'; '.join(waiting)}; nothing was changed"
            )
        progress(f"{flow.name}: waiting for the final checkpoints: {'; '.join(waiting)}")
        time.sleep(request.poll_seconds)


@dataclass(frozen=True)
class CutoverRecord:
    """What `reconciler failback` reads back from a cutover record (`CutoverOutcome.to_dict`)."""

    flow: str
    source: str
    target: str
    dry_run: bool
    started_ms: int
    source_ends: dict[mc.TopicPartition, int]

    @classmethod
    def parse(cls, text: str, name: str) -> CutoverRecord:
        """ValueError naming the file and what is wrong with it."""
        import json

        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{name}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg}): give a record `cutover` wrote"
            ) from None
        if not isinstance(d, dict) or d.get("kind") != "reconciler-cutover":
            raise ValueError(f'{name}: not a cutover record (no "kind": "reconciler-cutover")')
        if d.get("version") != 1:
            raise ValueError(f"{name}: cutover record version {d.get('version')!r}; this reconciler reads version 1")
        try:
            ends = {mc.TopicPartition(str(e["topic"]), int(e["partition"])): int(e["offset"]) for e in d["source_ends"]}
            return cls(
                str(d["flow"]), str(d["source"]), str(d["target"]), bool(d["dry_run"]), int(d["started_ms"]), ends
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{name}: a cutover record without a valid {exc}: give the file `cutover` wrote") from None
