"""Load YAML topology files into plain data plus a map from data paths to source positions.

PyYAML's composer gives every node a position; we build Python values from the node tree
ourselves so that (a) every value remembers its file/line/column and (b) duplicate mapping
keys are errors instead of PyYAML's silent last-one-wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
import yaml.constructor

from reconciler import settings
from reconciler.topology.diagnostics import Diagnostics, SourceLocation

Path_ = tuple[str | int, ...]

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass
class Document:
    """One YAML document: its data and where each value (and each mapping key) came from."""

    file: str
    data: Any
    positions: dict[Path_, SourceLocation] = field(default_factory=dict)
    key_positions: dict[Path_, SourceLocation] = field(default_factory=dict)
    #: the text as written of each key and scalar value YAML did not read as a string (`1`, `true`, `~`)
    key_texts: dict[Path_, str] = field(default_factory=dict)
    value_texts: dict[Path_, str] = field(default_factory=dict)

    def where(self, path: Path_) -> SourceLocation:
        """Position of the value at `path`, else of its nearest ancestor."""
        p = _data_path(path)
        while p:
            if p in self.positions:
                return self.positions[p]
            p = p[:-1]
        return self.positions.get((), SourceLocation(self.file, 1, 1))

    def where_key(self, path: Path_) -> SourceLocation:
        """Position of the mapping key that names `path` (falls back to the value)."""
        return self.key_positions.get(_data_path(path)) or self.where(path)

    def written(self, path: Path_, key: bool = False) -> str:
        """The value (or with `key`, the mapping key) at `path` as written in the file: `~` for a
        None read from `~`, `yes` for a True read from `yes`."""
        texts = self.key_texts if key else self.value_texts
        at = _data_path(path)
        if at in texts:
            return texts[at]
        value = path[-1] if key and path else None
        return value if isinstance(value, str) else str(value)


def _path_key(key: Any) -> str | int:
    """A mapping key as a step of a data path: strings and ints (bools too) as they are, others as text."""
    return key if isinstance(key, (str, int)) else str(key)


def _data_path(path: Iterable[Any]) -> Path_:
    return tuple(_path_key(p) for p in path)


def _loc(file: str, node: yaml.Node | Any) -> SourceLocation:  # a node or a (pure or C) Mark
    mark = node.start_mark if isinstance(node, yaml.Node) else node
    return SourceLocation(file, mark.line + 1, mark.column + 1)


# Limits on what one YAML document may make us build (issue 12: no traceback, no runaway memory).
MAX_DEPTH = 64  # nesting of mappings/sequences; a topology needs about 6
MAX_VALUES = 200_000  # values built again through aliases (a "billion laughs" document grows without bound)
MAX_INT = 2**63 - 1  # Kafka configs and counts are Java longs
MAX_SCALAR_CHARS = 100_000  # one string or number


class _Refused(Exception):
    """The document passes one of the limits: reported once, at `where`, and the document is dropped."""

    def __init__(self, message: str, where: SourceLocation, hint: str):
        super().__init__(message)
        self.message, self.where, self.hint = message, where, hint


class _Builder:
    """Turns a composed node tree into Python values, recording positions and duplicate keys.

    Aliases are expanded (as PyYAML does) but counted: past MAX_VALUES values built again through an
    alias the document is refused (what is written out is not counted), and
    an alias to a node that contains it (a self-referencing anchor) is an error, not a recursion.
    """

    def __init__(self, file: str, diags: Diagnostics):
        self.file = file
        self.diags = diags
        self.constructor = yaml.constructor.SafeConstructor()
        self.doc = Document(file, None)
        self.built: set[int] = set()  # ids of the nodes built once
        self.again = 0  # values built again, through an alias
        self.open: set[int] = set()  # ids of the collection nodes being built (the current path)

    def build(self, node: yaml.Node) -> Document:
        self.doc.data = self._value(node, ())
        return self.doc

    def _scalar(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode) and len(node.value) > MAX_SCALAR_CHARS:
            raise _Refused(
                f"value of {len(node.value):,} characters (limit {MAX_SCALAR_CHARS:,})",
                _loc(self.file, node),
                "a topology value is a name, a pattern or a number; shorten it",
            )
        try:
            value = self.constructor.construct_object(node, deep=True)
        # e.g. int('9'*5000), timestamp 2026-13-45, `!!bool yes}` (KeyError in PyYAML's bool constructor)
        # `!!int ""`: IndexError in PyYAML's int constructor
        except (ValueError, OverflowError, TypeError, KeyError, AttributeError, IndexError, yaml.YAMLError) as exc:
            raise _Refused(
                f"cannot read value {str(getattr(node, 'value', ''))[:40]!r}: {exc}",
                _loc(self.file, node),
                "quote it if it is meant as a string",
            ) from None
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise _Refused(
                f"number too large: {str(node.value)[:40]} (limit {MAX_INT:,}, a Java long)",
                _loc(self.file, node),
                "use a smaller number, or quote it if it is meant as a string",
            )
        if isinstance(value, float) and not (abs(value) <= MAX_INT):  # inf, nan and beyond a long
            raise _Refused(
                f"number out of range: {str(node.value)[:40]} (limit {MAX_INT:,})",
                _loc(self.file, node),
                "use a finite number, or quote it if it is meant as a string",
            )
        return value

    def _value(self, node: yaml.Node, path: Path_) -> Any:
        if id(node) in self.built:  # only what aliases repeat counts: a long document written out is fine
            self.again += 1
        else:
            self.built.add(id(node))
        if self.again > MAX_VALUES:
            raise _Refused(
                f"the document's aliases expand to more than {MAX_VALUES:,} values (limit; YAML aliases "
                "referring to aliases multiply, as in a 'billion laughs' document)",
                _loc(self.file, node),
                "write the values out, or use fewer nested aliases",
            )
        if len(path) > MAX_DEPTH:
            raise _Refused(
                f"nesting deeper than {MAX_DEPTH} levels (limit)",
                _loc(self.file, node),
                "a topology is a few levels deep; check the indentation and brackets",
            )
        self.doc.positions[path] = _loc(self.file, node)
        if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            value = self._scalar(node)
            if not isinstance(value, str):
                self.doc.value_texts[path] = str(node.value)
            return value
        if id(node) in self.open:
            raise _Refused(
                "an alias refers to the anchor that contains it (a self-referencing structure)",
                _loc(self.file, node),
                "YAML anchors must not contain their own alias; write the value out",
            )
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self._value(item, path + (i,)) for i, item in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict:
        self.constructor.flatten_mapping(node)  # YAML merge keys (<<)
        out: dict[Any, Any] = {}
        first_seen: dict[Any, SourceLocation] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _Refused(
                    "a mapping key must be a plain name, not a list or mapping",
                    _loc(self.file, key_node),
                    "write the key as a plain string",
                )
            key = self._scalar(key_node)
            key = key if isinstance(key, (str, int, float, bool)) or key is None else str(key)
            key_loc = _loc(self.file, key_node)
            if key in first_seen:
                self.diags.error(
                    f"duplicate key {key!r} (first defined at line {first_seen[key].line})",
                    key_loc,
                    hint="YAML keeps only one of them; remove or rename one",
                    related=(first_seen[key],),
                )
                continue
            first_seen[key] = key_loc
            at = path + (_path_key(key),)
            self.doc.key_positions[at] = key_loc
            if not isinstance(key, str):
                self.doc.key_texts[at] = str(key_node.value)
            out[key] = self._value(value_node, at)
        return out


def _deepest(text: str, file: str) -> SourceLocation:
    """Where the nesting of `text` first passes MAX_DEPTH (the event parser does not recurse)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH and event.start_mark is not None:
                    return _loc(file, event.start_mark)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        pass
    return SourceLocation(file, 1, 1)


def flows_limit(limit: int) -> tuple[str, str]:
    """The error and hint of a topology (or an import) past RECONCILER_MAX_FLOWS flows."""
    return (
        f"more than {limit:,} flows (limit, RECONCILER_MAX_FLOWS)",
        "every flow is validated, planned and run by this reconciler: split the topology (one per region or "
        "team), or raise RECONCILER_MAX_FLOWS if this is intended",
    )


def too_many_flows(count: int, where: SourceLocation, diags: Diagnostics, limit: int | None = None) -> bool:
    """The one rule on a topology's size (RECONCILER_MAX_FLOWS): past it, an error at `where` (the first flow
    past the limit) and True."""
    limit = settings.max_flows() if limit is None else limit
    if count <= limit:
        return False
    message, hint = flows_limit(limit)
    diags.error(message, where, hint=hint)
    return True


def _flow_past_limit(text: str, file: str, limit: int) -> SourceLocation | None:
    """Where the top-level `flows` list of a document in `text` gets its (limit+1)-th item, read with the event
    parser (libyaml's when there: no nodes built, and it stops there), so that a topology far too big is refused
    before it is composed; None when no document passes it or the text does not parse (the composer says why)."""
    loader = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    # one entry per open collection: [is_mapping, next_is_key, is_the_flows_list, last_key_was_flows]
    stack: list[list[bool]] = []
    count = 0
    try:
        for ev in yaml.parse(text, Loader=loader):
            if isinstance(ev, yaml.CollectionEndEvent):
                stack.pop()
                continue
            if isinstance(ev, yaml.DocumentStartEvent):
                stack, count = [], 0
            if not isinstance(ev, yaml.NodeEvent):
                continue
            flows_value = False
            if stack:
                top = stack[-1]
                if top[0]:
                    is_key, top[1] = top[1], not top[1]
                    if is_key:
                        top[3] = len(stack) == 1 and isinstance(ev, yaml.ScalarEvent) and ev.value == "flows"
                    else:
                        flows_value = top[3]
                elif top[2]:
                    count += 1
                    if count > limit:
                        return _loc(file, ev.start_mark)
            if isinstance(ev, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    return None
                stack.append([isinstance(ev, yaml.MappingStartEvent), True, flows_value, False])
    except (yaml.YAMLError, UnicodeError):  # e.g. a lone surrogate libyaml cannot encode: the composer says why
        return None
    return None


def load_text(text: str, file: str, diags: Diagnostics) -> list[Document]:
    """All documents in one YAML text; syntax errors and passed limits become diagnostics."""
    docs: list[Document] = []
    limit = settings.max_flows()
    past = _flow_past_limit(text, file, limit)
    if past is not None:
        too_many_flows(limit + 1, past, diags, limit)
        return docs
    try:
        for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
            if node is None:
                continue
            docs.append(_Builder(file, diags).build(node))
    except _Refused as exc:
        diags.error(exc.message, exc.where, hint=exc.hint)
    except MemoryError:
        diags.error(
            f"out of memory reading this file ({len(text):,} characters)",
            SourceLocation(file, 1, 1),
            hint="a topology file is a few hundred lines; check that this is the right file",
        )
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        diags.error(
            f"nesting deeper than {MAX_DEPTH} levels (limit)",
            _deepest(text, file),
            hint="a topology is a few levels deep; check the indentation and brackets",
        )
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = SourceLocation(file, mark.line + 1, mark.column + 1) if mark else SourceLocation(file, 1, 1)
        problem = exc.problem or str(exc)
        ctx = f" ({exc.context})" if exc.context else ""
        diags.error(
            f"YAML syntax error: {problem}{ctx}", where, hint="check indentation and quoting around this position"
        )
    except yaml.YAMLError as exc:  # pragma: no cover - non-marked errors are rare
        diags.error(f"YAML error: {exc}", SourceLocation(file, 1, 1))
    return docs


#: What was read from files that can be read only once (pipes, process substitution), by path.
_STREAMS: dict[str, str] = {}


#: The largest input file read (a topology file, an MM2 properties file, a Strimzi resource): past it, parsing
#: costs seconds and gigabytes (pure-Python YAML and properties parsers), and no real configuration is that big.
MAX_INPUT_BYTES = 16 * 1024 * 1024


class InputTooLarge(OSError):
    pass


def read_source(path: Path) -> str:
    """An input file's text (UTF-8), at most MAX_INPUT_BYTES (InputTooLarge, an OSError, past it). A pipe is read
    once and kept: a command reads its files more than once."""
    key = str(path)
    if key in _STREAMS:
        return _STREAMS[key]
    with open(path, "rb") as fh:
        data = fh.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InputTooLarge(
            f"the file is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, which no configuration needs: "
            "split it into several files (a directory of topology files is read as one)"
        )
    text = data.decode("utf-8")
    if not path.is_file():
        _STREAMS[key] = text
    return text


def topology_files(paths: Iterable[str | Path], diags: Diagnostics) -> list[Path]:
    """Expand files and directories (recursively, sorted) into the YAML files to load."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.suffix in YAML_SUFFIXES and f.is_file())
            if not found:
                diags.error(f"no .yaml/.yml files in directory {p}", SourceLocation(str(p), 1, 1))
            files.extend(found)
        elif p.is_file() or (p.exists() and not p.is_dir()):  # a pipe too: `validate <(cat t.yaml)`
            files.append(p)
        else:
            diags.error(
                f"no such file or directory: {p}",
                SourceLocation(str(p), 1, 1),
                hint="pass topology files or directories that hold them",
            )
    return files


def load_paths(paths: Iterable[str | Path], diags: Diagnostics) -> list[Document]:
    """Every document of every file. A file without any document (empty, only comments, truncated
    before its first key) is named: an error when no file holds a document, else a warning."""
    docs: list[Document] = []
    empty: list[str] = []
    for f in topology_files(paths, diags):
        try:
            text = read_source(f)
        except (OSError, UnicodeDecodeError) as exc:
            diags.error(f"cannot read file: {exc}", SourceLocation(str(f), 1, 1))
            continue
        before = len(diags.errors)
        found = load_text(text, str(f), diags)
        if not found and len(diags.errors) == before:
            empty.append(str(f))
        docs.extend(found)
    for name in empty:
        report = diags.warning if docs else diags.error
        report(
            "no topology document in this file (it is empty or holds only comments)",
            SourceLocation(name, 1, 1),
            hint="a topology file starts with `apiVersion: reconciler/v1` and `kind: Topology`",
        )
    return docs


def defines_clusters(path: str | Path) -> bool:
    """Whether the files under `path` define clusters and flows (a topology root on its own).

    A cheap look (PyYAML's safe loader on each file, errors ignored): used only to say how several
    paths given together are read."""
    scratch = Diagnostics()
    keys: set[str] = set()
    for f in topology_files([path], scratch):
        try:
            text = read_source(f)
        except (OSError, UnicodeDecodeError):
            continue
        for d in load_text(text, str(f), scratch):
            if isinstance(d.data, dict):
                keys.update(k for k in ("clusters", "flows") if d.data.get(k))
    return keys == {"clusters", "flows"}


def separate_roots(paths: Iterable[str | Path]) -> list[str]:
    """The paths that each define a whole topology (clusters and flows), when more than one does;
    else []. `reconciler validate topologies/*` passes several such roots; they are merged unless
    `--each` is given, and the merge is said."""
    names = [str(p) for p in paths]
    if len(names) < 2:
        return []
    roots = [p for p in names if defines_clusters(p)]
    return roots if len(roots) > 1 else []
