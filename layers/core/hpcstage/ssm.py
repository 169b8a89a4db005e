"""Run shell commands on one instance with SSM Run Command (AWS-RunShellScript) and wait, bounded.

GetCommandInvocation answers InvocationDoesNotExist for a moment after SendCommand, so that error
is polled through like "Pending". It returns only the first 24,000 characters of stdout (8,000 of
stderr); when an S3 output bucket is given, the full streams are read from there instead.

Throttling of SendCommand and GetCommandInvocation is retried by botocore when the caller builds
the client with `retry_config()` from `hpcstage.s3util` ("standard" mode: full-jitter backoff).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .errors import HpcstageError

DOCUMENT_NAME = "AWS-RunShellScript"
STDOUT_INLINE_LIMIT = 24_000
STDERR_INLINE_LIMIT = 8_000
# The SSM agent ends a cut-down inline stream with these markers (amazon-ssm-agent TruncateOutput).
STDOUT_TRUNCATED_MARKER = "---Output truncated---"
STDERR_TRUNCATED_MARKER = "---Error truncated----"
# AWS-RunShellScript's executionTimeout accepts 1..172800 seconds; TimeoutSeconds (delivery) >= 30.
MAX_EXECUTION_TIMEOUT_S = 172_800
MIN_DELIVERY_TIMEOUT_S = 30

_IN_PROGRESS = frozenset({"Pending", "InProgress", "Delayed", "Cancelling"})
# Errors that mean "ask again later", not "this command is broken".
_RETRY_POLL_ERRORS = frozenset({"InvocationDoesNotExist", "ThrottlingException", "InternalServerError"})


@dataclass(frozen=True)
class CommandResult:
    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    command_id: str

    @property
    def succeeded(self) -> bool:
        return self.status == "Success" and self.exit_code == 0


class SsmCommandError(HpcstageError):
    """The command did not run to an exit code (cancelled, undeliverable, timed out, ...)."""

    def __init__(self, message: str, *, command_id: str, status: str, status_details: str = "") -> None:
        super().__init__(message)
        self.command_id = command_id
        self.status = status
        self.status_details = status_details


class SsmCommandTimeout(SsmCommandError, TimeoutError):
    """The command timed out on the instance, or did not finish within our wait."""


def run_command(
    ssm: Any,
    instance_id: str,
    commands: Sequence[str],
    *,
    timeout_s: int,
    max_wait_s: float,
    poll_interval_s: float = 2.0,
    max_poll_interval_s: float = 15.0,
    delivery_timeout_s: int = 60,
    output_s3_bucket: str | None = None,
    output_s3_prefix: str | None = None,
    s3: Any = None,
    comment: str | None = None,
    cancel_on_timeout: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> CommandResult:
    """Run `commands` (shell text, one script) on `instance_id` and return its outcome.

    `timeout_s` bounds the run on the instance; `max_wait_s` bounds our polling. A non-zero exit
    code is returned, not raised (the caller knows what it means); a command that never produced
    one raises SsmCommandError, and SsmCommandTimeout when time ran out.
    """
    _check_arguments(
        commands, timeout_s, max_wait_s, poll_interval_s, delivery_timeout_s, output_s3_bucket, s3
    )
    command_id = _send(
        ssm,
        instance_id,
        commands,
        timeout_s=timeout_s,
        delivery_timeout_s=delivery_timeout_s,
        bucket=output_s3_bucket,
        prefix=output_s3_prefix,
        comment=comment,
    )
    budget = _WaitBudget(max_wait_s, sleep=sleep, clock=clock)
    backoff = _Backoff(poll_interval_s, max(poll_interval_s, max_poll_interval_s), rng or random.Random())
    try:
        invocation = _await_invocation(ssm, command_id, instance_id, budget, backoff)
    except SsmCommandTimeout as err:
        if cancel_on_timeout:
            _cancel_after_timeout(ssm, command_id, instance_id, err)
        raise
    return _to_result(invocation, command_id, instance_id, output_s3_bucket, output_s3_prefix, s3)


def output_key(prefix: str | None, command_id: str, instance_id: str, stream: str) -> str:
    """Where the SSM agent writes a stream of AWS-RunShellScript's single step in the output bucket."""
    parts = [prefix.strip("/")] if prefix and prefix.strip("/") else []
    return "/".join([*parts, command_id, instance_id, "awsrunShellScript", "0.awsrunShellScript", stream])


def _check_arguments(
    commands: Sequence[str],
    timeout_s: int,
    max_wait_s: float,
    poll_interval_s: float,
    delivery_timeout_s: int,
    bucket: str | None,
    s3: Any,
) -> None:
    if isinstance(commands, str) or not commands:
        raise ValueError("commands must be a non-empty list of shell lines")
    if not all(isinstance(line, str) for line in commands):
        raise TypeError("every command must be a str")
    if not 1 <= timeout_s <= MAX_EXECUTION_TIMEOUT_S:
        raise ValueError(f"timeout_s must be 1..{MAX_EXECUTION_TIMEOUT_S}, got {timeout_s}")
    if delivery_timeout_s < MIN_DELIVERY_TIMEOUT_S:
        raise ValueError(f"delivery_timeout_s must be at least {MIN_DELIVERY_TIMEOUT_S}")
    if max_wait_s <= 0 or poll_interval_s <= 0:
        raise ValueError("max_wait_s and poll_interval_s must be positive")
    if bucket and s3 is None:
        raise ValueError("output_s3_bucket needs an s3 client to read truncated output back")


def _send(
    ssm: Any,
    instance_id: str,
    commands: Sequence[str],
    *,
    timeout_s: int,
    delivery_timeout_s: int,
    bucket: str | None,
    prefix: str | None,
    comment: str | None,
) -> str:
    request: dict[str, Any] = {
        "InstanceIds": [instance_id],
        "DocumentName": DOCUMENT_NAME,
        "Parameters": {"commands": list(commands), "executionTimeout": [str(timeout_s)]},
        "TimeoutSeconds": delivery_timeout_s,
    }
    if comment:
        request["Comment"] = comment[:100]  # the API's limit
    if bucket:
        request["OutputS3BucketName"] = bucket
        if prefix:
            request["OutputS3KeyPrefix"] = prefix
    response = ssm.send_command(**request)
    return str(response["Command"]["CommandId"])


class _WaitBudget:
    """Time spent waiting, counted as the larger of what we slept and what the clock says.

    Counting the sleeps keeps the bound exact when tests inject a sleep that returns at once;
    the clock adds the time the API calls themselves took.
    """

    def __init__(self, limit_s: float, *, sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
        self.limit_s = limit_s
        self._sleep = sleep
        self._clock = clock
        self._started = clock()
        self._slept = 0.0

    def elapsed(self) -> float:
        return max(self._slept, self._clock() - self._started)

    def exhausted(self) -> bool:
        return self.elapsed() >= self.limit_s

    def sleep(self, delay_s: float) -> None:
        delay_s = min(delay_s, self.limit_s - self.elapsed())
        if delay_s > 0:
            self._sleep(delay_s)
            self._slept += delay_s


class _Backoff:
    """Poll delays growing from `first_s` to `cap_s`, each cut by a random part of up to half, so
    callers that started together do not poll in lockstep ("equal jitter")."""

    def __init__(self, first_s: float, cap_s: float, rng: random.Random) -> None:
        self._next = first_s
        self._cap = cap_s
        self._rng = rng

    def next_delay(self) -> float:
        base = self._next
        self._next = min(self._cap, self._next * 1.5)
        return base / 2 + self._rng.uniform(0, base / 2)


def _await_invocation(
    ssm: Any, command_id: str, instance_id: str, budget: _WaitBudget, backoff: _Backoff
) -> dict[str, Any]:
    invocation = _poll_invocation(ssm, command_id, instance_id)
    while invocation is None or invocation["Status"] in _IN_PROGRESS:
        if budget.exhausted():
            seen = "never became visible" if invocation is None else f"was still {invocation['Status']}"
            raise SsmCommandTimeout(
                f"SSM command {command_id} on {instance_id} {seen} after {budget.limit_s:g}s",
                command_id=command_id,
                status="" if invocation is None else invocation["Status"],
            )
        budget.sleep(backoff.next_delay())
        invocation = _poll_invocation(ssm, command_id, instance_id)
    return invocation


def _poll_invocation(ssm: Any, command_id: str, instance_id: str) -> dict[str, Any] | None:
    """The invocation, or None while SSM has not registered it yet (or asks us to slow down)."""
    try:
        invocation: dict[str, Any] = ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in _RETRY_POLL_ERRORS:
            return None
        raise
    return invocation


def _cancel_after_timeout(ssm: Any, command_id: str, instance_id: str, err: SsmCommandTimeout) -> None:
    # Leaving the command running would let it act after we reported failure; a failed cancel
    # must not hide the timeout, so it is added to the error's notes instead.
    try:
        ssm.cancel_command(CommandId=command_id, InstanceIds=[instance_id])
    except ClientError as cancel_err:
        err.add_note(f"cancelling {command_id} also failed: {cancel_err}")


def _to_result(
    invocation: dict[str, Any],
    command_id: str,
    instance_id: str,
    bucket: str | None,
    prefix: str | None,
    s3: Any,
) -> CommandResult:
    status = invocation["Status"]
    details = invocation.get("StatusDetails", "")
    response_code = invocation.get("ResponseCode", -1)
    exit_code = response_code if isinstance(response_code, int) and response_code >= 0 else None
    if status == "Success" or (status == "Failed" and exit_code is not None):
        return CommandResult(
            status=status,
            exit_code=exit_code,
            stdout=_full_stream(invocation, "stdout", command_id, instance_id, bucket, prefix, s3),
            stderr=_full_stream(invocation, "stderr", command_id, instance_id, bucket, prefix, s3),
            command_id=command_id,
        )
    error_type = SsmCommandTimeout if status == "TimedOut" else SsmCommandError
    stderr_excerpt = invocation.get("StandardErrorContent", "")[-500:].strip()
    raise error_type(
        f"SSM command {command_id} on {instance_id} ended {status} ({details})"
        + (f": {stderr_excerpt}" if stderr_excerpt else ""),
        command_id=command_id,
        status=status,
        status_details=details,
    )


def _full_stream(
    invocation: dict[str, Any],
    stream: str,
    command_id: str,
    instance_id: str,
    bucket: str | None,
    prefix: str | None,
    s3: Any,
) -> str:
    field, limit, marker = (
        ("StandardOutputContent", STDOUT_INLINE_LIMIT, STDOUT_TRUNCATED_MARKER)
        if stream == "stdout"
        else ("StandardErrorContent", STDERR_INLINE_LIMIT, STDERR_TRUNCATED_MARKER)
    )
    inline: str = invocation.get(field, "")
    truncated = inline.endswith(marker) or len(inline) >= limit
    if not (truncated and bucket):
        return inline
    key = output_key(prefix, command_id, instance_id, stream)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as err:
        raise SsmCommandError(
            f"{stream} of SSM command {command_id} was cut short; s3://{bucket}/{key} is unreadable: {err}",
            command_id=command_id,
            status=invocation["Status"],
        ) from err
    return bytes(body).decode("utf-8", errors="replace")
