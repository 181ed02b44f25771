"""The schema's `default`/`examples` come from topology/defaults.py, and still validate."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from reconciler.resources import schema_path
from reconciler.topology.defaults import BUILTIN_FLOW_DEFAULTS
from reconciler.topology.schema_defaults import annotate, render


def test_schema_file_is_annotated_from_the_builtin_defaults():
    text = schema_path().read_text(encoding="utf-8")
    assert text == render(annotate(json.loads(text))), (
        "schemas/topology.schema.json is out of date with reconciler/topology/defaults.py: "
        "run `python -m reconciler.topology.schema_defaults`"
    )


def test_every_builtin_default_is_shown_where_the_schema_has_the_key():
    settings = json.loads(schema_path().read_text())["$defs"]["flowSettings"]["properties"]
    assert settings["delivery"]["default"] == BUILTIN_FLOW_DEFAULTS["delivery"]
    assert (
        settings["heartbeats"]["properties"]["interval_seconds"]["default"]
        == BUILTIN_FLOW_DEFAULTS["heartbeats"]["interval_seconds"]
    )
    assert (
        settings["config_properties"]["properties"]["exclude"]["default"]
        == BUILTIN_FLOW_DEFAULTS["config_properties"]["exclude"]
    )
    assert settings["job"]["properties"]["master"]["examples"]


def _without_nones(value):
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    return value


def test_defaults_are_valid_values_of_their_own_schema():
    """Unset-by-default settings (None: e.g. job.image) are left out, as a user would."""
    schema = json.loads(schema_path().read_text())
    Draft202012Validator.check_schema(schema)
    settings = schema["$defs"]["flowSettings"]
    validator = Draft202012Validator({**settings, "$defs": schema["$defs"]})
    defaults = _without_nones({k: v for k, v in BUILTIN_FLOW_DEFAULTS.items() if k in settings["properties"]})
    assert [e.message for e in validator.iter_errors(defaults)] == []
