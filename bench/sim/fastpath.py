"""The page-level fast path: run the real list_shard at 1e8-1e9 objects without per-object Python work.

What runs unchanged (hpcstage code, called as in Lambda):
  hpcstage.inventory.lister.list_shard's loop: one list_page call per page, the end-of-range cut (contents[-1]
  compared with rng.end, then bisect over the page's keys and a slice), checkpointing on the last key,
  Budget.exhausted after every page, and on budget exhaustion hpcstage.inventory.planner.split_range (which probes
  with its own ThreadPoolExecutor); hpcstage.s3util.list_page (parameters, RequestCounter, retries count);
  hpcstage.inventory.planner.plan_shards and plan_from_hints entirely.

What the fast path bypasses (and how):
  1. URL decoding: the simulated client does not echo EncodingType=url, so list_page's loop that
     unquote_plus-es every key is skipped; keys are returned already decoded (bench/sim/s3.py, fast mode).
  2. Parquet: hpcstage.inventory.lister.PartWriter is swapped for CountingPartWriter, which counts rows and
     closes a part where the real writer would (every ``part_rows`` rows, and at close), storing an
     empty object in its place: the upload request (and its latency) is kept, the Parquet encoding and
     the bytes are not (the simulated PUT latency does not depend on size in either mode).
  3. Statistics: hpcstage.inventory.lister.InventoryStats is swapped for PageStats, which keeps only objects and
     bytes (exact: page length and the keyspace's O(1) byte prefix sums); no histograms or top-N.
  4. Page contents: a LazyPage builds an entry only when list_shard indexes it (the last entry of every
     page, and every entry of the one page per shard that crosses its end key). list_shard reads a
     page through hpcstage.s3util.page_objects (no fast-parser Page in the response: the keys view
     and the objects are the LazyPage itself) and head(objects, n) (a LazyPage slice).
The swap is done by patching the two names in hpcstage.inventory.lister for the duration of a run (the core has
no injection point for them yet; see the report for the hook we ask for). Three more names are
patched in every mode, so that time is virtual: hpcstage.inventory.tasks.Budget (the invocation's clock),
hpcstage.inventory.planner.ThreadPoolExecutor (probe rounds) and hpcstage.inventory.tasks.parallel_map (the 32 parallel
result/statistics GETs of continue_task and reduce_task), the last two on VirtualThreadPool; and
hpcstage.inventory.runner.diff_inventories (audit mode's exact diff, which would read Parquet) is stood in by
identical_inventories_diff, whose cost is not simulated. Full mode (tests, small N)
uses the real PartWriter, InventoryStats and URL decoding.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any
from unittest import mock

import hpcstage.inventory.lister
import hpcstage.inventory.planner
import hpcstage.inventory.runner
import hpcstage.inventory.tasks
from hpcstage.inventory.lister import Budget
from hpcstage.inventory.model import PartFile
from hpcstage.inventory.stats import InventoryStats

from bench.sim.s3 import LazyPage, VirtualThreadPool


class NullStore:
    """An OutputStore that keeps only small files (stats JSON) in memory and drops the rest."""

    def __init__(self) -> None:
        self.small: dict[str, bytes] = {}
        self.files = 0

    def put_bytes(self, key: str, data: bytes) -> None:
        self.files += 1

    def put_file(self, key: str, path: str) -> None:
        self.files += 1

    def get_bytes(self, key: str) -> bytes:
        return self.small[key]

    def exists(self, key: str) -> bool:
        return key in self.small

    def uri(self, key: str = "") -> str:
        return f"null://{key}"


class CountingPartWriter:
    """Stands in for hpcstage.inventory.output.PartWriter: same constructor and methods, counts rows only."""

    def __init__(
        self,
        store: Any,
        bucket: str,
        name: str,
        *,
        row_group_rows: int = 50_000,
        part_rows: int = 1_000_000,
        tmpdir: str | None = None,
    ) -> None:
        self.store = store
        self.name = name
        self.part_rows = part_rows
        self.rows = 0
        self.parts: list[PartFile] = []
        self._open = 0

    def add_page(self, contents: Sequence[dict[str, Any]]) -> None:
        n = len(contents)
        self.rows += n
        self._open += n
        while self._open >= self.part_rows:
            self._close_part(self.part_rows)
            self._open -= self.part_rows

    def _close_part(self, rows: int) -> None:
        key = f"data/{self.name}-{len(self.parts):04d}.parquet"
        self.store.put_bytes(key, b"")
        self.parts.append(PartFile(key=key, size=0, md5="", rows=rows))

    def close(self) -> list[PartFile]:
        if self._open:
            self._close_part(self._open)
            self._open = 0
        return self.parts

    def abort(self) -> None:
        self._open = 0


class PageStats(InventoryStats):
    """Stands in for InventoryStats: exact objects and bytes, O(1) per LazyPage."""

    def __init__(self, prefix: str = "", depth: int = 1, now: datetime | None = None, **kw: Any) -> None:
        super().__init__(prefix=prefix, depth=depth, now=now, **kw)

    def add_page(self, contents: Sequence[dict[str, Any]]) -> None:
        if isinstance(contents, LazyPage):
            self.objects += len(contents)
            self.bytes += contents.nbytes
        else:
            for o in contents:
                self.objects += 1
                self.bytes += o.get("Size") or 0


@contextlib.contextmanager
def fast_lister() -> Iterator[None]:
    """Swap PartWriter and InventoryStats inside hpcstage.inventory.lister for the counting stand-ins."""
    with (
        mock.patch.object(hpcstage.inventory.lister, "PartWriter", CountingPartWriter),
        mock.patch.object(hpcstage.inventory.lister, "InventoryStats", PageStats),
    ):
        yield


class _Clock:
    current: Callable[[], float] | None = None


TASK_CLOCK = _Clock()


def _virtual_budget(
    max_seconds: float | None = None, max_pages: int | None = None, clock: Callable[[], float] | None = None
) -> Budget:
    return Budget(
        max_seconds=max_seconds, max_pages=max_pages, clock=clock or TASK_CLOCK.current or time.monotonic
    )


@contextlib.contextmanager
def virtual_task_clock() -> Iterator[None]:
    """hpcstage.inventory.tasks.list_task builds Budget(max_seconds=...) on the wall clock; give it the simulated
    invocation's virtual clock instead (TASK_CLOCK.current, set by the simulator before each call)."""
    with mock.patch.object(hpcstage.inventory.tasks, "Budget", _virtual_budget):
        yield


@contextlib.contextmanager
def virtual_probe_pool() -> Iterator[None]:
    """Run hpcstage.inventory.planner's probe rounds on VirtualThreadPool: same parallelism, deterministic times."""
    with mock.patch.object(hpcstage.inventory.planner, "ThreadPoolExecutor", VirtualThreadPool):
        yield


def virtual_parallel_map(
    fn: Callable[[Any], Any], items: Sequence[Any], workers: int = hpcstage.inventory.tasks.RESULT_READERS
) -> list[Any]:
    """hpcstage.inventory.tasks.parallel_map in virtual time: the same ``workers``-thread pool, on VirtualThreadPool.

    Each read is charged to the lane that is free first, and the caller's clock then moves to the
    latest lane: n GETs cost about ceil(n / workers) GET latencies, not n (list scheduling over the
    drawn latencies, as a real pool would do), and the result does not depend on the OS scheduler.
    """
    items = list(items)
    if len(items) <= 1:
        return [fn(i) for i in items]
    return list(VirtualThreadPool(max_workers=min(workers, len(items))).map(fn, items))


_REAL_DIFF: Callable[..., dict[str, Any]] | None = getattr(
    hpcstage.inventory.runner, "diff_inventories", None
)


def identical_inventories_diff(previous: Sequence[Any], current: Sequence[Any], **kw: Any) -> dict[str, Any]:
    """Stands in for hpcstage.inventory.runner.diff_inventories (audit mode's exact object-level diff).

    The simulator's "previous run" is the same bucket (only its ranges.json matters: the perfect
    hints), so the true answer is "nothing added, removed or changed": the real function is called
    with no parts on either side, which returns that answer in its real shape without reading Parquet
    (the fast path writes none). Its cost -- the reducer reading both inventories' parts, 2 x N rows --
    is therefore NOT in the simulated times.
    """
    assert _REAL_DIFF is not None
    keep = {k: v for k, v in kw.items() if k in ("prefix", "depth", "max_prefixes")}
    return _REAL_DIFF([], [], **keep)


@contextlib.contextmanager
def no_parquet_diff() -> Iterator[None]:
    """Audit mode's exact diff, without reading Parquet (see identical_inventories_diff)."""
    if _REAL_DIFF is None:  # a core without the exact diff
        yield
        return
    with mock.patch.object(hpcstage.inventory.runner, "diff_inventories", identical_inventories_diff):
        yield


@contextlib.contextmanager
def virtual_result_readers() -> Iterator[None]:
    """continue_task and reduce_task read results and statistics through hpcstage.inventory.tasks.parallel_map
    (a ThreadPoolExecutor of 32): run those reads on virtual lanes instead of real threads."""
    with mock.patch.object(hpcstage.inventory.tasks, "parallel_map", virtual_parallel_map):
        yield
