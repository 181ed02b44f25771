"""JSON Schema validation of topology documents, with errors placed at file:line:col."""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from reconciler.resources import schema_path
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.k8s_names import PATTERN_MEANINGS
from reconciler.topology.loader import Document


@lru_cache(maxsize=1)
def validator() -> Draft202012Validator:
    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    # Checked against the metaschema by tests/unit/test_settings_registry.py, not at every run (0.2-0.9 s a command)
    return Draft202012Validator(schema)


def _path_text(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "document"


def _did_you_mean(word: str, choices: list[str]) -> str | None:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _report(err: ValidationError, doc: Document, diags: Diagnostics, prefix: tuple = ()) -> None:
    path = prefix + tuple(err.absolute_path)
    at = _path_text(path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = list(err.schema.get("properties", {}))
        for key in err.instance:
            if key not in allowed:
                hint = _did_you_mean(str(key), allowed) or f"allowed keys here: {', '.join(allowed)}"
                diags.error(f"unknown key {key!r} in {at}", doc.where_key(path + (key,)), hint=hint)
        return
    if err.validator == "propertyNames" or (err.validator == "pattern" and "propertyNames" in err.schema_path):
        name = err.instance
        hints = {
            "environments": "environment names use letters, digits, '-' and '_'",
            "flows": "a flow is named `source->target`, or `source->target:family` for a topic family",
        }
        diags.error(
            f"invalid name {name!r} in {at}",
            doc.where_key(path + (name,)),
            hint=hints.get(str(path[-1]) if path else "")
            or "cluster aliases use letters, digits, '-' and '_' (no dots: the dot separates remote-topic prefixes)",
        )
        return
    if err.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", err.message)
        diags.error(f"{at} is missing required key {missing[0] if missing else err.message!r}", doc.where(path))
        return
    if err.validator == "enum":
        diags.error(
            f"{at}: {err.instance!r} is not one of {', '.join(map(repr, err.validator_value))}",
            doc.where(path),
            hint=_did_you_mean(str(err.instance), [str(v) for v in err.validator_value]),
        )
        return
    if err.validator == "const":
        diags.error(f"{at} must be {err.validator_value!r}, not {err.instance!r}", doc.where(path))
        return
    if err.validator == "type" and err.validator_value == "string" and not isinstance(err.instance, (dict, list)):
        text = doc.written(path)
        what = "name" if path[-1:] in (("source",), ("target",)) else "value"
        diags.error(
            f"{at}: {what} {text} is not a string: quote it ('{text}')",
            doc.where(path),
            hint="YAML reads an unquoted 1, true, yes, null or ~ as a number, a boolean or nothing",
        )
        return
    if err.validator == "type":
        diags.error(
            f"{at} must be of type {err.validator_value}, not {type(err.instance).__name__} ({err.instance!r})",
            doc.where(path),
        )
        return
    if err.validator in ("minimum", "exclusiveMinimum") and not isinstance(err.instance, bool):
        least = "at least" if err.validator == "minimum" else "more than"
        diags.error(f"{at} must be {least} {err.validator_value}, not {err.instance!r}", doc.where(path))
        return
    if err.validator == "pattern" and err.validator_value in PATTERN_MEANINGS:
        diags.error(f"{at}: {err.instance!r} is not {PATTERN_MEANINGS[err.validator_value]}", doc.where(path))
        return
    pattern = err.schema.get("pattern")
    if err.validator in ("maxLength", "minLength") and pattern in PATTERN_MEANINGS and isinstance(err.instance, str):
        if not re.search(pattern, err.instance):
            return  # the value's pattern error says it once
        diags.error(
            f"{at}: {err.instance[:40]!r}... is {len(err.instance)} characters long: it is not "
            f"{PATTERN_MEANINGS[pattern]}",
            doc.where(path),
        )
        return
    diags.error(f"{at}: {err.message}", doc.where(path))


def validate_document(doc: Document, diags: Diagnostics) -> bool:
    """Report every schema error of one document; True when it is valid."""
    if not isinstance(doc.data, dict):
        diags.error(
            "a topology document must be a mapping with apiVersion, kind, clusters and flows",
            doc.where(()),
            hint="start the file with `apiVersion: reconciler/v1` and `kind: Topology`",
        )
        return False
    errors = sorted(validator().iter_errors(doc.data), key=lambda e: (doc.where(tuple(e.absolute_path)), e.message))
    for err in errors:
        _report(err, doc, diags)
    return not errors


@lru_cache(maxsize=8)
def _part_validator(definition: str) -> Draft202012Validator:
    """A validator of one of the schema's `$defs` (its references resolved within the schema)."""
    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"})


def validate_part(doc: Document, path: tuple, definition: str, diags: Diagnostics) -> bool:
    """Report every schema error of the value at `path` of `doc` against `$defs.<definition>`, placed as the whole
    document's would be (messages name the full path); True when it is valid."""
    value: Any = doc.data
    for p in path:
        value = value[p]
    errors = sorted(
        _part_validator(definition).iter_errors(value),
        key=lambda e: (doc.where(path + tuple(e.absolute_path)), e.message),
    )
    for err in errors:
        _report(err, doc, diags, path)
    return not errors


def schema_json() -> dict[str, Any]:
    return json.loads(schema_path().read_text(encoding="utf-8"))
