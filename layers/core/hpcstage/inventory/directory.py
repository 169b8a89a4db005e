"""S3 Express One Zone directory buckets: a parallel ``/``-delimiter walk with the same work-stealing pool.

Key-range sharding cannot work on a directory bucket: ListObjectsV2 "does not return objects in
lexicographical order" there and StartAfter "is not supported" (API_ListObjectsV2). What a directory bucket
does offer is its directories: ``Delimiter=/`` answers a directory's objects and its subdirectories
(CommonPrefixes). So the unit of work is a directory: a stream lists one directory page by page (any order
of keys within a page is fine: nothing here depends on order), writes its objects, and hands every
subdirectory it finds to the pool (``steal.LocalPool``), where idle streams take them. Parallelism comes as
fast as the tree fans out; one huge flat directory is listed by one stream, because nothing can split it.

Directory buckets also list "the prefixes that are related only to in-progress multipart uploads". Such a
prefix is walked like any other and turns out to hold no object; it is reported (``in_progress_prefixes``),
never counted as an object.

Completeness: every directory found is listed to its last page, or the run fails. A directory that S3
refuses (AccessDenied) does not stop the others; at the end the run fails naming every refused prefix.
The output is the same Parquet (S3 Inventory schema, rows in no particular order), manifest and report.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from botocore.exceptions import ClientError

from ..errors import AccessDeniedError, InputError
from ..s3util import RequestCounter, translate_client_error
from .lister import part_writer
from .model import KeyRange, PartFile, ShardResult
from .output import OutputStore
from .runner import InventoryOptions, Progress, finalize
from .stats import InventoryStats
from .steal import LocalPool

DIRECTORY_SUFFIX = "--x-s3"
# Prefixes listed in summary.json (each kind); the counts are always complete.
REPORTED_PREFIXES = 100


def is_directory_bucket(s3: Any, bucket: str) -> bool:
    """A directory bucket: by its name (``base--zone-id--x-s3``) or, failing that, by HeadBucket's answer
    (``BucketLocationType`` AvailabilityZone or LocalZone, which only directory buckets return)."""
    if bucket.endswith(DIRECTORY_SUFFIX):
        return True
    try:
        resp = s3.head_bucket(Bucket=bucket)
    except ClientError:
        return False  # the listing itself reports a missing bucket or denied access, in its words
    return resp.get("BucketLocationType") in ("AvailabilityZone", "LocalZone")


def list_directory_page(
    s3: Any, bucket: str, prefix: str, token: str | None, counter: RequestCounter | None
) -> dict[str, Any]:
    """One ``Delimiter=/`` page of one directory, keys and prefixes decoded."""
    params: dict[str, Any] = {"Bucket": bucket, "Delimiter": "/", "EncodingType": "url"}
    if prefix:
        params["Prefix"] = prefix
    if token:
        params["ContinuationToken"] = token
    try:
        resp: dict[str, Any] = s3.list_objects_v2(**params)
    except ClientError as err:
        if counter is not None:
            counter.add(1, 0)
        raise translate_client_error(err, bucket, where=f"under prefix {prefix!r}") from err
    if counter is not None:
        retries = int(resp.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        counter.add(1 + retries, retries)
    if resp.get("EncodingType") == "url":
        for o in resp.get("Contents", ()):
            o["Key"] = unquote_plus(o["Key"])
        for p in resp.get("CommonPrefixes", ()):
            p["Prefix"] = unquote_plus(p["Prefix"])
    return resp


def run_directory_inventory(
    s3: Any,
    bucket: str,
    prefix: str,
    store: OutputStore,
    opts: InventoryOptions | None = None,
    *,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Inventory a directory bucket (or a directory of it) with ``opts.workers`` streams."""
    opts = opts or InventoryOptions()
    if prefix and not prefix.endswith("/"):
        raise InputError(
            f"a directory bucket lists only prefixes that end in '/': use {prefix + '/'!r} (or the parent directory)"
        )
    if opts.listing.source is not None:
        raise InputError("directory buckets have no versions: --versions does not apply to them")
    progress = progress or Progress()
    started = datetime.now(UTC)
    dirs: dict[str, str] = {"d0": prefix}
    lock = threading.Lock()
    ids = itertools.count(1)
    pool = LocalPool([KeyRange(id="d0")])
    denied: list[str] = []
    empty: list[str] = []
    counters: list[RequestCounter] = []
    parts: list[PartFile] = []
    make_writer = part_writer(store, bucket, opts.listing)
    listed = [0]

    def stream(index: int) -> InventoryStats:
        stats = InventoryStats(prefix=prefix, depth=opts.listing.stats_depth, now=started)
        counter = RequestCounter()
        with lock:
            counters.append(counter)
        writer = make_writer(f"dir-{index:03d}")
        try:
            while (task := pool.get()) is not None:
                try:
                    walk(dirs[task.id], task.id != "d0", stats, writer, counter)
                except AccessDeniedError as err:
                    with lock:
                        denied.append(dirs[task.id])
                    if task.id == "d0":
                        pool.fail(err)
                        raise
                except BaseException as err:
                    pool.fail(err)
                    raise
                finally:
                    pool.finish()
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        with lock:
            parts.extend(files)
        return stats

    def walk(
        directory: str, found: bool, stats: InventoryStats, writer: Any, counter: RequestCounter
    ) -> None:
        token: str | None = None
        objects_here = subdirs_here = 0
        while True:
            resp = list_directory_page(s3, bucket, directory, token, counter)
            contents = resp.get("Contents") or []
            if contents:
                objects_here += len(contents)
                o, b = stats.objects, stats.bytes
                writer.add_page(contents)
                stats.add_page(contents)
                progress.page(stats.objects - o, stats.bytes - b)
            subdirs = [p["Prefix"] for p in resp.get("CommonPrefixes", ())]
            subdirs_here += len(subdirs)
            if subdirs:
                new = []
                with lock:
                    for sub in subdirs:
                        rid = f"d{next(ids)}"
                        dirs[rid] = sub
                        new.append(KeyRange(id=rid))
                pool.give(new)
            if not resp.get("IsTruncated"):
                break
            token = resp.get("NextContinuationToken")
            if not token:
                raise RuntimeError("S3 answered IsTruncated without a continuation token")
        with lock:
            listed[0] += 1
            if found and objects_here == 0 and subdirs_here == 0:
                empty.append(directory)  # a prefix of in-progress multipart uploads only

    with progress.lock:
        progress.phase = "listing directories"
    with ThreadPoolExecutor(max_workers=max(1, opts.workers), thread_name_prefix="dir") as ex:
        futures = [ex.submit(stream, i) for i in range(max(1, opts.workers))]
        per_stream: list[InventoryStats] = []
        first: BaseException | None = None
        for f in futures:
            try:
                per_stream.append(f.result())
            except BaseException as err:  # noqa: BLE001 - the first failure is raised below
                first = first or err
    if first is not None:
        raise first
    if denied:
        names = ", ".join(repr(p) for p in sorted(denied)[:20])
        raise AccessDeniedError(
            f"access denied listing {len(denied)} director{'y' if len(denied) == 1 else 'ies'} of bucket "
            f"{bucket}: {names}{' ...' if len(denied) > 20 else ''} (needs s3express:CreateSession on the "
            "bucket and a session policy allowing them); the inventory is incomplete, so no count is given"
        )
    merged = InventoryStats(prefix=prefix, depth=opts.listing.stats_depth, now=started)
    for st in per_stream:
        merged.merge(st)
    requests = sum(c.requests for c in counters)
    retries = sum(c.retries for c in counters)
    # One result for the whole key space: completeness was checked directory by directory above.
    whole = ShardResult(
        range=KeyRange(id="directories"),
        objects=merged.objects,
        bytes=merged.bytes,
        list_requests=requests,
        retries=retries,
        done=True,
        parts=parts,
    )
    extra: dict[str, Any] = {
        "bucket_type": "directory",
        "directories_listed": listed[0],
        "in_progress_prefixes": {"count": len(empty), "prefixes": sorted(empty)[:REPORTED_PREFIXES]},
    }
    extra.update(opts.extra_summary or {})
    return finalize(
        store,
        bucket=bucket,
        prefix=prefix,
        seeds=[KeyRange(id="d0")],
        results=[whole],
        stats=merged,
        started=started,
        destination_arn=opts.destination_arn or store.uri(),
        manifest_key_prefix=opts.manifest_key_prefix,
        extra=extra,
    )
