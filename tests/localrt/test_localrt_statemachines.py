"""The fixture template deployed into moto and its state machines executed for real, offline:
optimized lambda:invoke tasks calling the real handlers, Retry/Catch on the handlers' own error
names, failures with their cause, and Distributed Maps reading their items from S3."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hpcstage.local import (
    Deployed,
    ExecutionTimeout,
    LocalAws,
    TemplateError,
    describe_map_runs,
    run_execution,
)
from hpcstage.local.runtime import backend_status

FIXTURES = Path(__file__).parent / "fixtures"
STACK = "hpcstage-local"
ACCOUNT = "123456789012"
EXCEEDED = "The specified tolerated failure threshold was exceeded"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[LocalAws, Deployed]]:
    with LocalAws() as aws:
        yield aws, aws.deploy(FIXTURES / "template.yaml", {"CounterDir": str(tmp_path)})


def put_items(aws: LocalAws, deployed: Deployed, key: str, items: list[Any]) -> None:
    aws.client("s3").put_object(Bucket=deployed.name("DataBucket"), Key=key, Body=json.dumps(items).encode())


def test_deploy_creates_the_supported_resources_and_notes_the_rest(stack: tuple[LocalAws, Deployed]) -> None:
    aws, deployed = stack

    created = {logical_id: res.name for logical_id, res in deployed.resources.items() if res.created}
    assert created == {
        "DataBucket": "hpcstage-local-databucket",
        "RunsTable": f"{STACK}-RunsTable",
        "EventsTopic": f"{STACK}-EventsTopic",
        "Bus": f"{STACK}-bus",
        "DoubleFunction": f"{STACK}-DoubleFunction",
        "FlakyFunction": f"{STACK}-FlakyFunction",
        "LoggedFunction": f"{STACK}-logged",
        "PipelineStateMachine": f"{STACK}-PipelineStateMachine",
        "FanoutStateMachine": f"{STACK}-FanoutStateMachine",
        "TolerantFanoutStateMachine": f"{STACK}-TolerantFanoutStateMachine",
        "LargeMapStateMachine": f"{STACK}-LargeMapStateMachine",
    }
    assert sorted(res for res, value in deployed.resources.items() if not value.created) == [
        "FailureAlarm",
        "ProdOnlyBucket",
    ]
    assert deployed.notes == [
        "FailureAlarm (AWS::CloudWatch::Alarm): not created locally (unsupported type)",
        "ProdOnlyBucket: not created (condition IsProd is false)",
        "LoggedFunction (AWS::Serverless::Function): properties ignored locally: ['Events']",
        "LoggedFunction: event sources not wired locally: ['Nightly']",
    ]
    assert deployed.outputs == {
        "DataBucketName": "hpcstage-local-databucket",
        "PipelineArn": f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{STACK}-PipelineStateMachine",
        "LoggedFunctionArn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{STACK}-logged",
        "AlarmName": "local-skipped:FailureAlarm",
    }

    # The Globals and the function's own variables are merged, with references resolved
    config = aws.client("lambda").get_function_configuration(FunctionName=deployed.name("FlakyFunction"))
    assert config["Environment"]["Variables"] == {
        "POWERTOOLS_SERVICE_NAME": "localrt",
        "STAGE": "test",
        "COUNTER_DIR": deployed.parameters["CounterDir"],
    }
    assert (config["Handler"], config["Runtime"], config["Timeout"], config["MemorySize"]) == (
        "app.lambda_handler",
        "python3.12",
        30,
        256,
    )

    # The definition's ${...} placeholders were replaced by the local ARNs
    definition = json.loads(
        aws.client("stepfunctions").describe_state_machine(
            stateMachineArn=deployed.arn("PipelineStateMachine")
        )["definition"]
    )
    assert definition["States"]["Double"]["Parameters"]["FunctionName"] == deployed.arn("DoubleFunction")
    assert definition["States"]["Flaky"]["Parameters"]["FunctionName"] == deployed.arn("FlakyFunction")

    table = aws.client("dynamodb").describe_table(TableName=deployed.name("RunsTable"))["Table"]
    assert table["KeySchema"] == [{"AttributeName": "run_id", "KeyType": "HASH"}]
    topics = [t["TopicArn"] for t in aws.client("sns").list_topics()["Topics"]]
    assert topics == [deployed.arn("EventsTopic")]
    assert aws.client("events").describe_event_bus(Name=deployed.name("Bus"))["Arn"] == deployed.arn("Bus")


def test_retry_on_the_handlers_error_name_succeeds_after_two_failures(
    stack: tuple[LocalAws, Deployed], tmp_path: Path
) -> None:
    aws, deployed = stack

    result = aws.run(
        deployed.arn("PipelineStateMachine"), {"value": 4, "key": "k1", "fail_times": 2}, timeout_s=60
    )

    assert result.status == "SUCCEEDED"
    assert result.output == {
        "value": 4,
        "key": "k1",
        "fail_times": 2,
        "doubled": {"value": 8},
        "flaky": {"attempts": 3},
        "outcome": "done",
    }
    failures = [event["taskFailedEventDetails"] for event in result.history if event["type"] == "TaskFailed"]
    assert [failure["error"] for failure in failures] == ["FlakyError", "FlakyError"]
    assert [json.loads(failure["cause"])["errorMessage"] for failure in failures] == [
        "attempt 1 for k1 failed on purpose",
        "attempt 2 for k1 failed on purpose",
    ]
    assert (tmp_path / "k1.count").read_text() == "3"


def test_catch_takes_over_when_retries_run_out(stack: tuple[LocalAws, Deployed], tmp_path: Path) -> None:
    aws, deployed = stack

    result = aws.run(
        deployed.arn("PipelineStateMachine"), {"value": 1, "key": "k2", "fail_times": 5}, timeout_s=60
    )

    assert result.status == "SUCCEEDED"
    caught = result.output.pop("caught")
    assert result.output == {
        "value": 1,
        "key": "k2",
        "fail_times": 5,
        "doubled": {"value": 2},
        "outcome": "gave up",
    }
    assert caught["Error"] == "FlakyError"
    cause = json.loads(caught["Cause"])
    assert (cause["errorType"], cause["errorMessage"]) == ("FlakyError", "attempt 3 for k2 failed on purpose")
    assert (tmp_path / "k2.count").read_text() == "3"  # 1 attempt + MaxAttempts 2


def test_an_uncaught_handler_error_fails_the_execution_with_its_name_and_cause(
    stack: tuple[LocalAws, Deployed],
) -> None:
    aws, deployed = stack

    result = aws.run(
        deployed.arn("PipelineStateMachine"), {"value": -1, "key": "k3", "fail_times": 0}, timeout_s=60
    )

    assert result.status == "FAILED"
    assert result.output is None
    assert result.error == "NegativeValueError"
    assert result.cause is not None
    cause = json.loads(result.cause)
    assert (cause["errorType"], cause["errorMessage"]) == (
        "NegativeValueError",
        "cannot double negative value -1",
    )
    assert result.event_types()[-1] == "ExecutionFailed"
    assert result.history[-1]["executionFailedEventDetails"]["error"] == "NegativeValueError"


def test_on_event_sees_every_history_event_once_in_order(stack: tuple[LocalAws, Deployed]) -> None:
    aws, deployed = stack
    seen: list[dict[str, Any]] = []

    result = aws.run(
        deployed.arn("PipelineStateMachine"),
        {"value": 2, "key": "k4", "fail_times": 0},
        name="streamed",
        timeout_s=60,
        poll_s=0.01,
        on_event=seen.append,
    )

    assert result.execution_arn.endswith(":execution:hpcstage-local-PipelineStateMachine:streamed")
    assert seen == result.history
    assert [event["id"] for event in seen] == list(range(1, len(seen) + 1))
    assert result.event_types()[0] == "ExecutionStarted"
    assert result.event_types()[-1] == "ExecutionSucceeded"
    assert result.event_types().count("TaskSucceeded") == 2


class CountingSfn:
    """A Step Functions client that counts the calls made through it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def counted(**kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(**kwargs)

        return counted


def test_the_history_is_polled_less_often_than_the_status_when_asked(
    stack: tuple[LocalAws, Deployed],
) -> None:
    """Given a 1 s execution whose status is polled every 0.05 s and whose history is due every hour: the
    history is read twice (at the first poll, and at the end) and on_event still sees every event once."""
    aws, deployed = stack
    definition = {"StartAt": "Nap", "States": {"Nap": {"Type": "Wait", "Seconds": 1, "End": True}}}
    role = aws.client("iam").get_role(RoleName="hpcstage-local-execution")["Role"]["Arn"]
    sfn = CountingSfn(aws.client("stepfunctions"))
    arn = sfn.create_state_machine(name="napper", definition=json.dumps(definition), roleArn=role)
    seen: list[dict[str, Any]] = []

    result = run_execution(
        sfn,
        arn["stateMachineArn"],
        {},
        timeout_s=600,
        poll_s=0.05,
        history_every_s=3600,
        on_event=seen.append,
    )

    assert result.status == "SUCCEEDED"
    assert sfn.calls["get_execution_history"] == 2
    assert seen == result.history
    assert result.event_types() == [
        "ExecutionStarted",
        "WaitStateEntered",
        "WaitStateExited",
        "ExecutionSucceeded",
    ]


def test_the_end_is_seen_from_the_backend_between_two_status_polls(stack: tuple[LocalAws, Deployed]) -> None:
    """Given a 1 s execution whose status is due every hour: LocalAws.run's probe of moto's backend ends the
    wait once the execution has ended, with two DescribeExecution calls in all (the first poll, the last)."""
    aws, deployed = stack
    definition = {"StartAt": "Nap", "States": {"Nap": {"Type": "Wait", "Seconds": 1, "End": True}}}
    role = aws.client("iam").get_role(RoleName="hpcstage-local-execution")["Role"]["Arn"]
    sfn = CountingSfn(aws.client("stepfunctions"))
    arn = sfn.create_state_machine(name="prober", definition=json.dumps(definition), roleArn=role)
    probed: list[str] = []

    def probe(execution_arn: str) -> str:
        status = backend_status(execution_arn)
        probed.append(status)
        return status

    result = run_execution(sfn, arn["stateMachineArn"], {}, timeout_s=600, poll_s=3600, status_probe=probe)

    assert result.status == "SUCCEEDED"
    assert sfn.calls["describe_execution"] == 2
    assert probed[-1] == "SUCCEEDED"
    assert set(probed[:-1]) <= {"RUNNING"}
    assert backend_status(result.execution_arn) == "SUCCEEDED"


def test_distributed_map_runs_the_lambda_for_each_item_read_from_s3(stack: tuple[LocalAws, Deployed]) -> None:
    aws, deployed = stack
    put_items(aws, deployed, "in/items.json", [{"value": n} for n in range(50)])

    result = aws.run(deployed.arn("FanoutStateMachine"), {"key": "in/items.json"}, timeout_s=120)

    assert result.status == "SUCCEEDED", (result.error, result.cause)
    assert result.output == {
        "key": "in/items.json",
        "results": [{"value": 2 * n, "index": n} for n in range(50)],
    }
    (run,) = describe_map_runs(aws.client("stepfunctions"), result.execution_arn)
    assert run["status"] == "SUCCEEDED"
    assert run["maxConcurrency"] == 5
    assert run["itemCounts"] == {
        "pending": 0,
        "running": 0,
        "succeeded": 50,
        "failed": 0,
        "timedOut": 0,
        "aborted": 0,
        "total": 50,
        "resultsWritten": 50,
    }


def test_a_failed_item_fails_a_distributed_map_that_tolerates_none(stack: tuple[LocalAws, Deployed]) -> None:
    aws, deployed = stack
    put_items(aws, deployed, "in/bad.json", [{"value": 1}, {"value": -2}, {"value": 3}])

    result = aws.run(deployed.arn("FanoutStateMachine"), {"key": "in/bad.json"}, timeout_s=120)

    assert (result.status, result.error, result.cause) == (
        "FAILED",
        "States.ExceedToleratedFailureThreshold",
        EXCEEDED,
    )
    (run,) = describe_map_runs(aws.client("stepfunctions"), result.execution_arn)
    assert run["status"] == "FAILED"
    assert (run["itemCounts"]["succeeded"], run["itemCounts"]["failed"]) == (2, 1)
    assert "MapRunFailed" in result.event_types()


def test_tolerated_failure_count_lets_one_failure_through_and_a_fail_state_rethrows_two(
    stack: tuple[LocalAws, Deployed],
) -> None:
    aws, deployed = stack
    put_items(aws, deployed, "in/one-bad.json", [{"value": 1}, {"value": -2}, {"value": 3}])
    put_items(aws, deployed, "in/two-bad.json", [{"value": 1}, {"value": -2}, {"value": -3}, {"value": 4}])

    tolerated = aws.run(deployed.arn("TolerantFanoutStateMachine"), {"key": "in/one-bad.json"}, timeout_s=120)
    rethrown = aws.run(deployed.arn("TolerantFanoutStateMachine"), {"key": "in/two-bad.json"}, timeout_s=120)

    assert tolerated.status == "SUCCEEDED"
    assert tolerated.output == {"key": "in/one-bad.json", "results": [{"value": 2}, None, {"value": 6}]}
    # Catch on the States.* name, then a Fail state re-raising it through ErrorPath/CausePath
    assert (rethrown.status, rethrown.error, rethrown.cause) == (
        "FAILED",
        "States.ExceedToleratedFailureThreshold",
        EXCEEDED,
    )
    assert [
        e["stateEnteredEventDetails"]["name"] for e in rethrown.history if e["type"] == "FailStateEntered"
    ] == ["Rethrow"]


@pytest.mark.parametrize("error", ["States.Timeout", "States.NoSuchError", "MyApp.Error"])
def test_a_fail_state_reports_the_error_its_error_path_selects(
    stack: tuple[LocalAws, Deployed], error: str
) -> None:
    aws, _ = stack
    sfn = aws.client("stepfunctions")
    definition = {
        "StartAt": "Caught",
        "States": {
            "Caught": {
                "Type": "Pass",
                "Result": {"Error": error, "Cause": "why"},
                "ResultPath": "$.e",
                "Next": "Fail",
            },
            "Fail": {"Type": "Fail", "ErrorPath": "$.e.Error", "CausePath": "$.e.Cause"},
        },
    }
    role = aws.client("iam").get_role(RoleName="hpcstage-local-execution")["Role"]["Arn"]
    arn = sfn.create_state_machine(name="rethrow", definition=json.dumps(definition), roleArn=role)[
        "stateMachineArn"
    ]

    result = aws.run(arn, {}, timeout_s=60)

    assert (result.status, result.error, result.cause) == ("FAILED", error, "why")


def test_more_than_a_thousand_items_through_one_map_worker(stack: tuple[LocalAws, Deployed]) -> None:
    aws, deployed = stack
    items = list(range(1200))
    put_items(aws, deployed, "in/large.json", items)

    result = aws.run(
        deployed.arn("LargeMapStateMachine"), {"key": "in/large.json", "items": items}, timeout_s=120
    )

    assert result.status == "SUCCEEDED"
    assert result.output == {"key": "in/large.json", "items": items, "inline": items, "distributed": items}


def test_run_execution_stops_an_execution_that_outlives_its_timeout(stack: tuple[LocalAws, Deployed]) -> None:
    aws, deployed = stack
    sfn = aws.client("stepfunctions")
    definition = {"StartAt": "Nap", "States": {"Nap": {"Type": "Wait", "Seconds": 600, "End": True}}}
    role = aws.client("iam").get_role(RoleName="hpcstage-local-execution")["Role"]["Arn"]
    arn = sfn.create_state_machine(name="sleepy", definition=json.dumps(definition), roleArn=role)[
        "stateMachineArn"
    ]

    with pytest.raises(ExecutionTimeout, match="still RUNNING after 0.3 s") as raised:
        aws.run(arn, {}, timeout_s=0.3, poll_s=0.05)

    assert raised.value.final_status == "ABORTED"
    assert sfn.describe_execution(executionArn=raised.value.execution_arn)["status"] == "ABORTED"


def test_a_definition_placeholder_without_a_substitution_is_a_deploy_error(tmp_path: Path) -> None:
    (tmp_path / "machine.asl.json").write_text(
        json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": "${Missing}", "End": True}}})
    )
    (tmp_path / "template.yaml").write_text(
        "Resources:\n"
        "  Machine:\n"
        "    Type: AWS::Serverless::StateMachine\n"
        "    Properties:\n"
        "      DefinitionUri: machine.asl.json\n"
        "      DefinitionSubstitutions: {Other: x}\n"
    )

    with (
        LocalAws() as aws,
        pytest.raises(TemplateError, match=r"Machine: definition placeholders without .*: \['Missing'\]"),
    ):
        aws.deploy(tmp_path / "template.yaml")


def test_server_mode_serves_http_and_runs_the_same_machines(tmp_path: Path) -> None:
    assert "MOTO_PORT" not in os.environ

    with LocalAws(server=True) as aws:
        assert aws.endpoint_url is not None
        assert aws.endpoint_url.startswith("http://127.0.0.1:")
        port = aws.endpoint_url.rsplit(":", 1)[1]
        assert os.environ["MOTO_PORT"] == port  # where the interpreter calls Lambda and S3 back
        deployed = aws.deploy(FIXTURES / "template.yaml", {"CounterDir": str(tmp_path)})
        put_items(aws, deployed, "in/items.json", [{"value": n} for n in range(10)])

        pipeline = aws.run(deployed.arn("PipelineStateMachine"), {"value": 5, "key": "s", "fail_times": 0})
        fanout = aws.run(deployed.arn("FanoutStateMachine"), {"key": "in/items.json"}, timeout_s=120)

    assert pipeline.output == {
        "value": 5,
        "key": "s",
        "fail_times": 0,
        "doubled": {"value": 10},
        "flaky": {"attempts": 1},
        "outcome": "done",
    }
    assert fanout.output == {
        "key": "in/items.json",
        "results": [{"value": 2 * n, "index": n} for n in range(10)],
    }
    assert "MOTO_PORT" not in os.environ
    assert "AWS_ENDPOINT_URL" not in os.environ
