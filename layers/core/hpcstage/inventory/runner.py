"""One inventory, end to end: plan -> list (with continuation) -> reduce.

``finalize`` is the reduce step shared by the local runner and the Lambda reducer; ``run_inventory``
is the local orchestrator: a thread pool working through a queue of ranges, where shards that stop
on their budget put their sub-ranges back on the queue -- the same protocol the state machine's
continuation loop follows.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .diff import diff_inventories
from .lister import Budget, ListOptions, list_shard
from .model import KeyRange, Plan, ShardResult
from .output import OutputStore, write_manifest
from .planner import PlannerConfig, plan_from_hints, plan_shards
from .report import build_summary, check_complete, diff_summaries, load_stats, ranges_document, render_report


@dataclass
class Progress:
    """Counters for a progress display; updated from worker threads."""

    objects: int = 0
    bytes: int = 0
    ranges_done: int = 0
    ranges_total: int = 0
    list_requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def page(self, objects: int, nbytes: int) -> None:
        with self.lock:
            self.objects += objects
            self.bytes += nbytes
            self.list_requests += 1


@dataclass
class InventoryOptions:
    workers: int = 16
    shard_seconds: float | None = 60.0
    shard_pages: int | None = None
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    listing: ListOptions = field(default_factory=ListOptions)
    hints: Sequence[dict[str, Any]] | None = None
    previous_summary: dict[str, Any] | None = None
    destination_arn: str = ""
    manifest_key_prefix: str = ""
    previous_store: OutputStore | None = None  # the previous run's output: object-level diff


def make_plan(s3: Any, bucket: str, prefix: str, opts: InventoryOptions) -> Plan:
    if opts.hints:
        return plan_from_hints(
            bucket, prefix, opts.hints, opts.planner.target_shards, opts.planner.min_shard_objects
        )
    return plan_shards(s3, bucket, prefix, config=opts.planner)


def run_inventory(
    s3: Any,
    bucket: str,
    prefix: str,
    store: OutputStore,
    opts: InventoryOptions | None = None,
    *,
    progress: Progress | None = None,
    on_plan: Callable[[Plan], None] | None = None,
) -> dict[str, Any]:
    opts = opts or InventoryOptions()
    progress = progress or Progress()
    started = datetime.now(UTC)
    plan = make_plan(s3, bucket, prefix, opts)
    store.put_bytes("plan.json", json.dumps(plan.to_dict()).encode())
    if on_plan is not None:
        on_plan(plan)
    with progress.lock:
        progress.ranges_total = len(plan.ranges)
        progress.list_requests += plan.probe_requests

    results: list[ShardResult] = []
    queue: deque[KeyRange] = deque(plan.ranges)

    def work(rng: KeyRange) -> ShardResult:
        return list_shard(
            s3,
            bucket,
            prefix,
            rng,
            store,
            budget=Budget(max_seconds=opts.shard_seconds, max_pages=opts.shard_pages),
            options=opts.listing,
            now=started,
            on_page=progress.page,
        )

    with ThreadPoolExecutor(max_workers=max(1, opts.workers), thread_name_prefix="lister") as pool:
        running: set[Future[ShardResult]] = set()
        while queue or running:
            while queue and len(running) < opts.workers:
                running.add(pool.submit(work, queue.popleft()))
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                res = fut.result()  # a shard that failed after botocore's retries fails the run
                results.append(res)
                with progress.lock:
                    progress.ranges_done += 1
                    progress.ranges_total += len(res.subranges)
                queue.extend(res.subranges)
    return finalize(
        store,
        bucket=bucket,
        prefix=prefix,
        plan=plan,
        results=results,
        started=started,
        destination_arn=opts.destination_arn or store.uri(),
        manifest_key_prefix=opts.manifest_key_prefix,
        previous_summary=opts.previous_summary,
        previous_store=opts.previous_store,
    )


def finalize(
    store: OutputStore,
    *,
    bucket: str,
    prefix: str,
    plan: Plan,
    results: Sequence[ShardResult],
    started: datetime,
    destination_arn: str,
    manifest_key_prefix: str = "",
    previous_summary: dict[str, Any] | None = None,
    map_fn: Any = None,
    previous_store: OutputStore | None = None,
) -> dict[str, Any]:
    """Check completeness, merge statistics, write manifest, summary.json, report.txt and ranges.json."""
    check_complete(plan.ranges, results)
    stats = load_stats(store, results, map_fn)
    parts = [p for r in results for p in r.parts]
    write_manifest(
        store,
        bucket,
        parts,
        destination_arn=destination_arn,
        key_prefix=manifest_key_prefix,
        created_ms=int(started.timestamp() * 1000),
    )
    finished = datetime.now(UTC)
    summary = build_summary(
        bucket=bucket,
        prefix=prefix,
        stats=stats,
        results=results,
        probe_requests=plan.probe_requests,
        started=started,
        finished=finished,
        output_uri=store.uri(),
        planned_ranges=len(plan.ranges),
    )
    summary["plan_method"] = plan.method
    if previous_summary is not None:
        summary["diff"] = diff_summaries(previous_summary, summary)
        if previous_store is not None:
            # object-level: added, removed and changed, by streaming both inventories in key order
            previous_parts = [
                f["key"] for f in json.loads(previous_store.get_bytes("manifest.json"))["files"]
            ]
            summary["diff"]["exact"] = diff_inventories(
                previous_parts,
                [p.key for p in parts],
                prefix=prefix,
                depth=stats.depth,
                open_previous=previous_store.open,
                open_current=store.open,
            )
    store.put_bytes("summary.json", json.dumps(summary, indent=2).encode())
    store.put_bytes("report.txt", render_report(summary).encode())
    store.put_bytes("ranges.json", json.dumps(ranges_document(results)).encode())
    return summary
