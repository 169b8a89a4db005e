"""The discrete-event part: Lambda execution environments, Distributed Map runs, and hosts.

Scheduling is list scheduling in virtual time: a Map run hands its items, in order, to the earliest
free child slot (at most MaxConcurrency, children released at the child start rate); each child gets a
Lambda execution environment (warm if one is idle, else a cold one from the scaling token bucket) and
runs the *real* handler code to completion against a SimS3Client whose clock starts at the child's
start time. Items therefore start in non-decreasing virtual time, which is what lets one thread run
the whole simulation: a child's requests are admitted by the partition rate limiter after those of
every child that started earlier (an approximation: within a 1-second window, earlier-started workers
get precedence; the per-window cap itself is exact).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bench.sim.params import LambdaParams, StepFunctionsParams

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Invocation(Generic[T, R]):
    item: T
    slot: int
    round: int
    queued: float  # when the child could start (slot free and released)
    start: float  # handler start (after cold start or invoke overhead)
    end: float
    cold: bool
    result: R | None = None
    error: str | None = None


class LambdaFunction:
    """Execution environments of one function: warm reuse, cold starts, the scaling-rate token bucket."""

    def __init__(self, p: LambdaParams, name: str = "list") -> None:
        self.p = p
        self.name = name
        self.memory_gb = dict(p.memory_gb_by_function).get(name, p.memory_gb)
        self._idle: list[float] = []
        self._tokens = float(p.scale_burst)
        self._t_tokens = 0.0
        self.cold_starts = 0
        self.invocations = 0
        self.billed_s = 0.0

    def acquire(self, t: float) -> tuple[float, bool]:
        """Start an invocation requested at t: (handler start time, cold?)."""
        self.invocations += 1
        if self._idle and self._idle[0] <= t:
            heapq.heappop(self._idle)
            self.billed_s += self.p.warm_invoke_s
            return t + self.p.warm_invoke_s, False
        self._tokens = min(
            float(self.p.scale_burst), self._tokens + (t - self._t_tokens) * self.p.scale_per_s
        )
        self._t_tokens = t
        if self._tokens < 1.0:
            wait = (1.0 - self._tokens) / self.p.scale_per_s
            t += wait
            self._tokens = 1.0
            self._t_tokens = t
        self._tokens -= 1.0
        self.cold_starts += 1
        self.billed_s += self.p.cold_start_s
        return t + self.p.cold_start_s, True

    def release(self, start: float, end: float) -> None:
        self.billed_s += end - start
        heapq.heappush(self._idle, end)


@dataclass
class MapRun(Generic[T, R]):
    start: float
    end: float
    invocations: list[Invocation[T, R]] = field(default_factory=list)


def run_map(
    items: Sequence[T],
    t0: float,
    handler: Callable[[T, float, int], tuple[float, R | None, str | None]],
    fn: LambdaFunction,
    sfn: StepFunctionsParams,
    lam: LambdaParams,
    round_no: int = 0,
) -> MapRun[T, R]:
    """One Distributed Map run over ``items``: handler(item, start, slot) -> (end, result, error)."""
    run: MapRun[T, R] = MapRun(start=t0, end=t0)
    if not items:
        run.end = t0 + sfn.map_start_s + sfn.map_finish_s
        return run
    conc = max(1, min(sfn.max_concurrency, lam.concurrency, len(items)))
    t_open = t0 + sfn.map_start_s
    slots = [(t_open, i) for i in range(conc)]
    heapq.heapify(slots)
    last = t_open
    for k, item in enumerate(items):
        free, slot = heapq.heappop(slots)
        queued = max(free, t_open + k / sfn.child_start_rate)
        start, cold = fn.acquire(queued)
        end, result, error = handler(item, start, slot)
        fn.release(start, end)
        heapq.heappush(slots, (end, slot))
        last = max(last, end)
        run.invocations.append(Invocation(item, slot, round_no, queued, start, end, cold, result, error))
    run.end = last + sfn.map_finish_s
    return run


def run_host(
    items: Sequence[T],
    streams: int,
    handler: Callable[[T, float, int], tuple[float, R | None, str | None]],
    t0: float = 0.0,
) -> MapRun[T, R]:
    """``streams`` workers on one machine pulling ``items`` from a queue in order (no Lambda, no Map)."""
    run: MapRun[T, R] = MapRun(start=t0, end=t0)
    slots = [(t0, i) for i in range(max(1, min(streams, len(items))))]
    heapq.heapify(slots)
    for item in items:
        free, slot = heapq.heappop(slots)
        end, result, error = handler(item, free, slot)
        heapq.heappush(slots, (end, slot))
        run.end = max(run.end, end)
        run.invocations.append(Invocation(item, slot, 0, free, free, end, False, result, error))
    return run


def cost_breakdown(
    list_requests: int,
    lambda_fns: Sequence[LambdaFunction],
    transitions: int,
    lam: LambdaParams,
    sfn: StepFunctionsParams,
    list_price_per_1000: float,
) -> dict[str, Any]:
    list_cost = list_requests * list_price_per_1000 / 1000
    gb_s = sum(f.billed_s * f.memory_gb for f in lambda_fns)
    invocations = sum(f.invocations for f in lambda_fns)
    lambda_cost = gb_s * lam.price_gb_s + invocations * lam.price_per_request
    sfn_cost = transitions * sfn.price_per_transition
    return {
        "list": list_cost,
        "lambda": lambda_cost,
        "sfn": sfn_cost,
        "total": list_cost + lambda_cost + sfn_cost,
        "lambda_gb_s": gb_s,
        "invocations": invocations,
        "transitions": transitions,
    }
