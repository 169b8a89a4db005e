"""What a handler's cold start does and no longer does: no X-Ray SDK when tracing is off (hpcstage.tracing),
one botocore data loader for the handlers' clients (hpcstage.clients)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from aws_lambda_powertools import Tracer
from hpcstage import clients, tracing

ROOT = Path(__file__).resolve().parents[2]

# (environment, tracing on?) -- Powertools' own rule, which hpcstage.tracing mirrors
ENVIRONMENTS = [
    ({}, False),  # not in Lambda
    ({"LAMBDA_TASK_ROOT": "/var/task"}, True),
    ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, False),
    ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "1"}, False),
    ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"}, True),
    ({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"}, False),
    ({"LAMBDA_TASK_ROOT": "/var/task", "AWS_CHALICE_CLI_MODE": "true"}, False),
    ({"POWERTOOLS_TRACE_DISABLED": "false"}, False),
]


@pytest.mark.parametrize(("env", "on"), ENVIRONMENTS)
def test_tracing_is_on_exactly_where_powertools_would_trace(env: dict[str, str], on: bool) -> None:
    with mock.patch.dict("os.environ", env, clear=True):
        assert tracing.tracing_enabled() is on
        assert (not Tracer._is_tracer_disabled()) is on  # noqa: SLF001 - the rule hpcstage.tracing mirrors
        provider = tracing.provider()
    assert provider is None if on else isinstance(provider, tracing.NoTracing)


def test_a_tracer_without_tracing_runs_the_handler_and_passes_its_errors_through() -> None:
    with mock.patch.dict("os.environ", {"POWERTOOLS_TRACE_DISABLED": "true"}, clear=True):
        tracer = Tracer(provider=tracing.provider(), auto_patch=False)

        @tracer.capture_lambda_handler
        def handler(event: dict[str, int], context: object) -> dict[str, int]:
            if event["n"] < 0:
                raise ValueError("negative")
            return {"twice": 2 * event["n"]}

        @tracer.capture_method
        def method(n: int) -> int:
            return n + 1

        assert handler({"n": 21}, None) == {"twice": 42}
        assert method(1) == 2
        with pytest.raises(ValueError, match="^negative$"):
            handler({"n": -1}, None)
    assert isinstance(tracer.provider, tracing.NoTracing)
    Tracer._reset_config()  # noqa: SLF001 - the provider is kept class-wide; the next Tracer starts afresh


@pytest.mark.parametrize("function", sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py")))
def test_a_handler_imported_with_tracing_off_never_imports_the_xray_sdk(function: str) -> None:
    """In a fresh interpreter, as a cold start is: the module and what it imports, outside Lambda."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(ROOT / 'functions' / function / 'app.py')!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(type(module.tracer.provider).__name__, 'aws_xray_sdk.core' in sys.modules)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_SERVICE_NAME": "t"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    assert out.stdout.strip() == "NoTracing False"


def test_the_handlers_clients_share_the_s3_clients_botocore_data() -> None:
    """One loader (endpoint rules, partitions, service models read once) for the S3 client and the others."""
    clients.reset()
    try:
        with mock.patch.dict("os.environ", {"AWS_DEFAULT_REGION": "us-east-1"}):
            s3 = clients.s3()
            ddb = clients.client("dynamodb")
            sfn = clients.client("stepfunctions")
        assert ddb._loader is s3._loader  # noqa: SLF001
        assert sfn._loader is s3._loader  # noqa: SLF001
        assert clients.client("dynamodb") is ddb
    finally:
        clients.reset()


def test_a_client_with_a_pool_has_that_many_connections() -> None:
    """The launcher's Lambda client holds fleet.LAUNCH_THREADS connections (its Invokes go at once); the
    others keep botocore's default of 10."""
    from hpcstage.inventory import fleet

    clients.reset()
    try:
        with mock.patch.dict("os.environ", {"AWS_DEFAULT_REGION": "us-east-1"}):
            lam = clients.client("lambda", pool=fleet.LAUNCH_THREADS)
            plain = clients.client("lambda")
        assert lam.meta.config.max_pool_connections == fleet.LAUNCH_THREADS == 32
        assert plain.meta.config.max_pool_connections == 10
        assert clients.client("lambda", pool=fleet.LAUNCH_THREADS) is lam
    finally:
        clients.reset()
