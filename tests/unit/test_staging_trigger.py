"""The S3 trigger: exactly one execution per object version, malformed requests refused clearly,
hostile keys kept as data (moto DynamoDB, S3 and Step Functions in process)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import boto3
import pytest
from hpcstage import clients
from hpcstage.staging.errors import TriggerObjectError
from moto import mock_aws

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "requests-bucket"
TABLE = "idempotency"
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class Context:
    function_name = "staging-trigger"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:staging-trigger"
    memory_limit_in_mb = "256"
    aws_request_id = "req-1"
    log_group_name = "/aws/lambda/staging-trigger"
    log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def load_handler() -> ModuleType:
    path = ROOT / "functions/staging_trigger/app.py"
    spec = importlib.util.spec_from_file_location(f"staging_trigger_app_{uuid.uuid4().hex}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    default_request = {
        "selection": {"prefixes": ["proj/"]},
        "target": {"type": "local", "root": str(tmp_path / "cache" / "{run_id}")},
        "job": {"backend": "local", "command": 'wc -l < "$HPCSTAGE_FILE_LIST" > "$HPCSTAGE_OUTPUT_DIR/n"'},
        "output": "s3://results/outputs/{run_id}/",
    }
    with mock_aws():
        clients.reset()
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        machine = sfn.create_state_machine(
            name="staging",
            definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
            roleArn="arn:aws:iam::123456789012:role/staging",
        )["stateMachineArn"]
        variables = {
            "IDEMPOTENCY_TABLE": TABLE,
            "STAGING_STATE_MACHINE_ARN": machine,
            "STAGING_WORK_BUCKET": "results",
            "DEFAULT_STAGING_REQUEST": json.dumps(default_request),
        }
        with mock.patch.dict(os.environ, variables):
            app = load_handler()
            yield {"s3": s3, "ddb": ddb, "sfn": sfn, "machine": machine, "app": app, "tmp": tmp_path}
        clients.reset()


def event(
    key: str, *, version: str | None = "v1", etag: str = "etag-1", sequencer: str = "0001"
) -> dict[str, Any]:
    doc = json.loads((ROOT / "events/staging-trigger-object-created.json").read_text())
    doc["detail"]["bucket"]["name"] = BUCKET
    obj = {"key": key, "size": 10, "etag": etag, "sequencer": sequencer}
    if version is not None:
        obj["version-id"] = version
    doc["detail"]["object"] = obj
    return doc


def put_request(s3: Any, key: str, body: Any) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    s3.put_object(Bucket=BUCKET, Key=key, Body=data)


def executions(env: dict[str, Any]) -> list[dict[str, Any]]:
    return env["sfn"].list_executions(stateMachineArn=env["machine"])["executions"]


def execution_input(env: dict[str, Any], arn: str) -> dict[str, Any]:
    return json.loads(env["sfn"].describe_execution(executionArn=arn)["input"])


REQUEST = {"inventory": "s3://results/inventory/data/run-7", "selection": {"prefixes": ["proj/a/"]}}


def test_duplicate_events_start_one_execution(env: dict[str, Any]) -> None:
    put_request(env["s3"], "staging-requests/r1.json", REQUEST)
    first = env["app"].lambda_handler(event("staging-requests/r1.json"), Context())
    second = env["app"].lambda_handler(event("staging-requests/r1.json"), Context())
    assert first == second  # the second answer is the idempotency record's
    assert first["started"] is True and NAME_RE.match(first["name"])
    runs = executions(env)
    assert [r["name"] for r in runs] == [first["name"]]
    started = execution_input(env, runs[0]["executionArn"])
    assert started["inventory"] == REQUEST["inventory"]
    assert started["selection"] == REQUEST["selection"]  # the request overrides the default
    assert started["job"]["backend"] == "local"  # the default fills what the request leaves out


def test_a_replay_after_the_record_expired_starts_nothing_new(env: dict[str, Any]) -> None:
    put_request(env["s3"], "staging-requests/r1.json", REQUEST)
    first = env["app"].lambda_handler(event("staging-requests/r1.json"), Context())
    env["sfn"].stop_execution(executionArn=first["execution_arn"])
    # The idempotency record is gone (TTL), so the call reaches Step Functions, which refuses the
    # name of a closed execution: ExecutionAlreadyExists counts as success.
    items = env["ddb"].scan(TableName=TABLE)["Items"]
    assert len(items) == 1
    env["ddb"].delete_item(TableName=TABLE, Key={"id": items[0]["id"]})
    replay = env["app"].lambda_handler(event("staging-requests/r1.json"), Context())
    assert replay["started"] is False and replay["name"] == first["name"]
    assert replay["execution_arn"] == first["execution_arn"]
    assert len(executions(env)) == 1


def test_a_new_version_of_the_object_is_a_new_run(env: dict[str, Any]) -> None:
    put_request(env["s3"], "staging-requests/r1.json", REQUEST)
    a = env["app"].lambda_handler(event("staging-requests/r1.json", version="v1"), Context())
    b = env["app"].lambda_handler(event("staging-requests/r1.json", version="v2"), Context())
    assert a["name"] != b["name"]
    assert len(executions(env)) == 2


def test_without_versioning_etag_and_sequencer_identify_the_write(env: dict[str, Any]) -> None:
    put_request(env["s3"], "staging-requests/r1.json", REQUEST)
    a = env["app"].lambda_handler(event("staging-requests/r1.json", version=None), Context())
    again = env["app"].lambda_handler(event("staging-requests/r1.json", version=None), Context())
    rewrite = env["app"].lambda_handler(
        event("staging-requests/r1.json", version=None, sequencer="0002"), Context()
    )
    assert a["name"] == again["name"] != rewrite["name"]
    assert len(executions(env)) == 2


def test_a_ready_marker_stages_the_inventory_in_its_directory(env: dict[str, Any]) -> None:
    put_request(env["s3"], "inventory/data/run-9/_READY", b"")
    out = env["app"].lambda_handler(event("inventory/data/run-9/_READY"), Context())
    started = execution_input(env, out["execution_arn"])
    assert started["inventory"] == f"s3://{BUCKET}/inventory/data/run-9"
    assert started["selection"] == {"prefixes": ["proj/"]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "is not valid JSON"),
        (b"\xff\xfe", "is not valid JSON"),
        (b"[1, 2]", "must hold a JSON object (a staging request), not list"),
        (json.dumps({**REQUEST, "colour": "blue"}).encode(), "unknown input field(s): colour"),
        (json.dumps({**REQUEST, "selection": {}}).encode(), "'selection' is empty"),
        (
            json.dumps({**REQUEST, "output": "s3://results"}).encode(),
            "'output' must be an s3:// URL of a key prefix (not a whole bucket)",
        ),
        (b" " * (256 * 1024 + 1), "a staging request is at most 256 KiB"),
    ],
)
def test_malformed_requests_are_refused_clearly(env: dict[str, Any], body: bytes, message: str) -> None:
    put_request(env["s3"], "staging-requests/bad.json", body)
    with pytest.raises(TriggerObjectError) as err:
        env["app"].lambda_handler(event("staging-requests/bad.json"), Context())
    assert message in str(err.value)
    assert f"s3://{BUCKET}/staging-requests/bad.json" in str(err.value)
    assert executions(env) == []
    # The failed attempt left no idempotency record behind: a corrected upload (a new version) runs.
    put_request(env["s3"], "staging-requests/bad.json", REQUEST)
    fixed = env["app"].lambda_handler(event("staging-requests/bad.json", version="v2"), Context())
    assert fixed["started"] is True


@pytest.mark.parametrize(
    "bad_event",
    [
        {"detail-type": "Object Deleted", "detail": {}},
        {"detail-type": "Object Created", "detail": {"bucket": {"name": BUCKET}}},
        {
            "detail-type": "Object Created",
            "detail": {"bucket": {"name": BUCKET}, "object": {"key": "k.json"}},
        },
        [],
    ],
)
def test_events_that_are_not_object_created_are_refused(env: dict[str, Any], bad_event: Any) -> None:
    with pytest.raises(TriggerObjectError):
        env["app"].lambda_handler(bad_event, Context())
    assert executions(env) == []


HOSTILE = [
    "staging-requests/$(touch {tmp}/pwned).json",
    "staging-requests/`touch {tmp}/pwned`.json",
    "staging-requests/x; touch {tmp}/pwned #.json",
    'staging-requests/\'"; touch {tmp}/pwned; echo ".json',
    "staging-requests/--help -rf.json",
    "staging-requests/line\nbreak | touch {tmp}/pwned.json",
    "staging-requests/ünïcödé 中 %2F+plus.json",
]


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_keys_never_reach_a_shell(env: dict[str, Any], template: str) -> None:
    key = template.format(tmp=env["tmp"])
    put_request(env["s3"], key, REQUEST)
    shell_calls: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        shell_calls.append(args)
        raise AssertionError(f"a process was started: {args!r}")

    with (
        mock.patch.object(subprocess, "Popen", side_effect=refuse),
        mock.patch.object(os, "system", side_effect=refuse),
    ):
        out = env["app"].lambda_handler(event(key), Context())
    assert shell_calls == []
    assert not (env["tmp"] / "pwned").exists()
    assert NAME_RE.match(out["name"])
    assert execution_input(env, out["execution_arn"])["inventory"] == REQUEST["inventory"]


def test_a_hostile_marker_key_stays_data_in_the_input(env: dict[str, Any]) -> None:
    key = f"inventory/$(touch {env['tmp']}/pwned)/run 1;rm -rf ~/_READY"
    put_request(env["s3"], key, b"")
    out = env["app"].lambda_handler(event(key), Context())
    started = execution_input(env, out["execution_arn"])
    assert started["inventory"] == f"s3://{BUCKET}/inventory/$(touch {env['tmp']}/pwned)/run 1;rm -rf ~"
    assert NAME_RE.match(out["name"]) and not (env["tmp"] / "pwned").exists()
