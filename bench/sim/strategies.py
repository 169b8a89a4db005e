"""The listing strategies, side by side on the same simulated bucket.

  sequential        one paginator (aws s3 ls --recursive, s5cmd ls/du): one stream on one host
  dmap-reader       Step Functions Distributed Map's own s3:listObjectsV2 ItemReader: the service
                    pages sequentially, children process batches of 1,000 items
  seed-natural      the 2014 seed: 64 processes over the 1,296 prefixes [0-9a-z]{2}, 00,01,...,zz
  seed-interleaved  the same in "loop interchange" order 00,10,...,z0,01,...
  static-nohints    1,000 equal-width key ranges over the byte space, on Lambda, no splitting
  (hpcstage itself, work stealing, is measured by bench/sim/des.py; the plan-then-rounds design that was
  measured here is gone)

static-nohints also runs list_range (stopping after 840 s), so a range longer than the
15-minute Lambda limit resumes from its checkpoint in a further round instead of timing out.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError
from hpcstage.inventory.keys import ByteInterval, upper_bound
from hpcstage.inventory.lister import ListOptions, list_range, part_writer
from hpcstage.inventory.model import KeyRange, ShardResult
from hpcstage.inventory.stats import InventoryStats

from bench.keyspace import SEED_ALPHABET, Keyspace
from bench.sim.engine import Invocation, LambdaFunction, cost_breakdown, run_host, run_map
from bench.sim.fastpath import (
    CountingPartWriter,
    NullStore,
    PageStats,
    no_parquet_diff,
)
from bench.sim.params import SimParams
from bench.sim.s3 import LambdaTimeout, LazyPage, S3World, SimS3Client

STRATEGIES = (
    "sequential",
    "dmap-reader",
    "seed-natural",
    "seed-interleaved",
    "static-nohints",
)


@dataclass
class RunResult:
    strategy: str
    shape: str
    n: int
    makespan_s: float
    objects: int
    bytes: int
    missed: int
    list_requests: int
    probe_requests: int
    throttled: int
    workers: int
    invocations: int
    rounds: int
    failures: int
    cost: dict[str, Any]
    ideal_s: float
    coverage_ok: bool
    real_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    timeline: list[tuple[int, int, float, float, bool]] = field(
        default_factory=list
    )  # slot, round, start, end, done
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def efficiency(self) -> float:
        return self.ideal_s / self.makespan_s if self.makespan_s > 0 else 0.0

    @property
    def pages_min(self) -> int:
        return math.ceil(self.n / 1000)

    @property
    def list_overhead(self) -> float:
        return self.list_requests / max(1, self.pages_min) - 1.0

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "timeline"}
        d["efficiency"] = self.efficiency
        d["list_overhead"] = self.list_overhead
        return d


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def paginate(client: SimS3Client, bucket: str, prefix: str = "") -> tuple[int, int]:
    """A plain ListObjectsV2 paginator (what aws s3 ls / s5cmd do): (objects, bytes)."""
    objects = total = 0
    token: str | None = None
    while True:
        params: dict[str, Any] = {"Bucket": bucket, "MaxKeys": 1000}
        if prefix:
            params["Prefix"] = prefix
        if token:
            params["ContinuationToken"] = token
        resp = client.list_objects_v2(**params)
        contents = resp.get("Contents") or []
        objects += len(contents)
        total += contents.nbytes if isinstance(contents, LazyPage) else sum(o["Size"] for o in contents)
        if not resp.get("IsTruncated"):
            return objects, total
        token = resp["NextContinuationToken"]


def _ideal(world: S3World, workers: int, per_page_s: float, startup_s: float) -> float:
    pages = math.ceil(world.ks.n / 1000)
    rate_cap = pages / (world.partitions * world.p.s3.partition_rate_limit)
    return startup_s + max(pages * per_page_s / max(1, workers), rate_cap)


def _check_tiling(ks: Keyspace, pieces: list[tuple[str | None, str | None, int, int]]) -> bool:
    """Listed pieces (start_after, end, objects, bytes) tile the key space exactly, with exact counts."""
    spans = []
    for sa, end, objects, nbytes in pieces:
        lo = ks.count_le(sa) if sa is not None else 0
        hi = ks.count_le(end) if end is not None else ks.n
        if hi - lo != objects or ks.bytes_between(lo, hi) != nbytes:
            return False
        spans.append((lo, hi))
    spans.sort()
    cur = 0
    for lo, hi in spans:
        if lo != cur:
            return False
        cur = hi
    return cur == ks.n


# ---------------------------------------------------------------------------------------------
# host strategies
# ---------------------------------------------------------------------------------------------


def run_sequential(world: S3World) -> RunResult:
    t_real = time.perf_counter()
    client = world.client(0.0, name="seq")
    objects, nbytes = paginate(client, world.bucket)
    p = world.p
    return RunResult(
        strategy="sequential",
        shape=world.ks.name,
        n=world.ks.n,
        makespan_s=client.now(),
        objects=objects,
        bytes=nbytes,
        missed=world.ks.n - objects,
        list_requests=client.requests,
        probe_requests=0,
        throttled=world.throttled,
        workers=1,
        invocations=1,
        rounds=1,
        failures=0,
        cost={
            "list": client.requests * p.s3.list_price_per_1000 / 1000,
            "lambda": 0.0,
            "sfn": 0.0,
            "total": client.requests * p.s3.list_price_per_1000 / 1000,
        },
        ideal_s=_ideal(world, 1, world.mean_page_s(), 0.0),
        coverage_ok=objects == world.ks.n,
        real_s=time.perf_counter() - t_real,
    )


def dmap_reader_from(seq: RunResult, world: S3World) -> RunResult:
    """Distributed Map's own reader: the service lists sequentially; batches of 1,000 items go to children."""
    p = world.p
    batches = math.ceil(seq.objects / p.sfn.reader_batch_items)
    child_s = p.lam.warm_invoke_s + p.lam.cpu_per_page_s
    makespan = p.sfn.map_start_s + seq.makespan_s + p.lam.cold_start_s + child_s + p.sfn.map_finish_s
    fn = LambdaFunction(p.lam)
    fn.invocations = batches
    fn.billed_s = batches * child_s + p.lam.cold_start_s * min(batches, p.lam.concurrency)
    transitions = batches * p.sfn.transitions_per_child + p.sfn.transitions_per_round
    cost = cost_breakdown(seq.list_requests, [fn], transitions, p.lam, p.sfn, p.s3.list_price_per_1000)
    ideal = p.sfn.map_start_s + p.lam.cold_start_s + seq.ideal_s + p.sfn.map_finish_s
    return RunResult(
        strategy="dmap-reader",
        shape=seq.shape,
        n=seq.n,
        makespan_s=makespan,
        objects=seq.objects,
        bytes=seq.bytes,
        missed=seq.missed,
        list_requests=seq.list_requests,
        probe_requests=0,
        throttled=seq.throttled,
        workers=1,
        invocations=batches,
        rounds=1,
        failures=0,
        cost=cost,
        ideal_s=ideal,
        coverage_ok=seq.coverage_ok,
        real_s=0.0,
        notes=[
            f"derived from the sequential run: {batches} child executions of {p.sfn.reader_batch_items} items"
        ],
    )


def seed_prefixes(interleaved: bool) -> list[str]:
    a = SEED_ALPHABET
    if interleaved:
        return [x + y for y in a for x in a]  # 00,10,20,...,z0,01,11,...
    return [x + y for x in a for y in a]  # 00,01,...,0z,10,...


def run_seed(world: S3World, interleaved: bool, streams: int = 64) -> RunResult:
    t_real = time.perf_counter()
    before = world.requests

    def handler(prefix: str, t: float, slot: int) -> tuple[float, tuple[int, int], None]:
        client = world.client(t, name=f"seed-{prefix}")
        res = paginate(client, world.bucket, prefix)
        return client.now(), res, None

    run = run_host(seed_prefixes(interleaved), streams, handler)
    objects = sum(inv.result[0] for inv in run.invocations if inv.result)
    nbytes = sum(inv.result[1] for inv in run.invocations if inv.result)
    requests = world.requests - before
    p = world.p
    return RunResult(
        strategy="seed-interleaved" if interleaved else "seed-natural",
        shape=world.ks.name,
        n=world.ks.n,
        makespan_s=run.end,
        objects=objects,
        bytes=nbytes,
        missed=world.ks.n - objects,
        list_requests=requests,
        probe_requests=0,
        throttled=world.throttled,
        workers=streams,
        invocations=len(run.invocations),
        rounds=1,
        failures=0,
        cost={
            "list": requests * p.s3.list_price_per_1000 / 1000,
            "lambda": 0.0,
            "sfn": 0.0,
            "total": requests * p.s3.list_price_per_1000 / 1000,
        },
        ideal_s=_ideal(world, streams, world.mean_page_s(), 0.0),
        coverage_ok=objects == world.ks.n,
        real_s=time.perf_counter() - t_real,
        timeline=[(inv.slot, 0, inv.start, inv.end, True) for inv in run.invocations],
    )


# ---------------------------------------------------------------------------------------------
# Lambda strategies (static ranges, hpcstage): rounds of Distributed Map over list_shard
# ---------------------------------------------------------------------------------------------


def _rounds(
    world: S3World,
    ranges: list[KeyRange],
    t0: float,
    budget_for: Callable[[KeyRange], float],
    store: NullStore,
    max_rounds: int = 100_000,
) -> tuple[float, list[Invocation[KeyRange, ShardResult]], LambdaFunction, int, int]:
    """Map rounds until no sub-ranges are left: (end time, invocations, function, rounds, failures)."""
    p = world.p
    fn = LambdaFunction(p.lam)
    allinv: list[Invocation[KeyRange, ShardResult]] = []
    failures = 0
    t = t0
    items = ranges
    rounds = 0
    options = ListOptions()

    def handler(rng: KeyRange, start: float, slot: int) -> tuple[float, ShardResult | None, str | None]:
        client = world.client(
            start, name=rng.id, deadline=start + p.lam.timeout_s, cpu_per_page_s=p.lam.cpu_per_page_s
        )
        stop_at = client.now() + budget_for(rng)
        writer = (
            CountingPartWriter(store, world.bucket, rng.id)
            if world.fast
            else part_writer(store, world.bucket, options)(rng.id)
        )
        try:
            res = list_range(
                client,
                world.bucket,
                "",
                rng,
                writer=writer,
                stats=PageStats() if world.fast else InventoryStats(),
                new_id=lambda: f"{rng.id}.c",
                should_stop=lambda: client.now() >= stop_at,
                options=options,
            )
        except (LambdaTimeout, ClientError) as err:
            return client.now(), None, f"{type(err).__name__}: {err}"
        return client.now(), res, None

    while items:
        if rounds >= max_rounds:
            raise RuntimeError(f"more than {max_rounds} rounds")
        run = run_map(items, t, handler, fn, p.sfn, p.lam, round_no=rounds)
        rounds += 1
        allinv += run.invocations
        t = run.end
        nxt: list[KeyRange] = []
        for inv in run.invocations:
            if inv.error is not None or inv.result is None:
                failures += 1
                nxt.append(inv.item)  # the state machine's Retry: the same range again
            else:
                nxt.extend(inv.result.subranges)
        items = nxt
    return t, allinv, fn, rounds, failures


def _lambda_result(
    world: S3World,
    strategy: str,
    t_end: float,
    invs: list[Invocation[KeyRange, ShardResult]],
    fns: list[LambdaFunction],
    rounds: int,
    failures: int,
    probe_requests: int,
    t_real: float,
    phases: dict[str, float],
    requests_before: int,
) -> RunResult:
    p = world.p
    ok = [inv for inv in invs if inv.result is not None]
    pieces: list[tuple[str | None, str | None, int, int]] = []
    for inv in ok:
        r = inv.result
        assert r is not None
        end = r.range.end if r.done else r.checkpoint
        pieces.append((r.range.start_after, end, r.objects, r.bytes))
    objects = sum(x[2] for x in pieces)
    nbytes = sum(x[3] for x in pieces)
    requests = world.requests - requests_before
    transitions = len(invs) * p.sfn.transitions_per_child + rounds * p.sfn.transitions_per_round + 4
    cost = cost_breakdown(requests, fns, transitions, p.lam, p.sfn, p.s3.list_price_per_1000)
    workers = min(p.sfn.max_concurrency, p.lam.concurrency)
    ideal = _ideal(world, workers, world.mean_page_s() + p.lam.cpu_per_page_s, p.lam.cold_start_s)
    return RunResult(
        strategy=strategy,
        shape=world.ks.name,
        n=world.ks.n,
        makespan_s=t_end,
        objects=objects,
        bytes=nbytes,
        missed=world.ks.n - objects,
        list_requests=requests,
        probe_requests=probe_requests,
        throttled=world.throttled,
        workers=workers,
        invocations=len(invs),
        rounds=rounds,
        failures=failures,
        cost=cost,
        ideal_s=ideal,
        coverage_ok=_check_tiling(world.ks, pieces),
        real_s=time.perf_counter() - t_real,
        phases=phases,
        timeline=[
            (inv.slot, inv.round, inv.start, inv.end, bool(inv.result and inv.result.done)) for inv in invs
        ],
    )


def _reduce(world: S3World, t: float, results: int, fns: list[LambdaFunction]) -> float:
    p = world.p
    fn = LambdaFunction(p.lam)
    start, _ = fn.acquire(t)
    end = start + p.sfn.reduce_fixed_s + p.sfn.reduce_per_result_s * results
    fn.release(start, end)
    fns.append(fn)
    return end


def static_nohint_ranges(parts: int) -> list[KeyRange]:
    """``parts`` ranges of equal width over the whole UTF-8 byte space (no knowledge of the keys)."""
    frame = ByteInterval(b"", upper_bound(""))
    cuts: list[str] = []
    for i in range(1, parts):
        k = frame.at(i / parts)
        if k is not None and (not cuts or k > cuts[-1]):
            cuts.append(k)
    bounds: list[str | None] = [None, *cuts, None]
    return [
        KeyRange(id=f"s{i:05d}", start_after=bounds[i], end=bounds[i + 1]) for i in range(len(bounds) - 1)
    ]


def run_static_nohints(world: S3World) -> RunResult:
    """1,000 equal-width ranges listed by list_shard on Lambda; no probing, no splitting."""
    t_real = time.perf_counter()
    p = world.p
    before = world.requests
    store = NullStore()
    ranges = static_nohint_ranges(min(p.sfn.max_concurrency, p.lam.concurrency))
    t_end, invs, fn, rounds, failures = _rounds(world, ranges, 0.0, lambda r: p.hpc.static_budget_s, store)
    fns = [fn]
    t_end = _reduce(world, t_end, len(invs), fns)
    return _lambda_result(world, "static-nohints", t_end, invs, fns, rounds, failures, 0, t_real, {}, before)


RESULTS_BUCKET = "bench-results"
TASK_RETRY = (1.0, 2.0, 4.0)  # ListShard's Retry on States.TaskFailed: 3 attempts, 1 s x 2**n, full jitter


def run_strategy(name: str, world: S3World, seq: RunResult | None = None) -> RunResult:
    if name == "sequential":
        return run_sequential(world)
    if name == "dmap-reader":
        if seq is None:
            seq = run_sequential(world)
        return dmap_reader_from(seq, world)
    if name == "seed-natural":
        return run_seed(world, interleaved=False)
    if name == "seed-interleaved":
        return run_seed(world, interleaved=True)
    if name == "static-nohints":
        return run_static_nohints(world)
    raise ValueError(f"unknown strategy {name!r}")


def simulate(
    ks: Keyspace, strategy: str, params: SimParams, *, fast: bool = True, seq: RunResult | None = None
) -> RunResult:
    """One strategy on a fresh simulated bucket (fresh rate limiter and tallies)."""
    world = S3World(ks, params, fast=fast)
    with contextlib.ExitStack() as stack:
        stack.enter_context(no_parquet_diff())
        return run_strategy(strategy, world, seq)
