"""What a flow's driver does when the source lost records or the target refuses one (issue 34): the stateful side of
engine/source_loss.py's pure rules.

`SourceFaults` checks a partition's position against the source's log (`check_position`), acts on ends that moved
back (`ends_moved_back`) and on recreated topics (`recreated`); each loss is reported (the status record's
`out_of_range`, counted in `data_loss`, the log) and `offset_reset` decides (`out_of_range`): resume at the log start
or end, halt the partition, or fail the job. A record the target refuses under `on_refused_record: fail` halts its
partition (`halt_refused`). A reloaded spec whose policy resumes releases the partitions halted under the old one
(`release_halted`).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.contract.spec import OffsetReset
from reconciler.contract.status import FaultKind, OutOfRange, PartitionFault
from reconciler.engine.delivery import mode_of
from reconciler.engine.driver_parts import Cluster, FlowSpec, Partitions, Progress, UsesClients
from reconciler.engine.ends import EndsRead, timed_out
from reconciler.engine.idle_gate import IdleGate
from reconciler.engine.source_loss import position_loss, resume_at
from reconciler.engine.tails import Fingerprint, divergence_point, first_difference
from reconciler.engine.tasks import TP, PartitionResult
from reconciler.topology.choices import OnRefusedRecord

log = logging.getLogger(__name__)

#: The faults a loss at the source halts a partition with (`offset_reset: pause` or `fail`).
#: How long a partition whose tail is to be read back (`check_tails`) is held out of the batches while the reads
#: fail; then it is copied on, unchecked (an error counted).
TAIL_READ_GIVE_UP_S = 60.0
#: Offset syncs read back on both clusters when no fingerprint of a partition matches (`synced_anchor`), newest first:
#: the store keeps them with exponentially growing gaps, so a few reach far back.
SYNCS_READ_BACK = 8

LOSS_KINDS = frozenset({FaultKind.OUT_OF_RANGE, FaultKind.TRUNCATED, FaultKind.LOST_TAIL, FaultKind.RECREATED})


class SourceLog(Protocol):
    """What the loss handler reads of the source's log (engine/ends.py `PartitionEnds`)."""

    def watermarks(self, tp: TP) -> tuple[int, int]: ...

    def listed_earliest(self, partitions: Iterable[TP]) -> Mapping[TP, int]: ...

    def listed_latest(self, partitions: Iterable[TP]) -> Mapping[TP, int]: ...

    def read_latest(self, partitions: list[TP]) -> EndsRead: ...

    def true_end(self, tp: TP) -> int | None: ...

    def true_ends(self, listed: Mapping[TP, tuple[int, int]]) -> Mapping[TP, int]: ...

    def records_at(self, tp: TP, offsets: Iterable[int]) -> Mapping[int, Fingerprint | None]: ...

    def records_from(self, tp: TP, start: int, stop: int) -> list[Fingerprint]: ...

    def records_first(self, wanted: Mapping[TP, int]) -> Mapping[TP, Fingerprint | None]: ...

    def copies_first(self, wanted: Mapping[TP, int]) -> Mapping[TP, Fingerprint]: ...

    def copies_from(self, remote: str, partition: int, start: int, count: int) -> list[Fingerprint]: ...


class Commits(Protocol):
    """Where the loss handler commits a position it moved (offsets.py `OffsetStore`)."""

    def commit(self, positions: Mapping[TP, int]) -> None: ...


class MovesBack(Protocol):
    """Where a position moved back is recorded (delivery.py `DeliveryMode.move_back`)."""

    def move_back(
        self, store: Any, positions: Mapping[TP, int], remotes: Mapping[TP, str], slots: Mapping[TP, int]
    ) -> None: ...


class Intact(enum.Enum):
    """A tail read back that matches what the job copied last (`SourceFaults.read_back`)."""

    INTACT = "intact"


INTACT = Intact.INTACT


class FaultClients(Protocol):
    """What the loss handler uses of the driver's clients (driver_parts.py `Connections`)."""

    @property
    def ends(self) -> SourceLog: ...

    @property
    def offsets(self) -> Commits: ...


def sync_store(clients: Any) -> Any:
    """The offset syncs the job replayed at start and keeps (the checkpoint rounds' `OffsetSyncStore`); None where
    the flow's clients hold none (checkpoints off, or a loss handler made without them)."""
    return getattr(getattr(clients, "checkpoints", None), "store", None)


def synced_anchor(store: Any, ends: Any, tp: TP, remote: str, below: int) -> list[Fingerprint]:
    """The loss reaches back past every fingerprint the job keeps (the job started since, or copied the partition in
    rounds its ring does not reach back over): the offset syncs of `store` (MM2's own, kept with exponentially
    growing gaps: `checkpoints.store`) below `below`, newest first, are read on both clusters through `ends`
    (engine/ends.py `PartitionEnds`); the first whose source record is still the one its copy on the target (`remote`)
    holds is where the source and the copies still agree (one fingerprint, its copy's offset known; none: the
    offsets' rule decides)."""
    for sync in [s for s in store.syncs(*tp) if s.upstream_offset < below][:SYNCS_READ_BACK]:
        up, down = sync.upstream_offset, sync.downstream_offset
        record = ends.records_at(tp, [up]).get(up)
        copy = ends.copies_first({(remote, tp[1]): down}).get((remote, tp[1]))
        if record is not None and record.same_record(copy):
            return [Fingerprint(up, record.timestamp, record.digest, record.epoch, down)]
    return []


@dataclass(frozen=True)
class SilentSort:
    """A batch's silent partitions as one listing of their ends and log starts sorts them
    (`SourceFaults.check_positions`): below the log start (`truncated`), past the listed end (`past`: to be read to
    their true end; on Tansu the listed end is the last batch's base offset + 1), each with its listed (start, end);
    and those a listing answered with an error rather than a silence (`alone`: checked on their own). The others are
    within their listed log (valid: the listed end, the last stable offset, is at or below the high watermark), or
    held out (their leader did not answer)."""

    truncated: dict[TP, tuple[int, int]]
    past: dict[TP, tuple[int, int]]
    alone: list[TP]

    def losses(self, positions: Mapping[TP, int], true: Mapping[TP, int]) -> list[tuple[TP, str, int, int]]:
        """The positions out of the log, given the true ends read of `past` (one not read: not judged, nothing moves;
        it is after its next silent batch): each with why, and the log's start and end, as `check_position` says."""
        out = [
            (tp, f"offset {positions[tp]} is below the log start {low} (truncated)", low, high)
            for tp, (low, high) in self.truncated.items()
        ]
        return out + [
            (
                tp,
                f"offset {positions[tp]} is past the log end {end} (records lost, or recreated)",
                self.past[tp][0],
                end,
            )
            for tp, end in sorted(true.items())
            if tp in self.past and positions[tp] > end
        ]


def sort_silent(positions: Mapping[TP, int], latest: EndsRead, lows: Mapping[TP, int]) -> SilentSort:
    truncated: dict[TP, tuple[int, int]] = {}
    past: dict[TP, tuple[int, int]] = {}
    alone: list[TP] = []
    for tp, position in sorted(positions.items()):
        if tp in latest.unanswered:
            continue
        if tp not in lows or tp not in latest.ends:
            alone.append(tp)
        elif position < lows[tp]:
            truncated[tp] = (lows[tp], latest.ends[tp])
        elif position > latest.ends[tp]:
            past[tp] = (lows[tp], latest.ends[tp])
    return SilentSort(truncated, past, alone)


class SourceFaults(UsesClients[FaultClients]):
    """A flow's handling of data lost at the source and of records the target refuses. It is given the flow
    (`FlowSpec`: its `offset_reset` applies as reloaded), the partitions it moves or halts (through their methods),
    the idle gate (a partition it touches is no longer caught up), the progress it reports to, `error` (count and log
    an error), `fail` (`offset_reset: fail`: the job stops), and the driver's clients when it opens them (`connect`:
    the source's ends and the job's positions). `mode`: where a position moved back is recorded (default: the
    delivery mode of the spec)."""

    def __init__(
        self,
        flow: FlowSpec,
        parts: Partitions,
        gate: IdleGate,
        progress: Progress,
        error: Callable[[str], None],
        fail: Callable[[], None],
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = log,
        *,
        clients: FaultClients | None = None,
        mode: MovesBack | None = None,
    ):
        self._flow, self.parts, self.gate, self.progress = flow, parts, gate, progress
        self._error, self._fail, self.log, self._clients, self._moves = error, fail, log, clients, mode
        self._seeded = False  # the tails of the partitions copied before this start: from the offset syncs, once

    def _mode(self) -> MovesBack:
        """Where a position moved back is recorded: the delivery mode's group."""
        return self._moves if self._moves is not None else mode_of(self._flow.spec)

    @property
    def offset_reset(self) -> OffsetReset:
        return OffsetReset.of(self._flow.spec.engine.offset_reset)

    def check_position(self, tp: TP, position: int) -> None:
        """A partition that answered neither records nor end-of-partition (Tansu answers a fetch outside the log
        with nothing at all): is the position valid? Below the log start it is not; past the high watermark it is
        checked against the true end (engine/ends.py: on Tansu the high watermark is below it). A partition whose
        leader does not answer the read while the source does is held out (engine/unanswered.py)."""
        try:
            ends = self.clients.ends
            low, high = ends.watermarks(tp)
            if position < low:
                self.out_of_range(
                    tp, position, f"offset {position} is below the log start {low} (truncated)", low, high
                )
                return
            if position <= high:
                return
            end = ends.true_end(tp)
            if end is not None and position > end:
                self.out_of_range(
                    tp, position, f"offset {position} is past the log end {end} (records lost, or recreated)", low, end
                )
        except Exception as exc:  # noqa: BLE001 - transient: checked again next batch
            self.log.info("cannot check position of %s: %s", tp, exc)
            if timed_out(exc) and self.gate.reach.answers(Cluster.SOURCE):
                # its leader does not answer while the source does: not asked again after each batch (unanswered.py)
                self.gate.hold_out({tp: f"{type(exc).__name__}: {exc}"})

    def check_positions(self, positions: Mapping[TP, int]) -> None:
        """`check_position` of a batch's silent partitions in a few reads however many (issue 47; one by one, a hung
        leader's N partitions held the loop N x 10 s, Tansu's 2,500 ~3 minutes): their ends and log starts listed, the
        partitions whose leader did not answer held out together, the rest judged by `SilentSort`."""
        if len(positions) <= 1:
            for tp, position in positions.items():
                self.check_position(tp, position)
            return
        ends, at_ms = self.clients.ends, int(time.time() * 1000)
        try:
            latest = ends.read_latest(sorted(positions))
            lows = ends.listed_earliest(sorted(tp for tp in positions if tp in latest.ends)) if latest.ends else {}
        except Exception as exc:  # noqa: BLE001 - transient: checked again next batch
            self.log.info("cannot list the ends of %d partitions to check their positions: %s", len(positions), exc)
            return
        if latest.unanswered:  # their leader did not answer while the others' did: not waited for one by one
            self.gate.hold_out(latest.unanswered, at_ms)
        silent = sort_silent(positions, latest, lows)
        for tp, reason, low, high in silent.losses(positions, ends.true_ends(silent.past) if silent.past else {}):
            self.out_of_range(tp, positions[tp], reason, low, high)
        for tp in silent.alone:
            self.check_position(tp, positions[tp])

    def ends_moved_back(self, moved: Mapping[TP, tuple[int, int]]) -> bool:
        """The source's end of some partitions, read before this batch, is below the last read (`moved`: (before,
        now) each, from the idle gate's `take_moved_back`): the broker lost records at and after it (at-least-once or
        not, the job may have copied them), and new records will get their offsets. Reported each time; a position
        past the end is handled by `offset_reset` now, before the batch copies from it: reused offsets below the
        position would be skipped. Whether positions moved."""
        changed = False
        for tp, (before, end) in sorted(moved.items()):
            if tp in self.parts.halted:
                continue
            position = self.parts.positions.get(tp, -2)
            reason = f"the log end moved back from {before} to {end}: the source lost records it had acknowledged"
            if position > end:
                self.out_of_range(
                    tp, position, f"{reason}; offset {position} is past it", None, end, FaultKind.LOST_TAIL
                )
                changed = True
            elif self.tail_lost(tp, reason):
                changed = True
            else:
                self.report_loss(
                    tp,
                    position,
                    f"{reason} (the job had not copied past it)",
                    None,
                    end,
                    FaultKind.LOST_TAIL,
                    "reported; the job's position is within the log",
                )
        return changed

    def recreated(self, tp: TP, before: str, now: str) -> None:
        """The source topic's id changed since the last refresh: deleted and created again."""
        position = self.parts.positions.get(tp, -2)
        if position < 0:
            return
        reason = f"topic {tp[0]} was recreated (topic id {before} is now {now})"
        self.out_of_range(tp, position, reason, None, None, FaultKind.RECREATED)

    def out_of_range(
        self,
        tp: TP,
        position: int,
        reason: str,
        low: int | None = None,
        high: int | None = None,
        kind: FaultKind | None = None,
        seen: bool = True,
    ) -> None:
        """The source lost the records at the partition's position (`kind`; classified by the log's range when not
        given): reported, then `offset_reset` decides: resume at the log start or end, halt the partition, or fail
        the job. A `kind` of lost-tail is one the job saw happen (its end moved back between two reads) unless not
        `seen` (no record the job copied last matches the source's: where the loss began is not known)."""
        self.gate.records_lost(tp)
        tail_seen_lost = kind is FaultKind.LOST_TAIL and seen  # the end moved back between two reads
        if low is None or high is None:
            try:
                w_low, w_high = self.clients.ends.watermarks(tp)
                low = w_low if low is None else low
                high = w_high if high is None else high
            except Exception:  # noqa: BLE001
                pass
        if kind is None and (low is None or high is None):
            # which loss is not known (the source does not answer its watermarks): decided when the partition's
            # next batch reports it again, never now (the log start would copy it all again, a halt would stop it)
            self.log.info(
                "cannot classify the offset %s of %s (%s): read again at the next batch", position, tp, reason
            )
            return
        if kind is None:
            kind = (position_loss(position, low, high) if low is not None and high is not None else None) or (
                FaultKind.OUT_OF_RANGE
            )
        policy = self.offset_reset
        if kind is FaultKind.LOST_TAIL and policy is OffsetReset.RESUME:
            try:
                back = self.read_back(tp)
            except Exception as exc:  # noqa: BLE001
                # where the tail diverges is not known yet: the partition is held out of the batches until its tail
                # is read back (`check_tails`), not resumed at the log start (copied again: duplicates, even
                # exactly-once) on a read that timed out
                self.log.info("cannot read the tail of %s back: %s", tp, exc)
                if self.parts.tails.ring(tp):
                    self.parts.tails.suspect([tp], reason)
                    return
                back = None
            if isinstance(back, int) and back <= position and (high is None or back <= high):
                self.resume_after_divergence(tp, position, back, reason, low, high)
                return
        to = resume_at(policy, low, high, kind, tail_seen_lost)
        if policy is OffsetReset.FAIL:
            action = "failed: the job stops (offset_reset: fail)"
        elif to is None:
            action = f"halted (offset_reset: {policy.value})"
        else:
            action = f"resumed at the log {'start' if to == low else 'end'} {to} (offset_reset: {policy.value})"
        at = self.report_loss(tp, position, reason, low, high, kind, action)
        self.parts.renew_consumers()
        if to is None:
            self.parts.halt(tp, PartitionFault(tp[0], tp[1], kind, reason, position, at))
            if policy is OffsetReset.FAIL:
                self._fail()
            return
        self.parts.moved(tp, to)
        self.clients.offsets.commit({tp: to})  # at-least-once; exactly-once commits inside transactions

    # --- a tail lost and given to new records (issue 46, engine/tails.py) -----------------------------------------
    def read_back(self, tp: TP) -> int | Intact | None:
        """Read back the source's records at the offsets the job copied last (`Partitions.tails`): INTACT when the
        newest still matches (one record read), else where they diverge (tails.py `divergence_point`: the offset
        after the newest that still matches; None: none does, or nothing to compare). Raises when the source does
        not answer."""
        ring = self.parts.tails.ring(tp)
        if not ring:
            return None
        ends = self.clients.ends
        newest = ring[-1]
        got = dict(ends.records_at(tp, [newest.offset]))
        if newest.offset not in got:
            raise TimeoutError(f"the record at offset {newest.offset} was not read back")
        if newest.matches(got[newest.offset]):
            return INTACT
        got.update(ends.records_at(tp, [fp.offset for fp in ring[:-1]]))
        back = divergence_point(ring, got)
        remote = self.parts.plan.copy.get(tp)
        older: list[Fingerprint] = []
        if back is None:
            if any(fp.offset not in got for fp in ring):  # not known: read again, rather than copy it all again
                raise TimeoutError(f"{sum(fp.offset not in got for fp in ring)} of the records copied not read back")
            store = sync_store(self.clients)
            older = synced_anchor(store, ends, tp, remote, ring[0].offset) if store and remote else []
            if not older:
                return None
            back = older[0].offset + 1
        # Between the newest fingerprint that matches and the next one, record by record: the source's records
        # against their copies on the target, from the newest matching record whose copy's offset is known.
        known = sorted(
            (fp for fp in self.parts.tails.anchors(tp) + ring + older if fp.down is not None and fp.offset < back),
            key=lambda fp: fp.offset,
        )
        position = self.parts.positions.get(tp, -1)
        if not known or remote is None or position <= back:
            return back
        anchor, down = known[-1], known[-1].down or 0
        start = anchor.offset + 1
        source = ends.records_from(tp, start, position)
        copies = ends.copies_from(remote, tp[1], down + 1, len(source))
        return first_difference(start, source, copies, position)

    def check_tails(self) -> bool:
        """Read back the tail of each partition an event made suspect (`CopiedTails.suspects`: the source broker
        lost, a leader epoch changed, the source answering again after failing): where the source no longer holds
        what the job copied last, the tail was lost and its offsets given to new records (`tail_lost`). A partition
        whose read fails stays suspect and is left out of the next batch (`held_back`). Whether the partitions a batch
        copies, or their positions, changed."""
        tails = self.parts.tails
        changed = False
        if not self._seeded:
            self._seeded = True
            self.seed_from_syncs()
        for tp in [tp for tp in tails.suspects if tp in self.parts.halted or self.parts.positions.get(tp, -1) < 0]:
            tails.cleared(tp)
            changed = True
        newest = {tp: tails.ring(tp)[-1] for tp in tails.suspects}
        try:  # first the newest fingerprint of every partition, in one read: where it matches, nothing was lost
            now = self.clients.ends.records_first({tp: fp.offset for tp, fp in newest.items()}) if newest else {}
        except Exception as exc:  # noqa: BLE001 - each partition on its own, below
            self.log.info("cannot read the tails back: %s", exc)
            now = {}
        for tp, why in sorted(tails.suspects.items()):
            if tp in now and newest[tp].matches(now[tp]):
                tails.cleared(tp)
                changed = True
                continue
            try:
                changed = self.tail_lost(tp, why, raise_unread=True) or changed
            except Exception as exc:  # noqa: BLE001 - read again before the next batch
                if tails.suspect_for(tp) < TAIL_READ_GIVE_UP_S:
                    self.log.info("cannot read the tail of %s back (%s): %s", tp, why, exc)
                    continue
                self._error(
                    f"{tp[0]}[{tp[1]}]: the tail the job copied could not be read back for "
                    f"{TAIL_READ_GIVE_UP_S:.0f} s ({why}): {exc}; copied on unchecked"
                )
            tails.cleared(tp)
            changed = True
        return changed

    def seed_from_syncs(self) -> None:
        """After the job starts, no fingerprint of what it copied is kept: the last offset sync of each partition
        (source offset -> the offset of its copy on the target, MM2's own, replayed at start: `checkpoints.store`)
        gives one, its record read on the target; each partition is then read back before it is copied on (a tail
        lost while the job was away and refilled by new records). A partition without a sync below its position,
        or whose copy cannot be read, is copied on unchecked."""
        conn = self.clients
        store = sync_store(conn)
        if store is None:
            return
        last: dict[TP, tuple[int, int]] = {}
        for tp, position in self.parts.positions.items():
            if tp in self.parts.plan.copy and position > 0 and not self.parts.tails.ring(tp):
                below = [s for s in store.syncs(*tp) if s.upstream_offset < position]
                if below:
                    last[tp] = (below[0].upstream_offset, below[0].downstream_offset)
        try:
            copies = conn.ends.copies_first({(self.parts.plan.copy[tp], tp[1]): d for tp, (_, d) in last.items()})
        except Exception as exc:  # noqa: BLE001 - copied on unchecked
            self.log.info("cannot read the last copies back from the target: %s", exc)
            return
        for tp, (up, down) in last.items():
            copy = copies.get((self.parts.plan.copy[tp], tp[1]))
            if copy is not None:
                # its timestamp not taken: a remote topic may keep the time it was appended instead
                self.parts.tails.copied(tp, [Fingerprint(up, -1, copy.digest, None, down)])
                self.parts.tails.suspect([tp], "the job started")

    def held_back(self) -> set[TP]:
        """The partitions a batch must not copy yet: their tail is to be read back first (the source has not
        answered the read since the event that made them suspect)."""
        return set(self.parts.tails.suspects)

    def tail_lost(self, tp: TP, why: str, raise_unread: bool = False) -> bool:
        """Is the tail of `tp` the job copied still on the source? If not, report the loss and copy again from
        where they diverge (`resume_after_divergence`). Whether the position moved."""
        position = self.parts.positions.get(tp, -1)
        try:
            back = self.read_back(tp)
        except Exception:
            if raise_unread:
                raise
            return False
        if back is INTACT or back is None:
            if back is None and self.parts.tails.ring(tp):
                # older than the ring reaches: the offsets' rule decides
                self.out_of_range(
                    tp,
                    position,
                    f"{why}: none of the records the job copied last is on the source any more",
                    kind=FaultKind.LOST_TAIL,
                    seen=False,
                )
                return True
            return False
        assert isinstance(back, int)
        if back >= position:
            return False
        self.resume_after_divergence(tp, position, back, why)
        return True

    def resume_after_divergence(
        self, tp: TP, position: int, back: int, why: str, low: int | None = None, high: int | None = None
    ) -> None:
        """The source lost the records the job had copied at `back` .. `position` - 1 (the records it holds there now,
        if any, are new ones): reported (kind lost-tail, with the count of offsets reused), then copied from `back`
        under `offset_reset: resume`; the other policies as for any lost tail (`out_of_range`)."""
        reused = position - back
        reason = (
            f"{why}: the source no longer holds the records the job copied from offset {back} (its offsets "
            f"{back}..{position - 1} given to new records: {reused} offsets reused)"
        )
        policy = self.offset_reset
        if policy is not OffsetReset.RESUME:
            self.out_of_range(tp, position, reason, low, high, FaultKind.LOST_TAIL)
            return
        action = (
            f"resumed at offset {back}, after the last record the source still holds as copied "
            f"(offset_reset: {policy.value})"
        )
        self.gate.records_lost(tp)
        self.report_loss(tp, position, reason, low, high, FaultKind.LOST_TAIL, action, reused)
        self.parts.renew_consumers()
        self.parts.moved(tp, back)
        self.parts.tails.cleared(tp)
        remotes = {tp: self.parts.plan.copy[tp]} if tp in self.parts.plan.copy else {}
        self._mode().move_back(self.clients.offsets, {tp: back}, remotes, {tp: self.parts.slots.get(tp, 0)})

    def report_loss(
        self,
        tp: TP,
        position: int,
        reason: str,
        low: int | None,
        high: int | None,
        kind: FaultKind,
        action: str,
        reused: int | None = None,
    ) -> int:
        """A loss at the source in the status record (`out_of_range`, counted in `data_loss`; `reused`: the offsets the
        job had copied that the source gave to new records), the log and the metrics; when (epoch ms)."""
        event = OutOfRange(tp[0], tp[1], position, low, high, reason, action, int(time.time() * 1000), kind, reused)
        self.progress.add_out_of_range(event)
        self._error(f"{tp[0]}[{tp[1]}]: {kind.value}: {reason}; {action}")
        return event.at or 0

    def release_halted(self) -> None:
        """After a spec reload: the partitions halted under a policy the new spec changed resume (a refused record
        under `on_refused_record: skip`, its records going to the dead-letter topic; a loss under an `offset_reset`
        that resumes: the new policy decides where, and the workers drop their cached consumers)."""
        if self._flow.spec.settings.on_refused_record is OnRefusedRecord.SKIP:
            self.parts.release([FaultKind.REFUSED_RECORD])
        if resume_at(self.offset_reset, 0, 0) is not None:
            for _ in self.parts.release(LOSS_KINDS):
                self.parts.renew_consumers()

    def halt_refused(self, tp: TP, p: PartitionResult) -> None:
        """`on_refused_record: fail`: the partition stops at the record the target refuses (the records before it
        were copied and their position committed); the flow is degraded until the job restarts (after the remote
        topic's limit is raised, or with `on_refused_record: skip`)."""
        refused = p.refused
        assert refused is not None
        reason = f"record at offset {refused.offset} refused by the target: {refused.reason}"
        self.parts.halt(
            tp, PartitionFault(tp[0], tp[1], FaultKind.REFUSED_RECORD, reason, refused.offset, int(time.time() * 1000))
        )
        self.gate.record_refused(tp)
        self._error(f"{tp[0]}[{tp[1]}]: halted: {reason} (on_refused_record: fail)")
