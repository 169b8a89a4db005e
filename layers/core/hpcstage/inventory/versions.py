"""Versioned buckets: every version and delete marker, listed with ListObjectVersions by the same engine.

The key space is sharded and stolen exactly as for ListObjectsV2 (``steal.Cursor``, ``LocalPool``, the
fleet's leases): a range is a range of *keys*, and every version of a key belongs to the range holding the
key. ListObjectVersions pages in key order (the versions of one key newest first) and continues from a
(key marker, version-id marker) pair, which is this cursor's continuation token.

One rule keeps ranges, checkpoints and remainders exact: **a page is written only up to a key boundary.**
When a truncated page ends inside a key (more versions of it may follow), that key's rows are carried over
to the next page instead of being written, so the cursor's position -- the checkpoint the fleet records and
the point a stopped stream's remainder starts after -- is always a key whose versions are all written. A
resumed or stolen range starting after it lists the carried key again from its first version. (One key with
more versions than fit in memory would defeat this; S3 has no such limit, but millions of versions of one
key are not a research-data shape.)

Rows fill S3 Inventory's ``version_id``, ``is_latest`` and ``is_delete_marker``; the statistics separate
current and non-current versions and count delete markers (``VersionStats``).

ListObjectVersions' KeyMarker without a VersionIdMarker starts *after* that key in S3 ("keys that come after
the key marker"); moto 5.2.5 starts *at* it. Rows at or before the marker are dropped here, which is a no-op
on S3 and makes moto exact.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..s3util import RequestCounter, list_versions_page
from .model import KeyRange, PartFile
from .output import FILE_SCHEMA, INVENTORY_SCHEMA, PartWriter
from .page import TS, Page
from .stats import InventoryStats
from .steal import Cursor

# S3 Inventory's schema with the three version columns after bucket and key, where S3 Inventory puts them
_VERSION_FIELDS = [
    pa.field("version_id", pa.string()),
    pa.field("is_latest", pa.bool_()),
    pa.field("is_delete_marker", pa.bool_()),
]
_BASE = list(INVENTORY_SCHEMA)
VERSIONS_SCHEMA = pa.schema([*_BASE[:2], *_VERSION_FIELDS, *_BASE[2:]])

VERSIONS_FILE_SCHEMA = FILE_SCHEMA.replace(
    "required binary key (UTF8); ",
    "required binary key (UTF8); "
    "optional binary version_id (UTF8); optional boolean is_latest; optional boolean is_delete_marker; ",
)


@dataclass
class VersionPage(Page):
    """A ListObjectVersions page as columns: a Page plus version id, latest and delete-marker flags."""

    version_ids: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))
    is_latest: pa.Array = field(default_factory=lambda: pa.array([], pa.bool_()))
    is_delete_marker: pa.Array = field(default_factory=lambda: pa.array([], pa.bool_()))

    def head(self, n: int) -> VersionPage:
        return self.slice(0, n)

    def slice(self, start: int, stop: int) -> VersionPage:
        if start == 0 and stop >= len(self.keys):
            return self
        n = stop - start
        return VersionPage(
            self.keys[start:stop],
            self.sizes.slice(start, n),
            self.dates.slice(start, n),
            self.etags.slice(start, n),
            self.classes.slice(start, n),
            self.checksums.slice(start, n),
            self.version_ids.slice(start, n),
            self.is_latest.slice(start, n),
            self.is_delete_marker.slice(start, n),
        )

    @classmethod
    def concat(cls, pages: Sequence[Page]) -> VersionPage:
        vp = [p for p in pages if isinstance(p, VersionPage)]
        if len(vp) == 1:
            return vp[0]
        if not vp:
            return EMPTY_VERSIONS
        return cls(
            keys=[k for p in vp for k in p.keys],
            sizes=pa.concat_arrays([p.sizes for p in vp]),
            dates=pa.concat_arrays([p.dates for p in vp]),
            etags=pa.concat_arrays([p.etags for p in vp]),
            classes=pa.concat_arrays([p.classes for p in vp]),
            checksums=pa.concat_arrays([p.checksums for p in vp]),
            version_ids=pa.concat_arrays([p.version_ids for p in vp]),
            is_latest=pa.concat_arrays([p.is_latest for p in vp]),
            is_delete_marker=pa.concat_arrays([p.is_delete_marker for p in vp]),
        )

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]]) -> VersionPage:
        """boto3's Versions and DeleteMarkers rows (each marked ``_marker``), already in key order."""
        dates: list[datetime | None] = [r.get("LastModified") for r in rows]
        etags = [(r["ETag"].strip('"') if r.get("ETag") is not None else None) for r in rows]
        markers = [bool(r.get("_marker")) for r in rows]
        return cls(
            keys=[r["Key"] for r in rows],
            sizes=pa.array(
                [None if m else r.get("Size", 0) for r, m in zip(rows, markers, strict=True)], pa.int64()
            ),
            dates=pa.array(dates, TS),
            etags=pa.array(etags, pa.string()),
            classes=pa.array(
                [
                    None if m else r.get("StorageClass", "STANDARD")
                    for r, m in zip(rows, markers, strict=True)
                ],
                pa.string(),
            ),
            checksums=pa.array([(r.get("ChecksumAlgorithm") or [None])[0] for r in rows], pa.string()),
            version_ids=pa.array([r.get("VersionId") for r in rows], pa.string()),
            is_latest=pa.array([bool(r.get("IsLatest")) for r in rows], pa.bool_()),
            is_delete_marker=pa.array(markers, pa.bool_()),
        )

    def objects(self) -> Page:
        """The object versions only (delete markers have no size, class or ETag): what the base stats count."""
        keep = pc.invert(self.is_delete_marker)
        idx = pc.indices_nonzero(keep)
        if len(idx) == len(self.keys):
            return self
        take = idx.to_pylist()
        return Page(
            [self.keys[i] for i in take],
            self.sizes.take(idx),
            self.dates.take(idx),
            self.etags.take(idx),
            self.classes.take(idx),
            self.checksums.take(idx),
        )


EMPTY_VERSIONS = VersionPage.from_rows([])


def version_rows(resp: dict[str, Any]) -> list[dict[str, Any]]:
    """Versions and DeleteMarkers of one answer merged back into S3's order (key order; boto3 splits them)."""
    rows = [*resp.get("Versions", ()), *({**d, "_marker": True} for d in resp.get("DeleteMarkers", ()))]
    rows.sort(key=lambda r: r["Key"])  # stable: each list keeps its own newest-first order within a key
    return rows


@dataclass
class VersionCursor(Cursor):
    """A ``Cursor`` whose continuation token is (key marker, version-id marker) and whose pages end at keys."""

    carry: list[dict[str, Any]] = field(default_factory=list)

    def request(self, max_keys: int = 1000) -> dict[str, Any]:
        params: dict[str, Any] = {"MaxKeys": max_keys}
        if self.prefix:
            params["Prefix"] = self.prefix
        if self.token:
            params["KeyMarker"], params["VersionIdMarker"] = self.token  # type: ignore[str-unpack]  # a pair here
        elif self.pos is not None:
            params["KeyMarker"] = self.pos
        return params

    def split(self, ways: int, policy: Any, new_id: Any) -> list[KeyRange]:
        """As ``Cursor.split``, but never gives away the key being carried: the cuts lie above it.

        A stream inside a key with many versions would otherwise hand that key (its upper piece) to a
        thief, which starts the key again and, inside it, hands it on again: nobody would ever finish it.
        """
        if not self.carry:
            return super().split(ways, policy, new_id)
        written = self.pos
        self.pos = self.carry[0]["Key"]
        try:
            return super().split(ways, policy, new_id)
        finally:
            self.pos = written


class VersionSource:
    """ListObjectVersions as a page source of ``lister.list_range`` (its ``ListOptions.source``)."""

    kind = "versions"
    file_schema = VERSIONS_FILE_SCHEMA

    def cursor(self, rng: KeyRange, prefix: str) -> Cursor:
        return VersionCursor(rng, prefix=prefix)

    def page(
        self,
        s3: Any,
        bucket: str,
        prefix: str,
        cursor: Cursor,
        max_keys: int,
        counter: RequestCounter | None,
    ) -> tuple[Sequence[str], VersionPage, bool, Any]:
        """One request; returns (keys, rows, truncated, token) with the rows ending at a key boundary."""
        assert isinstance(cursor, VersionCursor)
        req = cursor.request(max_keys)
        resp = list_versions_page(
            s3,
            bucket,
            prefix,
            key_marker=req.get("KeyMarker"),
            version_id_marker=req.get("VersionIdMarker"),
            max_keys=max_keys,
            counter=counter,
        )
        rows = version_rows(resp)
        if "VersionIdMarker" not in req and "KeyMarker" in req:
            marker = req["KeyMarker"]
            rows = [r for r in rows if r["Key"] > marker]
        rows = cursor.carry + rows
        cursor.carry = []
        truncated = bool(resp.get("IsTruncated"))
        token = None
        if truncated:
            key_marker, vid_marker = resp.get("NextKeyMarker"), resp.get("NextVersionIdMarker")
            if not key_marker:
                raise RuntimeError("S3 answered IsTruncated without NextKeyMarker")
            token = (key_marker, vid_marker or "null")
            end = cursor.range.end
            # Rows past the range's end are cut by Cursor.take, which then ends the range: no carry needed.
            if rows and (end is None or rows[-1]["Key"] <= end):
                cut = bisect.bisect_left([r["Key"] for r in rows], rows[-1]["Key"])
                cursor.carry = rows[cut:]
                rows = rows[:cut]
        page = VersionPage.from_rows(rows)
        return page.keys, page, truncated, token


VERSIONS = VersionSource()


class VersionStats(InventoryStats):
    """InventoryStats over object versions (not delete markers), plus current/non-current and delete markers."""

    kind = "versions"
    file_schema = VERSIONS_FILE_SCHEMA

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.current = [0, 0]  # [versions, bytes] with is_latest
        self.noncurrent = [0, 0]
        self.delete_markers = 0
        self.current_delete_markers = 0  # keys whose latest version is a delete marker: deleted keys

    def add_page(self, objects: Any) -> None:
        page = objects if isinstance(objects, VersionPage) else VersionPage.concat([objects])
        if not len(page):
            return
        markers = page.is_delete_marker
        latest = page.is_latest
        n_markers = pc.sum(markers.cast(pa.int64())).as_py() or 0
        self.delete_markers += n_markers
        self.current_delete_markers += pc.sum(pc.and_(markers, latest).cast(pa.int64())).as_py() or 0
        versions = pc.invert(markers)
        sizes = page.sizes.fill_null(0)
        cur = pc.and_(versions, latest)
        non = pc.and_(versions, pc.invert(latest))
        self.current[0] += pc.sum(cur.cast(pa.int64())).as_py() or 0
        self.current[1] += pc.sum(pc.if_else(cur, sizes, 0)).as_py() or 0
        self.noncurrent[0] += pc.sum(non.cast(pa.int64())).as_py() or 0
        self.noncurrent[1] += pc.sum(pc.if_else(non, sizes, 0)).as_py() or 0
        super().add_page(page.objects())

    def merge(self, other: InventoryStats) -> None:
        super().merge(other)
        if isinstance(other, VersionStats):
            for mine, theirs in ((self.current, other.current), (self.noncurrent, other.noncurrent)):
                mine[0] += theirs[0]
                mine[1] += theirs[1]
            self.delete_markers += other.delete_markers
            self.current_delete_markers += other.current_delete_markers

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(
            kind=self.kind,
            current=self.current,
            noncurrent=self.noncurrent,
            delete_markers=self.delete_markers,
            current_delete_markers=self.current_delete_markers,
        )
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VersionStats:
        base = InventoryStats.from_dict(d)
        st = cls(prefix=base.prefix, depth=base.depth, now=base.now, top_n=base.top_n)
        st.__dict__.update({k: v for k, v in base.__dict__.items() if not k.startswith("_")})
        st.current = list(d["current"])
        st.noncurrent = list(d["noncurrent"])
        st.delete_markers = int(d["delete_markers"])
        st.current_delete_markers = int(d["current_delete_markers"])
        return st

    def summary(self) -> dict[str, Any]:
        """The ``versions`` section of summary.json."""
        return {
            "current": {"objects": self.current[0], "bytes": self.current[1]},
            "noncurrent": {"objects": self.noncurrent[0], "bytes": self.noncurrent[1]},
            "delete_markers": self.delete_markers,
            "deleted_keys": self.current_delete_markers,
        }


def stats_from_dict(d: dict[str, Any]) -> InventoryStats:
    """A stats sidecar of either kind (a versioned run's carry ``kind: versions``)."""
    return VersionStats.from_dict(d) if d.get("kind") == "versions" else InventoryStats.from_dict(d)


class VersionPartWriter(PartWriter):
    """PartWriter for version rows: the S3 Inventory columns of a versioned bucket's report."""

    def _flush(self) -> None:
        import os
        import tempfile

        import pyarrow.parquet as pq

        if not self._pages:
            return
        pages, self._pages, n, self._buffered = self._pages, [], self._buffered, 0
        page = VersionPage.concat(pages)
        etags = page.etags
        table = pa.Table.from_arrays(
            [
                pa.array([self.bucket] * n, pa.string()),
                pa.array(page.keys, pa.string()),
                page.version_ids,
                page.is_latest,
                page.is_delete_marker,
                page.sizes,
                page.dates,
                etags,
                page.classes,
                pc.match_substring(etags, "-"),
                page.checksums,
            ],
            schema=VERSIONS_SCHEMA,
        )
        if self._writer is None:
            fd, self._tmp = tempfile.mkstemp(suffix=".parquet", dir=self.tmpdir)
            os.close(fd)
            self._writer = pq.ParquetWriter(self._tmp, VERSIONS_SCHEMA, compression="snappy")
        self._writer.write_table(table)
        self._part_rows += n
        if self._part_rows >= self.part_rows:
            self._close_part()


def writer_class(source: Any) -> Callable[..., Any]:
    """The part writer class of a listing source (None: ListObjectsV2)."""
    return VersionPartWriter if getattr(source, "kind", None) == "versions" else PartWriter


def stats_class(source: Any) -> Callable[..., InventoryStats]:
    return VersionStats if getattr(source, "kind", None) == "versions" else InventoryStats


__all__ = [
    "VERSIONS",
    "VERSIONS_FILE_SCHEMA",
    "VersionCursor",
    "VersionPage",
    "VersionPartWriter",
    "VersionSource",
    "VersionStats",
    "PartFile",
    "stats_class",
    "stats_from_dict",
    "writer_class",
]
