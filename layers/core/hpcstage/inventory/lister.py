"""list_shard: list one key range, streaming rows into Parquet, within a time/page budget.

A shard that runs out of budget stops cleanly after a whole page: everything up to its
checkpoint (the last key written) is in its parts and statistics, and the unlisted remainder
(checkpoint, end] comes back split into sub-ranges, ready for the orchestrator to fan out. The
union of a stopped shard's rows and its sub-ranges' rows is exactly the uninterrupted listing.
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..s3util import LIST_MAX_KEYS, RequestCounter, head, list_page, page_objects
from .model import KeyRange, ShardResult
from .output import OutputStore, PartWriter
from .planner import split_range
from .stats import InventoryStats


@dataclass
class Budget:
    """When a lister must stop: after ``max_seconds`` of wall time or ``max_pages`` pages."""

    max_seconds: float | None = None
    max_pages: int | None = None
    clock: Callable[[], float] = field(default=time.monotonic)

    def __post_init__(self) -> None:
        self._start = self.clock()

    def exhausted(self, pages: int) -> bool:
        if self.max_pages is not None and pages >= self.max_pages:
            return True
        return self.max_seconds is not None and self.clock() - self._start >= self.max_seconds


@dataclass
class ListOptions:
    split_parts: int = 8  # a stopped range fans out 8 ways: large ranges spread within a few rounds
    stats_depth: int = 1
    page_size: int = LIST_MAX_KEYS
    row_group_rows: int = 50_000
    part_rows: int = 1_000_000
    tmpdir: str | None = None


def list_shard(
    s3: Any,
    bucket: str,
    prefix: str,
    rng: KeyRange,
    store: OutputStore,
    *,
    budget: Budget | None = None,
    options: ListOptions | None = None,
    now: datetime | None = None,
    on_page: Callable[[int, int], None] | None = None,
) -> ShardResult:
    """List keys in (rng.start_after, rng.end] under ``prefix`` into ``store``.

    ``on_page(objects, bytes)`` is called after each page (progress display).
    """
    opts = options or ListOptions()
    budget = budget or Budget()
    counter = RequestCounter()
    writer = PartWriter(
        store,
        bucket,
        rng.id,
        row_group_rows=opts.row_group_rows,
        part_rows=opts.part_rows,
        tmpdir=opts.tmpdir,
    )
    stats = InventoryStats(prefix=prefix, depth=opts.stats_depth, now=now)
    token: str | None = None
    last: str | None = None
    page_ends: list[str] = []  # one real key per page: the alphabet for splitting the remainder
    pages = 0
    done = False
    try:
        while True:
            resp = list_page(
                s3,
                bucket,
                prefix,
                start_after=rng.start_after,
                token=token,
                max_keys=opts.page_size,
                counter=counter,
            )
            pages += 1
            keys, objects = page_objects(resp)
            n = len(keys)
            past_end = False
            if rng.end is not None and n and keys[-1] > rng.end:
                n = bisect.bisect_right(keys, rng.end)
                objects = head(objects, n)
                past_end = True
            if n:
                writer.add_page(objects)
                before_objects, before_bytes = stats.objects, stats.bytes
                stats.add_page(objects)
                last = keys[n - 1]
                if len(page_ends) < 2048:
                    page_ends.append(last)
                else:  # keep an even sample of a long listing
                    page_ends[pages % 2048] = last
                if on_page is not None:
                    on_page(stats.objects - before_objects, stats.bytes - before_bytes)
            if past_end or not resp.get("IsTruncated"):
                done = True
                break
            token = resp.get("NextContinuationToken")
            if not token:
                raise RuntimeError(f"S3 answered IsTruncated without a continuation token for {bucket}")
            if budget.exhausted(pages):
                break
        parts = writer.close()
    except BaseException:
        writer.abort()
        raise

    subranges: list[KeyRange] = []
    split_counter = RequestCounter()
    checkpoint: str | None = None
    if not done:
        checkpoint = last if last is not None else rng.start_after
        remainder = KeyRange(
            id=rng.id, start_after=checkpoint, end=rng.end, estimate=max(0, rng.estimate - stats.objects)
        )
        subranges = split_range(
            s3, bucket, prefix, remainder, opts.split_parts, counter=split_counter, seed_keys=page_ends
        )
    stats_key = f"stats/{rng.id}.json"
    store.put_bytes(stats_key, json.dumps(stats.to_dict()).encode())
    return ShardResult(
        range=rng,
        objects=stats.objects,
        bytes=stats.bytes,
        list_requests=counter.requests + split_counter.requests,
        retries=counter.retries + split_counter.retries,
        done=done,
        checkpoint=checkpoint,
        subranges=subranges,
        parts=parts,
        stats_key=stats_key,
        split_requests=split_counter.requests,
    )
