"""{"inventory": {"latest": "s3://bucket/prefix"}}: validate_task reads the _latest pointer the
inventory state machine writes (inventory.output), records the run it names in config.json, and
says how to make one when there is none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hpcstage.errors import InputError
from hpcstage.inventory.output import latest_key, record_latest_run
from hpcstage.staging.config import config_from_run, validate_staging_input
from hpcstage.staging.errors import NoInventoryError
from hpcstage.staging.steps import validate_task
from moto import mock_aws


def request(latest: str) -> dict[str, Any]:
    return {
        "inventory": {"latest": latest},
        "selection": {"prefixes": ["genomics/run-1/"]},
        "target": {"type": "local", "root": "/tmp/cache/{run_id}"},
        "job": {"backend": "local", "command": "true"},
        "output": "s3://results/outputs/{run_id}/",
    }


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="results")
        yield client


def test_the_latest_run_of_the_named_prefix_is_recorded(s3: Any) -> None:
    record_latest_run(
        s3, "results", latest_key("inventory", "research-data", ""), "inventory/research-data/whole-1", "t1"
    )
    record_latest_run(
        s3,
        "results",
        latest_key("inventory", "research-data", "genomics/"),
        "inventory/research-data/genomics-7",
        "t2",
    )
    for latest, root in [
        ("s3://research-data/genomics/", "inventory/research-data/genomics-7"),
        ("s3://research-data", "inventory/research-data/whole-1"),
        ("s3://research-data/", "inventory/research-data/whole-1"),
    ]:
        cfg = validate_staging_input(request(latest), run_id="r1", work_bucket="results")
        run = validate_task(s3, cfg, results_bucket="results", results_prefix="inventory")
        recorded = config_from_run(s3, run)
        assert (recorded.inventory, recorded.latest_inventory_of) == (f"s3://results/{root}", latest)


def test_no_inventory_of_the_target_says_which_command_makes_one(s3: Any) -> None:
    # A whole-bucket inventory is not one of a prefix: the prefix's own pointer is looked for.
    record_latest_run(
        s3, "results", latest_key("lab", "research-data", ""), "lab/research-data/whole-1", "t1"
    )
    cfg = validate_staging_input(request("s3://research-data/genomics"), run_id="r1", work_bucket="results")
    with pytest.raises(NoInventoryError) as err:
        validate_task(s3, cfg, results_bucket="results", results_prefix="lab")
    assert str(err.value) == (
        "there is no inventory of s3://research-data/genomics yet (no "
        "s3://results/lab/research-data/_latest/genomics.json): make one with the stack's inventory state "
        "machine, e.g. `sam remote invoke InventoryStateMachine --stack-name STACK --event "
        '\'{"bucket": "research-data", "prefix": "genomics"}\'`, or name an inventory run\'s s3:// URL '
        "in 'inventory'"
    )
    assert isinstance(err.value, InputError)
    listed = s3.list_objects_v2(Bucket="results", Prefix="staging/")
    assert listed["KeyCount"] == 0  # nothing recorded for a run that cannot start


def test_without_a_results_bucket_the_latest_inventory_cannot_be_looked_up(s3: Any) -> None:
    cfg = validate_staging_input(request("s3://research-data"), run_id="r1", work_bucket="results")
    with pytest.raises(InputError) as err:
        validate_task(s3, cfg)
    assert str(err.value) == (
        "'inventory' names the latest inventory, but this function has no RESULTS_BUCKET to look it up in"
    )


def test_an_explicit_inventory_is_kept_as_given(s3: Any) -> None:
    event = dict(request("s3://unused"), inventory="s3://results/inventory/research-data/run-3/")
    cfg = validate_staging_input(event, run_id="r1", work_bucket="results")
    recorded = config_from_run(s3, validate_task(s3, cfg, results_bucket="results"))
    assert (recorded.inventory, recorded.latest_inventory_of) == (
        "s3://results/inventory/research-data/run-3",
        None,
    )
    assert json.loads(s3.get_object(Bucket="results", Key="staging/r1/config.json")["Body"].read())[
        "inventory"
    ] == ("s3://results/inventory/research-data/run-3")
