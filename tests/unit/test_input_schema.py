"""The documented input schema, the examples in events/ and the validator agree."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hpcstage.errors import InputError
from hpcstage.inventory.tasks import validate_input

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "layers/core/hpcstage/schemas/inventory-input.schema.json").read_text())
# inventory-fleet-*.json are inputs of the fleet state machine (hpcstage.inventory.fleet.validate_input)
EXAMPLES = sorted(
    p for p in (ROOT / "events").glob("inventory-*.json") if not p.name.startswith("inventory-fleet")
)
FLEET_EXAMPLES = sorted((ROOT / "events").glob("inventory-fleet-*.json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    event = json.loads(path.read_text())
    jsonschema.validate(event, SCHEMA)
    cfg = validate_input(event, run_id="run-1", results_bucket="results")
    assert cfg.bucket == event["bucket"]


@pytest.mark.parametrize("path", FLEET_EXAMPLES, ids=lambda p: p.name)
def test_fleet_examples_are_valid(path: Path) -> None:
    from hpcstage.inventory import fleet

    event = json.loads(path.read_text())
    cfg = fleet.validate_input(
        event, run_id="run-1", started="2026-01-01T00:00:00Z", results_bucket="results", table="t"
    )
    assert cfg.bucket == event["bucket"]


def test_there_is_an_example_for_each_use() -> None:
    assert [p.name for p in FLEET_EXAMPLES] == ["inventory-fleet-bucket.json"]
    assert [p.name for p in EXAMPLES] == [
        "inventory-audit.json",
        "inventory-bucket.json",
        "inventory-concurrency.json",
        "inventory-prefix.json",
    ]


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ([], "must be a JSON object"),
        ({}, "'bucket' must be an S3 bucket name"),
        ({"bucket": "Bad_Bucket"}, "'bucket' must be an S3 bucket name"),
        (
            {"bucket": "ok-bucket", "max_concurrency": 0},
            "'max_concurrency' must be a whole number from 1 to 10000",
        ),
        ({"bucket": "ok-bucket", "max_concurrency": True}, "'max_concurrency' must be a whole number"),
        (
            {"bucket": "ok-bucket", "shard_seconds": 900},
            "'shard_seconds' must be a whole number from 5 to 840",
        ),
        ({"bucket": "ok-bucket", "audit": "yes"}, "'audit' must be true or false"),
        ({"bucket": "ok-bucket", "bukcet": "x"}, "unknown input field(s): bukcet"),
    ],
)
def test_malformed_input_says_what_is_wrong(event: object, message: str) -> None:
    with pytest.raises(InputError) as err:
        validate_input(event, run_id="run-1", results_bucket="results")
    assert message in str(err.value)
    if isinstance(event, dict):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(event, SCHEMA)


def test_defaults() -> None:
    cfg = validate_input({"bucket": "ok-bucket"}, run_id="run-1", results_bucket="results")
    assert (
        cfg.prefix,
        cfg.max_concurrency,
        cfg.streams,
        cfg.shard_seconds,
        cfg.audit,
    ) == (
        "",
        1000,
        8,
        60,
        False,
    )
    assert cfg.root == "inventory/ok-bucket/run-1"


FLEET_SCHEMA = json.loads(
    (ROOT / "layers/core/hpcstage/schemas/inventory-fleet-input.schema.json").read_text()
)


@pytest.mark.parametrize("path", FLEET_EXAMPLES, ids=lambda p: p.name)
def test_fleet_examples_match_the_fleet_schema(path: Path) -> None:
    jsonschema.validate(json.loads(path.read_text()), FLEET_SCHEMA)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"bucket": "ok-bucket", "versions": "yes"}, "'versions' must be true or false"),
        ({"bucket": "ok-bucket", "access": {"profile": "lab"}}, "unknown 'access' field(s): profile"),
        ({"bucket": "ok-bucket", "access": {"role_arn": "arn:aws:iam::1:user/x"}}, "not an IAM role ARN"),
        (
            {"bucket": "ok-bucket", "access": {"request_payer": "yes"}},
            "'access.request_payer' must be true or false",
        ),
        ({"bucket": "ok-bucket", "streams": 0}, "'streams' must be a whole number from 1 to 64"),
    ],
)
def test_malformed_fleet_input_fails_the_validator_and_the_schema(
    event: dict[str, object], message: str
) -> None:
    from hpcstage.inventory import fleet

    with pytest.raises(InputError) as err:
        fleet.validate_input(event, run_id="r", started="s", results_bucket="res", table="t")
    assert message in str(err.value)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(event, FLEET_SCHEMA)


def test_a_versioned_cross_account_fleet_input_is_valid_for_both() -> None:
    from hpcstage.inventory import fleet

    event = {
        "bucket": "collab-data",
        "versions": True,
        "access": {
            "role_arn": "arn:aws:iam::210987654321:role/read",
            "external_id": "lab-1",
            "request_payer": True,
        },
    }
    jsonschema.validate(event, FLEET_SCHEMA)
    cfg = fleet.validate_input(event, run_id="r", started="s", results_bucket="res", table="t")
    assert cfg.versions and cfg.access["role_arn"] == "arn:aws:iam::210987654321:role/read"


def test_the_round_machine_refuses_a_directory_bucket() -> None:
    from hpcstage.errors import InputError
    from hpcstage.inventory.tasks import validate_input

    with pytest.raises(InputError, match=r"directory bucket.*hpcstage inventory s3://a--use1-az4--x-s3/"):
        validate_input({"bucket": "a--use1-az4--x-s3"}, run_id="r", results_bucket="b")
