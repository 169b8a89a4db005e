"""The one documented input of the inventory state machine: schemas/inventory-input.schema.json, the examples in
events/ and the validator (hpcstage.inventory.fleet.validate_input, through hpcstage.inputs) agree."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hpcstage.errors import InputError
from hpcstage.inventory.fleet import validate_input

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "layers/core/hpcstage/schemas/inventory-input.schema.json").read_text())
EXAMPLES = sorted((ROOT / "events").glob("inventory-*.json"))


def check(event: object, **kw: object) -> object:
    args: dict[str, object] = {
        "run_id": "run-1",
        "started": "2026-01-01T00:00:00Z",
        "results_bucket": "results",
        "table": "t",
    }
    return validate_input(event, **{**args, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    event = json.loads(path.read_text())
    jsonschema.validate(event, SCHEMA)
    cfg = check(event)
    assert cfg.bucket == event["bucket"]  # type: ignore[attr-defined]
    for name, value in event.items():
        assert getattr(cfg, name) == value, name


def test_there_is_an_example_for_each_use() -> None:
    assert [p.name for p in EXAMPLES] == [
        "inventory-audit.json",
        "inventory-bucket.json",
        "inventory-concurrency.json",
        "inventory-prefix.json",
    ]


def test_the_scheduled_audits_default_input_is_valid() -> None:
    from hpcstage.local.cfn import load_template

    default = load_template(ROOT / "template.yaml")["Parameters"]["AuditInput"]["Default"]
    event = json.loads(default)
    jsonschema.validate(event, SCHEMA)
    assert check(event).audit is True  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ([], "the input must be a JSON object, got list"),
        ({}, "'bucket' must be an S3 bucket name (e.g. \"my-data\"); it is missing"),
        ({"bucket": "Bad_Bucket"}, '\'bucket\' must be an S3 bucket name (e.g. "my-data"), got "Bad_Bucket"'),
        (
            {"bucket": "ok-bucket", "max_listers": 0},
            "'max_listers' must be a whole number from 1 to 1000, got 0",
        ),
        (
            {"bucket": "ok-bucket", "max_listers": True},
            "'max_listers' must be a whole number from 1 to 1000, got true",
        ),
        ({"bucket": "ok-bucket", "streams": 65}, "'streams' must be a whole number from 1 to 64, got 65"),
        (
            {"bucket": "ok-bucket", "lease_seconds": 0},
            "'lease_seconds' must be a whole number from 1 to 600, got 0",
        ),
        ({"bucket": "ok-bucket", "audit": "yes"}, "'audit' must be true or false, got \"yes\""),
        ({"bucket": "ok-bucket", "versions": "yes"}, "'versions' must be true or false, got \"yes\""),
        (
            {"bucket": "ok-bucket", "bukcet": "x"},
            "unknown input field(s): bukcet; allowed: access, audit, bucket, checkpoint_pages, lease_seconds, "
            "max_launches, max_listers, prefix, stats_depth, streams, versions",
        ),
        (
            {"bucket": "ok-bucket", "access": {"profile": "lab"}},
            "unknown 'access' field(s): profile; allowed: external_id, request_payer, role_arn, unsigned",
        ),
        (
            {"bucket": "ok-bucket", "access": "lab"},
            "'access' must be an object {role_arn, external_id, request_payer, unsigned}, got \"lab\"",
        ),
        (
            {"bucket": "ok-bucket", "access": {"role_arn": "arn:aws:iam::1:user/x"}},
            "'access.role_arn' must be an IAM role ARN (e.g. \"arn:aws:iam::210987654321:role/hpcstage-read\"), "
            'got "arn:aws:iam::1:user/x"',
        ),
        (
            {"bucket": "ok-bucket", "access": {"request_payer": "yes"}},
            "'access.request_payer' must be true or false, got \"yes\"",
        ),
    ],
)
def test_malformed_input_fails_the_validator_and_the_schema_with_one_exact_line(
    event: object, message: str
) -> None:
    with pytest.raises(InputError) as err:
        check(event)
    assert str(err.value) == message
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(event, SCHEMA)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"bucket": "a..b"}, '\'bucket\' must be an S3 bucket name (e.g. "my-data"), got "a..b"'),
        (
            {"bucket": "ok-bucket", "prefix": "é" * 513},
            "'prefix' must be at most 1,024 bytes of UTF-8 (S3's limit for a key)",
        ),
        (
            {"bucket": "ok-bucket", "audit": True, "versions": True},
            "'audit' compares the current objects of two runs; it cannot be combined with 'versions' "
            "(run the audit without 'versions')",
        ),
        (
            {"bucket": "ok-bucket", "access": {"external_id": "lab-1"}},
            "an external id is only used with a role to assume (--role-arn)",
        ),
        (
            {
                "bucket": "ok-bucket",
                "access": {"unsigned": True, "role_arn": "arn:aws:iam::210987654321:role/r"},
            },
            "--no-sign-request sends no credentials: it cannot be combined with a role or profile",
        ),
    ],
)
def test_what_the_schema_cannot_say_is_checked_after_it(event: object, message: str) -> None:
    with pytest.raises(InputError) as err:
        check(event)
    assert str(err.value) == message


def test_bad_run_id() -> None:
    with pytest.raises(InputError) as err:
        check({"bucket": "ok-bucket"}, run_id="a/b")
    assert str(err.value) == "run id 'a/b' is not a valid name"


def test_defaults_are_the_schemas() -> None:
    cfg = check({"bucket": "ok-bucket"}, lister_timeout_s=900)
    props = SCHEMA["properties"]
    assert (
        cfg.prefix,  # type: ignore[attr-defined]
        cfg.max_listers,  # type: ignore[attr-defined]
        cfg.streams,  # type: ignore[attr-defined]
        cfg.lease_seconds,  # type: ignore[attr-defined]
        cfg.checkpoint_pages,  # type: ignore[attr-defined]
        cfg.stats_depth,  # type: ignore[attr-defined]
        cfg.audit,  # type: ignore[attr-defined]
        cfg.max_launches,  # type: ignore[attr-defined]
        cfg.versions,  # type: ignore[attr-defined]
        cfg.access,  # type: ignore[attr-defined]
    ) == ("", 10, 8, 30.0, 50, 1, False, 20, False, {})
    assert [props[k]["default"] for k in ("max_listers", "streams", "lease_seconds", "max_launches")] == [
        10,
        8,
        30,
        20,
    ]
    assert cfg.root == "inventory/ok-bucket/run-1"  # type: ignore[attr-defined]
    assert (cfg.launch_timeout_seconds, cfg.stop_margin_seconds) == (1020, 60.0)  # type: ignore[attr-defined]


def test_a_versioned_cross_account_input_is_valid() -> None:
    event = {
        "bucket": "collab-data",
        "versions": True,
        "access": {
            "role_arn": "arn:aws:iam::210987654321:role/read",
            "external_id": "lab-1",
            "request_payer": True,
        },
    }
    jsonschema.validate(event, SCHEMA)
    cfg = check(event)
    assert cfg.versions  # type: ignore[attr-defined]
    assert cfg.access == event["access"]  # type: ignore[attr-defined]


def test_a_directory_bucket_is_refused_with_the_command_that_lists_it() -> None:
    with pytest.raises(InputError, match=r"directory bucket.*hpcstage inventory s3://a--use1-az4--x-s3/"):
        check({"bucket": "a--use1-az4--x-s3"})
