"""`offsets translate`, `failover` and `reachability`: MirrorMaker 2's RemoteClusterUtils for operators.

Topology files only say how to reach the clusters (and which replication policy names remote
topics); `${ENV_VAR}` settings are resolved here, for the one cluster these commands read, and
every printed line goes through a Redactor. Only `failover --apply` writes anything.

A cluster that is down is found by the probe (`adapters/probe.py`) before any client is built: one
line, exit 1, within seconds; the clients' own log lines only with `-v`.
"""

from __future__ import annotations

import json
import sys
import time

from reconciler import logs
from reconciler.adapters.mirror_kafka import ClusterIOError, MirrorKafka
from reconciler.adapters.probe import CONNECT_TIMEOUT, NotAnswering, Unreachable, require_reachable
from reconciler.cli.common import EXIT_ERROR, EXIT_OK, add_paths_argument, load_validated, timeout_argument
from reconciler.mirror import mirror_client as mc
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.operations.backend import Backend
from reconciler.render import mirror as render
from reconciler.topology.connection import check_references, client_config, redactor_for
from reconciler.topology.model import Topology
from reconciler.topology.secrets import Redactor


def register(sub) -> None:
    offsets = sub.add_parser("offsets", help="consumer-group offsets across clusters (MM2 checkpoints)")
    offsets_sub = offsets.add_subparsers(dest="offsets_command", metavar="ACTION")
    offsets_sub.required = True
    p = offsets_sub.add_parser("translate", help="print where a group of SOURCE may resume on TARGET, from checkpoints")
    _add_group_arguments(p)
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser(
        "failover", help="move a consumer group from SOURCE to TARGET with translated offsets (dry run unless --apply)"
    )
    _add_group_arguments(p)
    p.add_argument(
        "--apply",
        action="store_true",
        help="commit the translated offsets to the group on TARGET (refused while the group is active there)",
    )
    p.add_argument(
        "--allow-rewind",
        action="store_true",
        help="also move offsets the group already committed further on TARGET back to the translation",
    )
    p.set_defaults(func=cmd_failover)

    p = sub.add_parser("reachability", help="upstream clusters of CLUSTER, hop counts and heartbeat age")
    p.add_argument("--cluster", required=True, help="cluster alias to inspect")
    _add_common_arguments(p)
    p.set_defaults(func=cmd_reachability)


def _add_common_arguments(p) -> None:
    add_paths_argument(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--timeout", type=timeout_argument, default=30.0, metavar="SECONDS", help="per cluster request (default 30)"
    )


def _add_group_arguments(p) -> None:
    p.add_argument("--group", required=True, help="consumer group id (as on SOURCE)")
    p.add_argument("--source", required=True, help="alias of the cluster the group consumed from")
    p.add_argument("--target", required=True, help="alias of the cluster the group moves to")
    _add_common_arguments(p)


class _Refused(Exception):
    """A command stops with a message and exit code 1."""


def _connect(topology: Topology, alias: str, timeout: float) -> MirrorKafka:
    """The only place cluster settings are resolved (for the one cluster a command reads); a cluster that is
    down raises Unreachable or NotAnswering here, before any Kafka client retries for `timeout`."""
    _check_aliases(topology, alias)
    diags = check_references(topology, [alias])
    if not diags.ok:
        raise _Refused(diags.render())
    config = client_config(topology.clusters[alias])
    require_reachable(alias, config, min(timeout, CONNECT_TIMEOUT))
    return MirrorKafka(logs.client_config(config), timeout)


def _check_aliases(topology: Topology, *aliases: str) -> None:
    for alias in aliases:
        if alias not in topology.clusters:
            raise _Refused(
                f"cluster {alias!r} is not in the topology (clusters: {', '.join(sorted(topology.clusters))})"
            )


def _flow_policy(topology: Topology, source: str, target: str) -> ReplicationPolicy:
    flow = next((f for f in topology.flows if (f.source, f.target) == (source, target)), None)
    if flow is None:
        print(
            f"warning: no flow {source}->{target} in the topology; assuming the default replication policy",
            file=sys.stderr,
        )
        return ReplicationPolicy()
    return flow.policy


def _run(args, body) -> int:
    """Load the topology, run `body(topology, redact)`, and turn refusals and I/O errors into exit 1."""
    topology, _ = load_validated(args.paths, quiet_warnings=True)
    if topology is None:
        return EXIT_ERROR
    redact = redactor_for(topology)
    try:
        return body(topology, redact)
    except (_Refused, ClusterIOError, Unreachable, NotAnswering) as exc:
        print(redact(f"error: {exc}"), file=sys.stderr)
        return EXIT_ERROR


def _translation(args, topology: Topology, target: MirrorKafka) -> render.Translation:
    policy = _flow_policy(topology, args.source, args.target)
    try:
        scan = mc.translate_offsets(target, args.source, args.group, policy)
    except mc.NoCheckpointsTopic:
        raise _Refused(
            f"cluster {args.target!r} has no topic {policy.checkpoints_topic(args.source)}: "
            f"no flow {args.source}->{args.target} has emitted checkpoints there"
        ) from None
    if not scan.checkpoints:
        raise _Refused(
            f"no checkpoints for group {args.group!r} in {policy.checkpoints_topic(args.source)} on "
            f"{args.target!r}: the group is not replicated by the flow (groups filter) or has not "
            f"committed offsets on {args.source!r} yet"
        )
    return render.Translation(args.group, args.source, args.target, policy, scan)


def _emit(args, redact: Redactor, text: str, data: dict) -> None:
    sys.stdout.write(redact(json.dumps(data, indent=2) + "\n" if args.format == "json" else text))


def cmd_translate(args, backend: Backend) -> int:
    def body(topology: Topology, redact: Redactor) -> int:
        _check_aliases(topology, args.source, args.target)
        target = _connect(topology, args.target, args.timeout)
        t = _translation(args, topology, target)
        _emit(args, redact, render.translation_text(t), render.translation_json(t))
        return EXIT_OK

    return _run(args, body)


def cmd_failover(args, backend: Backend) -> int:
    def body(topology: Topology, redact: Redactor) -> int:
        _check_aliases(topology, args.source, args.target)
        target = _connect(topology, args.target, args.timeout)
        t = _translation(args, topology, target)
        partitions = target.topics()
        present = [tp for tp in t.scan.checkpoints if tp.partition < partitions.get(tp.topic, 0)]
        committed = target.committed_offsets(args.group, present)
        state = target.group_state(args.group)
        plan = mc.plan_failover(args.group, t.scan.offsets(), committed, partitions, args.allow_rewind)
        refusal = _refusal(args, state, plan)
        applied = False
        if args.apply and refusal is None and plan.commits:
            target.commit_offsets(args.group, plan.commits)
            applied = True
        shown = render.Failover(t, state, plan, applied)
        _emit(args, redact, render.failover_text(shown), render.failover_json(shown))
        return _conclude(args, plan, refusal, applied)

    return _run(args, body)


def _refusal(args, state: mc.GroupState, plan: mc.FailoverPlan) -> str | None:
    """Why --apply may not commit (None when it may)."""
    if state.active:
        return (
            f"group {args.group!r} is active on {args.target!r} (state {state.state}, {state.members} member(s)): "
            f"stop its consumers there before moving its offsets"
        )
    if plan.missing:
        return (
            f"{len(plan.missing)} partition(s) do not exist on {args.target!r} "
            f"({', '.join(map(str, plan.missing))}): replicate the topics before failing over"
        )
    return None


def _conclude(args, plan: mc.FailoverPlan, refusal: str | None, applied: bool) -> int:
    n = len(plan.commits)
    kept = sum(p.action is mc.FailoverAction.KEEP_AHEAD for p in plan.partitions)
    if kept:
        print(
            f"note: {kept} partition(s) already committed further on {args.target} are kept "
            "(--allow-rewind moves them back)",
            file=sys.stderr,
        )
    if not args.apply:
        if refusal:
            print(f"note: --apply would be refused: {refusal}", file=sys.stderr)
        print(
            f"dry run: {n} offset(s) would be committed to group {args.group} on {args.target}; "
            "nothing was changed (use --apply)",
            file=sys.stderr,
        )
        return EXIT_OK
    if refusal:
        print(f"error: refusing to fail over: {refusal}; nothing was changed", file=sys.stderr)
        return EXIT_ERROR
    print(
        f"committed {n} offset(s) to group {args.group} on {args.target}"
        if applied
        else f"nothing to commit: group {args.group} on {args.target} is already at or past the translated offsets",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_reachability(args, backend: Backend) -> int:
    def body(topology: Topology, redact: Redactor) -> int:
        cluster = _connect(topology, args.cluster, args.timeout)
        policy = mc.policy_between([f.policy for f in topology.flows])
        latest = mc.latest_heartbeats(cluster, policy)
        report = mc.reachability(args.cluster, latest, policy, int(time.time() * 1000))
        _emit(
            args,
            redact,
            render.reachability_text(report, topology.slo.max_heartbeat_age_seconds),
            render.reachability_json(report),
        )
        return EXIT_OK

    return _run(args, body)
