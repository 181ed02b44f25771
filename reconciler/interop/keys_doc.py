"""docs/interop.md's table of every MirrorMaker 2 key and what the import makes of it, generated from the tables the
import and export read (mm2_keys.py, itself derived from topology/settings_registry.py). `scripts/generate_settings.py`
writes it; tests/unit/test_interop_meaning.py fails while it is stale."""

from __future__ import annotations

from pathlib import Path

from reconciler.interop.mm2_keys import (
    BUILTIN_EXCLUDES,
    CLIENT_KEY_FATES,
    CLIENT_OVERRIDE_PREFIXES,
    CONNECTOR_KEYS,
    EOS_CONNECTOR_KEY,
    EOS_WORKER_KEY,
    MM2_REFRESH_DEFAULT,
    NOT_EXPRESSIBLE,
    POLICY_CLASSES,
    REFRESH_ENABLED_KEYS,
    REFRESH_KEYS,
    Kind,
)

BEGIN = (
    "<!-- mm2-keys-table:begin (generated from reconciler/interop/mm2_keys.py by scripts/generate_settings.py; "
    "do not edit) -->"
)
END = "<!-- mm2-keys-table:end -->"
DOC = "docs/interop.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(value: object, kind: Kind) -> str:
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value) or "(empty)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"`{value}`"


def mm2_keys_table() -> str:
    rows = ["| MM2 key | what becomes of it | MM2 default |", "|---|---|---|"]

    def row(key: str, fate: str, default: str = "") -> None:
        rows.append(f"| {_cell(key)} | {_cell(fate)} | {_cell(default)} |")

    row("`clusters`", "mapped: the keys of `clusters:`")
    row("`A.bootstrap.servers`", "mapped: `clusters.A.bootstrap_servers`")
    row("`A->B.enabled`", "mapped: a flow (`false`: `enabled: false`); a pair without it is reported")
    row("`config.providers`, `config.providers.P.class`", "read: `${P:...}` references become `${VAR}` (see Secrets)")
    for k in CONNECTOR_KEYS:
        spellings = ", ".join(f"`{s}`" for s in k.spellings)
        target = "`" + ".".join(k.setting) + "`"
        if k.setting in BUILTIN_EXCLUDES:
            builtin = ".".join(BUILTIN_EXCLUDES[k.setting][0])
            fate = (
                f"mapped: {target}, with `{builtin}: []` (MM2's list replaces its built-ins; an empty value "
                "excludes nothing); a list holding every built-in keeps them as built-ins"
            )
            default = _default(BUILTIN_EXCLUDES[k.setting][1], k.kind)
        elif k.kind is Kind.POLICY:
            fate = (
                f"mapped: {target} ({', '.join(f'`{c}`' for c in POLICY_CLASSES if '.' in c)} and their simple "
                "names); another class: an error unless `--policy-class CLASS=identity|default`"
            )
            default = "`default`"
        else:
            fate = f"mapped: {target}"
            default = _default(k.mm2_default, k.kind)
        row(spellings, fate, default)
    row(
        ", ".join(f"`{k}`" for k in REFRESH_KEYS),
        "mapped: `refresh_interval_seconds` (the smaller of the two, reported when they differ)",
        f"`{MM2_REFRESH_DEFAULT}`",
    )
    row(
        ", ".join(f"`{k}`" for k in REFRESH_ENABLED_KEYS),
        "`true`: mapped (the jobs refresh); `false`: reported, not expressible (the jobs always refresh)",
        "true",
    )
    row(
        f"`{EOS_WORKER_KEY}` (`A->B.`, `B.` or top level)",
        "`enabled`: `delivery: exactly-once`; `preparing`, `disabled`: at-least-once; else an error",
        "`disabled`",
    )
    row(
        f"`{EOS_CONNECTOR_KEY}`",
        "`required`: `delivery: exactly-once` (reported when the worker does not enable it: MM2 would not start the "
        "flow); `requested`: what the worker gives; else an error",
        "`requested`",
    )
    for key, fate in CLIENT_KEY_FATES.items():
        row(", ".join(f"`{k.strip()}`" for k in key.split(",")) + " (`A.` or top level)", fate)
    for key, action in NOT_EXPRESSIBLE.items():
        row(f"`{key}`", f"reported, not expressible: {action}")
    row(
        ", ".join(f"`{p}*`" for p in CLIENT_OVERRIDE_PREFIXES) + " (any level)",
        "reported: jobs use one librdkafka config per cluster",
    )
    row("`reconciler.*`", "ours (export's): read back")
    row("any other key", "reported: unknown key, not imported")
    return "\n".join(rows) + "\n"


def doc_text(current: str) -> str:
    if BEGIN not in current or END not in current:
        raise ValueError(f"{DOC} has no table markers ({BEGIN} ... {END})")
    head, rest = current.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{mm2_keys_table()}{END}{tail}"


def write(root: Path) -> list[str]:
    path = root / DOC
    current = path.read_text(encoding="utf-8")
    text = doc_text(current)
    if text == current:
        return []
    path.write_text(text, encoding="utf-8")
    return [DOC]
