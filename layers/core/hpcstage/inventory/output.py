"""Inventory output in the S3 Inventory format: Parquet parts, manifest.json, manifest.checksum.

Layout under the run's output root (a local directory or s3://bucket/prefix):
    data/<range-id>-<n>.parquet   Parquet parts, written as pages arrive
    stats/<range-id>.json         per-invocation statistics (merged by the reducer)
    manifest.json, manifest.checksum
    summary.json, report.txt, report.html, ranges.json
and, beside the runs of one bucket, one Hive table per target (bucket and prefix) that every run adds a
partition to, as S3 Inventory does (``<root>/<bucket>/hive/<target>/dt=<time>/symlink.txt``, each line
the absolute path or s3:// URL of one Parquet part; see hive_ddl). A writer that is given no hive
store keeps the older per-run ``hive/dt=<minute>/symlink.txt``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from ..s3util import as_page
from .model import PartFile
from .page import Page

INVENTORY_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("size", pa.int64()),
        pa.field("last_modified_date", pa.timestamp("ms", tz="UTC")),
        pa.field("e_tag", pa.string()),
        pa.field("storage_class", pa.string()),
        pa.field("is_multipart_uploaded", pa.bool_()),
        pa.field("checksum_algorithm", pa.string()),
    ]
)

# The Parquet message type string S3 Inventory puts in manifest.json's fileSchema.
FILE_SCHEMA = (
    "message s3.inventory { required binary bucket (UTF8); required binary key (UTF8); "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP_MILLIS); "
    "optional binary e_tag (UTF8); optional binary storage_class (UTF8); "
    "optional boolean is_multipart_uploaded; optional binary checksum_algorithm (UTF8);}"
)

# Parquet dictionary encoding only where values repeat by nature. Keys and ETags are (nearly) unique:
# the writer would build a dictionary for each and fall back to plain encoding when it grew too large,
# which took ~30 % of the write time and made parts larger (measured on bench/cpu_per_key.py pages).
DICTIONARY_COLUMNS = ["bucket", "storage_class", "checksum_algorithm"]


class OutputStore(Protocol):
    """Where a run's files go. Keys are relative ("data/r00001-0000.parquet")."""

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def put_file(self, key: str, path: str) -> None: ...

    def get_bytes(self, key: str) -> bytes: ...

    def exists(self, key: str) -> bool: ...

    def uri(self, key: str = "") -> str: ...

    def open(self, key: str) -> Any: ...


def put_all(writes: Sequence[tuple[OutputStore, str, bytes]]) -> None:
    """Write small objects at once (a thread each): a run's outputs do not depend on each other, and one after
    another they cost a round trip each (~60 ms a PUT in S3) at the end of every run."""
    if len(writes) <= 1:
        for store, key, data in writes:
            store.put_bytes(key, data)
        return
    with ThreadPoolExecutor(max_workers=len(writes), thread_name_prefix="put") as pool:
        for f in [pool.submit(store.put_bytes, key, data) for store, key, data in writes]:
            f.result()


class LocalStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        # absolute, so that the paths in summary.json and symlink.txt hold from any working directory
        self.root = Path(root).absolute()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        p = (self.root / key).resolve()
        if self.root.resolve() not in p.parents and p != self.root.resolve():
            raise ValueError(f"output key escapes the output directory: {key!r}")
        return p

    def put_bytes(self, key: str, data: bytes) -> None:
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(p)

    def put_file(self, key: str, path: str) -> None:
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, p)

    def get_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def uri(self, key: str = "") -> str:
        return str(self.root / key) if key else str(self.root)

    def open(self, key: str) -> Any:
        return open(self._path(key), "rb")  # noqa: SIM115 - the caller (pyarrow) owns the file


class S3Store:
    def __init__(self, s3: Any, bucket: str, prefix: str = "") -> None:
        self.s3 = s3
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_bytes(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def put_file(self, key: str, path: str) -> None:
        self.s3.upload_file(path, self.bucket, self._key(key))
        os.unlink(path)

    def get_bytes(self, key: str) -> bytes:
        body: bytes = self.s3.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        return body

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.s3.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def uri(self, key: str = "") -> str:
        k = self._key(key)
        return f"s3://{self.bucket}/{k}"

    def key_for(self, key: str) -> str:
        return self._key(key)

    def open(self, key: str) -> Any:
        """A seekable reader; accepts a key relative to the store or already prefixed (manifests hold those)."""
        from .diff import S3RangeFile

        full = key if self.prefix and key.startswith(self.prefix + "/") else self._key(key)
        return S3RangeFile(self.s3, self.bucket, full)


def target_name(prefix: str) -> str:
    """A folder name for one inventory target (a bucket's whole key space, or one prefix of it).

    Readable and safe as one path component locally and in an Athena LOCATION: ``all`` for the whole
    bucket, else ``prefix-<slug>-<hash>``, the hash telling apart prefixes whose slugs agree.
    """
    if not prefix:
        return "all"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", prefix).strip("-.")[:60] or "x"
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:8]
    return f"prefix-{slug}-{digest}"


def hive_partition(started_ms: int) -> str:
    """The ``dt`` value of a run's partition: its start, to the millisecond (``2026-11-22-15-56-24-107``). To the
    second, two runs of one target started within the same second wrote the same partition, the second run's
    over the first's: the local runtime runs a small target's inventory in under a second."""
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(started_ms // 1000)) + f"-{started_ms % 1000:03d}"


def run_root(results_prefix: str, bucket: str, run_id: str) -> str:
    """Where one run's output lives in the results bucket: ``<results prefix>/<bucket>/<run id>``."""
    return f"{results_prefix.strip('/')}/{bucket}/{run_id}".lstrip("/")


def hive_root(results_prefix: str, bucket: str, prefix: str) -> str:
    """The Hive table of one target beside its runs: ``<results prefix>/<bucket>/hive/<target>``."""
    return f"{results_prefix.strip('/')}/{bucket}/hive/{target_name(prefix)}".lstrip("/")


def latest_key(results_prefix: str, bucket: str, prefix: str) -> str:
    """Where the last successful run of a target (bucket and prefix) records its root: audits read it."""
    target = prefix.replace("/", "%2F") or "%ROOT%"
    return f"{results_prefix.strip('/')}/{bucket}/_latest/{target}.json".lstrip("/")


def latest_run(s3: Any, results_bucket: str, key: str) -> S3Store | None:
    """The output of the last successful run recorded at ``key`` (see latest_key), or None if none was."""
    from botocore.exceptions import ClientError

    try:
        latest = json.loads(s3.get_object(Bucket=results_bucket, Key=key)["Body"].read())
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
    return S3Store(s3, results_bucket, latest["root"])


def record_latest_run(s3: Any, results_bucket: str, key: str, root: str, finished: str) -> None:
    s3.put_object(
        Bucket=results_bucket, Key=key, Body=json.dumps({"root": root, "finished": finished}).encode()
    )


def _file_md5(path: str) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class PartWriter:
    """Streams listed objects into Parquet parts with bounded memory.

    Rows are buffered per column up to ``row_group_rows``, then written as one row group to a
    temporary file; at ``part_rows`` the part is closed and handed to the store (and the temporary
    file deleted), so neither memory nor local disk grows with the size of the shard.
    """

    def __init__(
        self,
        store: OutputStore,
        bucket: str,
        name: str,
        *,
        row_group_rows: int = 50_000,
        part_rows: int = 1_000_000,
        tmpdir: str | None = None,
    ) -> None:
        self.store = store
        self.bucket = bucket
        self.name = name
        self.row_group_rows = row_group_rows
        self.part_rows = part_rows
        self.tmpdir = tmpdir
        self.parts: list[PartFile] = []
        self._pages: list[Page] = []  # buffered until a row group's worth
        self._buffered = 0
        self._writer: pq.ParquetWriter | None = None
        self._tmp: str | None = None
        self._part_rows = 0

    def add_page(self, objects: Page | Sequence[dict[str, Any]]) -> None:
        page = as_page(objects)
        if len(page):
            self._pages.append(page)
            self._buffered += len(page)
        if self._buffered >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if not self._pages:
            return
        pages, self._pages, n, self._buffered = self._pages, [], self._buffered, 0
        table = pa.Table.from_arrays(
            [
                pa.repeat(pa.scalar(self.bucket, pa.string()), n),
                pa.concat_arrays([p.key_array() for p in pages]),
                pa.concat_arrays([p.sizes for p in pages]),
                pa.concat_arrays([p.dates for p in pages]),
                pa.concat_arrays([p.etags for p in pages]),
                pa.concat_arrays([p.classes for p in pages]),
                pa.concat_arrays([p.multipart() for p in pages]),
                pa.concat_arrays([p.checksums for p in pages]),
            ],
            schema=INVENTORY_SCHEMA,
        )
        if self._writer is None:
            fd, self._tmp = tempfile.mkstemp(suffix=".parquet", dir=self.tmpdir)
            os.close(fd)
            self._writer = pq.ParquetWriter(
                self._tmp, INVENTORY_SCHEMA, compression="snappy", use_dictionary=DICTIONARY_COLUMNS
            )
        self._writer.write_table(table)
        self._part_rows += n
        if self._part_rows >= self.part_rows:
            self._close_part()

    def _close_part(self) -> None:
        if self._writer is None or self._tmp is None:
            return
        self._writer.close()
        key = f"data/{self.name}-{len(self.parts):04d}.parquet"
        size = os.path.getsize(self._tmp)
        md5 = _file_md5(self._tmp)
        self.store.put_file(key, self._tmp)
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)
        self.parts.append(PartFile(key=key, size=size, md5=md5, rows=self._part_rows))
        self._writer, self._tmp, self._part_rows = None, None, 0

    def close(self) -> list[PartFile]:
        self._flush()
        self._close_part()
        return self.parts

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._tmp and os.path.exists(self._tmp):
            os.unlink(self._tmp)
        self._writer, self._tmp = None, None


def write_manifest(
    store: OutputStore,
    source_bucket: str,
    parts: Iterable[PartFile],
    *,
    destination_arn: str,
    key_prefix: str = "",
    created_ms: int | None = None,
    file_schema: str = FILE_SCHEMA,
    hive: OutputStore | None = None,
) -> dict[str, Any]:
    """manifest.json (S3 Inventory format), manifest.checksum, and a Hive symlink.txt.

    With ``hive`` (the target's table folder, see target_name), the symlink goes to a new
    ``dt=<millisecond>`` partition there; without, to the run's own ``hive/dt=<minute>/``.
    """
    created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
    files: list[dict[str, Any]] = [
        {"key": f"{key_prefix}{p.key}", "size": p.size, "MD5checksum": p.md5}
        for p in sorted(parts, key=lambda p: p.key)
    ]
    manifest = {
        "sourceBucket": source_bucket,
        "destinationBucket": destination_arn,
        "version": "2016-11-30",
        "creationTimestamp": str(created_ms),
        "fileFormat": "Parquet",
        "fileSchema": file_schema,
        "files": files,
    }
    body = json.dumps(manifest, indent=2).encode()
    symlinks = "".join(store.uri(f["key"][len(key_prefix) :]) + "\n" for f in files).encode()
    if hive is not None:
        link: tuple[OutputStore, str, bytes] = (
            hive,
            f"dt={hive_partition(created_ms)}/symlink.txt",
            symlinks,
        )
    else:
        dt = time.strftime("%Y-%m-%d-%H-%M", time.gmtime(created_ms / 1000))
        link = (store, f"hive/dt={dt}/symlink.txt", symlinks)
    put_all(
        [
            (store, "manifest.json", body),
            (store, "manifest.checksum", hashlib.md5(body, usedforsecurity=False).hexdigest().encode()),
            link,
        ]
    )
    return manifest


def hive_ddl(location: str, table: str = "hpcstage_inventory") -> str:
    """Athena DDL for a target's Hive table (S3 Inventory's Parquet schema, partitioned by dt).

    ``location`` is the target's hive folder (``s3://.../<bucket>/hive/<target>/``). New runs add
    partitions: ``MSCK REPAIR TABLE`` (or ALTER TABLE ADD PARTITION) picks them up.
    """
    location = location if location.endswith("/") else location + "/"
    return (
        f"CREATE EXTERNAL TABLE IF NOT EXISTS {table} (\n"
        "  bucket string,\n"
        "  key string,\n"
        "  size bigint,\n"
        "  last_modified_date timestamp,\n"
        "  e_tag string,\n"
        "  storage_class string,\n"
        "  is_multipart_uploaded boolean,\n"
        "  checksum_algorithm string\n"
        ")\n"
        "PARTITIONED BY (dt string)\n"
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe'\n"
        "STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'\n"
        "OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.IgnoreKeyTextOutputFormat'\n"
        f"LOCATION '{location}';\n"
    )
