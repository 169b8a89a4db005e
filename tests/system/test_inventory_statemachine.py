"""statemachines/inventory.asl.json executed offline: the real ASL, the real handlers, moto S3."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest
from hpcstage.inventory import tasks
from hpcstage.localcli import seed_bucket


def run(local_stack: Any, event: Any) -> Any:
    aws, deployed = local_stack
    return aws.run(deployed.arn("InventoryStateMachine"), event, timeout_s=300, poll_s=0.2)


def make_bucket(local_stack: Any, objects: dict[str, tuple[int, str]]) -> str:
    aws, _ = local_stack
    name = f"sm-{uuid.uuid4().hex[:12]}"
    aws.client("s3").create_bucket(Bucket=name)
    seed_bucket(name, objects)
    return name


def shapes(n: int) -> dict[str, dict[str, tuple[int, str]]]:
    rng = random.Random(5)
    return {
        "hex": {uuid.UUID(int=rng.getrandbits(128)).hex: (rng.randint(0, 999), "STANDARD") for _ in range(n)},
        "deep": {
            f"p{i % 3}/y=202{i % 5}/m={i % 12:02d}/d={i % 28:02d}/f{i:06d}": (
                i,
                "GLACIER" if i % 9 == 0 else "STANDARD",
            )
            for i in range(n)
        },
        "weird": {
            f"{rng.choice(['ü', '中', ' ', '+', '%', '&', '<', chr(10)])}{i}": (7, "STANDARD_IA")
            for i in range(n)
        },
    }


@pytest.mark.parametrize("shape", ["hex", "deep", "weird"])
def test_exact_totals_with_forced_continuation(local_stack: Any, shape: str) -> None:
    objects = shapes(2500)[shape]
    bucket = make_bucket(local_stack, objects)
    res = run(
        local_stack,
        {
            "bucket": bucket,
            "max_concurrency": 4,
            "streams": 2,
            "shard_pages": 1,
        },
    )
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    assert res.output["objects"] == len(objects)
    assert res.output["bytes"] == sum(s for s, _ in objects.values())
    assert res.output["continuations"] >= 1  # shards stopped after one page and were continued
    assert res.event_types().count("MapRunStarted") >= 2  # a further listing round ran


def test_empty_bucket_and_prefix(local_stack: Any) -> None:
    bucket = make_bucket(local_stack, {"a/1": (1, "STANDARD"), "b/2": (2, "STANDARD")})
    res = run(local_stack, {"bucket": bucket, "prefix": "b/"})
    assert res.status == "SUCCEEDED" and (res.output["objects"], res.output["bytes"]) == (1, 2)
    empty = make_bucket(local_stack, {})
    res = run(local_stack, {"bucket": empty})
    assert res.status == "SUCCEEDED" and res.output["objects"] == 0


def test_malformed_input_fails_in_the_first_state(local_stack: Any) -> None:
    res = run(local_stack, {"bucket": "Not A Bucket"})
    assert res.status == "FAILED"
    assert res.error == "InputError"
    assert "'bucket' must be an S3 bucket name" in (res.cause or "")
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in res.history if e["type"].endswith("StateEntered")
    ]
    assert entered[0] == "ValidateInput" and "Plan" not in entered


def test_a_failing_shard_is_retried(local_stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = make_bucket(local_stack, {f"k{i:05d}": (3, "STANDARD") for i in range(3000)})
    real = tasks.run_streams
    failures = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures["n"] < 2:
            failures["n"] += 1
            raise ConnectionError("injected failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(tasks, "run_streams", flaky)
    res = run(local_stack, {"bucket": bucket, "max_concurrency": 2, "streams": 2})
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    assert (res.output["objects"], res.output["bytes"]) == (3000, 9000)
    assert failures["n"] == 2


def test_a_shard_that_keeps_failing_fails_the_execution(
    local_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = make_bucket(local_stack, {f"k{i:05d}": (3, "STANDARD") for i in range(3000)})
    real = tasks.run_streams

    def broken(s3: Any, bucket_: str, prefix: str, seeds: Any, *a: Any, **kw: Any) -> Any:
        if seeds[0].end is None:  # the last range of the key space always fails
            raise ConnectionError("injected permanent failure")
        return real(s3, bucket_, prefix, seeds, *a, **kw)

    monkeypatch.setattr(tasks, "run_streams", broken)
    res = run(local_stack, {"bucket": bucket, "max_concurrency": 2, "streams": 2})
    assert res.status == "FAILED"  # never a silent partial count
    assert res.error in (
        "IncompleteInventoryError",
        "States.ExceedToleratedFailureThreshold",
        "ConnectionError",
    )
    assert res.cause and (
        "no result" in res.cause
        or "injected permanent failure" in res.cause
        or "failure" in res.cause.lower()
    )
    assert "Reduce" not in [
        e["stateEnteredEventDetails"]["name"] for e in res.history if e["type"] == "TaskStateEntered"
    ]


def test_audit_plans_from_the_previous_run_and_reports_the_change(local_stack: Any) -> None:
    aws, _ = local_stack
    bucket = make_bucket(local_stack, {f"d{i % 4}/f{i:05d}": (10, "STANDARD") for i in range(3000)})
    first = run(local_stack, {"bucket": bucket, "streams": 2})
    assert first.status == "SUCCEEDED"
    seed_bucket(bucket, {"d9/new": (5, "STANDARD"), "d0/f00000": (12, "STANDARD")})  # one added, one changed
    aws.client("s3").delete_object(Bucket=bucket, Key="d1/f00001")  # one removed
    second = run(local_stack, {"bucket": bucket, "streams": 2, "audit": True})
    assert second.status == "SUCCEEDED", (second.error, second.cause)
    assert second.output["objects"] == 3000
    assert second.output["diff"] == {
        "objects": 0,
        "bytes": 5 - 10 + 2,
        "added": {"objects": 1, "bytes": 5},
        "removed": {"objects": 1, "bytes": 10},
        "changed": {"objects": 1, "bytes": 2},
    }
    summary_uri = second.output["summary"]
    b, k = summary_uri[len("s3://") :].split("/", 1)
    summary = json.loads(aws.client("s3").get_object(Bucket=b, Key=k)["Body"].read())
    fb, fk = first.output["summary"][len("s3://") :].split("/", 1)
    fk = fk.replace("summary.json", "ranges.json")
    previous_ranges = json.loads(aws.client("s3").get_object(Bucket=fb, Key=fk)["Body"].read())
    # the previous run's ranges seeded the listing (one seed each: fewer ranges than listers)
    assert summary["ranges_planned"] == len(previous_ranges) and summary["probe_requests"] == 0
