"""What the job copied last, per partition, to tell a tail the source lost and gave to new records (issue 46).

A broker that loses acknowledged records (noida-db at a restart under load, Apache Kafka at an unclean leader election)
gives their offsets to the next records it is sent. Offsets alone tell the loss only while the end is below the job's
position; once new records refill the lost offsets, the job's position is inside the log again and the new records
below it would never be copied. So the job keeps, per partition, the fingerprints of a few records it copied
(`Fingerprint`: offset, timestamp, a digest of key, value and headers, and the leader epoch where the broker gives
one), in a ring of `RING_SIZE` spread back over the recent copies (`TailRing`). After an event that can hide a
truncation (engine/source_faults.py `SourceFaults.check_tails`), the source's records at those offsets are read back
and compared: the newest fingerprint that still matches is where the source and what was copied diverge
(`divergence_point`), and the partition is copied again from the offset after it.

Pure: no I/O here (the read back is `SourceFaults`' through engine/ends.py's `RecordReader`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]

#: Fingerprints kept per partition.
RING_SIZE = 16
#: Of those, the newest kept dense (every fingerprint added); older ones are thinned so the ring reaches further back.
RING_DENSE = 4
#: Fingerprints whose copy's offset on the target is known (the last record of a round), kept apart: the newest of
#: them below a divergence is where the record-by-record comparison starts (`first_difference`).
ANCHORS = 8


@dataclass(frozen=True)
class Fingerprint:
    """One copied record: its source offset, timestamp (ms), a digest of key, value and headers, and the leader epoch
    it was written in (None: the broker gives none, as noida-db and Tansu)."""

    offset: int
    timestamp: int
    digest: bytes
    epoch: int | None = None
    down: int | None = None  # the offset of its copy on the target, where known (the last record of a round)

    def same_record(self, other: Fingerprint | None) -> bool:
        """The same key, value and headers, wherever it is (a source record and its copy on the target: not the
        timestamp, which a remote topic with `message.timestamp.type=LogAppendTime` rewrites)."""
        return other is not None and other.digest == self.digest

    def matches(self, other: Fingerprint | None) -> bool:
        """The same record: same offset, timestamp and digest; and the same leader epoch where both are known (a
        different epoch at the same offset is another record, whatever its bytes)."""
        if other is None or other.offset != self.offset:
            return False
        if self.epoch is not None and other.epoch is not None and self.epoch != other.epoch:
            return False
        if self.timestamp >= 0 and other.timestamp >= 0 and other.timestamp != self.timestamp:
            return False  # (a negative timestamp: not known, as one read from a copy on the target)
        return other.digest == self.digest


def digest(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None) -> bytes:
    """A 16-byte digest of a record's key, value and headers (each with its length, None apart from empty)."""
    h = hashlib.blake2b(digest_size=16)
    for part in (key, value):
        h.update(b"\xff" if part is None else len(part).to_bytes(4, "big") + part)
    for name, v in headers or ():
        n = name.encode() if isinstance(name, str) else bytes(name)
        h.update(len(n).to_bytes(4, "big") + n)
        h.update(b"\xff" if v is None else len(v).to_bytes(4, "big") + bytes(v))
    return h.digest()


def fingerprint_of(message: Any, down: int | None = None) -> Fingerprint:
    """The fingerprint of a confluent_kafka `Message` (a source record, or its copy on the target: the same key,
    value, headers and timestamp); `down`: the offset of its copy on the target, where known."""
    epoch = getattr(message, "leader_epoch", None)
    e = epoch() if callable(epoch) else None
    return Fingerprint(
        message.offset(),
        message.timestamp()[1],
        digest(message.key(), message.value(), message.headers()),
        e if isinstance(e, int) and e >= 0 else None,
        down,
    )


def spread(items: Sequence[Any], size: int = RING_SIZE, dense: int = RING_DENSE) -> list[Any]:
    """At most `size` of `items` (oldest first): the first, the newest `dense`, and evenly spaced ones between (a
    task's samples of a round and its fingerprints over its rounds: cheap, no gap search as `TailRing` does)."""
    n = len(items)
    if n <= size:
        return list(items)
    middle = size - dense - 1
    step = (n - dense - 1) / (middle + 1)
    return [items[0]] + [items[round(step * (i + 1))] for i in range(middle)] + list(items[n - dense :])


def divergence_point(ring: Sequence[Fingerprint], read_back: Mapping[int, Fingerprint | None]) -> int | None:
    """Where the source and what the job copied part: the offset after the newest fingerprint of `ring` (oldest
    first) that the source still holds (`read_back`: offset -> the record the source holds there now, None: none);
    the job copies again from there. An offset not read back counts as not known and is passed over. None: no
    fingerprint matches (the divergence is older than the ring: the caller falls back to its offset rules)."""
    for fp in reversed(ring):
        if fp.offset in read_back and fp.matches(read_back[fp.offset]):
            return fp.offset + 1
    return None


def first_difference(start: int, source: Sequence[Fingerprint], copies: Sequence[Fingerprint], stop: int) -> int:
    """Where the source's records (`source`, in order, from offset `start`, just after a record known to match) and
    the job's copies of them on the target (`copies`, in order, from just after that record's copy) first differ: the
    offset of the
    first source record whose copy is another record (or is missing); `stop` (the job's position) when every
    source record up to it has its copy. A source shorter than `stop` (its tail lost and not yet refilled): the
    offset after its last record. Records on the target that are not copies of the source's next ones in order (an
    at-least-once duplicate, a record sent to the dead-letter topic instead) make the difference come earlier: more
    is copied again, nothing is skipped."""
    for s, c in zip(source, copies):
        if not s.same_record(c):
            return s.offset
    if len(copies) < len(source):
        return source[len(copies)].offset
    after = source[-1].offset + 1 if source else start
    return min(after, stop)


@dataclass
class TailRing:
    """The fingerprints of one partition's copied records, oldest first: at most RING_SIZE, the newest RING_DENSE as
    added, older ones thinned (the one whose removal leaves the smallest gap goes), so the ring reaches back over the
    recent copies with gaps growing with age."""

    entries: list[Fingerprint] = field(default_factory=list)
    anchors: list[Fingerprint] = field(default_factory=list)  # the newest ANCHORS with `down`, oldest first

    def add(self, fps: Iterable[Fingerprint]) -> None:
        for fp in fps:
            if self.entries and fp.offset <= self.entries[-1].offset:
                self.cut(fp.offset)  # copied again from an earlier offset: what was after it is not what was copied
            self.entries.append(fp)
            if len(self.entries) > RING_SIZE:
                self._thin()
            if fp.down is not None:
                self.anchors = (self.anchors + [fp])[-ANCHORS:]

    def _thin(self) -> None:
        e = self.entries
        last = len(e) - RING_DENSE  # the newest RING_DENSE stay; the oldest stays too
        drop = min(range(1, last), key=lambda i: (e[i + 1].offset - e[i - 1].offset, i))
        del e[drop]

    def cut(self, offset: int) -> None:
        """Forget the fingerprints at and after `offset` (the partition is copied again from there)."""
        self.entries = [fp for fp in self.entries if fp.offset < offset]
        self.anchors = [fp for fp in self.anchors if fp.offset < offset]

    @property
    def newest(self) -> Fingerprint | None:
        return self.entries[-1] if self.entries else None


@dataclass
class CopiedTails:
    """Per partition, what the job copied last (`TailRing`), and the partitions whose tail must be read back before
    they are copied further (`suspect`: an event that can hide a truncation happened; each with why)."""

    rings: dict[TP, TailRing] = field(default_factory=dict)
    suspects: dict[TP, str] = field(default_factory=dict)
    suspected_at: dict[TP, float] = field(default_factory=dict)  # since when (monotonic seconds)

    def copied(self, tp: TP, fps: Iterable[Fingerprint]) -> None:
        """`fps` were copied (durable on the target), oldest first. A leader epoch other than the last one copied is
        a change of leader: the tail is checked."""
        fps = list(fps)
        if not fps:
            return
        ring = self.rings.setdefault(tp, TailRing())
        last = ring.newest
        if last is not None and last.epoch is not None and fps[0].epoch is not None and fps[0].epoch != last.epoch:
            self.suspect([tp], f"the leader epoch changed from {last.epoch} to {fps[0].epoch}")
        ring.add(fps)

    def ring(self, tp: TP) -> list[Fingerprint]:
        ring = self.rings.get(tp)
        return list(ring.entries) if ring is not None else []

    def anchors(self, tp: TP) -> list[Fingerprint]:
        """The fingerprints of `tp` whose copy's offset on the target is known, oldest first."""
        ring = self.rings.get(tp)
        return list(ring.anchors) if ring is not None else []

    def suspect(self, tps: Iterable[TP], why: str) -> None:
        """Read the tail of `tps` back before copying them further (only those with fingerprints: nothing else can
        be compared)."""
        now = time.monotonic()
        for tp in tps:
            if tp in self.rings and self.rings[tp].entries and tp not in self.suspects:
                self.suspects[tp] = why
                self.suspected_at[tp] = now

    def cleared(self, tp: TP) -> None:
        self.suspects.pop(tp, None)
        self.suspected_at.pop(tp, None)

    def suspect_for(self, tp: TP) -> float:
        """Seconds since `tp` became suspect (0: it is not)."""
        at = self.suspected_at.get(tp)
        return 0.0 if at is None else time.monotonic() - at

    def moved_back(self, tp: TP, offset: int) -> None:
        """The partition is copied again from `offset`: what was copied at and after it is not on the source."""
        ring = self.rings.get(tp)
        if ring is not None:
            ring.cut(offset)

    def forget(self, tp: TP) -> None:
        self.rings.pop(tp, None)
        self.cleared(tp)
