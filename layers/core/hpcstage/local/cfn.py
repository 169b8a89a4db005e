"""Reading template.yaml without CloudFormation: short-form tags, SAM Globals, parameters, conditions
and the intrinsic functions a SAM template uses to wire its resources together.

Only what the local runtime needs: values are resolved against names and ARNs the runtime chose,
never against a deployed stack. Anything not understood raises ``TemplateError`` naming the spot.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml


class TemplateError(ValueError):
    """The template (or a value in it) cannot be understood or resolved locally."""


# --------------------------------------------------------------------------------------------------
# YAML with CloudFormation tags
# --------------------------------------------------------------------------------------------------


class CfnLoader(yaml.SafeLoader):
    """A SafeLoader that reads ``!Ref x`` as ``{"Ref": "x"}`` and ``!Sub s`` as ``{"Fn::Sub": "s"}``.

    Like CloudFormation, only ``true``/``false`` are booleans (``yes``/``on`` stay strings) and dates
    stay strings.
    """


def _construct_cfn_tag(loader: CfnLoader, tag_suffix: str, node: yaml.Node) -> Any:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:  # pragma: no cover - yaml has no other node kinds
        raise TemplateError(f"unsupported YAML node for !{tag_suffix}")
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{tag_suffix}": value}


def _construct_bool_or_string(loader: CfnLoader, node: yaml.Node) -> Any:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def _construct_string(loader: CfnLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


CfnLoader.add_multi_constructor("!", _construct_cfn_tag)
CfnLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool_or_string)
CfnLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_string)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=CfnLoader)  # noqa: S506 - CfnLoader is a SafeLoader


def load_template(path: str | Path) -> dict[str, Any]:
    template = load_yaml(Path(path).read_text(encoding="utf-8"))
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise TemplateError(f"{path}: not a CloudFormation template (no Resources mapping)")
    return template


# --------------------------------------------------------------------------------------------------
# SAM Globals
# --------------------------------------------------------------------------------------------------

GLOBALS_SECTIONS = {
    "AWS::Serverless::Function": "Function",
    "AWS::Serverless::StateMachine": "StateMachine",
    "AWS::Serverless::SimpleTable": "SimpleTable",
}


def merge_globals(global_value: Any, local_value: Any) -> Any:
    """SAM's rule: maps merge (the resource wins), lists concatenate (globals first), scalars override."""
    if isinstance(global_value, dict) and isinstance(local_value, dict):
        merged = copy.deepcopy(global_value)
        for key, value in local_value.items():
            merged[key] = merge_globals(merged[key], value) if key in merged else copy.deepcopy(value)
        return merged
    if isinstance(global_value, list) and isinstance(local_value, list):
        return copy.deepcopy(global_value) + copy.deepcopy(local_value)
    return copy.deepcopy(local_value)


def properties_with_globals(template: Mapping[str, Any], resource: Mapping[str, Any]) -> dict[str, Any]:
    properties = dict(resource.get("Properties") or {})
    section = GLOBALS_SECTIONS.get(str(resource.get("Type")))
    global_properties = (template.get("Globals") or {}).get(section) if section else None
    if not global_properties:
        return properties
    merged = merge_globals(global_properties, properties)
    return dict(merged)


# --------------------------------------------------------------------------------------------------
# Parameters and intrinsic functions
# --------------------------------------------------------------------------------------------------


class _NoValue:
    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE: Any = _NoValue()


def resolve_parameters(template: Mapping[str, Any], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Parameter values: given ones, else defaults; checked against AllowedValues/AllowedPattern."""
    declared: Mapping[str, Any] = template.get("Parameters") or {}
    given = dict(given or {})
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise TemplateError(f"parameters not declared by the template: {unknown}")
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        spec = spec or {}
        if name in given:
            raw = given[name]
        elif "Default" in spec:
            raw = spec["Default"]
        else:
            raise TemplateError(f"parameter {name} has no default and no value was given")
        if isinstance(raw, list):
            text = ",".join(str(item) for item in raw)
        elif isinstance(raw, bool):
            text = "true" if raw else "false"
        else:
            text = str(raw)
        allowed = spec.get("AllowedValues")
        if allowed is not None and text not in [str(item) for item in allowed]:
            raise TemplateError(f"parameter {name}={text!r} is not one of {allowed}")
        pattern = spec.get("AllowedPattern")
        if pattern is not None and not re.fullmatch(str(pattern), text):
            raise TemplateError(f"parameter {name}={text!r} does not match {pattern!r}")
        kind = str(spec.get("Type", "String"))
        if kind == "CommaDelimitedList" or kind.startswith("List<"):
            values[name] = [] if text == "" else [item.strip() for item in text.split(",")]
        else:
            values[name] = text
    return values


_SUB_RE = re.compile(r"\$\{([^}]*)\}")


class Resolver:
    """Evaluates Ref, Fn::* and Conditions. Resources are looked up through the two callbacks."""

    def __init__(
        self,
        *,
        template: Mapping[str, Any],
        parameters: Mapping[str, Any],
        pseudo: Mapping[str, Any],
        ref_resource: Callable[[str], Any],
        get_att: Callable[[str, str], Any],
    ) -> None:
        self._template = template
        self._parameters = parameters
        self._pseudo = pseudo
        self._ref_resource = ref_resource
        self._get_att = get_att
        self._conditions: dict[str, bool] = {}
        self._evaluating: set[str] = set()

    # -- conditions -----------------------------------------------------------------------------

    def condition(self, name: str) -> bool:
        if name in self._conditions:
            return self._conditions[name]
        declared = self._template.get("Conditions") or {}
        if name not in declared:
            raise TemplateError(f"unknown condition {name}")
        if name in self._evaluating:
            raise TemplateError(f"condition {name} refers to itself")
        self._evaluating.add(name)
        try:
            value = self._condition_value(declared[name])
        finally:
            self._evaluating.discard(name)
        self._conditions[name] = value
        return value

    def _condition_value(self, expression: Any) -> bool:
        if isinstance(expression, dict) and list(expression) == ["Condition"]:
            return self.condition(str(expression["Condition"]))
        value = self.resolve(expression)
        if not isinstance(value, bool):
            raise TemplateError(f"condition expression {expression!r} is not a boolean")
        return value

    # -- values ---------------------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self.ref(str(argument))
            if key.startswith("Fn::"):
                return self._function(key, argument)
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self._pseudo:
            return self._pseudo[name]
        if name in self._parameters:
            return self._parameters[name]
        if name in (self._template.get("Resources") or {}):
            return self._ref_resource(name)
        raise TemplateError(f"Ref to unknown name {name!r}")

    def _function(self, name: str, argument: Any) -> Any:
        handler = getattr(self, "_fn_" + name[len("Fn::") :].lower(), None)
        if handler is None:
            raise TemplateError(f"intrinsic function {name} is not supported locally")
        return handler(argument)

    def _fn_getatt(self, argument: Any) -> Any:
        if isinstance(argument, str):
            argument = argument.split(".", 1)
        logical_id, attribute = (self.resolve(item) for item in argument)
        if logical_id not in (self._template.get("Resources") or {}):
            raise TemplateError(f"Fn::GetAtt of unknown resource {logical_id!r}")
        return self._get_att(str(logical_id), str(attribute))

    def _fn_sub(self, argument: Any) -> str:
        if isinstance(argument, list):
            text, variables = argument[0], self.resolve(argument[1] if len(argument) > 1 else {})
        else:
            text, variables = argument, {}
        text = self.resolve(text)
        if not isinstance(text, str):
            raise TemplateError(f"Fn::Sub needs a string, got {text!r}")

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return _as_text(variables[name])
            if "." in name and name not in self._parameters and name not in self._pseudo:
                logical_id, attribute = name.split(".", 1)
                return _as_text(self._fn_getatt([logical_id, attribute]))
            return _as_text(self.ref(name))

        return _SUB_RE.sub(replace, text)

    def _fn_join(self, argument: Any) -> str:
        delimiter, items = argument
        resolved = self.resolve(items)
        if not isinstance(resolved, list):
            raise TemplateError(f"Fn::Join needs a list, got {resolved!r}")
        return str(self.resolve(delimiter)).join(_as_text(item) for item in resolved)

    def _fn_select(self, argument: Any) -> Any:
        index, items = (self.resolve(item) for item in argument)
        return items[int(index)]

    def _fn_split(self, argument: Any) -> list[str]:
        delimiter, text = (self.resolve(item) for item in argument)
        return str(text).split(str(delimiter))

    def _fn_if(self, argument: Any) -> Any:
        name, when_true, when_false = argument
        return self.resolve(when_true if self.condition(str(name)) else when_false)

    def _fn_equals(self, argument: Any) -> bool:
        left, right = (self.resolve(item) for item in argument)
        return _as_text(left) == _as_text(right)

    def _fn_not(self, argument: Any) -> bool:
        return not self._condition_value(argument[0])

    def _fn_and(self, argument: Any) -> bool:
        return all(self._condition_value(item) for item in argument)

    def _fn_or(self, argument: Any) -> bool:
        return any(self._condition_value(item) for item in argument)

    def _fn_findinmap(self, argument: Any) -> Any:
        map_name, top, second = (self.resolve(item) for item in argument[:3])
        try:
            return (self._template.get("Mappings") or {})[map_name][top][second]
        except KeyError as exc:
            raise TemplateError(f"Fn::FindInMap {map_name}/{top}/{second} not found") from exc

    def _fn_base64(self, argument: Any) -> str:
        return base64.b64encode(_as_text(self.resolve(argument)).encode("utf-8")).decode("ascii")

    def _fn_getazs(self, argument: Any) -> list[str]:
        region = self.resolve(argument) or self._pseudo["AWS::Region"]
        return [f"{region}{zone}" for zone in "abc"]

    def _fn_tojsonstring(self, argument: Any) -> str:
        return json.dumps(self.resolve(argument), separators=(",", ":"))

    def _fn_length(self, argument: Any) -> int:
        return len(self.resolve(argument))


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    raise TemplateError(f"cannot use {value!r} as a string")


def as_text(value: Any) -> str:
    """A resolved scalar as CloudFormation turns it into a string (booleans lower-case)."""
    return _as_text(value)
