"""`reconciler failback`: after a failover or cutover A->B, the way back B->A (`failback` -> `FailbackOutcome`).

Checks first, and refuses (nothing changed) when:
* the topology lacks the reverse flow B->A (or has several), or the forward flow A->B (the cutover record's);
* the cutover record is not of a flow A->B, or was a dry run;
* the forward flow is still enabled in the topology, or its job (or the reverse flow's) still reports live: a
  running forward job keeps moving what "reached B" means, and a running reverse job keeps its own positions;
* B's copy of an original topic the reverse flow would write back into (the identity policy) holds records
  produced on B before the last record copied from A: no start position both skips every copy and copies every
  record of B's own (see below).

Then, per partition of each original topic on A the forward flow copies: A is compared with its copy on B from the
partition's end at cutover (the record's `source_ends`; without a record, from past the forward flow's newest
offset sync) as `reconciler verify` compares them (`operations/verify.compare_partition`, aligned through the
forward flow's offset syncs). The A records there that are not on B (missing, changed or never copied) are the
divergent ones: accepted by A after the cutover, never reached B. Counted and listed as runs of A's offsets; with
`truncate`, deleted (DeleteRecords moves a partition's start: every record of the partition up to its end at the
count goes, the divergent ones last; the rest is on B).

The reverse flow's start: with the default policy it copies B's topics into `B.<topic>` on A and never copies a
remote topic back to its source (KIP-382), so A's originals never receive a record from it and no position is
set. With the identity policy B's copy of A's `orders` is named `orders` and the reverse flow writes it back into
A's `orders`: started at B's beginning it would copy every record A already has a second time. So its job's group
(`contract/spec.job_group_of`, on B) gets, per such partition, the position just past the last record B holds
from A; only forward (`mirror_client.plan_failover`'s rule, the same as failover's). The reverse flow then
starts from there when it is enabled and applied.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.analysis.expansion import route
from reconciler.contract.spec import job_group_of, offset_syncs_place
from reconciler.contract.status import StatusRecord, health
from reconciler.mirror import mirror_client as mc
from reconciler.mirror.records import OffsetSync
from reconciler.mirror.verify import Alignment, Difference, DiffKind, PartitionDigests, SyncAnchor
from reconciler.operations.backend import Backend, MirrorCluster
from reconciler.operations.cutover import CutoverRecord
from reconciler.operations.offsets import Refused, cluster_errors, connect, find_flow
from reconciler.operations.verify import READ_TIMEOUTS, compare_partition, read_syncs
from reconciler.topology.model import Delivery, Flow, Topology


@dataclass(frozen=True)
class FailbackRequest:
    source: str  # B: where the groups run now (--from)
    target: str  # A: where they go back to (--to)
    record: CutoverRecord | None = None
    truncate: bool = False
    dry_run: bool = False
    timeout: float = 30.0  # per cluster request; a partition's read gets READ_TIMEOUTS of them


@dataclass(frozen=True)
class Divergence:
    """One partition of an original topic on A, from its end at cutover."""

    topic: str
    partition: int
    remote_topic: str  # its copy on B
    cutover_end: int  # the first offset compared
    end: int  # past the last record read on A: where --truncate deletes up to
    copied: int  # A's records from the cutover end on that did reach B (the forward flow ran on)
    runs: tuple[Difference, ...]  # the ones that never reached B, as runs of A's offsets (kind `missing`)
    truncate_error: str | None = None
    truncated: bool = False

    @property
    def count(self) -> int:
        return sum(r.count for r in self.runs)


@dataclass(frozen=True)
class FailbackOutcome:
    forward: str
    reverse: str
    source: str  # B
    target: str  # A
    dry_run: bool
    truncate: bool
    from_record: bool
    divergence: tuple[Divergence, ...]
    starts: mc.FailoverPlan  # the reverse job's positions on B where it writes back into A's originals
    applied: bool  # the positions were committed

    @property
    def divergent(self) -> int:
        return sum(d.count for d in self.divergence)

    @property
    def truncate_errors(self) -> list[str]:
        return [f"{d.topic}-{d.partition}: {d.truncate_error}" for d in self.divergence if d.truncate_error]


# --- pure: what the comparison of one partition says ---------------------------------------------------------


def divergent_runs(alignment: Alignment, source: PartitionDigests) -> tuple[Difference, ...]:
    """The source records of a window that are not on the target (missing, changed, or pending: past the last
    match and the newest offset sync), as runs of source offsets in order."""
    runs = [
        Difference(DiffKind.MISSING, d.source_first, d.source_last, None, None, d.count)
        for d in alignment.differences
        if d.kind in (DiffKind.MISSING, DiffKind.CHANGED)
    ]
    if alignment.pending:
        so = source.offsets
        runs.append(Difference(DiffKind.MISSING, so[-alignment.pending], so[-1], None, None, alignment.pending))
    merged: list[Difference] = []
    for r in sorted(runs, key=lambda r: r.source_first or 0):
        last = merged[-1] if merged else None
        if last is not None and last.source_last is not None and r.source_first == last.source_last + 1:
            merged[-1] = Difference(
                DiffKind.MISSING, last.source_first, r.source_last, None, None, last.count + r.count
            )
        else:
            merged.append(r)
    return tuple(merged)


@dataclass(frozen=True)
class Copies:
    """Where the records copied from the source end on the target side of a comparison."""

    last: int | None  # the target offset of the last one (None: the side read holds none)
    own_before_last: int | None  # the first target record of no source record before it (None: none)


def locate_copies(alignment: Alignment, target: PartitionDigests) -> Copies:
    """Every target record read is a copy except those the alignment calls extra or changed (under the identity
    policy: B's own records in the same topic)."""
    own = sorted(
        (d.target_first, d.target_last)
        for d in alignment.differences
        if d.kind in (DiffKind.EXTRA, DiffKind.CHANGED) and d.target_first is not None and d.target_last is not None
    )
    firsts = [a for a, _ in own]

    def is_own(offset: int) -> bool:
        k = bisect_right(firsts, offset) - 1
        return k >= 0 and own[k][0] <= offset <= own[k][1]

    last = next((o for o in reversed(target.offsets) if not is_own(o)), None)
    before = next((a for a, _ in own if last is not None and a < last), None)
    return Copies(last, before)


# --- the operation ------------------------------------------------------------------------------------------


def _one_flow(topology: Topology, source: str, target: str, what: str) -> Flow:
    flows = [f for f in topology.flows if (f.source, f.target) == (source, target)]
    if not flows:
        raise Refused(
            f"no flow {source}->{target} in the topology: {what}; declare it (enabled: false is enough) and run "
            "failback again"
        )
    if len(flows) > 1:
        raise Refused(f"several flows {source}->{target} ({', '.join(f.name for f in flows)}): give --record")
    return flows[0]


def _flows(topology: Topology, request: FailbackRequest) -> tuple[Flow, Flow]:
    a, b = request.target, request.source
    for alias in (a, b):
        if alias not in topology.clusters:
            raise Refused(
                f"cluster {alias!r} is not in the topology (clusters: {', '.join(sorted(topology.clusters))})"
            )
    reverse = _one_flow(topology, b, a, "failback starts the reverse flow, which the topology must declare")
    record = request.record
    if record is None:
        forward = _one_flow(topology, a, b, "failback compares A with what the flow A->B copied to B")
    else:
        if (record.source, record.target) != (a, b):
            raise Refused(
                f"the cutover record is of flow {record.flow} ({record.source} to {record.target}), "
                f"not of a flow {a}->{b}: give --from {record.target} --to {record.source}, or another record"
            )
        if record.dry_run:
            raise Refused("the cutover record is of a dry run (nothing was moved then): give the record of the cutover")
        forward = find_flow(topology, record.flow)
    if forward.enabled:
        raise Refused(
            f"flow {forward.name} is still enabled in the topology: switch it off (enabled: false) and apply first "
            "(while it runs, what reached the other side keeps changing)"
        )
    return forward, reverse


def _refuse_live(topology: Topology, backend: Backend, flows: tuple[Flow, ...]) -> None:
    now_ms = backend.clock() * 1000
    for flow in flows:
        raw = backend.read_status(topology.clusters[flow.target]).get(flow.name)
        record = StatusRecord.of(raw, flow.name) if raw is not None else None
        if health(record, now_ms, None).replicating:
            raise Refused(
                f"the job of flow {flow.name} still reports {record.state_name if record else 'live'}: "
                "stop it (enabled: false, apply) before failing back; nothing was changed"
            )


def failback(topology: Topology, request: FailbackRequest, backend: Backend) -> FailbackOutcome:
    forward, reverse = _flows(topology, request)
    a_alias, b_alias = request.target, request.source
    with cluster_errors():
        _refuse_live(topology, backend, (forward, reverse))
        a = connect(topology, a_alias, backend, request.timeout)
        b = connect(topology, b_alias, backend, request.timeout)
        sides = _Sides(a, b, request, _forward_syncs(forward, a, b, a_alias, b_alias))
        compared = _compare(forward, reverse, sides)
        seeds = compared.seeds
        group = job_group_of(reverse.name)
        existing = b.committed_offsets(group, list(seeds)) if seeds else {}
        refusals = compared.refusals + _reverse_positions_behind(reverse, group, seeds, sides)
        if refusals:
            raise Refused("; ".join(refusals) + "; nothing was changed")
        plan = mc.plan_failover(group, seeds, existing, None)
        applied = False
        if not request.dry_run and plan.commits:
            b.commit_offsets(group, plan.commits)
            applied = True
        divergence = _truncate(a, compared.divergence, request.dry_run) if request.truncate else compared.divergence
    return FailbackOutcome(
        forward.name,
        reverse.name,
        b_alias,
        a_alias,
        request.dry_run,
        request.truncate,
        request.record is not None,
        tuple(divergence),
        plan,
        applied,
    )


@dataclass(frozen=True)
class _Sides:
    """A (where the groups go back to), B (where they run now), the request, and the forward flow's offset syncs."""

    a: MirrorCluster
    b: MirrorCluster
    request: FailbackRequest
    syncs: list[OffsetSync]

    @property
    def a_alias(self) -> str:
        return self.request.target

    @property
    def b_alias(self) -> str:
        return self.request.source


def _forward_syncs(forward: Flow, a: MirrorCluster, b: MirrorCluster, a_alias: str, b_alias: str) -> list[OffsetSync]:
    """The forward flow's offset syncs, from wherever its policy keeps them."""
    syncs_alias, syncs_topic = offset_syncs_place(forward, a_alias, b_alias)
    syncs_cluster = a if syncs_alias == a_alias else b
    n = syncs_cluster.topics().get(syncs_topic, 0)
    return read_syncs(syncs_cluster.read_all(syncs_topic, n)) if n else []


@dataclass
class _Comparison:
    """A compared with B, partition by partition: what diverged, where the reverse job starts, why not."""

    divergence: list[Divergence] = field(default_factory=list)
    seeds: dict[mc.TopicPartition, int] = field(default_factory=dict)  # the reverse job's positions on B
    refusals: list[str] = field(default_factory=list)


def _compare(forward: Flow, reverse: Flow, sides: _Sides) -> _Comparison:
    """Every partition of each original topic on A the forward flow copies, compared with its copy on B."""
    on_a, on_b = sides.a.topics(), sides.b.topics()
    out = _Comparison()
    for topic in sorted(on_a):
        remote = route(forward, topic)
        if remote is None or forward.policy.is_heartbeats_topic(topic):
            continue
        round_trip = remote in on_b and route(reverse, remote) == topic
        for p in range(on_a[topic]):
            _compare_partition(sides, topic, p, remote, on_b.get(remote, 0), round_trip, out)
    return out


def _compare_partition(
    sides: _Sides, topic: str, p: int, remote: str, remote_partitions: int, round_trip: bool, out: _Comparison
) -> None:
    """One partition, from its end at cutover: its divergence, and where the reverse job starts on B when it writes
    back into it (or why it cannot)."""
    record = sides.request.record
    if record is not None:  # a partition created after the cutover: all of it
        start = record.source_ends.get(mc.TopicPartition(topic, p), 0)
    else:
        start = SyncAnchor.fold(sides.syncs, topic, p, 0).replicated_through + 1
    read_timeout = sides.request.timeout * READ_TIMEOUTS
    verdict, src, tgt = compare_partition(
        sides.a, sides.b, topic, p, remote, remote_partitions, sides.syncs, read_timeout, start_offset=start
    )
    runs = divergent_runs(verdict.alignment, src)
    end = src.offsets[-1] + 1 if len(src) else verdict.source_start
    copied = verdict.source_records - sum(r.count for r in runs)
    out.divergence.append(Divergence(topic, p, remote, verdict.source_start, end, copied, runs))
    if not round_trip or verdict.target_start is None:
        return
    copies = locate_copies(verdict.alignment, tgt)
    if copies.own_before_last is not None:
        out.refusals.append(
            f"{remote}-{p} on {sides.b_alias} holds a record of its own at {copies.own_before_last}, before the "
            f"last record copied from {sides.a_alias} at {copies.last}: the reverse flow would copy records "
            f"back into {topic} on {sides.a_alias} or skip some of {sides.b_alias}'s"
        )
        return
    out.seeds[mc.TopicPartition(remote, p)] = copies.last + 1 if copies.last is not None else verdict.target_start


def _reverse_positions_behind(
    reverse: Flow, group: str, seeds: dict[mc.TopicPartition, int], sides: _Sides
) -> list[str]:
    """An exactly-once reverse job keeps its positions in its group on A, under A's names, and those come first: one
    behind a seed would copy A's records back."""
    if not seeds or reverse.delivery is not Delivery.EXACTLY_ONCE:
        return []
    on_target = sides.a.committed_offsets(group, [mc.TopicPartition(topic_of(reverse, s), s.partition) for s in seeds])
    refusals = []
    for s, seed in seeds.items():
        at = on_target.get(mc.TopicPartition(topic_of(reverse, s), s.partition))
        if at is not None and at < seed:
            refusals.append(
                f"the reverse flow's job already has position {at} on {s} (behind {seed}, its records from "
                f"{sides.a_alias}): it would copy them back; delete its group {group!r} on {sides.a_alias} first"
            )
    return refusals


def topic_of(reverse: Flow, remote: mc.TopicPartition) -> str:
    """The topic on A the reverse flow writes B's `remote` into."""
    return route(reverse, remote.topic) or remote.topic


def _truncate(a, divergence: list[Divergence], dry_run: bool) -> list[Divergence]:
    before = {mc.TopicPartition(d.topic, d.partition): d.end for d in divergence if d.count}
    errors: Mapping[mc.TopicPartition, str | None] = {} if dry_run or not before else a.delete_records(before)
    out = []
    for d in divergence:
        tp = mc.TopicPartition(d.topic, d.partition)
        if tp in errors:
            err = errors[tp]
            d = Divergence(
                d.topic, d.partition, d.remote_topic, d.cutover_end, d.end, d.copied, d.runs, err, err is None
            )
        out.append(d)
    return out
