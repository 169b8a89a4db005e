"""A head node named by its ParallelCluster cluster instead of an instance id: the request is checked
without AWS, then validate_task finds the running head node by its tags, once for the run, and takes
the cluster user from its OS unless one is configured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hpcstage.errors import InputError
from hpcstage.staging.config import StagingDefaults, config_from_run, validate_staging_input
from hpcstage.staging.steps import validate_task
from moto import mock_aws

HEAD = "i-0123456789abcdef0"
FILTERS = [
    {"Name": "tag:parallelcluster:cluster-name", "Values": ["genomics-1"]},
    {"Name": "tag:parallelcluster:node-type", "Values": ["HeadNode"]},
    {"Name": "instance-state-name", "Values": ["running"]},
]


def request(**job: Any) -> dict[str, Any]:
    return {
        "inventory": "s3://results/inventory/data/run-1",
        "selection": {"prefixes": ["in/"]},
        "target": {
            "type": "filecache",
            "mount_point": "/cache",
            "cache_path": "/ns1",
            "data_repository_path": "s3://data/in/",
            "cluster_name": "genomics-1",
        },
        "job": {"backend": "ssm", "command": "true", "workdir": "/home/hpc", **job},
        "output": "s3://data/in/outputs/{run_id}/",
    }


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="results")
        ec2 = boto3.client("ec2", region_name="us-east-1")
        with Stubber(ec2) as stubber:
            yield {"s3": s3, "ec2": ec2, "stub": stubber}
            stubber.assert_no_pending_responses()


def expect_head_node(stubber: Stubber, attributes: str) -> None:
    instance = {
        "InstanceId": HEAD,
        "Tags": [
            {"Key": "parallelcluster:cluster-name", "Value": "genomics-1"},
            {"Key": "parallelcluster:node-type", "Value": "HeadNode"},
            {"Key": "parallelcluster:attributes", "Value": attributes},
        ],
    }
    stubber.add_response(
        "describe_instances", {"Reservations": [{"Instances": [instance]}]}, {"Filters": FILTERS}
    )


def test_the_head_node_is_found_once_and_the_user_follows_its_os(aws: dict[str, Any]) -> None:
    cfg = validate_staging_input(request(), run_id="r1", work_bucket="results")
    assert "head_node_instance_id" not in cfg.target and cfg.job["cluster_name"] == "genomics-1"
    expect_head_node(aws["stub"], "ubuntu2204, slurm, 3.13.0, x86_64")  # one call for target and job

    run = validate_task(aws["s3"], cfg, {"ec2": aws["ec2"]})

    stored = config_from_run(aws["s3"], run)
    assert stored.target["head_node_instance_id"] == stored.job["head_node_instance_id"] == HEAD
    assert stored.job["cluster_user"] == "ubuntu"
    assert (
        json.loads(aws["s3"].get_object(Bucket="results", Key="staging/r1/config.json")["Body"].read())[
            "target"
        ]["head_node_instance_id"]
        == HEAD
    )


def test_a_configured_cluster_user_wins_over_the_os_default(aws: dict[str, Any]) -> None:
    defaults = StagingDefaults(cluster_user="hpcuser")
    cfg = validate_staging_input(request(), run_id="r1", work_bucket="results", defaults=defaults)
    expect_head_node(aws["stub"], "rocky9, slurm, 3.13.0, x86_64")
    stored = config_from_run(aws["s3"], validate_task(aws["s3"], cfg, {"ec2": aws["ec2"]}))
    assert stored.job["cluster_user"] == "hpcuser"


def test_a_fixed_head_node_needs_no_ec2_and_keeps_the_default_user(aws: dict[str, Any]) -> None:
    event = request(head_node_instance_id=HEAD)
    event["target"] = {**event["target"], "head_node_instance_id": HEAD}
    del event["target"]["cluster_name"]
    cfg = validate_staging_input(event, run_id="r1", work_bucket="results")
    stored = config_from_run(aws["s3"], validate_task(aws["s3"], cfg, None))
    assert (stored.job["head_node_instance_id"], stored.job["cluster_user"]) == (HEAD, "ec2-user")


def test_the_stacks_cluster_name_is_the_default(aws: dict[str, Any]) -> None:
    event = request()
    del event["target"]["cluster_name"]
    cfg = validate_staging_input(
        event, run_id="r1", work_bucket="results", defaults=StagingDefaults(cluster_name="genomics-1")
    )
    assert cfg.target["cluster_name"] == cfg.job["cluster_name"] == "genomics-1"


@pytest.mark.parametrize("name", ["1starts-with-digit", "has_underscore", "x" * 61, ""])
def test_a_bad_cluster_name_is_refused_at_validation(name: str) -> None:
    event = request()
    event["target"]["cluster_name"] = name
    with pytest.raises(InputError, match="ParallelCluster cluster name|needs 'head_node_instance_id'"):
        validate_staging_input(event, run_id="r1", work_bucket="results")
