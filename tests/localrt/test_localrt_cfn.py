"""Reading template.yaml locally: CloudFormation tags, SAM Globals, parameters, conditions, intrinsics."""

from __future__ import annotations

from typing import Any

import pytest
from hpcstage.local.cfn import (
    NO_VALUE,
    Resolver,
    TemplateError,
    load_yaml,
    merge_globals,
    properties_with_globals,
    resolve_parameters,
)
from hpcstage.local.runtime import substitute_definition

TEMPLATE_TEXT = """
Parameters:
  Stage: {Type: String, Default: dev, AllowedValues: [dev, prod]}
  Zones: {Type: CommaDelimitedList, Default: "a,b"}
Conditions:
  IsProd: !Equals [!Ref Stage, prod]
  IsDev: !Not [!Condition IsProd]
  Both: !And [!Condition IsDev, !Equals [x, x]]
Mappings:
  Sizes:
    dev: {Memory: 128}
Resources:
  Bucket:
    Type: AWS::S3::Bucket
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: app.handler
      Flags: [yes, on, true, False, 2016-10-31]
      Refs:
        short: !GetAtt Fn.Arn
        long: !GetAtt [Bucket, Arn]
        sub: !Sub "${AWS::StackName}-${Stage}-${Bucket}-${Fn.Arn}-${!Literal}"
        sub_vars: !Sub ["${A}/${B}", {A: !Ref Stage, B: 7}]
        join: !Join [",", [a, !Ref Stage, !Select [1, !Ref Zones]]]
        split: !Split ["/", "x/y/z"]
        if: !If [IsProd, big, small]
        novalue: !If [IsProd, kept, !Ref AWS::NoValue]
        map: !FindInMap [Sizes, !Ref Stage, Memory]
        b64: !Base64 "hi"
        both: !If [Both, yes-both, no-both]
"""


def make_resolver(template: dict[str, Any], parameters: dict[str, Any] | None = None) -> Resolver:
    values = resolve_parameters(template, parameters)
    return Resolver(
        template=template,
        parameters=values,
        pseudo={"AWS::Region": "eu-west-1", "AWS::StackName": "stk", "AWS::AccountId": "123456789012"},
        ref_resource=lambda logical_id: f"name-of-{logical_id}",
        get_att=lambda logical_id, attribute: f"{attribute}-of-{logical_id}",
    )


def test_short_tags_load_as_the_long_forms_and_yaml_11_words_stay_strings() -> None:
    # Given a template using short-form tags and YAML 1.1 words CloudFormation reads as strings
    template = load_yaml(TEMPLATE_TEXT)
    props = template["Resources"]["Fn"]["Properties"]

    # Then tags become their JSON forms, and only true/false are booleans
    assert props["Refs"]["short"] == {"Fn::GetAtt": ["Fn", "Arn"]}
    assert props["Refs"]["long"] == {"Fn::GetAtt": ["Bucket", "Arn"]}
    assert props["Refs"]["if"] == {"Fn::If": ["IsProd", "big", "small"]}
    assert template["Conditions"]["IsDev"] == {"Fn::Not": [{"Condition": "IsProd"}]}
    assert props["Flags"] == ["yes", "on", True, False, "2016-10-31"]


def test_intrinsics_resolve_against_parameters_pseudo_parameters_and_resources() -> None:
    template = load_yaml(TEMPLATE_TEXT)
    resolver = make_resolver(template)

    refs = resolver.resolve(template["Resources"]["Fn"]["Properties"]["Refs"])

    assert refs == {
        "short": "Arn-of-Fn",
        "long": "Arn-of-Bucket",
        "sub": "stk-dev-name-of-Bucket-Arn-of-Fn-${Literal}",
        "sub_vars": "dev/7",
        "join": "a,dev,b",
        "split": ["x", "y", "z"],
        "if": "small",
        "map": 128,
        "b64": "aGk=",
        "both": "yes-both",
    }  # "novalue" is dropped: AWS::NoValue removes the key


def test_conditions_follow_parameter_values() -> None:
    template = load_yaml(TEMPLATE_TEXT)
    prod = make_resolver(template, {"Stage": "prod"})

    assert prod.condition("IsProd") is True
    assert prod.condition("IsDev") is False
    assert prod.resolve({"Fn::If": ["IsProd", "kept", {"Ref": "AWS::NoValue"}]}) == "kept"
    assert make_resolver(template).resolve({"Ref": "AWS::NoValue"}) is NO_VALUE


def test_parameters_are_checked_and_typed() -> None:
    template = load_yaml(TEMPLATE_TEXT)

    assert resolve_parameters(template, None) == {"Stage": "dev", "Zones": ["a", "b"]}
    assert resolve_parameters(template, {"Zones": "x, y"}) == {"Stage": "dev", "Zones": ["x", "y"]}
    with pytest.raises(TemplateError, match=r"Stage='test' is not one of \['dev', 'prod'\]"):
        resolve_parameters(template, {"Stage": "test"})
    with pytest.raises(TemplateError, match=r"not declared by the template: \['Nope'\]"):
        resolve_parameters(template, {"Nope": "1"})
    with pytest.raises(TemplateError, match="Needed has no default"):
        resolve_parameters({"Parameters": {"Needed": {"Type": "String"}}}, {})


def test_unknown_names_and_functions_are_errors_not_guesses() -> None:
    template = load_yaml(TEMPLATE_TEXT)
    resolver = make_resolver(template)

    with pytest.raises(TemplateError, match="Ref to unknown name 'Missing'"):
        resolver.resolve({"Ref": "Missing"})
    with pytest.raises(TemplateError, match="Fn::GetAtt of unknown resource 'Missing'"):
        resolver.resolve({"Fn::GetAtt": ["Missing", "Arn"]})
    with pytest.raises(TemplateError, match="Fn::ImportValue is not supported locally"):
        resolver.resolve({"Fn::ImportValue": "x"})
    with pytest.raises(TemplateError, match="unknown condition Nope"):
        resolver.condition("Nope")


def test_sam_globals_merge_maps_append_lists_and_override_scalars() -> None:
    template = load_yaml(
        """
Globals:
  Function:
    Timeout: 30
    Layers: [g1]
    Environment: {Variables: {A: global-a, B: global-b}}
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 5
      Layers: [l1]
      Environment: {Variables: {B: local-b, C: local-c}}
  Bucket:
    Type: AWS::S3::Bucket
    Properties: {BucketName: x}
"""
    )

    merged = properties_with_globals(template, template["Resources"]["Fn"])

    assert merged == {
        "Timeout": 5,
        "Layers": ["g1", "l1"],
        "Environment": {"Variables": {"A": "global-a", "B": "local-b", "C": "local-c"}},
    }
    assert properties_with_globals(template, template["Resources"]["Bucket"]) == {"BucketName": "x"}
    assert merge_globals({"a": 1}, 2) == 2


def test_definition_substitutions_escape_json_and_refuse_unknown_placeholders() -> None:
    text = '{"FunctionName": "${FnArn}", "Comment": "${Quote}"}'

    result = substitute_definition(text, {"FnArn": "arn:x", "Quote": 'say "hi"'}, json_escape=True)

    assert result == '{"FunctionName": "arn:x", "Comment": "say \\"hi\\""}'
    with pytest.raises(TemplateError, match=r"without a DefinitionSubstitutions value: \['Other'\]"):
        substitute_definition('{"a": "${Other}"}', {"FnArn": "arn:x"}, json_escape=True, where="Machine")
