"""The package's shape, checked: no import cycles in `reconciler/`, between modules or between folders; the
folders in layers; the CLI is a leaf (only `cli/` imports `reconciler.cli`), and planning (`plan/`, `jobs/`,
`deployers/`) does not depend on the job runtime (`reconciler.engine`, pyspark). See docs/architecture.md.

Imports are read from the source (ast), so nothing is imported to check them. A cycle between modules counts
module-level imports (what runs at import time); the folder graph and the layering rules count every import,
including those inside functions and under `if TYPE_CHECKING:` (a type-only import is a dependency too),
except where noted. Inside `reconciler/engine/` no two modules depend on each other through any path, every import
counted (issue 49: the metrics and the reporter had a type-only circle; `test_no_import_cycle_in_the_engine`).

Layers of `reconciler/`, bottom first (`LAYERS`). A node is a folder (sub-package: `reconciler.plan` is every
module under reconciler/plan/) or a top-level module (`reconciler.settings`); the package's own `__init__`
is `reconciler`. A node imports only nodes of lower layers, never its own layer's or a higher one's, so no
two folders import each other, through any path:

    0  reconciler (the version), textutil, settings (environment variables), mirror (MirrorMaker 2's rules:
       filters, replication policy), state (the live state's types), resources (package data), deployer_kinds
       (the deployers' names, the local[N] rule)
    1  topology (the model: load, schema, build; flow ids, secrets), outputs
    2  analysis (routing, hazards), logs (needs the secrets' Redactor), adapters (every call to a cluster,
       reading the live state), gitops (topologies at git revisions)
    3  contract (what the planner and the job share: spec, status record, engine records), dev (dev
       brokers), interop (MM2 import/export)
    4  plan (desired state, diff, actions, findings: the planner), deployers (local, standalone, kubernetes),
       engine (the job's runtime: the engine host, a flow's driver, the tasks' copy code)
    5  apply (executor, lease), drift, policy (policy files read and judging a plan)
    6  jobplan (the planner's part for jobs: desired and live jobs, their actions' handlers), render,
       resources.mirror_job (the job's entry point, run by spark-submit as a file: jobs/mirror_job.py, linked into
       resources/ so an installed package ships it; its own node, since the rest of resources/ is package data that
       topology/ reads; above drift, whose judgement of its flows an engine on Kubernetes publishes)
    7  operations (observe, plan, apply, drift over a Backend)
    8  cli
    9  __main__
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path, top_level_only: bool) -> set[str]:
    source = path.read_text(encoding="utf-8")
    return imports_in(source, _module_name(path), top_level_only, path.name == "__init__.py")


def imports_in(source: str, module: str, top_level_only: bool, is_package: bool = False) -> set[str]:
    """What `source` (the text of `module`) imports: at module level only (not under `if TYPE_CHECKING:`), or every
    import (in functions and under TYPE_CHECKING too)."""
    tree = ast.parse(source, module)
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node, is_package)
            out.add(target)
            out |= {f"{target}.{a.name}" for a in node.names}  # `from pkg import module`
        elif top_level_only and isinstance(node, ast.If) and not _is_type_checking(node):
            out |= {a.name for n in node.body if isinstance(n, ast.Import) for a in n.names}
    return out


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _graph(top_level_only: bool) -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {m: {i for i in _imports(p, top_level_only) if i in files and i != m} for m, p in files.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _importers(prefixes: tuple[str, ...], of: str) -> list[str]:
    graph = {
        m: _imports(p, top_level_only=False) for m, p in {_module_name(p): p for p in PACKAGE.rglob("*.py")}.items()
    }
    return sorted(
        f"{m} imports {i}"
        for m, imports in graph.items()
        if m.startswith(prefixes)
        for i in imports
        if i == of or i.startswith(of + ".")
    )


def test_no_import_cycles():
    assert _cycles(_graph(top_level_only=True)) == []


#: The layers of `reconciler/`, bottom first (the module docstring says what each holds).
LAYERS: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"reconciler.{n}" if n != "reconciler" else n for n in layer.split())
    for layer in (
        "reconciler textutil settings mirror state resources deployer_kinds",
        "topology outputs",
        "analysis logs adapters gitops",
        "contract dev interop",
        "plan deployers engine",
        "apply drift policy",
        "jobplan render resources.mirror_job",
        "operations",
        "cli",
        "__main__",
    )
)
#: Modules that are their own node, not their folder's.
OWN_NODES = ("reconciler.resources.mirror_job",)


def _node(module: str) -> str:
    """The folder (or top-level module) `module` belongs to: reconciler.plan.diff -> reconciler.plan."""
    return module if module in OWN_NODES else ".".join(module.split(".")[:2])


def _folder_edges() -> dict[tuple[str, str], list[str]]:
    """(importing node, imported node) -> the module imports that make the edge ("a.b imports c.d"): every
    import, at module level, in functions and under TYPE_CHECKING."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[tuple[str, str], list[str]] = {}
    for m, p in sorted(files.items()):
        for i in sorted(_imports(p, top_level_only=False)):
            if i in files and _node(i) != _node(m):
                edges.setdefault((_node(m), _node(i)), []).append(f"{m} imports {i}")
    return edges


def _folder_nodes() -> set[str]:
    return {_node(_module_name(p)) for p in PACKAGE.rglob("*.py")}


def _cycle_edges(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """The edges inside each cycle of the folder graph, each with the imports that make it."""
    graph: dict[str, set[str]] = {n: set() for pair in edges for n in pair}
    for a, b in edges:
        graph[a].add(b)
    out = []
    for component in _cycles(graph):
        out.append("cycle: " + ", ".join(component))
        for (a, b), lines in sorted(edges.items()):
            if a in component and b in component:
                out += [f"  {a} -> {b}"] + [f"      {line}" for line in lines]
    return out


def test_no_import_cycles_between_folders():
    cycles = _cycle_edges(_folder_edges())
    assert cycles == [], "\n".join(cycles)


def test_every_folder_has_a_layer():
    layered = [n for layer in LAYERS for n in layer]
    assert len(layered) == len(set(layered))
    assert sorted(_folder_nodes() - set(layered)) == [], "add the new folder or module to LAYERS (and its docstring)"
    assert sorted(set(layered) - _folder_nodes()) == []


def test_folders_import_only_lower_layers():
    layer = {n: i for i, names in enumerate(LAYERS) for n in names}
    upward = [
        f"{a} (layer {layer[a]}) -> {b} (layer {layer[b]}): {line}"
        for (a, b), lines in sorted(_folder_edges().items())
        if a in layer and b in layer and layer[b] >= layer[a]
        for line in lines
    ]
    assert upward == [], "\n".join(upward)


def test_the_folder_checker_sees_a_cycle():
    edges = {("reconciler.a", "reconciler.b"): ["reconciler.a.x imports reconciler.b.y"]}
    edges[("reconciler.b", "reconciler.a")] = ["reconciler.b.y imports reconciler.a"]
    assert _cycle_edges(edges) == [
        "cycle: reconciler.a, reconciler.b",
        "  reconciler.a -> reconciler.b",
        "      reconciler.a.x imports reconciler.b.y",
        "  reconciler.b -> reconciler.a",
        "      reconciler.b.y imports reconciler.a",
    ]
    assert _node("reconciler.plan.diff") == "reconciler.plan" and _node("reconciler.settings") == "reconciler.settings"
    assert _node("reconciler.resources.mirror_job") == "reconciler.resources.mirror_job"
    assert _node("reconciler.resources") == "reconciler.resources" and _node("reconciler") == "reconciler"


def test_only_the_cli_imports_the_cli():
    # reconciler/__main__.py (`python -m reconciler`) is the CLI's own entry point.
    outside = [
        line
        for line in _importers(("reconciler",), "reconciler.cli")
        if not line.startswith(("reconciler.cli", "reconciler.__main__ "))
    ]
    assert outside == []


def test_planning_does_not_depend_on_the_job_runtime():
    planning = (
        "reconciler.plan",
        "reconciler.jobplan",
        "reconciler.deployers",
        "reconciler.contract",
        "reconciler.operations",
    )
    assert _importers(planning, "reconciler.engine") == []
    # The deployers find spark-submit and the Spark version inside the pyspark wheel (a function-level
    # import, to locate files); nothing at module level, and nothing in plan/ or jobs/.
    graph = _graph_all(top_level_only=True)
    assert (
        sorted(m for m in graph if m.startswith(planning) and any(i.split(".")[0] == "pyspark" for i in graph[m])) == []
    )
    assert [
        line
        for line in _importers(
            ("reconciler.plan", "reconciler.jobplan", "reconciler.contract", "reconciler.operations"), "pyspark"
        )
    ] == []


def _graph_all(top_level_only: bool) -> dict[str, set[str]]:
    return {_module_name(p): _imports(p, top_level_only) for p in PACKAGE.rglob("*.py")}


def test_the_contract_holds_types_and_formats_only_and_render_reads_no_data_plane():
    """contract/ is the wire format between the control and the data plane: no cluster I/O (no Kafka client, in
    functions neither; reading the status topic is `adapters/status_read.py`'s). render/ formats what the
    control plane computed: it names the job's metrics through `contract/metrics.py`, never `reconciler.engine`."""
    graph = _graph_all(top_level_only=False)
    clients = sorted(
        f"{m} imports {i}"
        for m, imports in graph.items()
        if m.startswith("reconciler.contract")
        for i in imports
        if i.split(".")[0] == "confluent_kafka"
    )
    assert clients == []
    assert _importers(("reconciler.render",), "reconciler.engine") == []


def test_the_checker_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def engine_cycles(sources: dict[str, str], top_level_only: bool = False) -> list[list[str]]:
    """The import cycles among the modules `sources` holds (module -> its text), every import counted: at module
    level, in functions and under `if TYPE_CHECKING:` (`top_level_only`: what runs at import time only)."""
    graph = {m: imports_in(text, m, top_level_only) & set(sources) - {m} for m, text in sources.items()}
    return _cycles(graph)


def test_no_import_cycle_in_the_engine():
    """No two modules of reconciler/engine/ depend on each other, whatever the import: a type-only one is a
    dependency too (issue 49: metrics.py imported the reporter under TYPE_CHECKING while the reporter imported it;
    the metrics now take a frozen snapshot from it, and offsets.py names the delivery mode by a protocol of its own)."""
    engine = PACKAGE / "engine"
    sources = {_module_name(p): p.read_text(encoding="utf-8") for p in engine.rglob("*.py")}
    assert "reconciler.engine.driver" in sources
    assert engine_cycles(sources) == []


def test_the_engine_checker_sees_a_type_only_cycle():
    sources = {
        "reconciler.engine.reporting": "from reconciler.engine import metrics\n",
        "reconciler.engine.metrics": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:  # the reporter imports this module\n"
            "    from reconciler.engine.reporting import Reporter\n"
        ),
        "reconciler.engine.driver": "from reconciler.engine.reporting import Reporter\n",
        "reconciler.engine.worker": "def run():\n    from reconciler.engine.tasks import TP\n",
        "reconciler.engine.tasks": "def tp():\n    from reconciler.engine.worker import run\n",
    }
    assert engine_cycles(sources) == [
        ["reconciler.engine.metrics", "reconciler.engine.reporting"],
        ["reconciler.engine.tasks", "reconciler.engine.worker"],
    ]
    assert engine_cycles(sources, top_level_only=True) == [], "what the module-level check alone would miss"


def test_the_contributors_layout_names_every_package():
    page = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    layout = page.split("## Layout", 1)[1].split("```", 2)[1]
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert [p for p in packages if f"reconciler/{p}/" not in layout] == []


def test_the_job_contracts_have_one_home_and_no_shims():
    """The job spec and status record live in reconciler.contract, job processes in reconciler.deployers.process:
    the old re-export modules are gone and nothing (code, tests, jobs/, bench/, docs) names them."""
    gone = ("reconciler.engine.spec", "reconciler.engine.status", "reconciler.engine.runner")
    gone += tuple(m.replace(".", "/") + ".py" for m in gone)
    assert [m for m in gone if m.endswith(".py") and (ROOT / m).exists()] == []
    files = [p for d in ("reconciler", "tests", "jobs", "bench", "docs") for p in (ROOT / d).rglob("*") if p.is_file()]
    files += [ROOT / "README.md"]
    named = sorted(
        f"{p.relative_to(ROOT)} names {m}"
        for p in files
        if p.suffix in (".py", ".md") and p.name != "test_architecture.py"
        for m in gone
        if m in p.read_text(encoding="utf-8")
    )
    assert named == []


def test_one_read_to_end_loop():
    """End-of-partition events are handled by adapters/read_to_end.py only; the worker's copy loop is a bounded
    copy that records end of partition as one stop condition (docs/architecture.md says why it is not one)."""
    allowed = {"reconciler/adapters/read_to_end.py", "reconciler/engine/worker.py"}
    assert package_files_naming("_PARTITION_EOF", allowed) == []


def test_one_reader_config():
    """A consumer that reads to the end of partitions is built from adapters/read_to_end.py's settings
    (reader_config, or END_READER in the job's consumer_config, which also forces the key against a cluster's
    config): nothing else sets enable.partition.eof by hand, so no reader misses what they carry (e.g.
    fetch.queue.backoff.ms, whose default stalls a long read)."""
    allowed = {"reconciler/adapters/read_to_end.py", "reconciler/engine/clients.py"}
    assert package_files_naming("enable.partition.eof", allowed) == []


def test_one_home_for_the_mirror_client():
    """A one-cluster MirrorKafka client is built in one place for the operations, the Backend's mirror client factory
    (operations/backend.py `kafka_mirror_client`, which heartbeats, offsets and the demo use); the job builds its own
    (engine/emitters.py: the job does not run over the Backend)."""
    allowed = {"reconciler/operations/backend.py", "reconciler/engine/emitters.py"}
    assert package_files_naming("MirrorKafka(", allowed) == []
    assert (PACKAGE / "operations" / "backend.py").read_text(encoding="utf-8").count("MirrorKafka(") == 1


def test_the_kubernetes_service_account_default_has_one_home():
    """The driver's service account default is declared in the settings registry only (model.py said "spark"
    beside defaults.py's "spark-operator-spark")."""
    assert package_files_naming("spark-operator-spark", {"reconciler/topology/settings_registry.py"}) == []


def package_files_naming(text: str, allowed: set[str]) -> list[str]:
    """The package's Python files (paths from the repository root) that contain `text`, less `allowed`."""
    return sorted(
        str(p.relative_to(ROOT))
        for p in PACKAGE.rglob("*.py")
        if text in p.read_text(encoding="utf-8") and str(p.relative_to(ROOT)) not in allowed
    )


def test_tests_inject_the_clock():
    """Time comes from the Backend's clock (observe, plan, status, drift): no test patches time.time."""
    patched = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("*.py")
        if p.name != "test_architecture.py"
        and any(s in p.read_text(encoding="utf-8") for s in ('setattr("time.time"', "setattr(time, "))
    )
    assert patched == []


#: Concepts with one home (issue 25): name -> the one module that defines it at top level.
ONE_HOME = {
    "RateWindow": "reconciler.contract.status",
    "RATE_WINDOW_SECONDS": "reconciler.contract.status",
    "DEFAULT_STATUS_INTERVAL_SECONDS": "reconciler.contract.spec",
    "read_statuses": "reconciler.jobplan.state",
    "JobStatuses": "reconciler.jobplan.state",
    "stale_after_seconds": "reconciler.contract.status",  # jobplan/state.py had its own wrapper
    "health": "reconciler.contract.status",
    "DEFAULT_JOB_STALE_SECONDS": "nowhere",  # drift's 60 s second threshold: gone
}


def _top_level_definitions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def test_one_home_per_concept():
    """Each of these is defined in one module; the others import it (a second definition, even an equal
    one, is how the status record's 10 s rate and the metrics' 60 s rate came apart)."""
    defined: dict[str, list[str]] = {name: [] for name in ONE_HOME}
    for path in PACKAGE.rglob("*.py"):
        for name in _top_level_definitions(path) & set(ONE_HOME):
            defined[name].append(_module_name(path))
    assert {name: sorted(homes) for name, homes in defined.items()} == {
        name: [home] if home != "nowhere" else [] for name, home in ONE_HOME.items()
    }


#: The CLI's wiring of the real outside world: it builds `Backend.default()` and hands it to each command.
BACKEND_WIRING = {"reconciler.cli.main"}


def test_cli_commands_import_neither_kafka_clients_nor_adapters():
    """A command parses its arguments, calls an operation with the Backend and renders what comes back: it
    never builds a client of its own (confluent_kafka, `adapters/`: KafkaAdmin, MirrorKafka, Connections,
    read_to_end, the probe). Only the backend wiring may name them (every import counts, also in functions)."""
    graph = _graph_all(top_level_only=False)
    reaching = sorted(
        f"{m} imports {i}"
        for m, imports in graph.items()
        if m.startswith("reconciler.cli.") and m not in BACKEND_WIRING
        for i in imports
        if i.split(".")[0] == "confluent_kafka" or i == "reconciler.adapters" or i.startswith("reconciler.adapters.")
    )
    assert reaching == []


def test_cli_commands_start_and_stop_nothing_themselves():
    """`dev up/down/status` and the demo start and stop the dev brokers and the local jobs through the Backend
    (`operations/dev.py` over `Backend.dev_brokers` and `Backend.local_jobs`): no command builds DevClusters or
    a deployer of its own (every import counts, also in functions)."""
    graph = _graph_all(top_level_only=False)
    reaching = sorted(
        f"{m} imports {i}"
        for m, imports in graph.items()
        if m.startswith("reconciler.cli.") and m not in BACKEND_WIRING
        for i in imports
        if i.startswith(("reconciler.dev.clusters", "reconciler.deployers")) or i == "reconciler.deployers"
    )
    assert reaching == []


def registration_imports(source: str, module: str, modules: set[str], is_package: bool = False) -> list[str]:
    """Imports in `source` (of `module`) kept only for what importing does: a `# noqa: F401` import that binds
    a private name (`import x as _x`), or imports a module of `modules` (`from pkg import handlers`), or a
    handlers module. (A `# noqa: F401` re-export of names, `from a.b import Name`, is not one.)"""
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if "noqa: F401" not in text.replace("noqa:F401", "noqa: F401"):
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = _resolve(module, node, is_package)
            targets = [f"{base}.{a.name}" for a in node.names]
        private = any((a.asname or a.name).split(".")[-1].startswith("_") for a in node.names)
        if private or any(t in modules or t.rsplit(".", 1)[-1] == "handlers" for t in targets):
            out.append(f"{module}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return out


def test_no_import_only_registers():
    """Nothing registers itself on import: the executor's handler table is built by one function
    (reconciler/operations/handlers.py) and the action types are listed in plan/actions.py, so no module
    imports another just for the side effect (a `# noqa: F401` import of a handlers module or a private alias)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    found = []
    for m, p in sorted(files.items()):
        found += registration_imports(p.read_text(encoding="utf-8"), m, set(files), p.name == "__init__.py")
    assert found == []


def test_the_registration_checker_sees_one():
    modules = {
        "reconciler.jobplan",
        "reconciler.jobplan.handlers",
        "reconciler.jobplan.plan",
        "reconciler.topology.flow_id",
    }
    source = (
        "from reconciler.jobplan import handlers as _handlers  # noqa: F401  (registers the job handlers)\n"
        "from . import handlers  # noqa: F401\n"
        "import reconciler.jobplan.handlers  # noqa: F401\n"
        "from reconciler.topology.flow_id import FlowId  # noqa: F401 (re-exported)\n"
        "from reconciler.jobplan import handlers as h\n"
    )
    assert registration_imports(source, "reconciler.jobplan.plan", modules) == [
        "reconciler.jobplan.plan:1: from reconciler.jobplan import handlers as _handlers  # noqa: F401  (registers the job handlers)",
        "reconciler.jobplan.plan:2: from . import handlers  # noqa: F401",
        "reconciler.jobplan.plan:3: import reconciler.jobplan.handlers  # noqa: F401",
    ]


#: The longest a class under reconciler/ may be (lines from `class` to its last line, docstring and blank lines
#: included): a class longer does several things, split it by behaviour (issue 37, the driver split).
MAX_CLASS_LINES = 400
#: Classes over MAX_CLASS_LINES while they are split, each with its issue; never a class under reconciler/engine/.
CLASS_SIZE_EXCEPTIONS: set[str] = set()


def test_no_class_is_over_400_lines():
    over = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    over[f"{rel}:{node.name}"] = size
    assert not any(name.startswith("reconciler/engine/") for name in CLASS_SIZE_EXCEPTIONS)
    unexpected = {name: size for name, size in over.items() if name not in CLASS_SIZE_EXCEPTIONS}
    assert not unexpected, f"classes over {MAX_CLASS_LINES} lines (split them by behaviour): {unexpected}"


#: The longest a function under reconciler/ may be (lines from `def` to its last line, docstring, comments and blank
#: lines included; a decorator's lines not): a function longer does several things, split it into readable pieces
#: (issue 49).
MAX_FUNCTION_LINES = 80
#: TEMPORARY (issue 49): the four functions over MAX_FUNCTION_LINES that other helpers of issue 49 are splitting at the
#: same time as this check lands, each in its own branch: theirs, not this list's. Each entry goes with its split (a
#: test below fails on an entry whose function is no longer over the limit); once the set is empty, it goes too.
FUNCTION_SIZE_EXCEPTIONS: set[str] = set()


def long_functions(source: str, name: str, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """`name:function` -> its length in lines, for every function (methods and nested ones too) of `source` longer
    than `limit` (AST: end_lineno - lineno + 1)."""
    over = {}
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
            size = node.end_lineno - node.lineno + 1
            if size > limit:
                over[f"{name}:{node.name}"] = size
    return over


def test_no_function_is_over_80_lines():
    over: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        over |= long_functions(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    unexpected = {name: size for name, size in over.items() if name not in FUNCTION_SIZE_EXCEPTIONS}
    assert not unexpected, f"functions over {MAX_FUNCTION_LINES} lines (split them into readable pieces): {unexpected}"
    assert sorted(FUNCTION_SIZE_EXCEPTIONS - set(over)) == [], "split: take it out of FUNCTION_SIZE_EXCEPTIONS"


def test_the_function_size_checker_sees_a_long_function():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    planted = (
        "def short():\n    return 1\n\n\n"
        f"def exactly_the_limit():\n{body}\n\n"
        f"class Holder:\n    async def too_long(self):\n{body.replace('    ', '        ')}        return 0\n"
    )
    assert long_functions(planted, "reconciler/planted.py") == {
        "reconciler/planted.py:too_long": MAX_FUNCTION_LINES + 1
    }


# --- the tests' and the benchmarks' Kafka clients log through reconciler.logs -----------------------------------------
#: The confluent-kafka clients. Each is given its configuration through `reconciler.logs.client_config` (or a function
#: of the package that returns its result, e.g. engine/clients.py's `producer_config`): librdkafka's lines then go to a
#: logger instead of stderr, where they buried a test's output while its brokers restarted.
KAFKA_CLIENTS = ("Producer", "Consumer", "AdminClient")
CLIENT_CONFIG = "reconciler.logs.client_config"


def _local_names(tree: ast.Module, module: str, is_package: bool = False) -> dict[str, str]:
    """Every name a file imports (at any depth), as the dotted name it stands for."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node, is_package)
            for a in node.names:
                names[a.asname or a.name] = f"{base}.{a.name}"
    return names


def _dotted(expr: ast.expr, names: dict[str, str]) -> str:
    if isinstance(expr, ast.Name):
        return names.get(expr.id, expr.id)
    if isinstance(expr, ast.Attribute):
        return f"{_dotted(expr.value, names)}.{expr.attr}"
    return ""


def _logging_config_functions() -> set[str]:
    """`reconciler.logs.client_config` and the package's top-level functions whose every return is a call of one of
    these (engine/clients.py's `producer_config`, `consumer_config`, ...), as dotted names."""
    found = {CLIENT_CONFIG}
    trees = [
        (_module_name(p), ast.parse(p.read_text(encoding="utf-8")), p.name == "__init__.py")
        for p in PACKAGE.rglob("*.py")
    ]
    grew = True
    while grew:
        grew = False
        for module, tree, is_package in trees:
            names = _local_names(tree, module, is_package)
            for node in tree.body:
                qualified = f"{module}.{node.name}" if isinstance(node, ast.FunctionDef) else None
                if qualified is None or qualified in found:
                    continue
                returns = [r.value for r in ast.walk(node) if isinstance(r, ast.Return)]
                local = {**names, **{n.name: f"{module}.{n.name}" for n in tree.body if isinstance(n, ast.FunctionDef)}}
                if returns and all(isinstance(v, ast.Call) and _dotted(v.func, local) in found for v in returns):
                    found.add(qualified)
                    grew = True
    return found


def unlogged_clients(source: str, module: str, logging_configs: set[str]) -> list[int]:
    """The lines of `source` that construct a confluent-kafka client whose configuration is not a call of one of
    `logging_configs`."""
    tree = ast.parse(source)
    names = _local_names(tree, module)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        made = _dotted(node.func, names)
        if not (made.startswith("confluent_kafka.") and made.rsplit(".", 1)[-1] in KAFKA_CLIENTS):
            continue
        config = node.args[0] if node.args else None
        if not (isinstance(config, ast.Call) and _dotted(config.func, names) in logging_configs):
            lines.append(node.lineno)
    return lines


def test_tests_and_benchmarks_give_their_kafka_clients_a_logger():
    """Every Producer, Consumer and AdminClient a test or a benchmark makes is configured through
    `reconciler.logs.client_config` (the one home for a client's logger), so librdkafka prints nothing on stderr."""
    configs = _logging_config_functions()
    assert {"reconciler.engine.clients.producer_config", "reconciler.engine.clients.consumer_config"} <= configs
    files = sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
    bare = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in files
        for line in unlogged_clients(p.read_text(encoding="utf-8"), _module_name(p), configs)
    ]
    assert bare == [], "clients without reconciler.logs.client_config(...) around their configuration: " + ", ".join(
        bare
    )


def test_the_client_checker_sees_a_bare_client():
    source = (
        "from confluent_kafka import Consumer, Producer as P\n"
        "import confluent_kafka.admin as admin\n"
        "from reconciler import logs\n"
        "from reconciler.topology.connection import client_config\n"
        "Consumer({'group.id': 'g'})\n"
        "P(logs.client_config({}))\n"
        "admin.AdminClient(client_config(cluster))\n"  # the topology's client_config attaches no logger
        "Consumer(conf)\n"
        "SequencedProducer('x:1')\n"
    )
    assert unlogged_clients(source, "tests.sample", {CLIENT_CONFIG}) == [5, 7, 8]


# --- settings: one scope each, no hand-kept lists, choices compared as enums ----------------------------------------
# (topology/settings_registry.py: each Setting's `scope`; every list of engine or deployment settings is derived)
REGISTRY_FILE = "reconciler/topology/settings_registry.py"


def scope_problems(flow_settings, topology_settings) -> list[str]:
    """What is wrong with the settings' scopes: a setting without one `Scope`, a topology setting of another scope
    (or a flow setting of the topology's), an engine or deployment setting that is no `job.*` setting or that no
    deployer reads."""
    from reconciler.topology.settings_registry import Scope

    out = [
        f"{s.name}: no Scope ({s.scope!r})" for s in (*flow_settings, *topology_settings) if type(s.scope) is not Scope
    ]
    out += [f"{s.name}: a topology setting of scope {s.scope}" for s in topology_settings if s.scope != Scope.TOPOLOGY]
    out += [f"{s.name}: a flow setting of scope topology" for s in flow_settings if s.scope == Scope.TOPOLOGY]
    out += [
        f"{s.name}: an {s.scope.value} setting must be a job setting read by a deployer"
        for s in flow_settings
        if s.scope in (Scope.ENGINE, Scope.DEPLOYMENT) and (s.path[0] != "job" or not s.deployers)
    ]
    return out


def test_every_setting_has_one_scope():
    from reconciler.topology.settings_registry import FLOW_SETTINGS, TOPOLOGY_SETTINGS

    assert scope_problems(FLOW_SETTINGS, TOPOLOGY_SETTINGS) == []


def test_the_scope_checker_sees_a_setting_without_one():
    import dataclasses

    from reconciler.topology.settings_registry import Scope, setting

    master, policy = setting("job.master"), setting("policy")
    planted = [
        dataclasses.replace(master, scope="engine"),  # a string, not the enum
        dataclasses.replace(policy, scope=Scope.ENGINE),  # an engine setting outside `job`
        dataclasses.replace(master, deployers=()),  # read by no deployer
        dataclasses.replace(master, scope=Scope.TOPOLOGY),
    ]
    assert scope_problems(planted, [dataclasses.replace(policy, scope=Scope.FLOW)]) == [
        "job.master: no Scope ('engine')",
        "policy: a topology setting of scope flow",
        "job.master: a flow setting of scope topology",
        "policy: an engine setting must be a job setting read by a deployer",
        "job.master: an engine setting must be a job setting read by a deployer",
    ]


def _names(node: ast.expr) -> set[str]:
    """What an expression names: `flow.job.deployer` -> {"deployer"}, `x.delivery.value` -> {"delivery"},
    `options["engine"]`, `options.get("engine")` and `settings[("job", "engine")]` -> {"engine"}."""
    if isinstance(node, ast.Attribute):
        return _names(node.value) if node.attr == "value" else {node.attr}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Subscript):  # options["engine"], settings[("heartbeats", "location")]: the last key
        key = node.slice.elts[-1] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
        return {key.value} if isinstance(key, ast.Constant) and isinstance(key.value, str) else set()
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return {node.args[0].value}
    return set()


def _strings(node: ast.expr) -> list[str]:
    """The string constants of `node`: itself, or the items of a tuple, list or set literal."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def bare_choice_comparisons(source: str, choices: Mapping[str, set[str]]) -> list[str]:
    """Comparisons in `source` of something that names a choice setting (`choices`: a name the code gives the
    setting -> its values) with a string that is one of its values (`flow.job.deployer == "kubernetes"`,
    `x.on_refused_record in ("skip",)`): "line: name value"."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        named = {n for o in operands for n in _names(o) if n in choices}
        for name in sorted(named):
            for value in sorted({v for o in operands for v in _strings(o) if v in choices[name]}):
                out.append((node.lineno, f"{node.lineno}: {name} {value!r}"))
    return [text for _, text in sorted(out)]


def _choice_names() -> dict[str, set[str]]:
    """Each choice setting's names in code (its last path element, its spec leaf's) -> its values."""
    from reconciler.topology.settings_registry import FLOW_SETTINGS, Type

    out: dict[str, set[str]] = {}
    for s in FLOW_SETTINGS:
        if s.type is Type.CHOICE:
            for name in {s.path[-1], *([s.spec_path.rsplit(".", 1)[-1]] if s.spec_path else [])}:
                out.setdefault(name, set()).update(s.choices)
    return out


def test_no_bare_string_comparison_of_a_choice():
    """A choice setting's value is compared with its enum's member (topology/choices.py), never with a string:
    `on_refused_record == "skpi"` was silently `fail`."""
    choices = _choice_names()
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if str(p.relative_to(ROOT)) != REGISTRY_FILE
        for line in bare_choice_comparisons(p.read_text(encoding="utf-8"), choices)
    ]
    assert found == [], "compare with the setting's enum member instead: " + ", ".join(found)


def test_the_choice_checker_sees_a_bare_string():
    source = (
        'if flow.job.deployer == "kubernetes": pass\n'
        'if spec.settings.on_refused_record != "skip": pass\n'
        'ok = flow.delivery.value in ("exactly-once", "other")\n'
        'ok = options.get("deployer") == "local"\n'
        'ok = settings[("policy",)] != "identity"\n'
        "ok = flow.job.deployer == DeployerKind.KUBERNETES\n"  # a member: fine
        'ok = m.kind == "counter"\n'  # `kind` names the policy in the spec, but "counter" is no policy
        'ok = flow.name == "skip"\n'  # a choice value, but not compared with a choice setting
    )
    assert bare_choice_comparisons(source, _choice_names()) == [
        "1: deployer 'kubernetes'",
        "2: on_refused_record 'skip'",
        "3: delivery 'exactly-once'",
        "4: deployer 'local'",
        "5: policy 'identity'",
    ]


def hand_kept_setting_lists(source: str, names: set[str]) -> list[str]:
    """Tuple, list and set literals in `source` holding two or more strings of `names` (setting names, their
    JobSettings fields or spec paths): "line: the names"."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            hits = [v for v in _strings(node) if v in names]
            if len(hits) >= 2:
                out.append((node.lineno, f"{node.lineno}: {', '.join(hits)}"))
    return [text for _, text in sorted(out)]


def _engine_and_deployment_names() -> set[str]:
    from reconciler.topology.settings_registry import FLOW_SETTINGS, Scope

    out: set[str] = set()
    for s in FLOW_SETTINGS:
        if s.scope in (Scope.ENGINE, Scope.DEPLOYMENT):
            out |= {s.name, s.path[-1], *([s.spec_path] if s.spec_path else [])}
    return out


def test_no_hand_kept_list_of_engine_or_deployment_settings():
    """Which settings are the engine's or the deployer's is each setting's scope (the registry): the
    engine-agreement check, the deployers' options and what replaces an engine are derived from it, no module
    keeps a list of their names (build.py's, contract/deployers.py's and jobplan/plan.py's had come apart)."""
    names = _engine_and_deployment_names()
    found = [
        f"{p.relative_to(ROOT)}:{hit}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if str(p.relative_to(ROOT)) != REGISTRY_FILE
        for hit in hand_kept_setting_lists(p.read_text(encoding="utf-8"), names)
    ]
    assert found == [], "derive it from settings_registry (Setting.scope): " + ", ".join(found)


def test_the_list_checker_sees_a_hand_kept_list():
    source = (
        'ENGINE_SETTINGS = ("deployer", "master", "spark_conf")\n'
        'FILES = frozenset({"manifests_dir", "kubectl_apply"})\n'
        'PATHS = ["engine.master", "engine.spark_conf"]\n'
        'ONE = ("master",)\n'  # one name is no list
        'SIDES = ("source", "target")\n'  # no setting names
    )
    assert hand_kept_setting_lists(source, _engine_and_deployment_names()) == [
        "1: deployer, master, spark_conf",
        "2: manifests_dir, kubectl_apply",
        "3: engine.master, engine.spark_conf",
    ]
