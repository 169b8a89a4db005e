"""The staging input schema, the examples in events/ and validate_staging_input agree."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hpcstage.errors import InputError
from hpcstage.staging.config import MAX_TOTAL_POLLS, StagingConfig, StagingDefaults, validate_staging_input
from hpcstage.staging.trigger import trigger_object

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "layers/core/hpcstage/schemas/staging-input.schema.json").read_text())
INPUTS = sorted(p for p in (ROOT / "events").glob("staging-*.json") if "trigger" not in p.name)
DEFAULTS = StagingDefaults(
    slurm_jwt_secret_arn="arn:aws:secretsmanager:us-east-1:123456789012:secret:slurm-jwt-AbCdEf",
    cluster_user="ec2-user",
)


def validate(event: Any, defaults: StagingDefaults = DEFAULTS) -> StagingConfig:
    return validate_staging_input(event, run_id="run-1", work_bucket="results", defaults=defaults)


def test_there_is_an_example_for_each_use() -> None:
    assert sorted(p.name for p in (ROOT / "events").glob("staging-*.json")) == [
        "staging-filecache.json",
        "staging-fsx.json",
        "staging-local.json",
        "staging-mountpoint.json",
        "staging-trigger-object-created.json",
    ]


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    event = json.loads(path.read_text())
    jsonschema.validate(event, SCHEMA)
    cfg = validate(event)
    assert cfg.target["type"] == event["target"]["type"]
    assert cfg.output == event["output"].replace("{run_id}", "run-1")
    assert cfg.work_url == "s3://results/staging/run-1"
    assert cfg.run() == {"run_id": "run-1", "work": "s3://results/staging/run-1", **cfg.waits}
    assert StagingConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_the_trigger_example_is_an_object_created_event() -> None:
    event = json.loads((ROOT / "events/staging-trigger-object-created.json").read_text())
    obj = trigger_object(event)
    assert (obj.bucket, obj.key, obj.identity) == (
        "hpcstage-requests",
        "staging-requests/run-0042.json",
        "version:IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
    )


def local_event(**changes: Any) -> dict[str, Any]:
    event = json.loads((ROOT / "events/staging-local.json").read_text())
    event.update(changes)
    return event


def test_output_maps_to_a_directory_under_the_job_root() -> None:
    cfg = validate(local_event())
    # A local target exports to the bucket root, so job-root/<prefix> lands exactly at the output.
    assert cfg.output_dir == "staging-output/run-1"
    assert cfg.target["export_url"] == "s3://hpcstage-local-resultsbucket/"
    assert cfg.target["root"] == "/tmp/hpcstage-demo/cache/run-1"
    assert cfg.job["workdir"] == "/tmp/hpcstage-demo/cache/run-1/jobs/run-1"
    fsx = validate(json.loads((ROOT / "events/staging-fsx.json").read_text()))
    assert fsx.output_dir == "results/alignments/run-1"
    assert fsx.target["work_url"] == "s3://results/staging/run-1/head-node"


def test_defaults_fill_the_head_node_and_file_system() -> None:
    event = json.loads((ROOT / "events/staging-fsx.json").read_text())
    del event["target"]["head_node_instance_id"], event["target"]["file_system_id"]
    with pytest.raises(InputError, match="needs 'head_node_instance_id'"):
        validate(event)
    cfg = validate(
        event,
        StagingDefaults(
            head_node_instance_id="i-0abcdef0123456789", fsx_file_system_id="fs-0fedcba987654321"
        ),
    )
    assert cfg.target["head_node_instance_id"] == cfg.job["head_node_instance_id"] == "i-0abcdef0123456789"
    assert cfg.target["file_system_id"] == "fs-0fedcba987654321"


def with_path(event: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    event = copy.deepcopy(event)
    *parents, last = path.split(".")
    node = event
    for name in parents:
        node = node[name]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return event


DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("inventory", "/local/path", "'inventory': not an S3 URL"),
        ("selection", {}, "'selection' is empty"),
        ("selection", {"prefix": ["a/"]}, "unknown selection field(s) prefix"),
        ("target.type", "nfs", "'target.type' must be one of local, fsx, filecache, mountpoint"),
        ("target.root", "relative/dir", "'target.root' must be an absolute path"),
        ("target.export_url", "s3://x/y", "set by hpcstage"),
        ("target.colour", "blue", "unknown field(s) for a local target: colour"),
        ("job.backend", "ssm", "a local target needs the local job backend"),
        ("job.script", "s3://b/s.sh", "exactly one of 'command'"),
        ("job.command", DELETE, "exactly one of 'command'"),
        ("job.cpus", 0, "'job.cpus' must be a whole number from 1 to 1024"),
        ("job.env", {"HPCSTAGE_OUTPUT_DIR": "/tmp"}, "is reserved"),
        ("job.env", {"BAD-NAME": "x"}, "not a valid environment variable name"),
        ("job.partition", "bad partition!", "invalid partition name"),
        ("job.user", "-c", "invalid user name"),
        ("output", "s3://only-a-bucket", "must name a key prefix"),
        ("output", "s3://b/../escape/", "'output'"),
        ("archived_policy", "ignore", "'archived_policy' must be one of fail, restore"),
        ("waits", {"job_max_polls": 0}, "'waits.job_max_polls' must be a whole number"),
        ("waits", {"max_polls": 700}, f"at most {MAX_TOTAL_POLLS} fit in one execution"),
        ("waits", {"job_poll_seconds": 1, "job_max_polls": 5}, "shorter than the job's time limit"),
        ("waits", {"poll_secs": 1}, "unknown 'waits' field(s): poll_secs"),
        ("colour", "blue", "unknown input field(s): colour"),
    ],
)
def test_malformed_input_says_what_is_wrong(path: str, value: Any, message: str) -> None:
    event = with_path(local_event(), path, value)
    with pytest.raises(InputError) as err:
        validate(event)
    assert message in str(err.value)


def test_schema_refuses_what_the_validator_refuses() -> None:
    for path, value in [
        ("selection", {}),
        ("target.type", "nfs"),
        ("target.export_url", "s3://x/y"),
        ("job.command", DELETE),
        ("job.env", {"HPCSTAGE_OUTPUT_DIR": "/tmp"}),
        ("output", "s3://only-a-bucket"),
        ("archived_policy", "ignore"),
        ("colour", "blue"),
    ]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(with_path(local_event(), path, value), SCHEMA)


def test_remote_output_must_be_below_the_data_repository() -> None:
    event = json.loads((ROOT / "events/staging-fsx.json").read_text())
    event["output"] = "s3://elsewhere/results/"
    with pytest.raises(InputError, match="must be below s3://research-data/"):
        validate(event)


def test_a_rest_job_needs_the_jwt_secret() -> None:
    event = json.loads((ROOT / "events/staging-filecache.json").read_text())
    with pytest.raises(InputError, match="SlurmJwtSecretArn"):
        validate(event, StagingDefaults())
