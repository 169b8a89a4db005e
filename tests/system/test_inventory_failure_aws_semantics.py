"""With every local-runtime patch (AWS's ToleratedFailure semantics), a shard that keeps failing
fails the Distributed Map itself; the execution fails with that cause and never reduces."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hpcstage.inventory import tasks
from hpcstage.localcli import seed_bucket

# The template names the buckets its functions may list (no default); moto enforces no IAM, so one name serves.
LOCAL_PARAMETERS = {"SourceBucketArns": "arn:aws:s3:::hpcstage-local-tests"}


@pytest.fixture(scope="module")
def aws_stack() -> Iterator[Any]:
    from hpcstage.local import LocalAws

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with LocalAws() as aws:
        yield aws, aws.deploy(os.path.join(root, "template.yaml"), LOCAL_PARAMETERS, root)


def test_keeps_failing_shard_fails_the_map(aws_stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    aws, deployed = aws_stack
    aws.client("s3").create_bucket(Bucket="failing-bkt")
    seed_bucket("failing-bkt", {f"k{i:05d}": (3, "STANDARD") for i in range(3000)})
    real = tasks.run_streams

    def broken(s3: Any, bucket: str, prefix: str, seeds: Any, *a: Any, **kw: Any) -> Any:
        if seeds[0].end is None:
            raise ConnectionError("injected permanent failure")
        return real(s3, bucket, prefix, seeds, *a, **kw)

    monkeypatch.setattr(tasks, "run_streams", broken)
    res = aws.run(
        deployed.arn("InventoryStateMachine"),
        {"bucket": "failing-bkt", "max_concurrency": 2, "streams": 2},
        timeout_s=300,
        poll_s=0.2,
    )
    assert res.status == "FAILED"
    assert res.error == "States.ExceedToleratedFailureThreshold"
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in res.history if e["type"].endswith("StateEntered")
    ]
    assert "Reduce" not in entered and "NotifyFailed" in entered
