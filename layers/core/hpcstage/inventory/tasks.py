"""The inventory state machine's tasks, as plain functions of (clients, input) -> small JSON.

Results travel through S3, never through the state machine (Step Functions payloads are capped at
256 KB): the plan, each round's items, each shard's result and statistics are objects under the
run's root ``<output prefix>/<bucket>/<run id>/``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..errors import IncompleteInventoryError, InputError
from ..inputs import validate
from .directory import DIRECTORY_SUFFIX
from .lister import ListOptions, part_writer
from .model import KeyRange, ShardResult
from .output import S3Store, hive_ddl, hive_root, latest_key, latest_run, record_latest_run, run_root
from .report import execution_summary
from .runner import Progress, finalize, run_streams, seeds_from_hints
from .stats import InventoryStats

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")
DEFAULT_MAX_CONCURRENCY = 1000
# A lister stops after this long and hands its remainder back: the streams of the next round pick it up.
DEFAULT_SHARD_SECONDS = 60
# Streams per lister invocation: listing waits on S3 (~150 ms a page) far more than it computes (~8 ms a
# page at 1 GB), so one Lambda keeps several ListObjectsV2 streams busy.
DEFAULT_STREAMS = 8
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
    streams: int
    shard_seconds: int
    stats_depth: int
    shard_pages: int | None
    audit: bool

    @property
    def root(self) -> str:
        return run_root(self.results_prefix, self.bucket, self.run_id)

    @property
    def latest_key(self) -> str:
        """Where the last successful run of this target records its root (for audits and hints)."""
        return latest_key(self.results_prefix, self.bucket, self.prefix)

    def store(self, s3: Any) -> S3Store:
        return S3Store(s3, self.results_bucket, self.root)


def validate_input(
    event: Any, *, run_id: str, results_bucket: str, results_prefix: str = "inventory"
) -> RunConfig:
    """Check an execution input against schemas/inventory-input.schema.json and fill its defaults."""
    cfg = validate(event, "inventory-input")
    # JSON Schema counts characters; S3 limits a key (so a prefix) to 1,024 bytes of UTF-8
    if len(cfg["prefix"].encode()) > 1024:
        raise InputError("'prefix' must be at most 1,024 bytes of UTF-8 (S3's limit for a key)")
    if not _NAME.match(run_id):
        raise InputError(f"run id {run_id!r} is not a valid name")
    if cfg["bucket"].endswith(DIRECTORY_SUFFIX):
        raise InputError(
            f"{cfg['bucket']} is an S3 Express One Zone directory bucket: its listings are unordered and take "
            f"no StartAfter, so key ranges cannot split it; inventory it with "
            f"`hpcstage inventory s3://{cfg['bucket']}/` (a parallel '/' walk)"
        )
    return RunConfig(
        bucket=cfg["bucket"],
        prefix=cfg["prefix"],
        run_id=run_id,
        results_bucket=results_bucket,
        results_prefix=results_prefix,
        max_concurrency=cfg["max_concurrency"],
        streams=cfg["streams"],
        shard_seconds=cfg["shard_seconds"],
        stats_depth=cfg["stats_depth"],
        shard_pages=cfg.get("shard_pages"),
        audit=cfg["audit"],
    )


def config_from(d: dict[str, Any]) -> RunConfig:
    return RunConfig(**d)


def _previous(
    s3: Any, cfg: RunConfig
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None, S3Store | None]:
    """The previous run's summary, per-range counts and output, for the same target, if recorded."""
    prev = latest_run(s3, cfg.results_bucket, cfg.latest_key)
    if prev is None:
        return None, None, None
    return json.loads(prev.get_bytes("summary.json")), json.loads(prev.get_bytes("ranges.json")), prev


def round_key(n: int) -> str:
    return f"rounds/{n:03d}.json"


def plan_task(s3: Any, cfg: RunConfig) -> dict[str, Any]:
    """Round 0's items: one range over the whole target, or a previous run's ranges as seeds (audits).

    Nothing is probed: the streams of each lister split their ranges among themselves while they list.
    """
    store = cfg.store(s3)
    hints = _previous(s3, cfg)[1] if cfg.audit else None
    seeds = seeds_from_hints(hints, cfg.max_concurrency) if hints else [KeyRange(id="r0")]
    store.put_bytes(round_key(0), json.dumps([r.to_dict() for r in seeds]).encode())
    store.put_bytes("seeds.json", json.dumps([r.to_dict() for r in seeds]).encode())
    return {
        "round": 0,
        "items_key": store.key_for(round_key(0)),
        "ranges": len(seeds),
        "method": "hints" if hints else "root",
    }


def list_task(
    s3: Any,
    cfg: RunConfig,
    item: dict[str, Any],
    remaining_ms: int,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """List one range with ``cfg.streams`` streams until done or the budget; the result goes to S3.

    The streams stop a minute before the Lambda would time out (time for the last parts and the result).
    What they have not listed comes back as the item's remainder for the next round.
    """
    rng = KeyRange.from_dict(item)
    store = cfg.store(s3)
    seconds = max(1.0, min(cfg.shard_seconds, remaining_ms / 1000 - 60))
    deadline = clock() + seconds
    progress = Progress()

    def should_stop() -> bool:  # the pages budget (tests, tuning) counts pages of all streams
        return clock() >= deadline or (
            cfg.shard_pages is not None and progress.list_requests >= cfg.shard_pages
        )

    listing = ListOptions(stats_depth=cfg.stats_depth)
    out = run_streams(
        s3,
        cfg.bucket,
        cfg.prefix,
        [rng],
        workers=cfg.streams,
        make_writer=part_writer(store, cfg.bucket, listing),
        options=listing,
        started=datetime.now(UTC),
        should_stop=should_stop,
        progress=progress,
    )
    stats_key = f"stats/{rng.id}.json"
    store.put_bytes(stats_key, json.dumps(out.stats.to_dict()).encode())
    doc = {
        "results": [r.to_dict() for r in out.results],
        "remainder": [r.to_dict() for r in out.remainder],
        "stats_key": stats_key,
    }
    store.put_bytes(f"results/{rng.id}.json", json.dumps(doc).encode())
    return {
        "id": rng.id,
        "done": not out.remainder,
        "objects": sum(r.objects for r in out.results),
        "subranges": len(out.remainder),
    }


def parallel_map(fn: Callable[[T], R], items: Sequence[T], workers: int = RESULT_READERS) -> list[R]:
    """fn over items with a thread pool (S3 GETs of small result objects are latency-bound).

    One name, so a simulator can run it in virtual time by replacing it.
    """
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="results") as pool:
        return list(pool.map(fn, items))


def _load_results(s3: Any, cfg: RunConfig, ids: list[str]) -> dict[str, dict[str, Any]]:
    from botocore.exceptions import ClientError

    store = cfg.store(s3)

    def load(rid: str) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = json.loads(store.get_bytes(f"results/{rid}.json"))
            return doc
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
    nxt = [KeyRange.from_dict(d) for r in items for d in results[r.id]["remainder"]]
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
    """Check that the listed pieces tile the key space, then write manifest, summary and report."""
    store = cfg.store(s3)
    seeds = [KeyRange.from_dict(d) for d in json.loads(store.get_bytes("seeds.json"))]
    ids = []
    for n in range(rounds):
        ids += [d["id"] for d in json.loads(store.get_bytes(round_key(n)))]
    docs = list(_load_results(s3, cfg, ids).values())
    results = [ShardResult.from_dict(r) for d in docs for r in d["results"]]
    stats = InventoryStats(prefix=cfg.prefix, depth=cfg.stats_depth)
    for st in parallel_map(
        lambda d: InventoryStats.from_dict(json.loads(store.get_bytes(d["stats_key"]))), docs
    ):
        stats.merge(st)
    previous, _, previous_store = _previous(s3, cfg) if cfg.audit else (None, None, None)
    summary = finalize(
        store,
        bucket=cfg.bucket,
        prefix=cfg.prefix,
        seeds=seeds,
        results=results,
        stats=stats,
        started=datetime.fromisoformat(started.replace("Z", "+00:00")),
        destination_arn=f"arn:aws:s3:::{cfg.results_bucket}",
        manifest_key_prefix=f"{cfg.root}/",
        previous_summary=previous,
        previous_store=previous_store,
        hive=(hive := S3Store(s3, cfg.results_bucket, hive_root(cfg.results_prefix, cfg.bucket, cfg.prefix))),
    )
    hive.put_bytes("athena.sql", hive_ddl(hive.uri()).encode())
    record_latest_run(s3, cfg.results_bucket, cfg.latest_key, cfg.root, summary["finished"])
    small = execution_summary(summary, f"s3://{cfg.results_bucket}/{cfg.root}/summary.json")
    small.update(ranges_planned=summary["ranges_planned"], continuations=summary["continuations"])
    return small


def config_dict(cfg: RunConfig) -> dict[str, Any]:
    return asdict(cfg)
