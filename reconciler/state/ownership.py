"""Who owns which remote topic of a cluster: the claims of topologies with an `owner:` (docs/environments.md,
"Ownership").

Kafka keeps no tags on a topic (a topic config must be one Kafka knows), so a claim is a record in the cluster's
`reconciler.lease.internal` topic, beside the apply's lease and its `applied/<cluster>` records (compacted, never
replicated nor pruned): key `owned/<owner>/<topic>`, value `{"owner": ..., "topic": ...}`; a tombstone withdraws it.
An apply writes them (`record_ownership`, the plan's action: the owner's desired remote topics it has not claimed
yet, and the claims of the topics it deleted); a plan reads them with the live state (`parse_claims`), and prune
deletes only a topic its own owner claims and no other does (plan/diff.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Protocol

#: The cluster's topic of the apply's lease, its applied records and the owners' claims (its one home: contract/
#: spec.py re-exports it).
LEASE_TOPIC = "reconciler.lease.internal"
CLAIM_PREFIX = b"owned/"

#: topic name -> the owners that claim it
Claims = Mapping[str, frozenset[str]]


class _Record(Protocol):
    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


def claim_key(owner: str, topic: str) -> bytes:
    """The key of `owner`'s claim of `topic` (neither holds a `/`: an owner is a name, a topic a Kafka name)."""
    return CLAIM_PREFIX + f"{owner}/{topic}".encode()


def claim_value(owner: str, topic: str) -> bytes:
    return json.dumps({"owner": owner, "topic": topic}, sort_keys=True).encode()


def parse_claims(records: Iterable[_Record]) -> dict[str, frozenset[str]]:
    """The claims standing after `records` (the topic read from its start: a tombstone withdraws the claim before
    it), by topic. Records of other keys and unreadable values are skipped."""
    standing: dict[bytes, tuple[str, str]] = {}
    for r in records:
        if not r.key or not r.key.startswith(CLAIM_PREFIX):
            continue
        if r.value is None:
            standing.pop(r.key, None)
            continue
        try:
            value = json.loads(r.value)
        except ValueError:
            continue
        owner, topic = (value.get("owner"), value.get("topic")) if isinstance(value, dict) else (None, None)
        if isinstance(owner, str) and isinstance(topic, str) and r.key == claim_key(owner, topic):
            standing[r.key] = (owner, topic)
    out: dict[str, set[str]] = {}
    for owner, topic in standing.values():
        out.setdefault(topic, set()).add(owner)
    return {topic: frozenset(owners) for topic, owners in sorted(out.items())}
