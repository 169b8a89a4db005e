"""Execution inputs checked against their JSON Schemas (schemas/*.schema.json), the one statement of
what an input may hold: the Step Functions console, the docs and this check read the same file.

Messages are made from the schema, one line each, saying what the field must be and what it got:
``'streams' must be a whole number from 1 to 64, got 0``. A property's ``title`` names what a string
must be and its first ``examples`` entry shows one (``'bucket' must be an S3 bucket name (e.g.
"my-data")``). Defaults come from each property's ``default``.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from .errors import InputError


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """schemas/<name>.schema.json, shipped as package data (pyproject.toml) and in the Lambda layer."""
    text = resources.files("hpcstage").joinpath("schemas", f"{name}.schema.json").read_text()
    doc: dict[str, Any] = json.loads(text)
    return doc


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    doc = schema(name)
    Draft202012Validator.check_schema(doc)
    return Draft202012Validator(doc)


def _what(prop: dict[str, Any]) -> str:
    """What a value of this property must be, in words."""
    kind = prop.get("type")
    if kind == "integer":
        lo, hi = prop.get("minimum"), prop.get("maximum")
        if lo is not None and hi is not None:
            return f"a whole number from {lo} to {hi}"
        return f"a whole number of at least {lo}" if lo is not None else "a whole number"
    if kind == "boolean":
        return "true or false"
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    what = str(prop.get("title") or ("a string" if kind == "string" else f"a JSON {kind}"))
    if kind == "string" and "maxLength" in prop and not prop.get("title"):
        what += f" of at most {prop['maxLength']:,} characters"
    if prop.get("examples"):
        what += f" (e.g. {json.dumps(prop['examples'][0])})"
    return what


def _message(err: Any, doc: dict[str, Any]) -> str:
    props = doc.get("properties", {})
    if err.validator == "type" and not err.path:
        return f"the input must be a JSON object, got {type(err.instance).__name__}"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = err.schema.get("properties", {}) if isinstance(err.schema, dict) else {}
        unknown = ", ".join(sorted(set(err.instance) - set(known)))
        allowed = ", ".join(sorted(known))
        if not err.path:
            return f"unknown input field(s): {unknown}; allowed: {allowed}"
        return f"unknown '{'.'.join(str(p) for p in err.path)}' field(s): {unknown}; allowed: {allowed}"
    if err.validator == "required":
        missing = [name for name in err.validator_value if name not in err.instance]
        return "; ".join(f"'{n}' must be {_what(props.get(n, {}))}; it is missing" for n in missing)
    field = ".".join(str(p) for p in err.path)
    prop = err.schema if isinstance(err.schema, dict) else {}
    return f"'{field}' must be {_what(prop)}, got {json.dumps(err.instance)}"


def validate(event: Any, name: str) -> dict[str, Any]:
    """``event`` checked against schemas/<name>.schema.json, with the top-level defaults filled in.

    Raises InputError with the first problem (in field order, so the message is stable)."""
    doc = schema(name)
    errors = list(_validator(name).iter_errors(event))
    if errors:
        first = min(errors, key=lambda e: (len(e.path) > 0, [str(p) for p in e.path], e.validator))
        raise InputError(_message(first, doc))
    filled = dict(event)
    for key, prop in doc.get("properties", {}).items():
        if key not in filled and "default" in prop:
            filled[key] = prop["default"]
    return filled
