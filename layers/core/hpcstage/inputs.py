"""Execution inputs checked against their JSON Schemas (schemas/*.schema.json), the one statement of
what an input may hold: the Step Functions console, the docs and this check read the same file.

Messages are made from the schema, one line each, saying what the field must be and what it got:
``'streams' must be a whole number from 1 to 64, got 0``. A property's ``title`` names what a string
must be and its first ``examples`` entry shows one (``'bucket' must be an S3 bucket name (e.g.
"my-data")``). Defaults come from each property's ``default``.
"""

from __future__ import annotations

import copy
import functools
import json
import re
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
def _ecma_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with ``$`` read as ECMA-262 reads it (JSON Schema's dialect): the end of the
    string, Python's ``\\Z``. Python's ``$`` also matches before a final newline, so ``^[a-z]+$``
    would let ``"bucket\\n"`` through (python-jsonschema searches with ``re`` as it is)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "$":
            ch = r"\Z"
        out.append(ch)
        i += 1
    return re.compile("".join(out))


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Any:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _ecma_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    doc = schema(name)
    Draft202012Validator.check_schema(doc)
    return extend(Draft202012Validator, {"pattern": _pattern})(doc)


def _what(prop: dict[str, Any]) -> str:
    """What a value of this property must be, in words."""
    kind = prop.get("type")
    if kind in ("integer", "number"):
        noun = "a whole number" if kind == "integer" else "a number"
        lo, hi = prop.get("minimum"), prop.get("maximum")
        if lo is not None and hi is not None:
            return f"{noun} from {lo} to {hi}"
        if lo is not None:
            return f"{noun} of at least {lo}"
        if prop.get("exclusiveMinimum") is not None:
            return f"{noun} greater than {prop['exclusiveMinimum']}"
        return noun
    if kind == "boolean":
        return "true or false"
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if prop.get("title"):
        what = str(prop["title"])
    elif kind == "string":
        what = "a non-empty string" if prop.get("minLength") == 1 else "a string"
        if "maxLength" in prop:
            what += f" of at most {prop['maxLength']:,} characters"
    elif kind == "array":
        what = "a non-empty JSON array" if prop.get("minItems") == 1 else "a JSON array"
    else:
        what = f"a JSON {kind}" if kind else "a JSON value"
    if prop.get("examples"):
        what += f" (e.g. {json.dumps(prop['examples'][0])})"
    return what


def _field(path: Any) -> str:
    """``job.env``, ``selection.globs[0]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _order(err: Any) -> tuple[Any, ...]:
    """Errors of the whole input first, then by field, so the message for one input is stable."""
    return (len(err.absolute_path) > 0, [str(p) for p in err.absolute_path], err.validator)


def _branch(err: Any) -> Any | None:
    """For a failed oneOf/anyOf, the error inside the one alternative of the value's JSON type
    (a string given where a string or an object is allowed is held to the string rule)."""
    by_branch: dict[Any, list[Any]] = {}
    for sub in err.context or ():
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
    fitting = [
        subs
        for subs in by_branch.values()
        if not any(sub.validator == "type" and not sub.relative_path for sub in subs)
    ]
    return min(fitting[0], key=_order) if len(fitting) == 1 else None


def _message(err: Any, doc: dict[str, Any]) -> str:
    while err.validator in ("oneOf", "anyOf") and (inner := _branch(err)) is not None:
        err = inner
    schema = err.schema if isinstance(err.schema, dict) else {}
    props = schema.get("properties", {})
    path = list(err.absolute_path)
    field = _field(path)
    got = json.dumps(err.instance)
    custom = schema.get("errorMessages", {}).get(err.validator)
    if custom:
        return f"'{field}' {custom.format(got=got)}"
    if err.validator == "type" and not path:
        return f"the input must be a JSON object, got {type(err.instance).__name__}"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        unknown = ", ".join(sorted(set(err.instance) - set(props)))
        allowed = ", ".join(sorted(props))
        if not path:
            return f"unknown input field(s): {unknown}; allowed: {allowed}"
        return f"unknown '{field}' field(s): {unknown}; allowed: {allowed}"
    if err.validator == "required":
        missing = [name for name in err.validator_value if name not in err.instance]
        return "; ".join(
            f"'{_field([*path, n])}' must be {_what(_resolve(props.get(n, {}), doc))}; it is missing"
            for n in missing
        )
    if err.validator == "maxProperties":
        return f"'{field}' has {len(err.instance)} entries; at most {err.validator_value}"
    return f"'{field}' must be {_what(schema)}, got {got}"


def _resolve(prop: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """A property schema with a local ``$ref`` (``#/$defs/...``) followed."""
    while "$ref" in prop and str(prop["$ref"]).startswith("#/"):
        node: Any = doc
        for part in str(prop["$ref"])[2:].split("/"):
            node = node[part]
        prop = {**node, **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop


def _fill_defaults(value: dict[str, Any], schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """``value`` with the defaults of its schema's properties filled in, and those of its nested
    objects whose schema lists their properties (``waits``)."""
    filled = dict(value)
    for key, prop in schema.get("properties", {}).items():
        if key not in filled and "default" in prop:
            filled[key] = copy.deepcopy(prop["default"])
        if isinstance(filled.get(key), dict) and "properties" in prop:
            filled[key] = _fill_defaults(filled[key], prop, doc)
    return filled


def validate(event: Any, name: str) -> dict[str, Any]:
    """``event`` checked against schemas/<name>.schema.json, with defaults filled in: those of the
    top-level fields, and those of nested objects whose properties the schema lists in place.

    Raises InputError with the first problem (in field order, so the message is stable)."""
    doc = schema(name)
    errors = list(_validator(name).iter_errors(event))
    if errors:
        raise InputError(_message(min(errors, key=_order), doc))
    return _fill_defaults(event, doc, doc)
