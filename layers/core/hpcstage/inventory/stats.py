"""Mergeable inventory statistics: every lister invocation builds one, the reducer merges them.

Everything here is exact (counts and byte sums), bounded in size (prefix table capped, top-N
heap), and JSON-serialisable so it can travel through S3 between Lambdas.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..s3util import as_page
from .page import Page

# Storage classes whose objects must be restored before they can be read.
ARCHIVE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
# All Glacier-family classes (Instant Retrieval can be read directly, but is billed per retrieval).
GLACIER_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE", "GLACIER_IR"})
AGE_BUCKETS_DAYS = (1, 7, 30, 90, 365, 3 * 365)
AGE_LABELS = ("<1d", "1-7d", "7-30d", "30-90d", "90d-1y", "1-3y", ">3y")
OTHER_PREFIX = "(other prefixes)"


def bit_length(sizes: pa.Array) -> pa.Array:
    """int.bit_length, vectorised: floor(log2(n)) + 1, and 0 for 0 (exact below 2**53)."""
    n = pc.max_element_wise(sizes, 1)
    b = pc.add(pc.floor(pc.log2(n.cast(pa.float64(), safe=False))).cast(pa.int64()), 1)
    b = pc.min_element_wise(b, 63)  # no int64 has more bits; keeps the shifts below in range
    # float64 rounding can put 2**k - 1 one bit high (from k = 48 on): correct with integer shifts
    b = pc.if_else(pc.greater(pc.shift_left(1, pc.subtract(b, 1)), n), pc.subtract(b, 1), b)
    up = pc.and_(pc.less(b, 63), pc.less_equal(pc.shift_left(1, pc.min_element_wise(b, 62)), n))
    b = pc.if_else(up, pc.add(b, 1), b)
    return pc.if_else(pc.equal(sizes, 0), 0, b)


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _sum_count(groups: pa.Array, sizes: pa.Array) -> list[tuple[Any, int, int]]:
    # one page is ~1,000 rows: Acero's thread pool costs more than it saves at that size
    g = (
        pa.table({"g": groups, "s": sizes})
        .group_by("g", use_threads=False)
        .aggregate([("s", "sum"), ("s", "count")])
    )
    return list(
        zip(
            g.column("g").to_pylist(),
            g.column("s_sum").to_pylist(),
            g.column("s_count").to_pylist(),
            strict=True,
        )
    )


class InventoryStats:
    def __init__(
        self,
        prefix: str = "",
        depth: int = 1,
        now: datetime | None = None,
        top_n: int = 20,
        max_prefixes: int = 10_000,
    ) -> None:
        self.prefix = prefix
        self.depth = depth
        self.now = now or datetime.now(UTC)
        self._now_s = self.now.timestamp()
        self.top_n = top_n
        self.max_prefixes = max_prefixes
        self.objects = 0
        self.bytes = 0
        self.multipart = 0
        self.by_class: dict[str, list[int]] = {}
        self.by_prefix: dict[str, list[int]] = {}
        self.size_hist: dict[int, list[int]] = {}
        self.age_hist = [[0, 0] for _ in AGE_LABELS]
        self.top: list[tuple[int, str]] = []  # min-heap of the largest objects
        self.oldest: float | None = None
        self.newest: float | None = None
        self.batch_rows = 20_000
        self._pending: list[Page] = []
        self._pending_rows = 0
        # keys -> their prefix to `depth` levels below `prefix` (RE2, run by pyarrow per page)
        self._prefix_pattern = "^(?P<p>" + re.escape(prefix) + "(?:[^/]*/){0," + str(depth) + "})"

    def add_page(self, objects: Page | Sequence[dict[str, Any]]) -> None:
        """Count a page now (objects, bytes: progress stays live); aggregate the rest in batches.

        Each aggregate is a pyarrow kernel; run per 1,000-object page their dispatch cost dominated,
        so pages are buffered (at most ``batch_rows`` objects) and aggregated together.
        """
        page = as_page(objects)
        n = len(page)
        if n == 0:
            return
        self.objects += n
        self.bytes += pc.sum(page.sizes).as_py() or 0
        self._pending.append(page)
        self._pending_rows += n
        if self._pending_rows >= self.batch_rows:
            self._aggregate_pending()

    def fold(self) -> None:
        """Aggregate the buffered pages now (a stream between two ranges); the tables are the same."""
        self._aggregate_pending()

    def _aggregate_pending(self) -> None:
        """Fold the buffered pages into the tables. A batch is consecutive pages of sorted keys, so a
        group often takes the whole batch (one class, one prefix, one age bucket): each table first
        checks that with a min/max or a prefix test and falls back to a group-by otherwise."""
        if not self._pending:
            return
        pages, self._pending, self._pending_rows = self._pending, [], 0
        n = sum(len(p) for p in pages)
        sizes = _concat([p.sizes for p in pages]).fill_null(0)
        total = pc.sum(sizes).as_py() or 0
        classes = _concat([p.classes for p in pages]).fill_null("STANDARD")
        lo_c, hi_c = (v.as_py() for v in pc.min_max(classes).values())
        groups = [(lo_c, total, n)] if lo_c == hi_c else _sum_count(classes, sizes)
        for cls, b, c in groups:
            e = self.by_class.setdefault(cls, [0, 0])
            e[0] += c
            e[1] += b
        keys = _concat([p.key_array() for p in pages])
        for p, b, c in self._prefix_groups(pages[0].keys[0], keys, sizes, total, n):
            if p not in self.by_prefix and len(self.by_prefix) >= self.max_prefixes:
                p = OTHER_PREFIX
            e = self.by_prefix.setdefault(p, [0, 0])
            e[0] += c
            e[1] += b
        for bits, b, c in _sum_count(bit_length(sizes), sizes):
            e = self.size_hist.setdefault(bits, [0, 0])
            e[0] += c
            e[1] += b
        self._add_ages(_concat([p.dates for p in pages]), sizes)
        self.multipart += pc.sum(_concat([p.multipart() for p in pages])).as_py() or 0
        self._add_top(keys, sizes)

    def _prefix_groups(
        self, first: str, keys: pa.Array, sizes: pa.Array, total: int, n: int
    ) -> list[tuple[Any, int, int]]:
        """(prefix, bytes, count) of the batch: the keys' prefixes to ``depth`` levels below ``prefix``."""
        p = self._full_depth_prefix(first)
        if p is not None and pc.all(pc.starts_with(keys, pattern=p)).as_py():
            return [(p, total, n)]  # every key lies below the first key's full-depth prefix
        # flatten(), not field(): a key the pattern does not match (outside ``prefix``) is a null struct,
        # whose child value is "" unless the parent's nulls are carried over
        prefixes = pc.extract_regex(keys, pattern=self._prefix_pattern).flatten()[0]
        return _sum_count(prefixes.fill_null(self.prefix), sizes)

    def _full_depth_prefix(self, key: str) -> str | None:
        """The key's prefix when it has all ``depth`` levels (every key starting with it has the same one)."""
        if not key.startswith(self.prefix):
            return None
        end = len(self.prefix)
        for _ in range(self.depth):
            end = key.find("/", end) + 1
            if end == 0:
                return None
        return key[:end]

    def _add_ages(self, dates: pa.Array, sizes: pa.Array) -> None:
        if dates.null_count:
            valid = pc.is_valid(dates)
            dates, sizes = dates.filter(valid), sizes.filter(valid)
        if not len(dates):
            return
        ms = dates.cast(pa.int64())
        lo, hi = (v.as_py() for v in pc.min_max(ms).values())
        self._extend_dates(lo / 1000, hi / 1000)
        now_ms = int(self._now_s * 1000)
        oldest, newest = self._age_bucket(now_ms - lo), self._age_bucket(now_ms - hi)
        if oldest == newest:  # buckets grow with age: every object between lies in this one
            self.age_hist[oldest][0] += len(ms)
            self.age_hist[oldest][1] += pc.sum(sizes).as_py() or 0
            return
        age_ms = pc.subtract(now_ms, ms)
        bucket = None
        for days in AGE_BUCKETS_DAYS:
            step = pc.greater_equal(age_ms, days * 86_400_000).cast(pa.int64())
            bucket = step if bucket is None else pc.add(bucket, step)
        for i, b, c in _sum_count(bucket, sizes):
            self.age_hist[i][0] += c
            self.age_hist[i][1] += b

    @staticmethod
    def _age_bucket(age_ms: int) -> int:
        return sum(age_ms >= days * 86_400_000 for days in AGE_BUCKETS_DAYS)

    def _extend_dates(self, lo: float, hi: float) -> None:
        if self.oldest is None or lo < self.oldest:
            self.oldest = lo
        if self.newest is None or hi > self.newest:
            self.newest = hi

    def _add_top(self, keys: pa.Array, sizes: pa.Array) -> None:
        """Keep the ``top_n`` largest (size, key) pairs. Once the heap is full, only objects at least as
        large as its smallest can enter: those are found with one comparison over the batch."""
        if len(self.top) >= self.top_n:
            idx = pc.indices_nonzero(pc.greater_equal(sizes, self.top[0][0]))
            if len(idx) > 4 * self.top_n:
                idx = self._top_indices(keys.take(idx), sizes.take(idx), idx)
        elif len(keys) > self.top_n:
            idx = self._top_indices(keys, sizes, None)
        else:
            idx = None
        if idx is None:
            candidates = list(zip(sizes.to_pylist(), keys.to_pylist(), strict=True))
        else:
            candidates = list(zip(sizes.take(idx).to_pylist(), keys.take(idx).to_pylist(), strict=True))
        for item in candidates:
            if len(self.top) < self.top_n:
                heapq.heappush(self.top, item)
            elif item > self.top[0]:
                heapq.heapreplace(self.top, item)

    def _top_indices(self, keys: pa.Array, sizes: pa.Array, within: pa.Array | None) -> pa.Array:
        """Indices of the ``top_n`` largest (size, key) pairs (keys are unique: no ties)."""
        order = [("s", "descending"), ("k", "descending")]
        idx = pc.select_k_unstable(pa.table({"s": sizes, "k": keys}), k=self.top_n, sort_keys=order)
        return within.take(idx) if within is not None else idx

    def merge(self, other: InventoryStats) -> None:
        self._aggregate_pending()
        other._aggregate_pending()  # noqa: SLF001 - same class
        self.objects += other.objects
        self.bytes += other.bytes
        self.multipart += other.multipart
        for cls, (n, b) in other.by_class.items():
            e = self.by_class.setdefault(cls, [0, 0])
            e[0] += n
            e[1] += b
        for bits, (n, b) in other.size_hist.items():
            e = self.size_hist.setdefault(bits, [0, 0])
            e[0] += n
            e[1] += b
        for k, (n, b) in other.by_prefix.items():
            if k not in self.by_prefix and len(self.by_prefix) >= self.max_prefixes:
                k = OTHER_PREFIX
            e = self.by_prefix.setdefault(k, [0, 0])
            e[0] += n
            e[1] += b
        for i, (n, b) in enumerate(other.age_hist):
            self.age_hist[i][0] += n
            self.age_hist[i][1] += b
        for item in other.top:
            if len(self.top) < self.top_n:
                heapq.heappush(self.top, item)
            elif item > self.top[0]:
                heapq.heapreplace(self.top, item)
        for ts in (other.oldest,):
            if ts is not None and (self.oldest is None or ts < self.oldest):
                self.oldest = ts
        for ts in (other.newest,):
            if ts is not None and (self.newest is None or ts > self.newest):
                self.newest = ts

    def to_dict(self) -> dict[str, Any]:
        self._aggregate_pending()
        return {
            "prefix": self.prefix,
            "depth": self.depth,
            "now": self.now.isoformat(),
            "top_n": self.top_n,
            "objects": self.objects,
            "bytes": self.bytes,
            "multipart": self.multipart,
            "by_class": self.by_class,
            "by_prefix": self.by_prefix,
            "size_hist": {str(k): v for k, v in self.size_hist.items()},
            "age_hist": self.age_hist,
            "top": [[s, k] for s, k in self.top],
            "oldest": self.oldest,
            "newest": self.newest,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InventoryStats:
        st = cls(prefix=d["prefix"], depth=d["depth"], now=datetime.fromisoformat(d["now"]), top_n=d["top_n"])
        st.objects = d["objects"]
        st.bytes = d["bytes"]
        st.multipart = d["multipart"]
        st.by_class = {k: list(v) for k, v in d["by_class"].items()}
        st.by_prefix = {k: list(v) for k, v in d["by_prefix"].items()}
        st.size_hist = {int(k): list(v) for k, v in d["size_hist"].items()}
        st.age_hist = [list(v) for v in d["age_hist"]]
        st.top = [(int(s), str(k)) for s, k in d["top"]]
        heapq.heapify(st.top)
        st.oldest = d["oldest"]
        st.newest = d["newest"]
        return st
