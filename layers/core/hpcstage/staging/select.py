"""Select the objects to stage from inventory Parquet, check archive classes and capacity.

The inventory can hold hundreds of millions of rows, so parts are read one at a time (an S3 part is
copied to a temporary file, read, and deleted) in record batches: memory is bounded by a batch plus
whatever the caller keeps (the archived list, the explicit key set), never by the inventory.
Size, date, prefix and storage-class filters run vectorised in Arrow; globs and explicit keys are
checked in Python only on the rows those filters kept.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from botocore.exceptions import ClientError

from ..inventory.report import human_bytes
from ..inventory.stats import ARCHIVE_CLASSES
from ..s3util import parse_s3_url
from .errors import ArchivedObjectsError, InsufficientCapacityError, SelectionError, StagingError
from .manifest import ManifestEntry, ManifestFile

STORAGE_CLASSES = frozenset(
    {
        "STANDARD",
        "REDUCED_REDUNDANCY",
        "STANDARD_IA",
        "ONEZONE_IA",
        "INTELLIGENT_TIERING",
        "GLACIER",
        "DEEP_ARCHIVE",
        "GLACIER_IR",
        "OUTPOSTS",
        "SNOW",
        "EXPRESS_ONEZONE",
    }
)
RESTORE_TIERS = ("Standard", "Bulk", "Expedited")
ARCHIVE_POLICIES = ("fail", "restore")
_COLUMNS = ["bucket", "key", "size", "last_modified_date", "storage_class"]
_SELECTION_FIELDS = (
    "prefixes",
    "globs",
    "min_size",
    "max_size",
    "modified_after",
    "modified_before",
    "storage_classes",
    "manifest",
)


@dataclass(frozen=True)
class Selection:
    """Which inventory rows to stage. Every given criterion must hold (AND); within ``prefixes``
    and within ``globs`` any one match is enough (OR).

    - ``min_size``/``max_size``: inclusive bounds in bytes.
    - ``modified_after`` (inclusive) / ``modified_before`` (exclusive): a half-open window, so
      consecutive windows never select an object twice. Times without a zone are taken as UTC.
    - ``globs``: fnmatch on the whole key, case-sensitive; ``*`` also matches ``/``.
    - ``manifest``: explicit keys, or an ``s3://bucket/key`` object with one key per line
      (resolved by ``resolve_manifest``); keys not found in the inventory are reported.
    """

    prefixes: tuple[str, ...] = ()
    globs: tuple[str, ...] = ()
    min_size: int | None = None
    max_size: int | None = None
    modified_after: datetime | None = None
    modified_before: datetime | None = None
    storage_classes: frozenset[str] | None = None
    manifest_keys: frozenset[str] | None = None
    manifest_url: str | None = None

    @classmethod
    def from_json(cls, text: str | bytes) -> Selection:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise SelectionError(f"selection is not valid JSON: {err}") from err
        return cls.from_dict(doc)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Selection:
        if not isinstance(doc, Mapping):
            raise SelectionError(f"selection must be a JSON object, not {type(doc).__name__}")
        unknown = sorted(set(doc) - set(_SELECTION_FIELDS))
        if unknown:
            raise SelectionError(
                f"unknown selection field(s) {', '.join(unknown)}; known fields: {', '.join(_SELECTION_FIELDS)}"
            )
        min_size = _size(doc, "min_size")
        max_size = _size(doc, "max_size")
        if min_size is not None and max_size is not None and min_size > max_size:
            raise SelectionError(f"min_size ({min_size}) is larger than max_size ({max_size})")
        after = _timestamp(doc, "modified_after")
        before = _timestamp(doc, "modified_before")
        if after is not None and before is not None and after >= before:
            raise SelectionError(
                f"modified_after ({after.isoformat()}) must be earlier than modified_before ({before.isoformat()})"
            )
        classes = None
        if doc.get("storage_classes") is not None:
            names = _string_list(doc, "storage_classes")
            if not names:
                raise SelectionError(
                    "storage_classes is empty: it would select nothing (omit it to allow all)"
                )
            upper = {n.upper() for n in names}
            bad = sorted(upper - STORAGE_CLASSES)
            if bad:
                raise SelectionError(
                    f"unknown storage class(es) {', '.join(bad)}; known: {', '.join(sorted(STORAGE_CLASSES))}"
                )
            classes = frozenset(upper)
        keys, url = _manifest(doc.get("manifest"))
        for glob in _string_list(doc, "globs"):
            if glob == "":
                raise SelectionError("globs must not contain an empty pattern")
        return cls(
            prefixes=tuple(_string_list(doc, "prefixes")),
            globs=tuple(_string_list(doc, "globs")),
            min_size=min_size,
            max_size=max_size,
            modified_after=after,
            modified_before=before,
            storage_classes=classes,
            manifest_keys=keys,
            manifest_url=url,
        )

    def resolve_manifest(self, s3: Any) -> Selection:
        """Load an ``s3://`` explicit manifest (newline-separated keys) into ``manifest_keys``."""
        if self.manifest_url is None:
            return self
        if s3 is None:
            raise SelectionError(f"the explicit manifest {self.manifest_url} needs an s3 client")
        loc = parse_s3_url(self.manifest_url)
        body = s3.get_object(Bucket=loc.bucket, Key=loc.prefix)["Body"].read().decode("utf-8")
        keys = frozenset(line.rstrip("\r") for line in body.split("\n") if line.rstrip("\r"))
        return dataclasses.replace(self, manifest_keys=keys, manifest_url=None)


def _size(doc: Mapping[str, Any], name: str) -> int | None:
    value = doc.get(name)
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < 0:
        raise SelectionError(f"{name} must be a whole number of bytes >= 0, not {value!r}")
    return int(value)


def _timestamp(doc: Mapping[str, Any], name: str) -> datetime | None:
    value = doc.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SelectionError(f"{name} must be an ISO 8601 string such as 2024-05-01T00:00:00Z, not {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise SelectionError(f"{name} {value!r} is not an ISO 8601 time (e.g. 2024-05-01T00:00:00Z)") from err
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _string_list(doc: Mapping[str, Any], name: str) -> list[str]:
    value = doc.get(name)
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SelectionError(f"{name} must be a list of strings, not {value!r}")
    return list(value)


def _manifest(value: Any) -> tuple[frozenset[str] | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, str):
        if not value.startswith("s3://"):
            raise SelectionError(f"manifest must be a list of keys or an s3://bucket/key URL, not {value!r}")
        try:
            loc = parse_s3_url(value)
        except ValueError as err:
            raise SelectionError(str(err)) from err
        if not loc.prefix or loc.prefix.endswith("/"):
            raise SelectionError(f"manifest URL {value!r} must name an object, not a prefix")
        return None, value
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return frozenset(value), None
    raise SelectionError("manifest must be a list of non-empty key strings or an s3://bucket/key URL")


@dataclass
class SelectionResult:
    objects: int = 0
    bytes: int = 0
    archived: list[ManifestEntry] = field(default_factory=list)
    archived_bytes: int = 0
    missing_keys: list[str] = field(default_factory=list)
    by_storage_class: dict[str, list[int]] = field(default_factory=dict)
    buckets: list[str] = field(default_factory=list)
    rows_scanned: int = 0
    parts_read: int = 0
    manifest_uri: str | None = None

    def to_dict(self, max_listed: int = 20) -> dict[str, Any]:
        """Small enough for a Step Functions payload: lists are cut to ``max_listed``."""
        return {
            "objects": self.objects,
            "bytes": self.bytes,
            "archived_objects": len(self.archived),
            "archived_bytes": self.archived_bytes,
            "archived_sample": [e.key for e in self.archived[:max_listed]],
            "missing_keys": len(self.missing_keys),
            "missing_sample": self.missing_keys[:max_listed],
            "by_storage_class": {
                c: {"objects": v[0], "bytes": v[1]} for c, v in sorted(self.by_storage_class.items())
            },
            "buckets": self.buckets,
            "rows_scanned": self.rows_scanned,
            "parts_read": self.parts_read,
            "manifest_uri": self.manifest_uri,
        }


ParquetSources = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def select_objects(
    parquet_sources: ParquetSources,
    selection: Selection | Mapping[str, Any],
    *,
    s3: Any = None,
    write: Callable[[ManifestEntry], None] | None = None,
    output: str | os.PathLike[str] | None = None,
    output_format: str | None = None,
    batch_rows: int = 65_536,
    all_versions: bool = False,
) -> SelectionResult:
    """Scan inventory Parquet and write the selected rows as a staging manifest.

    A versioned inventory (``--versions``: ``is_latest``/``is_delete_marker`` columns) is read for its
    current versions only, unless ``all_versions``: non-current versions and delete markers are not files.

    ``parquet_sources``: a .parquet file, a directory or ``s3://bucket/prefix`` holding an inventory
    (its manifest.json lists the parts; without one, ``data/*.parquet``), or a list of these.
    Selected rows go to ``write`` (a callable) and/or ``output`` (a local path or s3:// URL, CSV or
    JSONL by ``output_format`` or extension).
    """
    if not isinstance(selection, Selection):
        selection = Selection.from_dict(selection)
    selection = selection.resolve_manifest(s3)
    sink = ManifestFile(output, output_format, s3=s3) if output is not None else None
    result = SelectionResult()
    matcher = _RowMatcher(selection)
    buckets: set[str] = set()
    try:
        for part in _iter_parts(parquet_sources, s3):
            result.parts_read += 1
            for batch in part.iter_batches(
                batch_size=batch_rows, columns=_COLUMNS, current_only=not all_versions
            ):
                result.rows_scanned += batch.num_rows
                for entry in matcher.select(batch):
                    result.objects += 1
                    result.bytes += entry.size
                    counts = result.by_storage_class.setdefault(entry.storage_class, [0, 0])
                    counts[0] += 1
                    counts[1] += entry.size
                    buckets.add(entry.bucket)
                    if entry.storage_class in ARCHIVE_CLASSES:
                        result.archived.append(entry)
                        result.archived_bytes += entry.size
                    if write is not None:
                        write(entry)
                    if sink is not None:
                        sink.write(entry)
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    if sink is not None:
        result.manifest_uri = sink.close()
    result.buckets = sorted(buckets)
    if selection.manifest_keys is not None:
        result.missing_keys = sorted(selection.manifest_keys - matcher.found_keys)
    return result


class _RowMatcher:
    def __init__(self, selection: Selection) -> None:
        self.selection = selection
        self.found_keys: set[str] = set()
        self._glob_re = (
            re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in selection.globs))
            if selection.globs
            else None
        )
        self._classes = pa.array(sorted(selection.storage_classes)) if selection.storage_classes else None

    def select(self, batch: pa.RecordBatch) -> Iterator[ManifestEntry]:
        s = self.selection
        keys = batch.column("key")
        sizes = batch.column("size")
        # Inventory rows without a storage class are STANDARD (S3 omits the default).
        classes = pc.fill_null(batch.column("storage_class"), "STANDARD")
        masks: list[Any] = []
        if s.prefixes:
            prefix_mask = pc.starts_with(keys, pattern=s.prefixes[0])
            for p in s.prefixes[1:]:
                prefix_mask = pc.or_(prefix_mask, pc.starts_with(keys, pattern=p))
            masks.append(prefix_mask)
        if s.min_size is not None:
            masks.append(pc.greater_equal(sizes, s.min_size))
        if s.max_size is not None:
            masks.append(pc.less_equal(sizes, s.max_size))
        dates = batch.column("last_modified_date")
        if s.modified_after is not None:
            masks.append(pc.greater_equal(dates, pa.scalar(s.modified_after, dates.type)))
        if s.modified_before is not None:
            masks.append(pc.less(dates, pa.scalar(s.modified_before, dates.type)))
        if self._classes is not None:
            masks.append(pc.is_in(classes, value_set=self._classes))
        table = pa.RecordBatch.from_arrays(
            [batch.column("bucket"), keys, sizes, classes], names=["bucket", "key", "size", "storage_class"]
        )
        if masks:
            mask = masks[0]
            for m in masks[1:]:
                mask = pc.and_(mask, m)
            # A null (unknown size or date) never satisfies a bound.
            table = table.filter(pc.fill_null(mask, False))
        explicit = s.manifest_keys
        glob_re = self._glob_re
        for bucket, key, size, storage_class in zip(
            table.column(0).to_pylist(),
            table.column(1).to_pylist(),
            table.column(2).to_pylist(),
            table.column(3).to_pylist(),
            strict=True,
        ):
            if explicit is not None:
                if key not in explicit:
                    continue
                self.found_keys.add(key)
            if glob_re is not None and not glob_re.match(key):
                continue
            yield ManifestEntry(bucket, key, int(size or 0), storage_class)


class _Part:
    """One local Parquet file, read in batches; a temporary copy is deleted when done."""

    def __init__(self, path: str, temporary: bool) -> None:
        self.path = path
        self.temporary = temporary

    def iter_batches(
        self, *, batch_size: int, columns: list[str], current_only: bool = True
    ) -> Iterator[pa.RecordBatch]:
        try:
            parquet = pq.ParquetFile(self.path)
            missing = [c for c in columns if c not in parquet.schema_arrow.names]
            if missing:
                raise StagingError(f"inventory part {self.path} lacks column(s) {', '.join(missing)}")
            versioned = {"is_latest", "is_delete_marker"} <= set(parquet.schema_arrow.names)
            if not (current_only and versioned):
                yield from parquet.iter_batches(batch_size=batch_size, columns=columns)
                return
            for batch in parquet.iter_batches(
                batch_size=batch_size, columns=[*columns, "is_latest", "is_delete_marker"]
            ):
                current = pc.and_(
                    pc.fill_null(batch.column("is_latest"), False),
                    pc.invert(pc.fill_null(batch.column("is_delete_marker"), False)),
                )
                yield batch.filter(current).select(columns)
        finally:
            if self.temporary and os.path.exists(self.path):
                os.unlink(self.path)


def _iter_parts(sources: ParquetSources, s3: Any) -> Iterator[_Part]:
    if isinstance(sources, str | os.PathLike):
        sources = [sources]
    if not sources:
        raise SelectionError("no inventory Parquet sources given")
    for source in sources:
        text = os.fspath(source)
        if text.startswith("s3://"):
            yield from _s3_parts(text, s3)
        else:
            yield from _local_parts(Path(text))


def _local_parts(path: Path) -> Iterator[_Part]:
    if path.is_file():
        yield _Part(str(path), temporary=False)
        return
    if not path.is_dir():
        raise StagingError(f"inventory source {path} does not exist")
    manifest = path / "manifest.json"
    if manifest.exists():
        files = json.loads(manifest.read_text())["files"]
        for f in files:
            yield _Part(str(path / f["key"]), temporary=False)
        return
    parts = sorted((path / "data").glob("*.parquet")) or sorted(path.glob("*.parquet"))
    if not parts:
        raise StagingError(f"no manifest.json and no Parquet parts under {path}")
    for p in parts:
        yield _Part(str(p), temporary=False)


def _s3_parts(url: str, s3: Any) -> Iterator[_Part]:
    if s3 is None:
        raise SelectionError(f"reading the inventory at {url} needs an s3 client")
    loc = parse_s3_url(url)
    if loc.prefix.endswith(".parquet"):
        yield _download_part(s3, loc.bucket, loc.prefix, None)
        return
    prefix = loc.prefix.rstrip("/")
    manifest_key = f"{prefix}/manifest.json" if prefix else "manifest.json"
    try:
        body = s3.get_object(Bucket=loc.bucket, Key=manifest_key)["Body"].read()
    except ClientError as err:
        raise StagingError(
            f"cannot read the inventory manifest s3://{loc.bucket}/{manifest_key}: {err}"
        ) from err
    for f in json.loads(body)["files"]:
        key = f["key"]
        # S3 Inventory writes full keys; hpcstage's own output may write keys relative to the prefix.
        full = key if not prefix or key.startswith(prefix + "/") else f"{prefix}/{key}"
        yield _download_part(s3, loc.bucket, full, f.get("MD5checksum"))


def _download_part(s3: Any, bucket: str, key: str, md5: str | None) -> _Part:
    fd, tmp = tempfile.mkstemp(suffix=".parquet")
    os.close(fd)
    try:
        s3.download_file(bucket, key, tmp)
        if md5:
            digest = hashlib.md5(usedforsecurity=False)
            with open(tmp, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            if digest.hexdigest() != md5:
                raise StagingError(
                    f"inventory part s3://{bucket}/{key} does not match its manifest MD5 {md5}"
                )
    except BaseException:
        os.unlink(tmp)
        raise
    return _Part(tmp, temporary=True)


def check_archived(
    result: SelectionResult,
    policy: str,
    *,
    s3: Any = None,
    days: int = 7,
    tier: str = "Bulk",
    max_listed: int = 20,
) -> int:
    """Deal with selected objects in GLACIER / DEEP_ARCHIVE (GLACIER_IR reads directly).

    ``policy="fail"`` raises ArchivedObjectsError naming up to ``max_listed`` keys and the total;
    ``policy="restore"`` asks S3 to restore each one for ``days`` days at ``tier`` and returns how
    many requests were made (a restore already in progress counts as requested).
    Returns 0 when nothing is archived.
    """
    if policy not in ARCHIVE_POLICIES:
        raise SelectionError(
            f"archived-object policy must be one of {', '.join(ARCHIVE_POLICIES)}, not {policy!r}"
        )
    if not result.archived:
        return 0
    if policy == "fail":
        listed = [e.key for e in result.archived[:max_listed]]
        more = len(result.archived) - len(listed)
        raise ArchivedObjectsError(
            f"{len(result.archived)} selected object(s) ({human_bytes(result.archived_bytes)}) are in "
            f"GLACIER/DEEP_ARCHIVE and must be restored first: {', '.join(map(repr, listed))}"
            + (f" and {more} more" if more else "")
            + "; use the 'restore' policy or leave them out of the selection",
            listed,
            len(result.archived),
        )
    if s3 is None:
        raise SelectionError("the 'restore' policy needs an s3 client")
    if tier not in RESTORE_TIERS:
        raise SelectionError(f"restore tier must be one of {', '.join(RESTORE_TIERS)}, not {tier!r}")
    if days < 1:
        raise SelectionError(f"restore days must be at least 1, not {days}")
    requested = 0
    for entry in result.archived:
        if tier == "Expedited" and entry.storage_class == "DEEP_ARCHIVE":
            raise SelectionError(
                f"DEEP_ARCHIVE objects cannot be restored with the Expedited tier ({entry.key!r})"
            )
        try:
            s3.restore_object(
                Bucket=entry.bucket,
                Key=entry.key,
                RestoreRequest={"Days": days, "GlacierJobParameters": {"Tier": tier}},
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "RestoreAlreadyInProgress":
                raise
        requested += 1
    return requested


def restored_count(s3: Any, entries: Sequence[ManifestEntry]) -> int:
    """How many of ``entries`` have a finished restore (HeadObject Restore: ongoing-request="false")."""
    done = 0
    for entry in entries:
        restore = s3.head_object(Bucket=entry.bucket, Key=entry.key).get("Restore", "")
        if 'ongoing-request="false"' in restore:
            done += 1
    return done


def check_capacity(selection_bytes: int, free_bytes: int | None, *, headroom: float = 0.0) -> None:
    """Raise InsufficientCapacityError unless ``selection_bytes`` (plus a ``headroom`` fraction of
    it) fits in ``free_bytes``. ``free_bytes=None`` means the target does not copy data."""
    if free_bytes is None:
        return
    if headroom < 0:
        raise ValueError(f"headroom must be >= 0, not {headroom}")
    needed = int(selection_bytes * (1 + headroom))
    if needed > free_bytes:
        extra = f" (selection {_both(selection_bytes)} plus {headroom:.0%} headroom)" if headroom else ""
        raise InsufficientCapacityError(
            f"the selection needs {_both(needed)}{extra} but the target has only {_both(free_bytes)} free",
            needed,
            free_bytes,
        )


def _both(n: int) -> str:
    return f"{human_bytes(n)} ({n:,} bytes)"
