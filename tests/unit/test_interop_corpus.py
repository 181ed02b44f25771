"""Real MirrorMaker 2 properties and Strimzi KafkaMirrorMaker2 files from public repositories
(tests/unit/interop_files/corpus/, each naming its origin on its first line; secrets replaced by `${VAR}`).

For each: the import gives the expected topology (`NAME.expected`, checked by hand once against what MM2 does with the
file) or the expected error (`NAME.error`); the topology validates; export to the same format and import again gives
the same topology; and no MM2 key of a properties file is dropped without a line on stderr. A second line
`# reconciler-import: OPTIONS` gives the import's options (--policy-class)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reconciler.interop.draft import ImportOptions
from reconciler.interop.mm2_keys import (
    BY_SPELLING,
    CLIENT_KEY_FATES,
    EOS_CONNECTOR_KEY,
    EOS_WORKER_KEY,
    REFRESH_ENABLED_KEYS,
    REFRESH_KEYS,
)
from reconciler.interop.properties import parse_properties
from reconciler.operations.interop import export_topology, import_topology

CORPUS = Path(__file__).parent / "interop_files" / "corpus"
INPUTS = sorted(p for p in CORPUS.iterdir() if p.suffix in (".properties", ".yaml"))

#: Keys the import maps (after their `A.` / `A->B.` scope), every other key must be named by a note.
MAPPED = (
    set(BY_SPELLING)
    | set(REFRESH_KEYS)
    | set(REFRESH_ENABLED_KEYS)
    | {EOS_CONNECTOR_KEY, EOS_WORKER_KEY, "clusters", "bootstrap.servers", "enabled", "config.providers"}
    | {k.strip() for keys in CLIENT_KEY_FATES for k in keys.split(",") if "*" not in k}
)


def _fmt(path: Path) -> str:
    return "mm2" if path.suffix == ".properties" else "strimzi"


def _options(text: str) -> ImportOptions:
    m = re.search(r"^# reconciler-import: (.*)$", text, re.M)
    pairs = re.findall(r"--policy-class (\S+)=(\S+)", m.group(1)) if m else []
    return ImportOptions(dict(pairs))


def _body(yaml_text: str) -> dict:
    """The topology as data (the header comments name the input and its lines; Strimzi's export lists the target
    cluster first: the order of `clusters:` means nothing)."""
    return yaml.safe_load(yaml_text)


def test_the_corpus_is_real_and_diverse():
    assert len(INPUTS) >= 15
    for p in INPUTS:
        assert p.read_text(encoding="utf-8").startswith("# origin: github.com/"), p.name
    assert {_fmt(p) for p in INPUTS} == {"mm2", "strimzi"}


@pytest.mark.parametrize("path", INPUTS, ids=[p.name for p in INPUTS])
def test_corpus_file_imports_as_expected_validates_and_round_trips(path):
    text = path.read_text(encoding="utf-8")
    name = f"corpus/{path.name}"
    fmt = _fmt(path)
    first = import_topology(fmt, text, name, _options(text))
    error = path.with_name(path.name + ".error")
    if error.exists():
        assert first.errors == error.read_text(encoding="utf-8").rstrip("\n")
        return
    assert first.errors is None and first.topology is not None and first.draft is not None
    assert first.yaml_text == path.with_name(path.name + ".expected").read_text(encoding="utf-8")
    exported = export_topology(fmt, first.topology, name)
    again = import_topology(fmt, exported, f"exported.{fmt}")
    assert again.errors is None and again.draft is not None, again.errors
    assert _body(again.yaml_text) == _body(first.yaml_text)
    if fmt == "mm2":
        assert not again.draft.notes, [n.render() for n in again.draft.notes]  # export writes only what it reads
        noted = {n.where for n in first.draft.notes} | {n.key for n in first.draft.notes}
        aliases = {a.strip() for a in first.topology.clusters}
        for p in parse_properties(text, name):
            key = p.key.split("->", 1)[1] if "->" in p.key else p.key
            head, dot, rest = key.partition(".")
            scoped = rest if dot and head in aliases else key
            assert scoped in MAPPED or scoped.startswith("config.providers.") or p.where in noted or p.key in noted, (
                f"{p.where}: {p.key} is dropped without a line on stderr"
            )
