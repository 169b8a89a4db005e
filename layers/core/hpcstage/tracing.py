"""The Tracer's provider for the Lambda handlers: X-Ray when tracing is on, nothing when it is off.

Powertools' ``Tracer()`` imports ``aws_xray_sdk.core`` even when tracing is disabled, and that import makes
the X-Ray recorder, whose sampler builds a botocore session and an X-Ray client (0.25-0.8 s of CPU on this
machine; a handler's whole cold start was ~0.5 s of import). Tracing is disabled wherever the X-Ray daemon is
not there to receive segments -- outside Lambda (the local runtime, tests, the CLI), under ``sam local``, or
with ``POWERTOOLS_TRACE_DISABLED`` -- and there ``Tracer(provider=tracing.provider())`` gets a provider that
does nothing, so the X-Ray SDK is never imported. In Lambda with tracing on, ``provider()`` is None and
Powertools makes its X-Ray provider as before.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any

from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

# The values Powertools reads as true (aws_lambda_powertools.shared.functions.strtobool).
_TRUTHY = {"1", "y", "yes", "t", "true", "on"}


def tracing_enabled(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Powertools' own rule (Tracer._is_tracer_disabled): off with POWERTOOLS_TRACE_DISABLED, outside Lambda
    (no LAMBDA_TASK_ROOT), and under SAM CLI or Chalice's local mode."""
    env = os.environ if env is None else env
    if env.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in _TRUTHY:
        return False
    if not env.get("LAMBDA_TASK_ROOT"):
        return False
    return not (env.get("AWS_SAM_LOCAL") or env.get("AWS_CHALICE_CLI_MODE"))


class NoSegment(BaseSegment):
    """A segment that records nothing (what the disabled Tracer's decorators annotate)."""

    def close(self, end_time: int | None = None) -> None:
        pass

    def add_subsegment(self, subsegment: Any) -> None:
        pass

    def remove_subsegment(self, subsegment: Any) -> None:
        pass

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def add_exception(self, exception: BaseException, stack: list[Any], remote: bool = False) -> None:
        pass


class NoTracing(BaseProvider):
    """A Tracer provider that records nothing and imports nothing."""

    @contextlib.contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Generator[BaseSegment, None, None]:
        yield NoSegment()

    @contextlib.asynccontextmanager
    async def in_subsegment_async(
        self, name: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[BaseSegment, None]:
        yield NoSegment()

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def patch(self, modules: Sequence[str]) -> None:
        pass

    def patch_all(self) -> None:
        pass


def provider() -> BaseProvider | None:
    """What to pass to ``Tracer(provider=...)``: None (Powertools' X-Ray provider) when tracing is on."""
    return None if tracing_enabled() else NoTracing()
