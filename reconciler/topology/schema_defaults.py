"""The JSON Schema's `default` and `examples` annotations, generated from `topology/defaults.py`.

Editors (VS Code's YAML extension, IntelliJ, Neovim through the yaml-language-server) show a key's
`default` and `examples` in completion and hover. The values are not written by hand in the schema:
`annotate()` copies them from BUILTIN_FLOW_DEFAULTS (the one home of defaults) into
`$defs.flowSettings` and `$defs.flow`, and `tests/unit/test_schema_defaults.py` fails when the
schema file is not what `annotate()` makes of it. After changing a default or adding a setting:

    python -m reconciler.topology.schema_defaults      # rewrites schemas/topology.schema.json
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS

#: Example values shown by editors, by path below a flow's settings.
EXAMPLES: dict[tuple[str, ...], list[Any]] = {
    ("topics", "include"): [["orders\\..*", "payments"]],
    ("topics", "exclude"): [[".*\\.tmp", ".*-staging"]],
    ("groups", "include"): [["billing-.*"]],
    ("groups", "exclude"): [["console-consumer-.*"]],
    ("separator",): ["_"],
    ("replication_factor",): [3],
    ("job", "master"): ["local[4]", "spark://spark-master:7077"],
    ("job", "spark_conf"): [{"spark.executor.memory": "2g"}],
    ("job", "image"): ["ghcr.io/example/reconciler-job:0.1.0"],
}


def annotate(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` with `default` (and `examples`) on every flow setting that has a built-in default."""
    out = copy.deepcopy(schema)
    defs = out["$defs"]
    _annotate(defs["flowSettings"], {k: v for k, v in BUILTIN_FLOW_DEFAULTS.items() if k != "enabled"}, ())
    _annotate(defs["flow"], {"enabled": BUILTIN_FLOW_DEFAULTS["enabled"]}, ())
    return out


def _annotate(node: dict[str, Any], defaults: dict[str, Any], path: tuple[str, ...]) -> None:
    props = node.get("properties", {})
    for key, value in defaults.items():
        prop = props.get(key)
        if prop is None:
            continue
        here = (*path, key)
        if isinstance(value, dict) and "properties" in prop:
            _annotate(prop, value, here)
        elif value is not None:
            prop["default"] = copy.deepcopy(value)
        if here in EXAMPLES:
            prop["examples"] = copy.deepcopy(EXAMPLES[here])


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    from reconciler.resources import schema_path

    path = Path(argv[0]) if argv else schema_path().resolve()
    text = render(annotate(json.loads(path.read_text(encoding="utf-8"))))
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
