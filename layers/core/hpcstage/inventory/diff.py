"""Exact change between two inventories of the same target: objects and bytes added, removed and
changed (size or ETag), by prefix, with bounded memory.

Each inventory's Parquet parts are sorted by key, and the parts of one run cover disjoint key ranges,
so ordering the parts by their first key gives one sorted stream per inventory; a merge-join of the
two streams reads each row once and holds one row group of each at a time.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow.parquet as pq

Row = tuple[str, int, str | None]  # key, size, etag
COLUMNS = ["key", "size", "e_tag"]


class S3RangeFile(io.RawIOBase):
    """A read-only, seekable view of an S3 object through ranged GETs (Parquet reads its footer,
    then each row group, so a part is never downloaded whole just to find its first key)."""

    def __init__(self, s3: Any, bucket: str, key: str) -> None:
        self.s3, self.bucket, self.key = s3, bucket, key
        self.size = int(s3.head_object(Bucket=bucket, Key=key)["ContentLength"])
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int = -1) -> bytes:
        if self.pos >= self.size or n == 0:
            return b""
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        body: bytes = self.s3.get_object(
            Bucket=self.bucket, Key=self.key, Range=f"bytes={self.pos}-{end - 1}"
        )["Body"].read()
        self.pos += len(body)
        return body

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def _first_key(f: pq.ParquetFile) -> str:
    stats = f.metadata.row_group(0).column(f.schema_arrow.get_field_index("key")).statistics
    if stats is not None and stats.has_min_max:
        return str(stats.min)
    return str(f.read_row_group(0, columns=["key"]).column(0)[0].as_py())


def _sorted_rows(paths: Sequence[Any], opener: Callable[[Any], Any]) -> Iterator[Row]:
    firsts = []
    for p in paths:
        f = pq.ParquetFile(opener(p))
        if f.metadata.num_rows == 0:
            continue
        firsts.append((_first_key(f), p))
    for _, p in sorted(firsts, key=lambda t: t[0]):
        f = pq.ParquetFile(opener(p))
        for batch in f.iter_batches(columns=COLUMNS, batch_size=50_000):
            d = batch.to_pydict()
            yield from zip(d["key"], d["size"], d["e_tag"], strict=True)


def _prefix(key: str, base: str, depth: int) -> str:
    parts = key[len(base) :].split("/", depth)
    if len(parts) <= depth:
        return base + "/".join(parts[:-1]) + ("/" if len(parts) > 1 else "")
    return base + "/".join(parts[:depth]) + "/"


def diff_inventories(
    previous: Sequence[Any],
    current: Sequence[Any],
    *,
    prefix: str = "",
    depth: int = 1,
    open_previous: Callable[[Any], Any] = lambda p: p,
    open_current: Callable[[Any], Any] = lambda p: p,
    max_prefixes: int = 10_000,
) -> dict[str, Any]:
    """Parts of the previous and current inventory (paths, or keys the openers turn into files).

    ``changed`` counts objects whose size or ETag differs; its bytes are the net size change.
    """
    totals = {k: [0, 0] for k in ("added", "removed", "changed")}
    by_prefix: dict[str, dict[str, list[int]]] = {}

    def count(kind: str, key: str, nbytes: int) -> None:
        totals[kind][0] += 1
        totals[kind][1] += nbytes
        p = _prefix(key, prefix, depth)
        if p not in by_prefix and len(by_prefix) >= max_prefixes:
            p = "(other prefixes)"
        e = by_prefix.setdefault(p, {k: [0, 0] for k in totals})[kind]
        e[0] += 1
        e[1] += nbytes

    old, new = _sorted_rows(previous, open_previous), _sorted_rows(current, open_current)
    a, b = next(old, None), next(new, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            assert a is not None
            count("removed", a[0], a[1] or 0)
            a = next(old, None)
        elif a is None or b[0] < a[0]:
            count("added", b[0], b[1] or 0)
            b = next(new, None)
        else:
            if (a[1], a[2]) != (b[1], b[2]):
                count("changed", b[0], (b[1] or 0) - (a[1] or 0))
            a, b = next(old, None), next(new, None)
    return {
        **{k: {"objects": v[0], "bytes": v[1]} for k, v in totals.items()},
        "by_prefix": [
            {"prefix": p, **{k: {"objects": v[0], "bytes": v[1]} for k, v in kinds.items()}}
            for p, kinds in sorted(by_prefix.items())
        ],
    }
