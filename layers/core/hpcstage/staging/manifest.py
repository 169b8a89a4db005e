"""The staging manifest: which objects to stage (bucket, key, size, storage_class), as CSV or JSONL.

Written once by selection and read by every target. CSV is quoted by the csv module, so keys with
commas, quotes or newlines survive a round trip; JSONL escapes them. A manifest on S3 is read from
a local temporary copy, so it can be iterated more than once without holding it in memory.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..s3util import parse_s3_url
from .errors import StagingError

MANIFEST_FIELDS = ("bucket", "key", "size", "storage_class")
FORMATS = ("csv", "jsonl")


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    bucket: str
    key: str
    size: int
    storage_class: str = "STANDARD"

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "key": self.key,
            "size": self.size,
            "storage_class": self.storage_class,
        }


def format_for(destination: str | os.PathLike[str], fmt: str | None) -> str:
    """The manifest format: as given, else from the file extension (.csv / .jsonl), else an error."""
    if fmt is None:
        suffix = Path(os.fspath(destination)).suffix.lower().lstrip(".")
        fmt = {"csv": "csv", "jsonl": "jsonl", "ndjson": "jsonl"}.get(suffix)
        if fmt is None:
            raise ValueError(
                f"cannot tell the manifest format of {os.fspath(destination)!r}: name it .csv or .jsonl"
            )
    if fmt not in FORMATS:
        raise ValueError(f"manifest format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    return fmt


class ManifestWriter:
    """Writes entries to a text stream in CSV (with a header row) or JSONL."""

    def __init__(self, stream: IO[str], fmt: str) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"manifest format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        self._stream = stream
        self._fmt = fmt
        self._csv = csv.writer(stream, lineterminator="\n") if fmt == "csv" else None
        if self._csv is not None:
            self._csv.writerow(MANIFEST_FIELDS)

    def write(self, entry: ManifestEntry) -> None:
        if self._csv is not None:
            self._csv.writerow((entry.bucket, entry.key, entry.size, entry.storage_class))
        else:
            self._stream.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")


class ManifestFile:
    """A manifest being written to a local path or to s3://bucket/key (uploaded on close)."""

    def __init__(
        self, destination: str | os.PathLike[str], fmt: str | None = None, *, s3: Any = None
    ) -> None:
        self.fmt = format_for(destination, fmt)
        self.uri = os.fspath(destination)
        self._s3_target = None
        if self.uri.startswith("s3://"):
            if s3 is None:
                raise ValueError(f"writing the manifest to {self.uri} needs an s3 client")
            url = parse_s3_url(self.uri)
            self._s3_target = (s3, url.bucket, url.prefix)
            fd, self._path = tempfile.mkstemp(suffix="." + self.fmt)
            os.close(fd)
        else:
            Path(self.uri).parent.mkdir(parents=True, exist_ok=True)
            self._path = self.uri + ".tmp"
        self._stream = open(self._path, "w", encoding="utf-8", newline="")  # noqa: SIM115 - closed in close()
        self.writer = ManifestWriter(self._stream, self.fmt)

    def write(self, entry: ManifestEntry) -> None:
        self.writer.write(entry)

    def close(self) -> str:
        """Finish the file (atomically for a local path) and return where it is."""
        self._stream.close()
        if self._s3_target is not None:
            s3, bucket, key = self._s3_target
            try:
                s3.upload_file(self._path, bucket, key)
            finally:
                os.unlink(self._path)
        else:
            os.replace(self._path, self.uri)
        return self.uri

    def abort(self) -> None:
        self._stream.close()
        if os.path.exists(self._path):
            os.unlink(self._path)


def read_entries(stream: IO[str], fmt: str) -> Iterator[ManifestEntry]:
    if fmt == "csv":
        reader = csv.reader(stream)
        header = next(reader, None)
        if header is None:
            return
        if tuple(header) != MANIFEST_FIELDS:
            raise StagingError(f"manifest CSV header is {header}, expected {list(MANIFEST_FIELDS)}")
        for row in reader:
            if len(row) != len(MANIFEST_FIELDS):
                raise StagingError(
                    f"manifest CSV row has {len(row)} fields, expected {len(MANIFEST_FIELDS)}: {row}"
                )
            yield ManifestEntry(row[0], row[1], int(row[2]), row[3] or "STANDARD")
    elif fmt == "jsonl":
        for line in stream:
            if line.strip():
                d = json.loads(line)
                yield ManifestEntry(
                    d["bucket"], d["key"], int(d["size"]), d.get("storage_class") or "STANDARD"
                )
    else:
        raise ValueError(f"manifest format must be one of {', '.join(FORMATS)}, not {fmt!r}")


class StagingManifest:
    """A re-iterable list of ManifestEntry: in memory, in a local file, or copied down from S3."""

    def __init__(self, opener: Callable[[], Iterator[ManifestEntry]], *, uri: str = "") -> None:
        self._opener = opener
        self.uri = uri
        self._totals: tuple[int, int] | None = None
        self._bucket: str | None = None

    def __iter__(self) -> Iterator[ManifestEntry]:
        return self._opener()

    @classmethod
    def from_entries(cls, entries: Iterable[ManifestEntry]) -> StagingManifest:
        items = list(entries)
        return cls(lambda: iter(items))

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], fmt: str | None = None) -> StagingManifest:
        fmt = format_for(path, fmt)

        def open_entries() -> Iterator[ManifestEntry]:
            with open(path, encoding="utf-8", newline="") as f:
                yield from read_entries(f, fmt)

        return cls(open_entries, uri=os.fspath(path))

    @classmethod
    def from_s3(cls, s3: Any, url: str, fmt: str | None = None) -> StagingManifest:
        """Copy the manifest to a temporary file once; it is deleted with this object."""
        fmt = format_for(url, fmt)
        loc = parse_s3_url(url)
        fd, tmp = tempfile.mkstemp(suffix="." + fmt)
        os.close(fd)
        try:
            s3.download_file(loc.bucket, loc.prefix, tmp)
        except BaseException:
            os.unlink(tmp)
            raise
        manifest = cls.from_path(tmp, fmt)
        manifest.uri = url
        weakref.finalize(manifest, _unlink_quietly, tmp)
        return manifest

    @classmethod
    def from_text(cls, text: str, fmt: str) -> StagingManifest:
        return cls(lambda: read_entries(io.StringIO(text, newline=""), fmt))

    def totals(self) -> tuple[int, int]:
        """(objects, bytes), counted once."""
        if self._totals is None:
            objects = total = 0
            for entry in self:
                objects += 1
                total += entry.size
            self._totals = (objects, total)
        return self._totals

    def bucket(self) -> str | None:
        """The one bucket every entry names (None for an empty manifest); targets map one bucket
        onto one root, so a manifest naming two is refused."""
        if self._bucket is None:
            buckets: set[str] = set()
            for entry in self:
                buckets.add(entry.bucket)
                if len(buckets) > 1:
                    raise StagingError(
                        f"a staging manifest must name one bucket, this one names {sorted(buckets)}: "
                        "select and stage each bucket separately"
                    )
            if not buckets:
                return None
            self._bucket = buckets.pop()
        return self._bucket


def _unlink_quietly(path: str) -> None:
    # Called at interpreter exit or garbage collection: the file may already be gone.
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
