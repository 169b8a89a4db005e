"""The inventory state machine's tasks, as plain functions of (clients, input) -> small JSON.

Results travel through S3, never through the state machine (Step Functions payloads are capped at
256 KB): the plan, each round's items, each shard's result and statistics are objects under the
run's root ``<output prefix>/<bucket>/<run id>/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, TypeVar

from ..errors import IncompleteInventoryError, InputError
from ..s3util import BUCKET_NAME
from .lister import Budget, ListOptions, list_shard
from .model import KeyRange, Plan, ShardResult
from .output import S3Store
from .planner import PlannerConfig, plan_from_hints, plan_shards
from .runner import finalize

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")
DEFAULT_MAX_CONCURRENCY = 1000
# A lister stops after this long and hands its remainder back, split: short enough that a range the
# planner under-estimated is split again within a minute, long enough to amortise a round.
DEFAULT_SHARD_SECONDS = 60
# Every range ends in a partial page: ranges of >= 50 pages keep that overhead under 2 % of LIST requests.
DEFAULT_MIN_SHARD_OBJECTS = 50_000
RESULT_READERS = 32
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class RunConfig:
    """The validated execution input (see schemas/inventory-input.schema.json)."""

    bucket: str
    prefix: str
    run_id: str
    results_bucket: str
    results_prefix: str
    max_concurrency: int
    target_shards: int
    shard_seconds: int
    min_shard_objects: int
    stats_depth: int
    shard_pages: int | None
    audit: bool

    @property
    def root(self) -> str:
        return f"{self.results_prefix.strip('/')}/{self.bucket}/{self.run_id}".lstrip("/")

    @property
    def latest_key(self) -> str:
        """Where the last successful run of this target records its root (for audits and hints)."""
        target = self.prefix.replace("/", "%2F") or "%ROOT%"
        return f"{self.results_prefix.strip('/')}/{self.bucket}/_latest/{target}.json".lstrip("/")

    def store(self, s3: Any) -> S3Store:
        return S3Store(s3, self.results_bucket, self.root)


def _int(event: dict[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    value = event.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"'{name}' must be a whole number from {lo} to {hi}, got {value!r}")
    return value


def validate_input(
    event: Any, *, run_id: str, results_bucket: str, results_prefix: str = "inventory"
) -> RunConfig:
    """Check an execution input and fill defaults; every message says what is wrong and how to fix it."""
    if not isinstance(event, dict):
        raise InputError(f"the input must be a JSON object, got {type(event).__name__}")
    known = {
        "min_shard_objects",
        "bucket",
        "prefix",
        "max_concurrency",
        "target_shards",
        "shard_seconds",
        "shard_pages",
        "stats_depth",
        "audit",
    }
    unknown = sorted(set(event) - known)
    if unknown:
        raise InputError(f"unknown input field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
    bucket = event.get("bucket")
    if not isinstance(bucket, str) or not BUCKET_NAME.match(bucket):
        raise InputError(f"'bucket' must be an S3 bucket name (e.g. \"my-data\"), got {bucket!r}")
    prefix = event.get("prefix", "")
    if not isinstance(prefix, str) or len(prefix.encode()) > 1024:
        raise InputError("'prefix' must be a string of at most 1,024 bytes")
    if not _NAME.match(run_id):
        raise InputError(f"run id {run_id!r} is not a valid name")
    max_conc = _int(event, "max_concurrency", DEFAULT_MAX_CONCURRENCY, 1, 10_000)
    audit = event.get("audit", False)
    if not isinstance(audit, bool):
        raise InputError("'audit' must be true or false")
    return RunConfig(
        bucket=bucket,
        prefix=prefix,
        run_id=run_id,
        results_bucket=results_bucket,
        results_prefix=results_prefix,
        max_concurrency=max_conc,
        target_shards=_int(event, "target_shards", max_conc, 1, 100_000),
        shard_seconds=_int(event, "shard_seconds", DEFAULT_SHARD_SECONDS, 5, 840),
        min_shard_objects=_int(event, "min_shard_objects", DEFAULT_MIN_SHARD_OBJECTS, 1, 10**9),
        stats_depth=_int(event, "stats_depth", 1, 1, 16),
        shard_pages=_int(event, "shard_pages", 1, 1, 10_000_000) if "shard_pages" in event else None,
        audit=audit,
    )


def config_from(d: dict[str, Any]) -> RunConfig:
    return RunConfig(**d)


def _previous(
    s3: Any, cfg: RunConfig
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None, S3Store | None]:
    """The previous run's summary, per-range counts and output, for the same target, if recorded."""
    from botocore.exceptions import ClientError

    try:
        latest = json.loads(s3.get_object(Bucket=cfg.results_bucket, Key=cfg.latest_key)["Body"].read())
        prev = S3Store(s3, cfg.results_bucket, latest["root"])
        return json.loads(prev.get_bytes("summary.json")), json.loads(prev.get_bytes("ranges.json")), prev
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None, None, None
        raise


def round_key(n: int) -> str:
    return f"rounds/{n:03d}.json"


def plan_task(s3: Any, cfg: RunConfig) -> dict[str, Any]:
    """Plan the ranges (from the previous inventory's counts when auditing) and write round 0's items."""
    store = cfg.store(s3)
    hints = _previous(s3, cfg)[1] if cfg.audit else None
    if hints:
        plan = plan_from_hints(cfg.bucket, cfg.prefix, hints, cfg.target_shards, cfg.min_shard_objects)
    else:
        planner = PlannerConfig(target_shards=cfg.target_shards, min_shard_objects=cfg.min_shard_objects)
        plan = plan_shards(s3, cfg.bucket, cfg.prefix, config=planner)
    store.put_bytes("plan.json", json.dumps(plan.to_dict()).encode())
    store.put_bytes(round_key(0), json.dumps([r.to_dict() for r in plan.ranges]).encode())
    return {
        "round": 0,
        "items_key": store.key_for(round_key(0)),
        "ranges": len(plan.ranges),
        "method": plan.method,
        "probe_requests": plan.probe_requests,
    }


def list_task(s3: Any, cfg: RunConfig, item: dict[str, Any], remaining_ms: int) -> dict[str, Any]:
    """List one range, stopping well before the Lambda times out; the full result goes to S3."""
    rng = KeyRange.from_dict(item)
    store = cfg.store(s3)
    # Leave time for the split probes, the last part upload and the result write.
    seconds = max(1.0, min(cfg.shard_seconds, remaining_ms / 1000 - 60))
    res = list_shard(
        s3,
        cfg.bucket,
        cfg.prefix,
        rng,
        store,
        budget=Budget(max_seconds=seconds, max_pages=cfg.shard_pages),
        options=ListOptions(stats_depth=cfg.stats_depth),
    )
    store.put_bytes(f"results/{rng.id}.json", json.dumps(res.to_dict()).encode())
    return {"id": rng.id, "done": res.done, "objects": res.objects, "subranges": len(res.subranges)}


def parallel_map(fn: Callable[[T], R], items: Sequence[T], workers: int = RESULT_READERS) -> list[R]:
    """fn over items with a thread pool (S3 GETs of small result objects are latency-bound).

    One name, so a simulator can run it in virtual time by replacing it.
    """
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="results") as pool:
        return list(pool.map(fn, items))


def _load_results(s3: Any, cfg: RunConfig, ids: list[str]) -> dict[str, ShardResult]:
    from botocore.exceptions import ClientError

    store = cfg.store(s3)

    def load(rid: str) -> ShardResult | None:
        try:
            return ShardResult.from_dict(json.loads(store.get_bytes(f"results/{rid}.json")))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    loaded = parallel_map(load, ids)
    out = {rid: res for rid, res in zip(ids, loaded, strict=True) if res is not None}
    missing = [rid for rid, res in zip(ids, loaded, strict=True) if res is None]
    if missing:
        raise IncompleteInventoryError(
            f"{len(missing)} range(s) have no result after the listing round: {', '.join(missing[:10])}"
        )
    return out


def continue_task(s3: Any, cfg: RunConfig, round_no: int, max_rounds: int = 50) -> dict[str, Any]:
    """Collect the sub-ranges of shards that stopped on their budget into the next round's items.

    Every item of the round must have a result: a missing one (a failed Map item, which some
    runtimes report as null) fails the execution here instead of producing a partial count.
    """
    store = cfg.store(s3)
    items = [KeyRange.from_dict(d) for d in json.loads(store.get_bytes(round_key(round_no)))]
    results = _load_results(s3, cfg, [r.id for r in items])
    nxt = [s for r in items for s in results[r.id].subranges]
    if nxt and round_no + 1 >= max_rounds:
        raise IncompleteInventoryError(f"still {len(nxt)} ranges to list after {max_rounds} rounds")
    if nxt:
        store.put_bytes(round_key(round_no + 1), json.dumps([r.to_dict() for r in nxt]).encode())
    return {
        "round": round_no + 1,
        "items_key": store.key_for(round_key(round_no + 1)),
        "ranges": len(nxt),
        "has_more": bool(nxt),
    }


def reduce_task(s3: Any, cfg: RunConfig, rounds: int, started: str) -> dict[str, Any]:
    """Check that every planned range is accounted for, then write manifest, summary and report."""
    store = cfg.store(s3)
    plan = Plan.from_dict(json.loads(store.get_bytes("plan.json")))
    ids = []
    for n in range(rounds):
        ids += [d["id"] for d in json.loads(store.get_bytes(round_key(n)))]
    results = list(_load_results(s3, cfg, ids).values())
    previous, _, previous_store = _previous(s3, cfg) if cfg.audit else (None, None, None)
    summary = finalize(
        store,
        bucket=cfg.bucket,
        prefix=cfg.prefix,
        plan=plan,
        results=results,
        started=datetime.fromisoformat(started.replace("Z", "+00:00")),
        destination_arn=f"arn:aws:s3:::{cfg.results_bucket}",
        manifest_key_prefix=f"{cfg.root}/",
        previous_summary=previous,
        map_fn=parallel_map,
        previous_store=previous_store,
    )
    s3.put_object(
        Bucket=cfg.results_bucket,
        Key=cfg.latest_key,
        Body=json.dumps({"root": cfg.root, "finished": summary["finished"]}).encode(),
    )
    small = {
        k: summary[k]
        for k in (
            "bucket",
            "prefix",
            "objects",
            "bytes",
            "list_requests",
            "list_cost_usd",
            "ranges_planned",
            "ranges_listed",
            "continuations",
            "seconds",
        )
    }
    small["summary"] = f"s3://{cfg.results_bucket}/{cfg.root}/summary.json"
    if "diff" in summary:
        small["diff"] = {"objects": summary["diff"]["objects"], "bytes": summary["diff"]["bytes"]}
        exact = summary["diff"].get("exact")
        if exact:
            small["diff"].update({k: exact[k] for k in ("added", "removed", "changed")})
    return small


def config_dict(cfg: RunConfig) -> dict[str, Any]:
    return asdict(cfg)
