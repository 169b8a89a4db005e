"""LocalAws makes its clients -- the deployment's, the execution poll's, the CLI's -- from one boto3 Session per
``with``: a Session per client read botocore's endpoint and partition data again each time (0.2-0.5 s of CPU
for the Step Functions client of `hpcstage demo`'s execution, before the execution started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from hpcstage.local import LocalAws

FIXTURES = Path(__file__).parent / "fixtures"


def test_one_session_serves_the_deployment_and_every_client_of_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    real = boto3.session.Session

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(boto3.session, "Session", Counted)
    with LocalAws() as aws:
        deployed = aws.deploy(FIXTURES / "template.yaml", {"CounterDir": "/tmp"})
        s3, sfn = aws.client("s3"), aws.client("stepfunctions")
        buckets = sorted(bucket["Name"] for bucket in s3.list_buckets()["Buckets"])
        machines = sorted(machine["name"] for machine in sfn.list_state_machines()["stateMachines"])
        first = aws.session
    created = [r for r in deployed.resources.values() if r.created]
    assert buckets == sorted(r.name for r in created if r.type == "AWS::S3::Bucket")
    assert machines == sorted(r.name for r in created if r.type == "AWS::Serverless::StateMachine")
    assert len(machines) >= 1
    assert made == [first]
    assert s3._loader is sfn._loader  # noqa: SLF001 - one loader: botocore's data read once
    with LocalAws() as aws:  # a new run: a new Session (the last one's credentials were that run's)
        aws.client("s3")
        second = aws.session
    assert made == [first, second]
    assert second is not first


def test_the_interpreters_task_clients_are_ready_when_the_emulator_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto's interpreter makes a client per Lambda/EventBridge task; once LocalAws is running, making one reads
    no botocore data file (the first execution no longer pays for them at its first and last task)."""
    import botocore.loaders
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    reads: list[str] = []
    real = botocore.loaders.JSONFileLoader.load_file

    def counted(self: Any, file_path: str) -> Any:
        reads.append(file_path)
        return real(self, file_path)

    with LocalAws(server=True):
        monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file", counted)
        made = [boto_client_for(region="us-east-1", service=service) for service in ("lambda", "events")]
        monkeypatch.undo()
    assert [client.meta.service_model.service_name for client in made] == ["lambda", "events"]
    assert reads == []
