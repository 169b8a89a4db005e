"""Mergeable inventory statistics: every lister invocation builds one, the reducer merges them.

Everything here is exact (counts and byte sums), bounded in size (prefix table capped, top-N
heap), and JSON-serialisable so it can travel through S3 between Lambdas.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

# Storage classes whose objects must be restored before they can be read.
ARCHIVE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
# All Glacier-family classes (Instant Retrieval can be read directly, but is billed per retrieval).
GLACIER_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE", "GLACIER_IR"})
AGE_BUCKETS_DAYS = (1, 7, 30, 90, 365, 3 * 365)
AGE_LABELS = ("<1d", "1-7d", "7-30d", "30-90d", "90d-1y", "1-3y", ">3y")
OTHER_PREFIX = "(other prefixes)"


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

    def _prefix_of(self, key: str) -> str:
        rest = key[len(self.prefix) :]
        parts = rest.split("/", self.depth)
        if len(parts) <= self.depth:
            return self.prefix + "/".join(parts[:-1]) + ("/" if len(parts) > 1 else "")
        return self.prefix + "/".join(parts[: self.depth]) + "/"

    def add_page(self, contents: Sequence[dict[str, Any]]) -> None:
        by_class, by_prefix, size_hist, age_hist, top = (
            self.by_class,
            self.by_prefix,
            self.size_hist,
            self.age_hist,
            self.top,
        )
        now_s, top_n = self._now_s, self.top_n
        for o in contents:
            size = o.get("Size") or 0
            self.objects += 1
            self.bytes += size
            cls = o.get("StorageClass", "STANDARD")
            e = by_class.get(cls)
            if e is None:
                by_class[cls] = [1, size]
            else:
                e[0] += 1
                e[1] += size
            key = o["Key"]
            p = self._prefix_of(key)
            e = by_prefix.get(p)
            if e is None:
                if len(by_prefix) >= self.max_prefixes:
                    p = OTHER_PREFIX
                    e = by_prefix.setdefault(p, [0, 0])
                else:
                    e = by_prefix[p] = [0, 0]
            e[0] += 1
            e[1] += size
            b = size.bit_length()
            e = size_hist.get(b)
            if e is None:
                size_hist[b] = [1, size]
            else:
                e[0] += 1
                e[1] += size
            lm = o.get("LastModified")
            if lm is not None:
                ts = lm.timestamp()
                if self.oldest is None or ts < self.oldest:
                    self.oldest = ts
                if self.newest is None or ts > self.newest:
                    self.newest = ts
                age_days = (now_s - ts) / 86400.0
                i = 0
                while i < len(AGE_BUCKETS_DAYS) and age_days >= AGE_BUCKETS_DAYS[i]:
                    i += 1
                age_hist[i][0] += 1
                age_hist[i][1] += size
            etag = o.get("ETag")
            if etag and "-" in etag:
                self.multipart += 1
            if len(top) < top_n:
                heapq.heappush(top, (size, key))
            elif size > top[0][0]:
                heapq.heapreplace(top, (size, key))

    def merge(self, other: InventoryStats) -> None:
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
