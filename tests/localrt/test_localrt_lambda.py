"""moto's Lambda calling the real handlers in-process (hpcstage.local.motopatch, group "lambda")."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import moto
import pytest
from hpcstage.local import LocalAws, motopatch
from hpcstage.local.motopatch import EnvironmentBusyError, EnvironmentGate
from moto.awslambda_simple.models import LambdaSimpleBackend

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def aws(tmp_path: Path) -> Iterator[tuple[LocalAws, Any]]:
    with LocalAws() as local:
        deployed = local.deploy(FIXTURES / "template.yaml", {"CounterDir": str(tmp_path)})
        yield local, deployed


def invoke(local: LocalAws, function_name: str, event: Any) -> tuple[str | None, Any]:
    response = local.client("lambda").invoke(FunctionName=function_name, Payload=json.dumps(event).encode())
    return response.get("FunctionError"), json.loads(response["Payload"].read())


def test_two_app_py_handlers_each_run_their_own_code(aws: tuple[LocalAws, Any], tmp_path: Path) -> None:
    local, deployed = aws

    doubled = invoke(local, deployed.name("DoubleFunction"), {"value": 21})
    flaky = invoke(local, deployed.name("FlakyFunction"), {"key": "k", "fail_times": 0})

    assert doubled == (None, {"value": 42})
    assert flaky == (None, {"key": "k", "attempts": 1})
    assert (tmp_path / "k.count").read_text() == "1"


def test_a_handler_exception_comes_back_as_aws_reports_it(aws: tuple[LocalAws, Any]) -> None:
    local, deployed = aws

    function_error, payload = invoke(local, deployed.name("DoubleFunction"), {"value": -3})

    assert function_error == "Unhandled"
    assert payload["errorType"] == "NegativeValueError"
    assert payload["errorMessage"] == "cannot double negative value -3"
    assert len(payload["stackTrace"]) == 1
    assert "functions/double/app.py" in payload["stackTrace"][0]


def test_powertools_handler_sees_its_environment_and_context_only_while_it_runs(
    aws: tuple[LocalAws, Any],
) -> None:
    local, deployed = aws
    name = deployed.name("LoggedFunction")

    function_error, payload = invoke(local, name, {"hello": "world"})

    assert function_error is None
    assert payload == {
        "service": "logged-service",  # Logger() read POWERTOOLS_SERVICE_NAME at import: env applied
        "function_name": "hpcstage-local-logged",
        "memory_limit_in_mb": "512",
        "invoked_function_arn": f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
        "has_time_left": True,
        "has_request_id": True,
        "greeting": "hello from us-east-1",
        "bucket": deployed.name("DataBucket"),
        "prod": "no",
        "stage": "test",
        "verbose": "true",
        "lambda_function_name": name,
    }
    assert "GREETING" not in os.environ
    assert "AWS_LAMBDA_FUNCTION_NAME" not in os.environ


def test_event_invocations_run_the_handler_in_the_background(
    aws: tuple[LocalAws, Any], tmp_path: Path
) -> None:
    local, deployed = aws

    response = local.client("lambda").invoke(
        FunctionName=deployed.name("FlakyFunction"),
        InvocationType="Event",
        Payload=json.dumps({"key": "async", "fail_times": 0}).encode(),
    )

    assert response["StatusCode"] == 202
    counter = tmp_path / "async.count"
    for _ in range(200):  # bounded wait for the background thread: 200 x 0.05 s
        if counter.exists() and counter.read_text() == "1":
            break
        time.sleep(0.05)
    assert counter.read_text() == "1"


def write_function(root: Path, name: str, source: str) -> Path:
    code_dir = root / name
    code_dir.mkdir()
    (code_dir / "app.py").write_text(source)
    return code_dir


def register(local: LocalAws, name: str, code_dir: Path, handler: str = "app.lambda_handler") -> None:
    """Create Lambda function ``name`` in the emulator (a fresh role, an empty zip) and run it from ``code_dir``."""
    role = local.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    local.client("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler=handler,
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )
    local.register_function(name, code_dir)


def test_the_emulator_stops_after_the_event_invocations_still_running_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An asynchronous invocation that outlives the execution it served (the fleet's lister that reduced a run
    answers, then writes its exit to DynamoDB) ends before LocalAws stops the emulator under it; the wait is
    bounded, and names what is still running when it gives up."""
    code_dir = write_function(
        tmp_path,
        "waiter",
        "import pathlib, time\n"
        "import boto3\n\n"
        "def lambda_handler(event, context):\n"
        "    go = pathlib.Path(event['go'])\n"
        "    for _ in range(600):  # bounded: 30 s\n"
        "        if go.exists():\n"
        "            break\n"
        "        time.sleep(0.05)\n"
        "    # the rest of its work, after the execution it served has ended, needs the emulator\n"
        "    sts = boto3.client('sts', endpoint_url=event['endpoint'])\n"
        "    for _ in range(20):\n"
        "        sts.get_caller_identity()\n"
        "        time.sleep(0.1)\n"
        "    pathlib.Path(event['path']).write_text('finished' if go.exists() else 'gave up')\n",
    )
    go, done = tmp_path / "go", tmp_path / "done.txt"
    with LocalAws() as local:
        register(local, "waiter", code_dir)
        response = local.client("lambda").invoke(
            FunctionName="waiter",
            InvocationType="Event",
            Payload=json.dumps({"go": str(go), "path": str(done), "endpoint": local.endpoint_url}).encode(),
        )
        assert response["StatusCode"] == 202
        assert motopatch.drain_event_invocations(0.0) == ["waiter"]  # waiting for its go: still running
        # its go comes as the emulator begins to stop (as a lister's exit follows the end of its execution)
        stop = LocalAws._stop_running_executions
        monkeypatch.setattr(
            LocalAws, "_stop_running_executions", lambda self: (go.write_text(""), stop(self))
        )
    assert done.read_text() == "finished"  # LocalAws waited for it before stopping
    assert motopatch.drain_event_invocations(0.0) == []


def test_unregistered_functions_keep_motos_echo(aws: tuple[LocalAws, Any]) -> None:
    local, deployed = aws
    lam = local.client("lambda")
    config = lam.get_function(FunctionName=deployed.name("DoubleFunction"))["Configuration"]
    lam.create_function(
        FunctionName="not-registered",
        Runtime="python3.12",
        Role=config["Role"],
        Handler="app.lambda_handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )

    assert invoke(local, "not-registered", {"value": 1}) == (None, {"value": 1})


@pytest.mark.parametrize(
    ("source", "handler", "error_type", "message"),
    [
        (
            "import not_a_module_anywhere\n",
            "app.lambda_handler",
            "Runtime.ImportModuleError",
            "Unable to import",
        ),
        ("x = 1\n", "app.lambda_handler", "Runtime.HandlerNotFound", "Handler 'lambda_handler' missing"),
        ("x = 1\n", "missing.lambda_handler", "Runtime.ImportModuleError", "No module named 'missing'"),
        (
            "def lambda_handler(event, context):\n    return {1, 2}\n",
            "app.lambda_handler",
            "Runtime.MarshalError",
            "Unable to marshal response",
        ),
    ],
)
def test_runtime_failures_use_aws_error_names(
    tmp_path: Path, source: str, handler: str, error_type: str, message: str
) -> None:
    with LocalAws() as local:
        register(local, "broken", write_function(tmp_path, "broken", source), handler)

        function_error, payload = invoke(local, "broken", {})

    assert function_error == "Unhandled"
    assert payload["errorType"] == error_type
    assert message in payload["errorMessage"]
    assert "broken" not in motopatch.registered_functions()  # LocalAws forgot its registrations


def test_a_module_is_imported_once_per_deployment_like_a_cold_start(tmp_path: Path) -> None:
    code_dir = write_function(
        tmp_path,
        "counter",
        "CALLS = []\n\ndef lambda_handler(event, context):\n    CALLS.append(1)\n    return len(CALLS)\n",
    )

    def session() -> list[Any]:
        with LocalAws() as local:
            register(local, "counter", code_dir)
            return [invoke(local, "counter", {})[1] for _ in range(3)]

    assert session() == [1, 2, 3]  # warm: module state is kept between invocations
    assert session() == [1, 2, 3]  # a new emulator starts cold


# -- the environment gate ------------------------------------------------------------------------------


def test_environment_gate_shares_equal_environments_and_excludes_different_ones() -> None:
    gate = EnvironmentGate()
    os.environ["GATE_X"] = "before"

    with gate.applied({"GATE_X": "a"}):
        assert os.environ["GATE_X"] == "a"
        with gate.applied({"GATE_X": "a"}, wait_s=0):  # same environment: runs alongside
            assert os.environ["GATE_X"] == "a"
        with pytest.raises(EnvironmentBusyError), gate.applied({"GATE_X": "b"}, wait_s=0):
            pass  # pragma: no cover - never entered
        assert os.environ["GATE_X"] == "a"

    assert os.environ["GATE_X"] == "before"
    with gate.applied({"GATE_NEW": "1"}):
        assert os.environ["GATE_NEW"] == "1"
    assert "GATE_NEW" not in os.environ


def test_environment_gate_serves_waiters_in_arrival_order() -> None:
    # Given A running with environment "a" and B waiting for environment "b"
    gate = EnvironmentGate()
    release_a = threading.Event()
    a_inside = threading.Event()
    seen_by_b: list[str] = []

    def run_a() -> None:
        with gate.applied({"GATE_Y": "a"}):
            a_inside.set()
            release_a.wait(timeout=30)

    def run_b() -> None:
        with gate.applied({"GATE_Y": "b"}, wait_s=30):
            seen_by_b.append(os.environ["GATE_Y"])

    thread_a = threading.Thread(target=run_a)
    thread_a.start()
    assert a_inside.wait(timeout=30)
    thread_b = threading.Thread(target=run_b)
    thread_b.start()
    for _ in range(600):  # bounded wait until B is queued: 600 x 0.01 s
        if gate._waiting:
            break
        time.sleep(0.01)
    assert len(gate._waiting) == 1

    # When another "a" arrives, it may not overtake B, even though "a" is the running environment
    with pytest.raises(EnvironmentBusyError), gate.applied({"GATE_Y": "a"}, wait_s=0):
        pass  # pragma: no cover - never entered

    # Then B runs once A has finished, with its own environment
    release_a.set()
    thread_a.join(timeout=30)
    thread_b.join(timeout=30)
    assert seen_by_b == ["b"]
    assert "GATE_Y" not in os.environ


# -- applying the patches ------------------------------------------------------------------------------


def test_patches_are_idempotent_reversible_and_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    before = motopatch.use_patches(motopatch.PATCH_GROUPS)
    try:
        patched_invoke = LambdaSimpleBackend.invoke
        assert motopatch.apply_patches() == frozenset(motopatch.PATCH_GROUPS)
        assert LambdaSimpleBackend.invoke is patched_invoke

        motopatch.remove_patches()
        assert motopatch.applied_patches() == frozenset()
        assert LambdaSimpleBackend.invoke is not patched_invoke
        assert LambdaSimpleBackend.invoke.__module__ == "moto.awslambda_simple.models"

        motopatch.apply_patches()
        assert LambdaSimpleBackend.invoke is patched_invoke
    finally:
        motopatch.use_patches(before)

    monkeypatch.setattr(moto, "__version__", "5.2.6")
    with pytest.raises(motopatch.MotoVersionError, match="supports moto==5.2.5 only; found moto 5.2.6"):
        motopatch.apply_patches()
    with pytest.raises(ValueError, match="unknown moto patch groups"):
        motopatch.apply_patches(("nope",))


def test_local_aws_holds_its_patch_choice_and_restores_the_previous_one() -> None:
    before = motopatch.use_patches(("s3_listing",))
    try:
        with LocalAws(patches=("lambda", "map_iteration")):
            assert motopatch.applied_patches() == {"lambda", "map_iteration"}
        assert motopatch.applied_patches() == {"s3_listing"}
    finally:
        motopatch.use_patches(before)
