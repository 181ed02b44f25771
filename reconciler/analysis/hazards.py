"""Topology hazards found at validation time: replication loops, diamonds, residency violations.

They are judged on example topic names (witnesses of every include pattern and residency rule),
pushed through `expand`, the same function a plan uses on live topic names.
"""

from __future__ import annotations

from reconciler import settings
from reconciler.analysis.expansion import KAFKA_MAX_TOPIC_NAME, Expansion, Multiplication, Placement, expand, route
from reconciler.analysis.witness import examples
from reconciler.mirror.policy import HEARTBEATS_TOPIC
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.model import Topology


def witness_topics(topology: Topology) -> dict[str, list[str]]:
    """Example local topic names per source cluster: what its flows and the residency rules could carry."""
    names: set[str] = set()
    for flow in topology.active_flows:
        for pattern in flow.topics.include:
            names.update(examples(pattern))
    for rule in topology.residency:
        for pattern in rule.topics.include:
            names.update(examples(pattern))
    names.add(HEARTBEATS_TOPIC)
    sources = {f.source for f in topology.active_flows}
    return {c: sorted(names) for c in sorted(sources)}


def _flow_refs(p: Placement) -> str:
    return ", ".join(f"{f.name} at {f.where}" for f in p.path if f.where)


MAX_LOOPS_REPORTED = 20  # loops and diamonds of one kind shown; past it a count (a mesh has one per cycle)


def check_loops(exp: Expansion, diags: Diagnostics) -> None:
    seen: set[tuple[str, ...]] = set()
    for loop in exp.loops:
        cycle = tuple(f.name for f in loop.path)
        key = tuple(sorted(cycle))
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > MAX_LOOPS_REPORTED:
            continue
        diags.error(
            f"replication loop {loop.describe_path()}: topic {loop.origin_topic!r} would be copied back to "
            f"{loop.cluster!r} forever (identity policy keeps topic names, so the KIP-382 alias rule cannot stop it)",
            loop.path[-1].where,
            hint="use `policy: default` on one of these flows, or make their topic filters disjoint; flows: "
            + _flow_refs(loop),
            related=tuple(f.where for f in loop.path[:-1] if f.where),
        )
    if len(seen) > MAX_LOOPS_REPORTED:
        first = exp.loops[0]
        diags.error(
            f"{len(seen) - MAX_LOOPS_REPORTED:,} more replication loops like the ones above"
            + ("" if exp.complete else " (counted until the analysis stopped)"),
            first.path[-1].where,
            hint="identity-policy flows must not form cycles whose topic filters overlap; use `policy: default` "
            "on the flows of the cycle, or make their filters disjoint",
        )


def identity_cycles(topology: Topology, names: list[str]) -> list[tuple[str, tuple]]:
    """(topic, flows of a cycle) for each example topic that identity-policy flows carry around a cycle.

    Polynomial: per topic, the flows that keep its name (`route` returns it unchanged) form a graph;
    a strongly connected component with more than one cluster holds a cycle, found by a walk inside it.
    """
    found = []
    for topic in names:
        keep = [f for f in topology.active_flows if route(f, topic) == topic]
        for component in _sccs(keep):
            if len(component) < 2:
                continue
            inside = [f for f in keep if f.source in component and f.target in component]
            cycle = _cycle(inside)
            if cycle:
                found.append((topic, cycle))
    return found


def _sccs(flows) -> list[set[str]]:
    """Tarjan's strongly connected components of the flow graph, iteratively (no recursion limit)."""
    succ: dict[str, list[str]] = {}
    for f in flows:
        succ.setdefault(f.source, []).append(f.target)
        succ.setdefault(f.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == node:
                        break
                out.append(comp)
    return out


def _cycle(flows) -> tuple:
    """One cycle of flows inside a strongly connected set of flows (walk until a cluster repeats)."""
    out_of: dict[str, list] = {}
    for f in flows:
        out_of.setdefault(f.source, []).append(f)
    if not flows:
        return ()
    start = min(out_of)
    path, seen = [], {start: 0}
    here = start
    while True:
        f = out_of[here][0]
        path.append(f)
        if f.target in seen:
            return tuple(path[seen[f.target] :])
        seen[f.target] = len(path)
        here = f.target


def check_identity_cycles(topology: Topology, exp: Expansion, names: list[str], diags: Diagnostics) -> None:
    """When the expansion stopped at the bound, loops it did not reach are found on the graph (SCCs)."""
    if exp.complete or exp.loops:
        return
    for topic, cycle in identity_cycles(topology, names)[:MAX_LOOPS_REPORTED]:
        path = " -> ".join([cycle[0].source] + [f.target for f in cycle])
        diags.error(
            f"replication loop {path}: topic {topic!r} would be copied back to {cycle[0].source!r} forever "
            "(identity policy keeps topic names, so the KIP-382 alias rule cannot stop it)",
            cycle[-1].where,
            hint="use `policy: default` on one of these flows, or make their topic filters disjoint; flows: "
            + ", ".join(f"{f.name} at {f.where}" for f in cycle if f.where),
            related=tuple(f.where for f in cycle[:-1] if f.where),
        )


def check_diamonds(exp: Expansion, diags: Diagnostics) -> None:
    """Fan-out-fan-in: the same origin topic reaches a cluster by two paths (KIP-382 future work)."""
    reported: set[tuple] = set()
    by_origin: dict[tuple[str, str, str], list[Placement]] = {}
    for p in exp.placements():
        if p.path and p.origin_topic != HEARTBEATS_TOPIC:
            by_origin.setdefault((p.cluster, p.origin_cluster, p.origin_topic), []).append(p)
    for (cluster, origin, topic), ps in sorted(by_origin.items(), key=lambda kv: kv[0]):
        paths = sorted({q.describe_path(): q for q in ps}.items())
        if len(paths) < 2:
            continue
        key = (cluster, origin, tuple(name for name, _ in paths))
        if key in reported:
            continue
        reported.add(key)
        if len(reported) > MAX_LOOPS_REPORTED:
            continue
        (path_a, pa), (path_b, pb) = paths[0], paths[1]
        diags.warning(
            f"diamond: records of {origin}:{topic!r} reach {cluster!r} twice, as {pa.topic!r} via {path_a} "
            f"and as {pb.topic!r} via {path_b}",
            pb.path[-1].where,
            hint="consumers on that cluster would see duplicate streams; narrow one path's topic filter if that is not intended",
            related=(pa.path[-1].where,) if pa.path[-1].where else (),
        )
    if len(reported) > MAX_LOOPS_REPORTED:
        diags.warning(
            f"{len(reported) - MAX_LOOPS_REPORTED:,} more diamonds like the ones above",
            hint="consumers would see duplicate streams; narrow the topic filters of the fan-in flows",
        )


def check_residency(topology: Topology, exp: Expansion, diags: Diagnostics) -> None:
    reported: set[tuple[str, str]] = set()
    for rule in topology.residency:
        for p in exp.placements():
            if not p.path or not rule.topics.matches(p.origin_topic):
                continue
            tag_value = topology.clusters[p.cluster].tags.get(rule.tag)
            if tag_value in rule.allowed:
                continue
            flow = p.path[-1]
            if (rule.name, flow.name) in reported:
                continue
            reported.add((rule.name, flow.name))
            diags.error(
                f"flow {flow.name} violates policy {rule.name!r}: topic {p.origin_topic!r} from {p.origin_cluster} "
                f"would reach cluster {p.cluster!r} ({rule.tag}={tag_value or 'unset'}; allowed: {', '.join(rule.allowed)})"
                + (f" via {p.describe_path()}" if p.hops > 1 else ""),
                flow.where,
                hint=f"exclude topics matching {', '.join(rule.topics.include)} from this flow, or tag the target {rule.tag}: one of {list(rule.allowed)}",
                related=(rule.where,) if rule.where else (),
            )


def check_families(topology: Topology, diags: Diagnostics) -> None:
    """Topic families of one pair must not select the same topic: judged on the witnesses of every
    family's include patterns (and the other topics the graph brings to the source), with `route`,
    the rule the jobs apply. Heartbeats are carried by one family per pair and do not count."""
    pairs: dict[str, list] = {}
    for f in topology.flows:
        if f.family is not None:
            pairs.setdefault(f.pair, []).append(f)
    for flows in pairs.values():
        names = sorted({ex for f in flows for p in f.topics.include for ex in examples(p)})
        for i, a in enumerate(flows):
            for b in flows[i + 1 :]:
                both = next(
                    (
                        t
                        for t in names
                        if not a.policy.is_heartbeats_topic(t) and route(a, t) is not None and route(b, t) is not None
                    ),
                    None,
                )
                if both is None:
                    continue
                diags.error(
                    f"topic families {a.name} and {b.name} overlap: both would replicate a topic such as {both!r}, "
                    "so its records would be copied twice",
                    b.where,
                    hint="make their topic filters disjoint (add the other family's patterns to `topics.exclude`), "
                    f"or merge the families; {a.name} is at {a.where}",
                    related=(a.where,) if a.where else (),
                )


def multiplication_message(m: Multiplication) -> tuple[str, str]:
    """(message, hint) for an expansion that passed the bound: shared by validate and plan."""
    more = "more than " if m.more else ""
    limit = f"the limit of {m.bound:,} remote topics (RECONCILER_MAX_REMOTE_TOPICS)"
    if m.cluster_copies > 1:
        names = ", ".join(m.examples) + (", ..." if m.cluster_copies > len(m.examples) else "")
        message = (
            f"replication multiplies topics: each topic on {m.origin_cluster} would reach {m.cluster} as "
            f"{more}{m.cluster_copies:,} remote copies: {names} ({more}{m.copies:,} remote copies in all), "
            f"which passes {limit}"
        )
    else:
        message = (
            f"replication multiplies topics: each topic on {m.origin_cluster} would be copied along the chain "
            f"to {m.clusters:,} clusters ({', '.join(m.chain)}, ...); with every cluster doing the same, "
            f"more than {m.bound:,} remote topics, which passes {limit}"
        )
    hint = (
        "MM2 re-replicates remote topics along every path the topic filters allow; restrict the flows' filters, "
        "e.g. exclude remote topics (`topics: {exclude: ['.*[.].*']}`) so only local topics are replicated, "
        "or raise RECONCILER_MAX_REMOTE_TOPICS if this is intended"
    )
    return message, hint


def check_multiplication(exp: Expansion, diags: Diagnostics, topology: Topology) -> None:
    m = exp.multiplied
    if m is not None and not exp.loops:  # a loop is the cause: reported as such
        message, hint = multiplication_message(m)
        where = next((f.where for f in topology.active_flows if f.source == m.origin_cluster and f.where), None)
        diags.error(message, where, hint=hint)
    reported: set[str] = set()
    for p in exp.too_long:
        flow = p.path[-1]
        if flow.name in reported:
            continue
        reported.add(flow.name)
        diags.error(
            f"flow {flow.name} would create remote topic names longer than Kafka allows ({KAFKA_MAX_TOPIC_NAME} "
            f"characters): {p.origin_cluster}:{p.origin_topic!r} via {p.describe_path()} becomes a "
            f"{len(p.topic):,}-character name ({p.topic[:40]}...)",
            flow.where,
            hint="long chains of default-policy flows prefix every hop's alias; exclude remote topics from this flow's "
            "filter (`topics: {exclude: ['.*[.].*']}`) or shorten the chain",
        )


def analyse(topology: Topology, diags: Diagnostics, limit: int | None = None) -> Expansion:
    """All graph checks; returns the witness expansion (useful for graph rendering).

    The expansion stops once it passes `limit` remote placements (RECONCILER_MAX_REMOTE_TOPICS by
    default): loops and short paths are found first (breadth first), and the multiplication is a finding.
    """
    check_families(topology, diags)
    witnesses = witness_topics(topology)
    exp = expand(topology, witnesses, limit=settings.max_remote_topics() if limit is None else limit)
    check_multiplication(exp, diags, topology)
    check_identity_cycles(topology, exp, sorted({n for names in witnesses.values() for n in names}), diags)
    check_loops(exp, diags)
    check_diamonds(exp, diags)
    check_residency(topology, exp, diags)
    return exp
