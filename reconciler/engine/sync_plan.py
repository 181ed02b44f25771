"""Offset-sync decisions for a run of replicated records, without a Python call per record.

MirrorMaker 2 decides per record (`PartitionOffsetSyncState.update`, in mirror/offset_syncs.py)
whether the upstream->downstream mapping must be published. A worker copies records in runs
where both upstream and downstream offsets are consecutive (the common case); for such a run the
decisions are a closed form: the first record may sync (first ever, gap, rewind), then one every
`max_offset_lag` downstream offsets. `plan_run` computes exactly the syncs `update` would, jumping
from one to the next; a test checks it against `update` record by record.
"""

from __future__ import annotations

from reconciler.mirror.offset_syncs import PartitionOffsetSyncState


def state_to_list(state: PartitionOffsetSyncState) -> list[int]:
    return [state.previous_upstream_offset, state.previous_downstream_offset, state.last_sync_downstream_offset]


def state_from_list(values: list[int] | None, max_offset_lag: int) -> PartitionOffsetSyncState:
    state = PartitionOffsetSyncState(max_offset_lag)
    if values:
        state.previous_upstream_offset, state.previous_downstream_offset, state.last_sync_downstream_offset = values
    return state


def plan_run(state: PartitionOffsetSyncState, upstream0: int, downstream0: int, count: int) -> list[tuple[int, int]]:
    """Feed records (upstream0+i, downstream0+i) for i < count into `state`; return the syncs to emit.

    Equivalent to calling `state.update` for each record and keeping the pairs it returned True for.
    """
    syncs: list[tuple[int, int]] = []
    if count <= 0:
        return syncs
    # The first record of the run carries every "mapping may have shifted" rule.
    if state.update(upstream0, downstream0):
        syncs.append((upstream0, downstream0))
    if count == 1:
        return syncs
    # Inside the run upstream and downstream both step by one, so only the staleness rule can fire:
    # at the first i where downstream0+i - (last_sync+1) >= lag.
    last_up, last_down = upstream0 + count - 1, downstream0 + count - 1
    lag = state.max_offset_lag
    next_sync_down = max(state.last_sync_downstream_offset + 1 + lag, downstream0 + 1)
    while next_sync_down <= last_down:
        up = upstream0 + (next_sync_down - downstream0)
        syncs.append((up, next_sync_down))
        state.last_sync_downstream_offset = next_sync_down
        next_sync_down = next_sync_down + 1 + lag
    state.previous_upstream_offset = last_up
    state.previous_downstream_offset = last_down
    return syncs
