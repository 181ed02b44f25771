"""The package's shape, checked: no import cycles in `reconciler/`, the CLI is a leaf (only `cli/`
imports `reconciler.cli`), and planning (`plan/`, `jobs/`, `deploy/`) does not depend on the job
runtime (`reconciler.replication`, pyspark). See docs/architecture.md.

Imports are read from the source (ast), so nothing is imported to check them. A cycle counts
module-level imports (what runs at import time); the layering rules count every import, including
those inside functions, except where noted.
"""

from __future__ import annotations

import ast
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
    module = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node, path.name == "__init__.py")
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
        "reconciler.jobs",
        "reconciler.deploy",
        "reconciler.contract",
        "reconciler.operations",
    )
    assert _importers(planning, "reconciler.replication") == []
    # The deployers find spark-submit and the Spark version inside the pyspark wheel (a function-level
    # import, to locate files); nothing at module level, and nothing in plan/ or jobs/.
    graph = _graph_all(top_level_only=True)
    assert (
        sorted(m for m in graph if m.startswith(planning) and any(i.split(".")[0] == "pyspark" for i in graph[m])) == []
    )
    assert [
        line
        for line in _importers(
            ("reconciler.plan", "reconciler.jobs", "reconciler.contract", "reconciler.operations"), "pyspark"
        )
    ] == []


def _graph_all(top_level_only: bool) -> dict[str, set[str]]:
    return {_module_name(p): _imports(p, top_level_only) for p in PACKAGE.rglob("*.py")}


def test_the_checker_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_the_readme_layout_names_every_package():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("```", 2)[1]
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert [p for p in packages if f"reconciler/{p}/" not in layout] == []


def test_the_job_contracts_have_one_home_and_no_shims():
    """The job spec and status record live in reconciler.contract, job processes in reconciler.deploy.process:
    the old re-export modules are gone and nothing (code, tests, jobs/, bench/, docs) names them."""
    gone = ("reconciler.replication.spec", "reconciler.replication.status", "reconciler.replication.runner")
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
    allowed = {"reconciler/adapters/read_to_end.py", "reconciler/replication/worker.py"}
    assert package_files_naming("_PARTITION_EOF", allowed) == []


def test_one_reader_config():
    """A consumer that reads to the end of partitions is built from adapters/read_to_end.py's settings
    (reader_config, or END_READER in the job's consumer_config, which also forces the key against a cluster's
    config): nothing else sets enable.partition.eof by hand, so no reader misses what they carry (e.g.
    fetch.queue.backoff.ms, whose default stalls a long read)."""
    allowed = {"reconciler/adapters/read_to_end.py", "reconciler/replication/clients.py"}
    assert package_files_naming("enable.partition.eof", allowed) == []


def test_the_kubernetes_service_account_default_has_one_home():
    """The driver's service account defaults in topology/defaults.py only (model.py said "spark" beside it)."""
    assert package_files_naming("spark-operator-spark", {"reconciler/topology/defaults.py"}) == []


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
    "read_statuses": "reconciler.jobs.state",
    "JobStatuses": "reconciler.jobs.state",
    "stale_after_seconds": "reconciler.contract.status",  # jobs/state.py had its own wrapper
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
