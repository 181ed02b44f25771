"""`reconciler verify`, pure: does a remote topic hold what its source topic holds?

Each side of a partition is reduced to one 64-bit digest per record (key, value, headers and timestamp:
what MirrorMaker 2 copies), in log order, with its offset (`PartitionDigests`: 16 bytes a record, never the
records). The two sequences are aligned through the offset syncs (`SyncAnchor`: the downstream offset of the
last sync at or before the window's start is where the target side starts) and walked in order:

* equal digests: the record was copied (`matched`);
* a target record equal to a source record already matched, nearby behind (`LOOKBACK`): a duplicate of
  at-least-once delivery (a batch written again after a retry), reported apart (`DUPLICATE`), not an error;
* a target record found further on in the source (within `LOOKAHEAD`): the source records in between never
  reached the target (`MISSING`);
* a source record found further on in the target: the target records in between came from nowhere
  (`EXTRA`);
* neither: the record at this place differs (`CHANGED`).
* Source records past the last match and past the newest offset sync (`replicated_through`) are not yet
  replicated (`pending`: the flow's lag), not a difference; a missing record followed by a match, or at or
  before the newest sync, was lost.

Differences are reported as runs of consecutive offsets (`Difference`), so a partition missing a million
records is one line.
"""

from __future__ import annotations

import enum
import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from hashlib import blake2b

from reconciler.mirror.records import OffsetSync

#: How far back, in matched source records, a target record is looked for as a duplicate.
LOOKBACK = 100_000
#: How far ahead either side is searched to tell a missing or an extra record from a changed one.
LOOKAHEAD = 10_000

_LEN = struct.Struct(">i").pack
_TS = struct.Struct(">q").pack


def record_digest(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None, timestamp: int
) -> int:
    """A 64-bit digest of what a replicated record must keep: key, value, headers (in order) and timestamp.
    None and empty differ (a length of -1)."""
    parts = [
        _LEN(-1 if key is None else len(key)),
        key or b"",
        _LEN(-1 if value is None else len(value)),
        value or b"",
        _TS(timestamp),
    ]
    if headers:
        for name, hv in headers:
            raw = name.encode()
            parts += (_LEN(len(raw)), raw, _LEN(-1 if hv is None else len(hv)), hv or b"")
    return int.from_bytes(blake2b(b"".join(parts), digest_size=8).digest(), "little")


@dataclass
class PartitionDigests:
    """One side of a partition in a window: offsets and digests, in log order."""

    offsets: array = field(default_factory=lambda: array("q"))
    digests: array = field(default_factory=lambda: array("Q"))
    #: with a `since` time: the first offset whose timestamp is at or after it (None: none is)
    first_since: int | None = None

    def add(self, offset: int, digest: int) -> None:
        self.offsets.append(offset)
        self.digests.append(digest)

    def __len__(self) -> int:
        return len(self.digests)


@dataclass(frozen=True)
class SyncAnchor:
    """Where the two sides of a partition are aligned, from the offset syncs of one source partition."""

    upstream: int | None  # the sync at or before the window start (None: no such sync)
    downstream: int | None
    first_upstream: int | None  # the first sync (after the last rewind), when none is at or before the start
    first_downstream: int | None
    replicated_through: int  # the newest sync's upstream offset: every record up to it was copied (-1: none)

    @classmethod
    def fold(cls, syncs: Iterable[OffsetSync], topic: str, partition: int, window_start: int) -> SyncAnchor:
        """One pass over the offset-syncs topic in log order (constant memory); an upstream rewind (the
        topic recreated) forgets the syncs before it, as MM2's OffsetSyncStore does."""
        at = first = None
        newest = -1
        for s in syncs:
            if s.topic != topic or s.partition != partition:
                continue
            if s.upstream_offset < newest:  # rewind
                at = first = None
            newest = s.upstream_offset
            if first is None:
                first = s
            if s.upstream_offset <= window_start:
                at = s
        return cls(
            at.upstream_offset if at else None,
            at.downstream_offset if at else None,
            first.upstream_offset if first else None,
            first.downstream_offset if first else None,
            newest,
        )

    def starts(self, window_start: int, target_low: int) -> tuple[int, int]:
        """(source start, target start): from the anchoring sync, else the first sync, else the window start
        and the target's beginning."""
        if self.upstream is not None and self.downstream is not None:
            return self.upstream, self.downstream
        if self.first_upstream is not None and self.first_downstream is not None:
            return self.first_upstream, self.first_downstream
        return window_start, target_low


class DiffKind(str, enum.Enum):
    MISSING = "missing"  # on the source, not on the target
    EXTRA = "extra"  # on the target, from no source record
    CHANGED = "changed"  # at the same place, a different record
    DUPLICATE = "duplicate"  # on the target again (at-least-once), not an error


@dataclass(frozen=True)
class Difference:
    """A run of `count` consecutive records of one kind; offsets are first..last on each side (None: none)."""

    kind: DiffKind
    source_first: int | None
    source_last: int | None
    target_first: int | None
    target_last: int | None
    count: int

    def to_dict(self) -> dict:
        return {
            "kind": self.kind.value,
            "source_offsets": None if self.source_first is None else [self.source_first, self.source_last],
            "target_offsets": None if self.target_first is None else [self.target_first, self.target_last],
            "count": self.count,
        }


@dataclass(frozen=True)
class Alignment:
    matched: int
    differences: tuple[Difference, ...]  # missing, extra, changed (in order)
    duplicates: tuple[Difference, ...]
    pending: int  # source records past the newest sync and the last match: not yet replicated

    @property
    def clean(self) -> bool:
        return not self.differences


class _Runs:
    def __init__(self) -> None:
        self.runs: list[Difference] = []

    def add(self, kind: DiffKind, s: int | None, t: int | None, count: int = 1, s_last: int | None = None) -> None:
        s_last = s if s_last is None else s_last
        last = self.runs[-1] if self.runs else None
        if (
            last is not None
            and last.kind is kind
            and (s is None) == (last.source_first is None)
            and (t is None) == (last.target_first is None)
            and (s is None or s == last.source_last + 1)  # type: ignore[operator]
            and (t is None or t == last.target_last + 1)  # type: ignore[operator]
        ):
            self.runs[-1] = Difference(kind, last.source_first, s_last, last.target_first, t, last.count + count)
        else:
            self.runs.append(Difference(kind, s, s_last, t, t, count))


def _find(a: array, x: int, lo: int, hi: int) -> int:
    try:
        return a.index(x, max(lo, 0), max(min(hi, len(a)), 0))
    except ValueError:
        return -1


def align(
    source: PartitionDigests, target: PartitionDigests, replicated_through: int, window_start: int = -1
) -> Alignment:
    """Walk both sides once (see the module's doc); cost O(n) when they agree. Both sides start where an
    offset sync aligns them, which may be before the window: what comes before `window_start` (a source
    offset) is walked to keep the alignment but neither counted nor reported."""
    S, T, so, to = source.digests, target.digests, source.offsets, target.offsets
    n, m = len(S), len(T)
    w = bisect_left(so, window_start)  # the first source index in the window
    i = j = matched = 0
    diffs, dups = _Runs(), _Runs()
    dup_at = -1  # the source index the current duplicate run continues at
    while i < n and j < m:
        t = T[j]
        if S[i] == t:
            matched += i >= w
            i += 1
            j += 1
            continue
        if 0 <= dup_at < i and S[dup_at] == t:
            if i >= w:
                dups.add(DiffKind.DUPLICATE, so[dup_at], to[j])
            dup_at += 1
            j += 1
            continue
        k = _find(S, t, i - LOOKBACK, i)
        if k >= 0:
            if i >= w:
                dups.add(DiffKind.DUPLICATE, so[k], to[j])
            dup_at = k + 1
            j += 1
            continue
        a = _find(S, t, i + 1, i + LOOKAHEAD)
        b = _find(T, S[i], j + 1, j + LOOKAHEAD)
        if a >= 0 and (b < 0 or a - i <= b - j):
            first = max(i, w)
            if first < a:
                diffs.add(DiffKind.MISSING, so[first], None, a - first, so[a - 1])
            i = a
        elif b >= 0:
            if i >= w:
                diffs.add(DiffKind.EXTRA, None, to[j])
            j += 1
        else:
            if i >= w:
                diffs.add(DiffKind.CHANGED, so[i], to[j])
            i += 1
            j += 1
    pending = 0
    i = max(i, w)
    while i < n:  # the source's tail, past the last match: missing where an offset sync says it was copied
        if so[i] > replicated_through:
            pending = n - i
            break
        diffs.add(DiffKind.MISSING, so[i], None)
        i += 1
    while j < m:  # the target's tail: duplicates, else extra
        k = _find(S, T[j], n - LOOKBACK, n)
        if k >= 0:
            dups.add(DiffKind.DUPLICATE, so[k], to[j])
        else:
            diffs.add(DiffKind.EXTRA, None, to[j])
        j += 1
    return Alignment(matched, tuple(diffs.runs), tuple(dups.runs), pending)
