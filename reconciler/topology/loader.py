"""Load YAML topology files into plain data plus a map from data paths to source positions.

PyYAML's composer gives every node a position; we build Python values from the node tree
ourselves so that (a) every value remembers its file/line/column and (b) duplicate mapping
keys are errors instead of PyYAML's silent last-one-wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml
import yaml.constructor

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

    def where(self, path: Path_) -> SourceLocation:
        """Position of the value at `path`, else of its nearest ancestor."""
        p = tuple(path)
        while p:
            if p in self.positions:
                return self.positions[p]
            p = p[:-1]
        return self.positions.get((), SourceLocation(self.file, 1, 1))

    def where_key(self, path: Path_) -> SourceLocation:
        """Position of the mapping key that names `path` (falls back to the value)."""
        return self.key_positions.get(tuple(path)) or self.where(path)


def _loc(file: str, node: yaml.Node) -> SourceLocation:
    return SourceLocation(file, node.start_mark.line + 1, node.start_mark.column + 1)


class _Builder:
    """Turns a composed node tree into Python values, recording positions and duplicate keys."""

    def __init__(self, file: str, diags: Diagnostics):
        self.file = file
        self.diags = diags
        self.constructor = yaml.constructor.SafeConstructor()
        self.doc = Document(file, None)

    def build(self, node: yaml.Node) -> Document:
        self.doc.data = self._value(node, ())
        return self.doc

    def _value(self, node: yaml.Node, path: Path_) -> Any:
        self.doc.positions[path] = _loc(self.file, node)
        if isinstance(node, yaml.MappingNode):
            self.constructor.flatten_mapping(node)  # YAML merge keys (<<)
            out: dict[Any, Any] = {}
            first_seen: dict[Any, SourceLocation] = {}
            for key_node, value_node in node.value:
                key = self.constructor.construct_object(key_node, deep=True)
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
                self.doc.key_positions[path + (key,)] = key_loc
                out[key] = self._value(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self._value(item, path + (i,)) for i, item in enumerate(node.value)]
        return self.constructor.construct_object(node, deep=True)


def load_text(text: str, file: str, diags: Diagnostics) -> list[Document]:
    """All documents in one YAML text; syntax errors become diagnostics."""
    docs: list[Document] = []
    try:
        for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
            if node is None:
                continue
            docs.append(_Builder(file, diags).build(node))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = SourceLocation(file, mark.line + 1, mark.column + 1) if mark else SourceLocation(file, 1, 1)
        problem = exc.problem or str(exc)
        ctx = f" ({exc.context})" if exc.context else ""
        diags.error(f"YAML syntax error: {problem}{ctx}", where, hint="check indentation and quoting around this position")
    except yaml.YAMLError as exc:  # pragma: no cover - non-marked errors are rare
        diags.error(f"YAML error: {exc}", SourceLocation(file, 1, 1))
    return docs


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
        elif p.is_file():
            files.append(p)
        else:
            diags.error(f"no such file or directory: {p}", SourceLocation(str(p), 1, 1),
                        hint="pass topology files or directories that hold them")
    return files


def load_paths(paths: Iterable[str | Path], diags: Diagnostics) -> list[Document]:
    docs: list[Document] = []
    for f in topology_files(paths, diags):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            diags.error(f"cannot read file: {exc}", SourceLocation(str(f), 1, 1))
            continue
        docs.extend(load_text(text, str(f), diags))
    return docs
