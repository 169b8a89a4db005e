"""A simulated S3 bucket answering ListObjectsV2 in virtual time.

``S3World`` holds the bucket (a keyspace model), the request-rate limiter and the tallies.
``SimS3Client`` is what one simulated worker (a Lambda invocation, a CLI process) holds: a boto3-like
client whose ``list_objects_v2(**params)`` answers like S3 and advances that worker's *virtual* clock
by the page's latency (plus throttling back-offs, modelled on botocore's standard retry mode).

Clocks. A client belongs to the thread that created it (the worker's main thread) and starts at the
worker's start time. hpcstage's planner probes from a ThreadPoolExecutor: a pool thread's first call
starts its own clock at the owner's current time (the owner is blocked in ``pool.map`` while the pool
runs), and once the pool's threads have exited, the owner's clock jumps to the latest of theirs (the
pool's makespan). So a probe round costs max over threads of the sum of their probes, as in Lambda.

Delimiter is supported (CommonPrefixes, each counted in MaxKeys like a key; such pages are built
entry by entry: only hpcstage's planner uses them, to walk directory levels).

Two modes:
  full  Contents is a list of dicts with URL-encoded keys (EncodingType=url), exactly like boto3.
  fast  Contents is a ``LazyPage``: a sequence that builds an entry only when indexed, with exact
        count and bytes in O(1); EncodingType is not echoed, so hpcstage's list_page skips its per-key
        unquote loop (keys are returned decoded). See bench/sim/fastpath.py for what else is bypassed.
"""

from __future__ import annotations

import bisect
import math
import threading
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload
from urllib.parse import quote_plus

from botocore.exceptions import ClientError

from bench.keyspace import Keyspace, _norm_ppf
from bench.sim.params import SimParams

_QUANTILES = 4096


class LambdaTimeout(Exception):  # noqa: N818 - named after the Lambda error "Task timed out"
    """The invocation ran past its deadline: Lambda would kill it here."""


class LazyEntry(Mapping[str, Any]):
    """One Contents entry whose fields are computed when read (the key first, the rest on demand)."""

    __slots__ = ("ks", "r", "_key")
    FIELDS = ("Key", "LastModified", "ETag", "Size", "StorageClass")

    def __init__(self, ks: Keyspace, r: int) -> None:
        self.ks = ks
        self.r = r
        self._key: str | None = None

    def __getitem__(self, name: str) -> Any:
        if name == "Key":
            if self._key is None:
                self._key = self.ks.key(self.r)
            return self._key
        if name == "Size":
            return self.ks.size(self.r)
        if name == "LastModified":
            return self.ks.last_modified(self.r)
        if name == "ETag":
            return self.ks.etag(self.r)
        if name == "StorageClass":
            return self.ks.storage_class(self.r)
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.FIELDS)

    def __len__(self) -> int:
        return len(self.FIELDS)


class LazyPage(Sequence[Mapping[str, Any]]):
    """Contents of one page, ranks [r0, r1) of the keyspace, built on demand."""

    __slots__ = ("ks", "r0", "r1", "_last")

    def __init__(self, ks: Keyspace, r0: int, r1: int) -> None:
        self.ks = ks
        self.r0 = r0
        self.r1 = r1
        self._last: LazyEntry | None = None

    def __len__(self) -> int:
        return self.r1 - self.r0

    @overload
    def __getitem__(self, i: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> LazyPage: ...

    def __getitem__(self, i: int | slice) -> Mapping[str, Any] | LazyPage:
        n = self.r1 - self.r0
        if isinstance(i, slice):
            a, b, step = i.indices(n)
            if step != 1:
                raise ValueError("LazyPage slices must be contiguous")
            return LazyPage(self.ks, self.r0 + a, self.r0 + max(a, b))
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        if i == n - 1:
            if self._last is None:
                self._last = LazyEntry(self.ks, self.r1 - 1)
            return self._last
        return LazyEntry(self.ks, self.r0 + i)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        ks = self.ks
        for r in range(self.r0, self.r1):
            yield LazyEntry(ks, r)

    @property
    def nbytes(self) -> int:
        return self.ks.bytes_between(self.r0, self.r1)


class VirtualThreadPool:
    """A deterministic stand-in for ThreadPoolExecutor (as used by hpcstage.inventory.planner's probe rounds).

    ``map`` runs the tasks one after another in the calling thread; each task runs on the virtual
    worker thread ("lane") that becomes free first -- what a real pool does -- and a SimS3Client
    called meanwhile advances that lane's clock instead of its owner's. When the map ends, the
    owner's clock moves to the latest lane (the round's makespan). With real threads the same
    client also works (see SimS3Client), but which thread takes which probe then depends on the OS
    scheduler, and so would the simulated times.
    """

    active: VirtualThreadPool | None = None

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "", **_: Any) -> None:
        self.n = max(1, max_workers or 1)
        self.client: SimS3Client | None = None
        self.lanes: list[float] = []
        self.cur = 0

    def __enter__(self) -> VirtualThreadPool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Any, *iterables: Any) -> Iterator[Any]:
        results = []
        prev, VirtualThreadPool.active = VirtualThreadPool.active, self
        try:
            for args in zip(*iterables, strict=False):
                if self.lanes:
                    self.cur = min(range(self.n), key=self.lanes.__getitem__)
                results.append(fn(*args))
        finally:
            VirtualThreadPool.active = prev
            if self.client is not None and self.lanes:
                self.client._main = max(self.client._main, max(self.lanes))
        return iter(results)


class S3World:
    """The bucket, its partitions' request-rate limiter, and tallies shared by all simulated clients."""

    def __init__(
        self, ks: Keyspace, params: SimParams, *, bucket: str = "bench-bucket", fast: bool = True
    ) -> None:
        self.ks = ks
        self.p = params
        self.bucket = bucket
        self.fast = fast
        sp = params.s3
        self.partitions = max(1, math.ceil(ks.n / sp.objects_per_partition))
        self._part_bounds = [ks.n * i // self.partitions for i in range(1, self.partitions)]
        self._limit = int(sp.partition_rate_limit)  # requests per 1-second window per partition
        self._windows: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._prefix_cache: dict[str, tuple[int, int]] = {}
        self.requests = 0  # answered (billed) LIST requests
        self.throttled = 0  # 503 SlowDown answers
        self.keys_returned = 0
        self.objects: dict[tuple[str, str], bytes] = {}  # the results bucket(s): small objects in memory
        self.io_requests: dict[str, int] = {}
        self._lat = [
            math.exp(sp.latency_sigma * _norm_ppf((i + 0.5) / _QUANTILES)) for i in range(_QUANTILES)
        ]

    def mean_page_s(self, keys: int = 1000) -> float:
        sp = self.p.s3
        return (sp.latency_fixed_s + sp.latency_per_key_s * keys) * math.exp(sp.latency_sigma**2 / 2)

    def client(
        self, start: float, *, name: str = "w", deadline: float | None = None, cpu_per_page_s: float = 0.0
    ) -> SimS3Client:
        return SimS3Client(self, start, name=name, deadline=deadline, cpu_per_page_s=cpu_per_page_s)

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        r = self._prefix_cache.get(prefix)
        if r is None:
            r = self.ks.prefix_range(prefix)
            if len(self._prefix_cache) < 10_000:
                self._prefix_cache[prefix] = r
        return r

    def admit(self, rank: int, t: float) -> bool:
        """Whether the partition holding ``rank`` accepts one more request at virtual time t."""
        part = bisect.bisect_right(self._part_bounds, rank)
        k = (part, int(t))
        with self._lock:
            c = self._windows.get(k, 0)
            if c >= self._limit:
                self.throttled += 1
                return False
            self._windows[k] = c + 1
            return True

    def token(self, rank: int, prefix: str) -> str:
        return f"{rank}.{zlib.crc32(prefix.encode()):08x}"

    def rank_of_token(self, token: str, prefix: str) -> int:
        rank, _, check = token.partition(".")
        if check != f"{zlib.crc32(prefix.encode()):08x}" or not rank.isdigit():
            raise ClientError(
                {
                    "Error": {
                        "Code": "InvalidArgument",
                        "Message": "The continuation token provided is incorrect",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                "ListObjectsV2",
            )
        return int(rank)


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


def _client_error(code: str, status: int, op: str, message: str = "") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message or code}, "ResponseMetadata": {"HTTPStatusCode": status}},
        op,
    )


class SimS3Client:
    """A boto3-like S3 client for one simulated worker, with its own virtual clock.

    ListObjectsV2 serves the simulated bucket; get/put/head_object and upload_file serve any other
    bucket (the results bucket of hpcstage's state machine) from memory, with their own latency.
    """

    def __init__(
        self, world: S3World, start: float, *, name: str, deadline: float | None, cpu_per_page_s: float
    ) -> None:
        self.world = world
        self.name = name
        self.deadline = deadline
        self.cpu_per_key_s = cpu_per_page_s / 1000.0
        self._owner = threading.current_thread()
        self._main = start
        self._others: dict[threading.Thread, float] = {}
        self._lock = threading.Lock()
        self._quota = world.p.retry.quota_capacity
        self.requests = 0
        self.retries = 0

    # -- clocks -------------------------------------------------------------------------------
    def _fold_dead(self) -> None:
        for th in [t for t in self._others if not t.is_alive()]:
            self._main = max(self._main, self._others.pop(th))

    def now(self) -> float:
        """The owner's virtual time (after any finished probe pool): use as Budget(clock=...)."""
        with self._lock:
            self._fold_dead()
            return self._main

    def _begin(self) -> tuple[threading.Thread | VirtualThreadPool, float]:
        th = threading.current_thread()
        pool = VirtualThreadPool.active
        with self._lock:
            self._fold_dead()
            if pool is not None and th is self._owner:
                if pool.client is None:
                    pool.client = self
                    pool.lanes = [self._main] * pool.n
                return pool, pool.lanes[pool.cur]
            if th is self._owner:
                return th, self._main
            t = self._others.get(th)
            if t is None:
                t = self._others[th] = self._main
            return th, t

    def _end(self, th: threading.Thread | VirtualThreadPool, t: float) -> None:
        with self._lock:
            if isinstance(th, VirtualThreadPool):
                th.lanes[th.cur] = t
            elif th is self._owner:
                self._main = t
            else:
                self._others[th] = t

    def _draw(self, key: str) -> float:
        h = zlib.crc32(f"{self.name}|{key}".encode())
        return self.world._lat[h % _QUANTILES]

    # -- small-object I/O (results bucket) ----------------------------------------------------------
    def _io(self, kind: str, key: str, median_s: float) -> None:
        th, t = self._begin()
        t += self._draw(f"{kind}|{key}") * median_s
        if self.deadline is not None and t > self.deadline:
            self._end(th, self.deadline)
            raise LambdaTimeout(f"{self.name}: task timed out after the Lambda limit")
        self._end(th, t)
        with self.world._lock:
            self.world.io_requests[kind] = self.world.io_requests.get(kind, 0) + 1

    def put_object(self, *, Bucket: str, Key: str, Body: bytes | str = b"", **_: Any) -> dict[str, Any]:  # noqa: N803
        data = Body.encode() if isinstance(Body, str) else bytes(Body)
        self._io("PUT", Key, self.world.p.s3.put_latency_s)
        self.world.objects[(Bucket, Key)] = data
        return {"ETag": f'"{zlib.crc32(data):08x}"', "ResponseMetadata": {"HTTPStatusCode": 200}}

    def upload_file(self, Filename: str, Bucket: str, Key: str, **_: Any) -> None:  # noqa: N803
        with open(Filename, "rb") as f:
            self.put_object(Bucket=Bucket, Key=Key, Body=f.read())

    def get_object(self, *, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:  # noqa: N803
        self._io("GET", Key, self.world.p.s3.get_latency_s)
        data = self.world.objects.get((Bucket, Key))
        if data is None:
            raise _client_error("NoSuchKey", 404, "GetObject", "The specified key does not exist.")
        return {"Body": _Body(data), "ContentLength": len(data), "ResponseMetadata": {"HTTPStatusCode": 200}}

    def head_object(self, *, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:  # noqa: N803
        self._io("HEAD", Key, self.world.p.s3.get_latency_s)
        data = self.world.objects.get((Bucket, Key))
        if data is None:
            raise _client_error("404", 404, "HeadObject", "Not Found")
        return {"ContentLength": len(data), "ResponseMetadata": {"HTTPStatusCode": 200}}

    # -- the API ---------------------------------------------------------------------------------
    def list_objects_v2(self, **params: Any) -> dict[str, Any]:
        w = self.world
        if params.get("Bucket") != w.bucket:
            raise ClientError(
                {
                    "Error": {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist"},
                    "ResponseMetadata": {"HTTPStatusCode": 404},
                },
                "ListObjectsV2",
            )
        prefix = params.get("Prefix") or ""
        max_keys = min(1000, int(params.get("MaxKeys", 1000)))
        token = params.get("ContinuationToken")
        start_after = params.get("StartAfter")
        a, b = w.prefix_range(prefix)
        if token:
            r0 = w.rank_of_token(token, prefix)
        elif start_after:
            r0 = max(a, w.ks.count_le(start_after))
        else:
            r0 = a
        r0 = min(r0, b)
        delimiter = params.get("Delimiter") or ""
        ranks: list[int] = []
        common: list[str] = []
        if delimiter:
            ranks, common, r1 = w.ks.delimited(prefix, r0, b, max_keys, delimiter, w.prefix_range)
        else:
            r1 = min(b, r0 + max_keys)
        truncated = r1 < b and max_keys > 0

        th, t = self._begin()
        rp = w.p.retry
        sp = w.p.s3
        attempt = 0
        draw_key = f"{prefix}|{token or start_after or ''}|{max_keys}" + (
            f"|{delimiter}" if delimiter else ""
        )
        while not w.admit(r0, t):
            attempt += 1
            t += sp.slowdown_latency_s
            if attempt >= rp.max_attempts or self._quota < rp.throttling_retry_cost:
                self._end(th, t)
                raise ClientError(
                    {
                        "Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."},
                        "ResponseMetadata": {"HTTPStatusCode": 503, "RetryAttempts": attempt - 1},
                    },
                    "ListObjectsV2",
                )
            self._quota -= rp.throttling_retry_cost
            jitter = (zlib.crc32(f"{self.name}|{draw_key}|{attempt}".encode()) % 10_000) / 10_000
            t += jitter * min(rp.base_scale_s * 2 ** (attempt - 1), rp.max_backoff_s)
        self._quota = min(
            rp.quota_capacity, self._quota + (rp.throttling_retry_cost if attempt else rp.success_refund)
        )
        n = len(ranks) + len(common) if delimiter else r1 - r0
        t += self._draw(f"{draw_key}|{attempt}") * (sp.latency_fixed_s + sp.latency_per_key_s * n)
        t += self.cpu_per_key_s * n
        if self.deadline is not None and t > self.deadline:
            self._end(th, self.deadline)
            raise LambdaTimeout(f"{self.name}: task timed out after the Lambda limit")
        self._end(th, t)
        with w._lock:
            w.requests += 1
            w.keys_returned += n
            self.requests += 1
            self.retries += attempt

        encode = params.get("EncodingType") == "url" and not w.fast
        resp: dict[str, Any] = {
            "ResponseMetadata": {"HTTPStatusCode": 200, "RetryAttempts": attempt},
            "IsTruncated": truncated,
            "Name": w.bucket,
            "Prefix": quote_plus(prefix, safe="/") if encode else prefix,
            "MaxKeys": max_keys,
            "KeyCount": n,
        }
        if delimiter:
            resp["Delimiter"] = quote_plus(delimiter, safe="/") if encode else delimiter
            if ranks:
                contents = [w.ks.obj(r) for r in ranks]
                if encode:
                    for o in contents:
                        o["Key"] = quote_plus(o["Key"], safe="/")
                resp["Contents"] = contents
            if common:
                resp["CommonPrefixes"] = [
                    {"Prefix": quote_plus(cp, safe="/") if encode else cp} for cp in common
                ]
        elif n:
            if w.fast:
                resp["Contents"] = LazyPage(w.ks, r0, r1)
            else:
                contents = [w.ks.obj(r) for r in range(r0, r1)]
                if encode:
                    for o in contents:
                        o["Key"] = quote_plus(o["Key"], safe="/")
                resp["Contents"] = contents
        if encode:
            resp["EncodingType"] = "url"
        if token:
            resp["ContinuationToken"] = token
        elif start_after:
            resp["StartAfter"] = quote_plus(start_after, safe="/") if encode else start_after
        if truncated:
            resp["NextContinuationToken"] = w.token(r1, prefix)
        return resp
