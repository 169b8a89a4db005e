"""The staging state machine's poll states retry transient failures (an SSM command that could not
be delivered or timed out, a throttled or failing AWS call, a dropped connection) with full jitter
instead of failing the run, and every error name they retry is one that can actually be raised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore.exceptions
import botocore.session
import hpcstage.ssm
import pytest

ASL = json.loads((Path(__file__).resolve().parents[2] / "statemachines" / "staging.asl.json").read_text())
TRANSIENT = [
    "SsmCommandError",
    "SsmCommandTimeout",
    "InternalServerError",
    "ThrottlingException",
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ConnectionClosedError",
]


def states(machine: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, state in machine["States"].items():
        found[name] = state
        for branch in state.get("Branches", []):
            found.update(states(branch))
    return found


@pytest.mark.parametrize("name", ["StagePoll", "ExportPoll", "ReleasePoll", "RestorePoll"])
def test_poll_states_retry_transient_errors_with_jitter(name: str) -> None:
    retriers = states(ASL)[name]["Retry"]
    [transient] = [r for r in retriers if "SsmCommandTimeout" in r["ErrorEquals"]]
    assert transient == {
        "ErrorEquals": TRANSIENT,
        "IntervalSeconds": 5,
        "MaxAttempts": 4,
        "BackoffRate": 2.0,
        "MaxDelaySeconds": 60,
        "JitterStrategy": "FULL",
    }


def test_every_retried_error_name_exists() -> None:
    session = botocore.session.get_session()
    modeled = {
        shape
        for service in ("fsx", "ssm")
        for shape in session.get_service_model(service).shape_names
        if session.get_service_model(service).shape_for(shape).metadata.get("exception")
    }
    for error in TRANSIENT:
        assert hasattr(hpcstage.ssm, error) or hasattr(botocore.exceptions, error) or error in modeled, error
