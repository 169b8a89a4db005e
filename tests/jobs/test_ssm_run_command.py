"""hpcstage.ssm.run_command against a real boto3 SSM client with botocore's Stubber, which checks
every request against the SSM service model (moto's SSM runs nothing and always answers Success).
S3 (for output that GetCommandInvocation truncates) is moto."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from hpcstage.ssm import (
    STDOUT_INLINE_LIMIT,
    STDOUT_TRUNCATED_MARKER,
    CommandResult,
    SsmCommandError,
    SsmCommandTimeout,
    output_key,
    run_command,
)
from moto import mock_aws

INSTANCE = "i-0123456789abcdef0"
COMMAND_ID = "0b8e7f6a-1234-4cde-9f00-123456789abc"


@pytest.fixture
def ssm() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("ssm", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


class TopOfRange(random.Random):
    """Jitter pinned to its maximum, so the number of polls in a wait is known."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def expect_send(stubber: Stubber, commands: list[str], **extra: Any) -> None:
    stubber.add_response(
        "send_command",
        {"Command": {"CommandId": COMMAND_ID, "Status": "Pending"}},
        {
            "InstanceIds": [INSTANCE],
            "DocumentName": "AWS-RunShellScript",
            "Parameters": {"commands": commands, "executionTimeout": ["300"]},
            "TimeoutSeconds": 60,
            **extra,
        },
    )


def invocation(status: str, *, code: int = -1, stdout: str = "", stderr: str = "", details: str = "") -> dict:
    return {
        "CommandId": COMMAND_ID,
        "InstanceId": INSTANCE,
        "Status": status,
        "StatusDetails": details or status,
        "ResponseCode": code,
        "StandardOutputContent": stdout,
        "StandardErrorContent": stderr,
    }


def expect_poll(stubber: Stubber, answer: dict) -> None:
    stubber.add_response("get_command_invocation", answer, {"CommandId": COMMAND_ID, "InstanceId": INSTANCE})


def expect_not_yet_visible(stubber: Stubber) -> None:
    stubber.add_client_error(
        "get_command_invocation",
        service_error_code="InvocationDoesNotExist",
        http_status_code=400,
        expected_params={"CommandId": COMMAND_ID, "InstanceId": INSTANCE},
    )


def run(client: Any, sleeps: Sleeps, **options: Any) -> CommandResult:
    # A frozen clock: the wait is measured by the sleeps alone, so poll counts are exact.
    options = {
        "timeout_s": 300,
        "max_wait_s": 120,
        "sleep": sleeps,
        "clock": lambda: 0.0,
        "rng": random.Random(7),
        **options,
    }
    return run_command(client, INSTANCE, ["hostname", "squeue -h"], **options)


def test_invocation_not_yet_visible_is_retried_until_it_succeeds(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    sleeps = Sleeps()
    expect_send(stubber, ["hostname", "squeue -h"])
    expect_not_yet_visible(stubber)
    expect_not_yet_visible(stubber)
    expect_poll(stubber, invocation("InProgress"))
    expect_poll(stubber, invocation("Success", code=0, stdout="head-node\n"))

    result = run(client, sleeps)

    assert result == CommandResult("Success", 0, "head-node\n", "", COMMAND_ID)
    assert result.succeeded
    assert len(sleeps) == 3


def test_poll_delays_grow_with_jitter_up_to_the_cap(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    sleeps = Sleeps()
    expect_send(stubber, ["hostname", "squeue -h"])
    for _ in range(12):
        expect_poll(stubber, invocation("InProgress"))
    expect_poll(stubber, invocation("Success", code=0))

    run(client, sleeps, poll_interval_s=2, max_poll_interval_s=10, max_wait_s=1000)

    assert len(sleeps) == 12
    assert 1 <= sleeps[0] <= 2
    assert all(5 <= delay <= 10 for delay in sleeps[-3:])  # capped: half fixed, half random
    assert len(set(sleeps)) == len(sleeps)  # jittered


def test_a_non_zero_exit_code_is_returned_not_raised(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_send(stubber, ["hostname", "squeue -h"])
    expect_poll(stubber, invocation("Failed", code=3, stdout="partial\n", stderr="sbatch: error: bad\n"))

    result = run(client, Sleeps())

    assert result == CommandResult("Failed", 3, "partial\n", "sbatch: error: bad\n", COMMAND_ID)
    assert not result.succeeded


@pytest.mark.parametrize(
    ("status", "details", "error"),
    [
        ("Cancelled", "Cancelled", SsmCommandError),
        ("Failed", "Undeliverable", SsmCommandError),
        ("Failed", "DeliveryTimedOut", SsmCommandError),
        ("TimedOut", "ExecutionTimedOut", SsmCommandTimeout),
    ],
)
def test_commands_that_never_produced_an_exit_code_raise(
    ssm: tuple[Any, Stubber], status: str, details: str, error: type[Exception]
) -> None:
    client, stubber = ssm
    expect_send(stubber, ["hostname", "squeue -h"])
    expect_poll(stubber, invocation(status, details=details, stderr="agent says no"))

    with pytest.raises(error, match=f"ended {status} \\({details}\\): agent says no") as caught:
        run(client, Sleeps())
    assert caught.value.command_id == COMMAND_ID  # type: ignore[attr-defined]


def test_polling_stops_at_max_wait_and_cancels_the_command(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    sleeps = Sleeps()
    expect_send(stubber, ["hostname", "squeue -h"])
    for _ in range(6):  # at 0, 2, 4, 6, 8 and 10 seconds
        expect_poll(stubber, invocation("InProgress"))
    stubber.add_response("cancel_command", {}, {"CommandId": COMMAND_ID, "InstanceIds": [INSTANCE]})

    with pytest.raises(SsmCommandTimeout, match="was still InProgress after 10s"):
        run(client, sleeps, poll_interval_s=2, max_poll_interval_s=2, max_wait_s=10, rng=TopOfRange())

    assert sleeps == [2, 2, 2, 2, 2]
    assert isinstance(SsmCommandTimeout("x", command_id="c", status="s"), TimeoutError)


def test_a_failed_cancel_is_noted_on_the_timeout_not_hidden(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_send(stubber, ["hostname", "squeue -h"])
    expect_not_yet_visible(stubber)
    expect_not_yet_visible(stubber)
    stubber.add_client_error("cancel_command", service_error_code="InvalidCommandId", http_status_code=400)

    with pytest.raises(SsmCommandTimeout, match="never became visible") as caught:
        run(client, Sleeps(), poll_interval_s=3, max_poll_interval_s=3, max_wait_s=3, rng=TopOfRange())

    assert any("InvalidCommandId" in note for note in caught.value.__notes__)


def test_other_api_errors_are_not_retried(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    expect_send(stubber, ["hostname", "squeue -h"])
    stubber.add_client_error(
        "get_command_invocation", service_error_code="InvalidInstanceId", http_status_code=400
    )

    with pytest.raises(ClientError, match="InvalidInstanceId"):
        run(client, Sleeps())


@mock_aws
def test_truncated_stdout_is_read_in_full_from_s3(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="ssm-output")
    full = "".join(f"line {i:06d} ✓\n" for i in range(5000))  # ~75,000 characters
    key = f"runs/{COMMAND_ID}/{INSTANCE}/awsrunShellScript/0.awsrunShellScript/stdout"
    s3.put_object(Bucket="ssm-output", Key=key, Body=full.encode())
    cut = STDOUT_INLINE_LIMIT - len(STDOUT_TRUNCATED_MARKER) - 1
    inline = full[:cut] + "\n" + STDOUT_TRUNCATED_MARKER
    expect_send(stubber, ["hostname", "squeue -h"], OutputS3BucketName="ssm-output", OutputS3KeyPrefix="runs")
    expect_poll(stubber, invocation("Success", code=0, stdout=inline, stderr="short warning\n"))

    result = run(client, Sleeps(), output_s3_bucket="ssm-output", output_s3_prefix="runs", s3=s3)

    assert len(inline) == STDOUT_INLINE_LIMIT
    assert result.stdout == full
    assert result.stderr == "short warning\n"  # not truncated: no S3 read (there is no stderr object)


@mock_aws
def test_truncated_stdout_whose_s3_object_is_missing_is_an_error(ssm: tuple[Any, Stubber]) -> None:
    client, stubber = ssm
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="ssm-output")
    expect_send(stubber, ["hostname", "squeue -h"], OutputS3BucketName="ssm-output")
    expect_poll(stubber, invocation("Success", code=0, stdout="x" * STDOUT_INLINE_LIMIT))

    with pytest.raises(
        SsmCommandError, match=f"s3://ssm-output/{COMMAND_ID}/{INSTANCE}/.*/stdout is unreadable"
    ):
        run(client, Sleeps(), output_s3_bucket="ssm-output", s3=s3)


def test_output_keys_follow_the_agent_layout() -> None:
    assert (
        output_key("a/b/", "cmd", "i-1", "stdout")
        == "a/b/cmd/i-1/awsrunShellScript/0.awsrunShellScript/stdout"
    )
    assert output_key(None, "cmd", "i-1", "stderr") == "cmd/i-1/awsrunShellScript/0.awsrunShellScript/stderr"


@pytest.mark.parametrize(
    ("commands", "options", "error"),
    [
        ("hostname", {}, ValueError),
        ([], {}, ValueError),
        (["ok", 3], {}, TypeError),
        (["ok"], {"timeout_s": 0}, ValueError),
        (["ok"], {"timeout_s": 172_801}, ValueError),
        (["ok"], {"max_wait_s": 0}, ValueError),
        (["ok"], {"delivery_timeout_s": 10}, ValueError),
        (["ok"], {"output_s3_bucket": "b"}, ValueError),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(
    ssm: tuple[Any, Stubber], commands: Any, options: dict, error: type[Exception]
) -> None:
    client, _ = ssm
    with pytest.raises(error):
        run_command(client, INSTANCE, commands, **{"timeout_s": 60, "max_wait_s": 60, **options})


def test_slow_api_calls_count_against_max_wait(ssm: tuple[Any, Stubber]) -> None:
    """A clock that moves 50 s per reading: polls at 0 s and (after one short sleep) at 100 s, then out."""
    client, stubber = ssm
    readings = iter(range(0, 10_000, 50))
    expect_send(stubber, ["hostname", "squeue -h"])
    for _ in range(2):
        expect_poll(stubber, invocation("Pending"))
    stubber.add_response("cancel_command", {}, {"CommandId": COMMAND_ID, "InstanceIds": [INSTANCE]})

    with pytest.raises(SsmCommandTimeout, match="still Pending after 120s"):
        run(client, Sleeps(), clock=lambda: float(next(readings)))
