"""The values of the choice settings (`Type.CHOICE` in topology/settings_registry.py): one enum per setting, declared
once here (or below: `job.policy`'s `PolicyKind` in mirror/policy.py, `job.deployer`'s `DeployerKind` in
deployer_kinds.py). The registry's `choices` are derived from them; code compares a setting's value with a member,
never with a bare string (tests/unit/test_architecture.py), so a misspelt value fails at once instead of meaning
the other choice.

    policy                        mirror.policy.PolicyKind
    delivery                      Delivery
    heartbeats.location           HeartbeatsLocation
    offset_syncs.topic_location   OffsetSyncsLocation
    on_refused_record             OnRefusedRecord
    job.deployer                  deployer_kinds.DeployerKind
    job.offset_reset              OffsetReset (and OFFSET_RESET_ALIASES, its older names)
"""

from __future__ import annotations

import enum


class Delivery(str, enum.Enum):
    AT_LEAST_ONCE = "at-least-once"
    EXACTLY_ONCE = "exactly-once"


class OffsetSyncsLocation(str, enum.Enum):
    SOURCE = "source"
    TARGET = "target"


class HeartbeatsLocation(str, enum.Enum):
    """Where a flow source->target writes its heartbeats: SOURCE (KIP-382's text, our default) or
    TARGET (Kafka's MirrorHeartbeatConnector, which produces to the target cluster)."""

    SOURCE = "source"
    TARGET = "target"


class OnRefusedRecord(str, enum.Enum):
    """What a flow does with a source record the target refuses (`on_refused_record`)."""

    FAIL = "fail"  # halt its partition at that record (the flow degraded)
    SKIP = "skip"  # write a reference to it to the flow's dead-letter topic and copy on


class OffsetReset(str, enum.Enum):
    """What a job does when the source lost the records at its next offset (`job.offset_reset`, the spec's
    `engine.offset_reset`): the position is below the partition's log start (retention or a deletion passed it),
    above its log end (the broker lost acknowledged records; their offsets will be given to new ones), or its topic
    was recreated. Each is reported (status `out_of_range` and `data_loss`, drift, metrics) whatever the policy."""

    RESUME = "resume"  # the default: where nothing the source holds is skipped and nothing is copied twice (below)
    RESUME_AT_START = "resume-at-start"  # at the partition's log start: nothing the source holds is skipped
    RESUME_AT_END = "resume-at-end"  # at the partition's log end: nothing is copied twice, what the source holds is not
    PAUSE = "pause"  # the partition halts (a PartitionFault, the flow degraded); the others copy on
    FAIL = "fail"  # the job stops (state failed, exit 1): nothing more is copied until someone looks

    @classmethod
    def of(cls, value: str) -> OffsetReset:
        return cls(OFFSET_RESET_ALIASES.get(value, value))


#: The values of `offset_reset` before issue 34, kept working: `earliest` is `resume-at-start`, `halt` is `pause`.
OFFSET_RESET_ALIASES: dict[str, OffsetReset] = {"earliest": OffsetReset.RESUME_AT_START, "halt": OffsetReset.PAUSE}
