"""Execution inputs are checked by their JSON Schema alone; the messages are made from the schema."""

from __future__ import annotations

import json

import pytest
from hpcstage.errors import InputError
from hpcstage.inputs import schema, validate


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ([], "the input must be a JSON object, got list"),
        ({}, "'bucket' must be an S3 bucket name (e.g. \"my-data\"); it is missing"),
        ({"bucket": "Bad_Bucket"}, '\'bucket\' must be an S3 bucket name (e.g. "my-data"), got "Bad_Bucket"'),
        ({"bucket": "ok-bucket", "streams": 0}, "'streams' must be a whole number from 1 to 64, got 0"),
        ({"bucket": "ok-bucket", "streams": "8"}, "'streams' must be a whole number from 1 to 64, got \"8\""),
        ({"bucket": "ok-bucket", "audit": 1}, "'audit' must be true or false, got 1"),
        (
            {"bucket": "ok-bucket", "prefix": 3},
            "'prefix' must be a string of at most 1,024 characters, got 3",
        ),
        (
            {"bucket": "ok-bucket", "checkpoint_pages": 0},
            "'checkpoint_pages' must be a whole number from 1 to 10000, got 0",
        ),
        (
            {"bucket": "ok-bucket", "x": 1, "a": 2},
            "unknown input field(s): a, x; allowed: access, audit, bucket, checkpoint_pages, lease_seconds, "
            "max_launches, max_listers, prefix, stats_depth, streams, versions",
        ),
        (
            {"bucket": "ok-bucket", "access": {"unsigned": True, "profile": "x", "b": 1}},
            "unknown 'access' field(s): b, profile; allowed: external_id, request_payer, role_arn, unsigned",
        ),
    ],
)
def test_messages_come_from_the_schema(event: object, message: str) -> None:
    with pytest.raises(InputError) as err:
        validate(event, "inventory-input")
    assert str(err.value) == message


def test_bounds_in_messages_are_the_schemas() -> None:
    streams = schema("inventory-input")["properties"]["streams"]
    with pytest.raises(InputError) as err:
        validate({"bucket": "ok-bucket", "streams": streams["maximum"] + 1}, "inventory-input")
    assert f"from {streams['minimum']} to {streams['maximum']}" in str(err.value)


def test_defaults_are_the_schemas() -> None:
    props = schema("inventory-input")["properties"]
    filled = validate({"bucket": "ok-bucket"}, "inventory-input")
    assert filled == {"bucket": "ok-bucket", **{k: p["default"] for k, p in props.items() if "default" in p}}
    assert filled["access"] == {} and filled["max_listers"] == 10


@pytest.mark.parametrize("bucket", ["ok-bucket\n", "ok-bucket\n\n", "\nok-bucket"])
def test_dollar_is_the_end_of_the_string_as_in_ecma_262(bucket: str) -> None:
    # Python's re lets "$" match before a final newline; JSON Schema's dialect (ECMA-262) does not.
    with pytest.raises(InputError) as err:
        validate({"bucket": bucket}, "inventory-input")
    assert (
        str(err.value) == f"'bucket' must be an S3 bucket name (e.g. \"my-data\"), got {json.dumps(bucket)}"
    )


def test_ecma_anchors_leave_escaped_dollars_and_classes_alone() -> None:
    from hpcstage.inputs import _ecma_pattern

    assert _ecma_pattern(r"^a\$[$]b$").pattern == r"^a\$[$]b\Z"
    assert _ecma_pattern(r"^(x|$)").pattern == r"^(x|\Z)"
