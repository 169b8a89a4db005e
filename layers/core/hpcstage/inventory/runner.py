"""One inventory on one machine: many streams stealing work from each other, then the reduce.

``run_inventory`` starts from a single range over the bucket or prefix (or a previous run's ranges as
seeds) and lets ``workers`` streams split it among themselves while they list (hpcstage.inventory.steal).
``finalize`` is the reduce step shared with the Lambda reducer: completeness (the listed pieces tile the
key space exactly), merged statistics, manifest, summary and report.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

from ..errors import InputError
from ..s3util import RequestCounter
from .diff import diff_inventories
from .lister import ListOptions, Writer, list_range, part_writer
from .model import KeyRange, ShardResult
from .output import FILE_SCHEMA, OutputStore, put_all, write_manifest
from .report import build_summary, check_tiling, diff_summaries, ranges_document, render_report
from .report_html import render_html
from .stats import InventoryStats
from .steal import LocalPool
from .versions import VersionStats, stats_class


@dataclass
class Progress:
    """Counters for a progress display; updated from stream threads."""

    objects: int = 0
    bytes: int = 0
    ranges_done: int = 0
    ranges_total: int = 0
    list_requests: int = 0
    streams_active: int = 0
    phase: str = "starting"
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def page(self, objects: int, nbytes: int) -> None:
        with self.lock:
            self.objects += objects
            self.bytes += nbytes
            self.list_requests += 1

    COUNTERS: ClassVar[tuple[str, ...]] = (
        "objects",
        "bytes",
        "ranges_done",
        "ranges_total",
        "list_requests",
        "streams_active",
    )

    def counts(self) -> tuple[int, ...]:
        """The counters, read together (what a worker process reports to the parent)."""
        with self.lock:
            return tuple(getattr(self, name) for name in self.COUNTERS)

    def set_sums(self, rows: Iterable[Sequence[int]]) -> None:
        """Set every counter to its sum over ``rows`` (``counts()`` of each worker process)."""
        sums = [sum(col) for col in zip(*rows, strict=True)] or [0] * len(self.COUNTERS)
        with self.lock:
            for name, value in zip(self.COUNTERS, sums, strict=True):
                setattr(self, name, value)


def default_workers() -> int:
    """Streams for this machine: listing waits on S3 far more than it computes (~5 ms CPU a page against
    50-300 ms of latency), so many streams share a core; 32 per core, at least 32 and at most 256."""
    return max(32, min(256, 32 * (os.cpu_count() or 1)))


class StreamGate:
    """How many of one process's streams list at once, sized from what its pages cost.

    A stream turns out one page per (wait + CPU) for a page; the streams of one process share one GIL, so
    together they turn out at most 1 / CPU pages a second. About ``(wait + cpu) / cpu`` streams keep that
    core busy; more add no pages and cost CPU of their own (on the local endpoint, 64 streams spent 11.4-12.3
    ms of CPU a page against 8.4-9.1 ms for 4-16, and made more splits and Parquet parts: bench/RESULTS.md).
    So the gate lets ``ceil(HEADROOM * (wait + cpu) / cpu)`` streams in, at most ``most``. ``wait`` is the
    least wait of the last MEMORY windows of WINDOW answered attempts (an attempt's wall time less the CPU
    its thread spent between sending it and reading the answer): the page latency without the time a
    thread queues for the GIL or a core when the process is busy, which grows with the streams and would
    feed on itself. ``cpu`` is this process's CPU per attempt over the last MEMORY windows, everything
    included (one window's, 32 attempts in a fraction of a second, swung between 4 and 18 ms on the local
    endpoint, and the limit, which goes as 1 / cpu, swung up to 27 with it). HEADROOM covers latencies above
    the least one; every stream past what keeps the core busy queues for the GIL, and the process's system
    time grows with them (a process of 16 streams made 656,000 futex calls for 1,000 pages, one of 4 made
    28,000). S3's 50-300 ms pages for ~9 ms of CPU give 10-52 streams per process; the local endpoint's 50 ms
    pages about 10. (Local endpoint, 1M keys, 64 streams in two processes: HEADROOM 2 against 1.5, 13 runs
    each, 7.34 s and 10.9 CPU-s against 7.03 s and 10.1 CPU-s on the mean; bench/RESULTS.md.)

    Streams over the limit wait at the gate before taking a range (a listing stream is never stopped, so a
    smaller limit takes effect as ranges end); the limit starts at START and moves after every WINDOW
    answered attempts. ``measured=False`` (a client without request hooks, whose attempts are not seen)
    lets all ``most`` streams in from the start.
    """

    START = 8
    WINDOW = 32
    MEMORY = 4
    HEADROOM = 1.5

    def __init__(
        self, most: int, *, measured: bool = True, cpu_clock: Callable[[], float] = time.process_time
    ) -> None:
        self.most = max(1, most)
        self.limit = min(self.most, self.START) if measured else self.most
        self._cv = threading.Condition()
        self._inside = 0
        self._over = False
        self._clock = cpu_clock
        self._waits: list[float] = []
        self._lows: list[float] = []  # the least wait of each of the last MEMORY windows
        self._cpus: list[float] = []  # the process CPU of each of the last MEMORY windows
        self._cpu_at = cpu_clock()
        self.history: list[tuple[float, float, int]] = []  # (wait, cpu) per window and the limit it gave
        self._on_resize: list[Callable[[int], None]] = []

    def on_resize(self, call: Callable[[int], None]) -> None:
        self._on_resize.append(call)
        call(self.limit)

    def enter(self) -> bool:
        """Wait for a place; False when the streams are over (every stream then leaves its loop)."""
        with self._cv:
            while not self._over and self._inside >= self.limit:
                self._cv.wait()
            if self._over:
                return False
            self._inside += 1
            return True

    def leave(self) -> None:
        with self._cv:
            self._inside -= 1
            self._cv.notify()

    def over(self) -> None:
        """A stream found no more work: let every waiting stream out."""
        with self._cv:
            self._over = True
            self._cv.notify_all()

    def answered(self, wait: float) -> None:
        """One attempt answered after ``wait`` seconds of waiting; every WINDOW of them resizes the gate."""
        with self._cv:
            self._waits.append(wait)
            if len(self._waits) < self.WINDOW:
                return
            now = self._clock()
            self._cpus = [*self._cpus[-(self.MEMORY - 1) :], now - self._cpu_at]
            self._cpu_at = now
            cpu = sum(self._cpus) / (len(self._cpus) * len(self._waits))
            self._lows = [*self._lows[-(self.MEMORY - 1) :], min(self._waits)]
            self._waits = []
            low = min(self._lows)
            limit = self.size(low, cpu)
            self.history.append((low, cpu, limit))
            grew = limit > self.limit
            self.limit = limit
            if grew:
                self._cv.notify_all()
            calls = list(self._on_resize)
        for call in calls:
            call(limit)

    def size(self, wait: float, cpu: float) -> int:
        if cpu <= 0:
            return self.most
        return max(1, min(self.most, math.ceil(self.HEADROOM * (max(0.0, wait) + cpu) / cpu)))


class _AttemptClock:
    """A stream's RequestCounter hooks: the wait of each attempt (wall less this thread's CPU) to the gate."""

    def __init__(self, gate: StreamGate) -> None:
        self._gate = gate
        self._at = threading.local()  # a stream's directory requests go out from threads of their own

    def before(self) -> None:
        self._at.sent = (time.perf_counter(), time.thread_time())

    def after(self, _slow: bool) -> None:
        sent = getattr(self._at, "sent", None)
        if sent is not None:
            self._at.sent = None
            wall, cpu = sent
            self._gate.answered((time.perf_counter() - wall) - (time.thread_time() - cpu))


@dataclass
class InventoryOptions:
    workers: int = field(default_factory=default_workers)  # streams in all, shared out over the processes
    # Processes to list in (inventory/procs.py); 1: this process's threads only. The command line's
    # default is procs.default_processes() where processes are possible (not under an in-process mock).
    processes: int = 1
    spare_processes: Any = None  # procs.ListerProcesses the caller started early (the command line)
    listing: ListOptions = field(default_factory=ListOptions)
    hints: Sequence[dict[str, Any]] | None = None
    previous_summary: dict[str, Any] | None = None
    destination_arn: str = ""
    manifest_key_prefix: str = ""
    previous_store: OutputStore | None = None  # the previous run's output: object-level diff
    extra_summary: dict[str, Any] | None = None  # added to summary.json (access: requester pays, role)
    hive: OutputStore | None = None  # the target's Hive table folder: this run adds a dt= partition


def seeds_from_hints(hints: Sequence[dict[str, Any]], pieces: int) -> list[KeyRange]:
    """A previous run's per-range counts (ranges.json) merged into about ``pieces`` seed ranges.

    The rows must tile the key space (as every ranges.json does); anything else is refused, because a
    seed set with a gap would silently drop keys.
    """
    rows = []
    for i, row in enumerate(hints):
        if not isinstance(row, dict) or not isinstance(row.get("objects", 0), int):
            raise InputError(f"hints: row {i} is not a ranges.json row ({{start_after, end, objects}})")
        rows.append((row.get("start_after"), row.get("end"), int(row.get("objects") or 0)))
    rows.sort(key=lambda r: (r[0] is not None, r[0] or ""))
    cur: str | None = None
    for i, (a, b, _) in enumerate(rows):
        if a != cur or (i < len(rows) - 1 and b is None):
            raise InputError("hints: the ranges do not tile the key space (not a ranges.json of one run)")
        cur = b
    if not rows or cur is not None:
        raise InputError("hints: the ranges do not reach the end of the key space")
    total = sum(r[2] for r in rows)
    target = max(1, total // max(1, pieces))
    seeds: list[KeyRange] = []
    start: str | None = None  # where the seed being built begins (None: the first key)
    building = False
    acc = 0
    for a, b, n in rows:
        # close the seed before this row when that leaves it nearer its share than taking the row would
        if acc and len(seeds) < pieces - 1 and abs(acc - target) <= abs(acc + n - target):
            seeds.append(KeyRange(id=f"h{len(seeds)}", start_after=start, end=a, estimate=acc))
            acc, building = 0, False
        if not building:
            start, building = a, True
        acc += n
        if acc >= target or b is None:
            seeds.append(KeyRange(id=f"h{len(seeds)}", start_after=start, end=b, estimate=acc))
            acc, building = 0, False
    return seeds


class StreamPool(Protocol):
    """Where streams meet (steal.LocalPool; a worker process's linked pool, inventory/procs.py)."""

    splits: int

    @property
    def active(self) -> int: ...

    def get(self) -> KeyRange | None: ...

    def wanted(self) -> int: ...

    def give(self, ranges: Sequence[KeyRange]) -> None: ...

    def finish(self) -> None: ...

    def close(self) -> list[KeyRange]: ...

    def fail(self, err: BaseException) -> None: ...


@dataclass
class StreamsOutcome:
    results: list[ShardResult]  # one per range listed (to its end, or to a checkpoint)
    # what is left when the streams were stopped: ranges not finished or not started
    remainder: list[KeyRange]
    stats: InventoryStats  # merged over every stream
    splits: int
    # listed in several processes (inventory/procs.py): what each listed, in summary.json's "processes"
    processes: list[dict[str, int]] | None = None


def run_streams(
    s3: Any,
    bucket: str,
    prefix: str,
    seeds: Sequence[KeyRange],
    *,
    workers: int,
    make_writer: Callable[[str], Writer],
    options: ListOptions,
    started: datetime,
    stats_factory: Callable[[], Any] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    progress: Progress | None = None,
    pool: StreamPool | None = None,
    id_base: str | None = None,
    id_numbers: Iterator[int] | None = None,
    gate: StreamGate | None = None,
) -> StreamsOutcome:
    """``workers`` streams list ``seeds``, stealing work from each other, until done or ``should_stop``.

    The listing loop of the command line's runner (run_inventory); the Lambda fleet's streams call
    list_range on the ranges they lease instead (inventory/fleet.py). ``should_stop`` stops every stream at
    a page boundary and returns what is left as the remainder. Ranges split off while listing are named
    ``<seed id>.<n>`` (``id_base`` and ``id_numbers`` instead: the worker processes of one run number theirs
    apart). A failure in any stream stops the others and is raised.

    ``pool`` replaces the in-memory pool of ``seeds`` (a worker process's pool, linked to the others:
    hpcstage.inventory.procs); it has LocalPool's methods. ``gate`` sizes how many of the ``workers`` streams
    list at once (StreamGate; by default one measuring this client's attempts).
    """
    pool = pool if pool is not None else LocalPool(seeds)
    if gate is None:
        gate = StreamGate(
            workers, measured=bool(getattr(getattr(s3, "meta", None), "hpcstage_counts_requests", False))
        )
    resize = getattr(pool, "resize", None)
    if resize is not None:
        gate.on_resize(resize)
    results: list[ShardResult] = []
    remainder: list[KeyRange] = []
    lock = threading.Lock()
    progress = progress or Progress()
    new_stats = stats_factory or (
        lambda: InventoryStats(prefix=prefix, depth=options.stats_depth, now=started)
    )
    ids = id_numbers if id_numbers is not None else itertools.count(1)
    base = id_base if id_base is not None else seeds[0].id if len(seeds) == 1 else "s"

    def new_id() -> str:
        with lock:
            return f"{base}.{next(ids)}"

    def give(ranges: Sequence[KeyRange]) -> None:
        with progress.lock:
            progress.ranges_total += len(ranges)
        pool.give(ranges)

    def stop() -> bool:
        if should_stop():
            with lock:
                remainder.extend(pool.close())
            return True
        return False

    def stream() -> Any:
        stats = new_stats()
        clock = _AttemptClock(gate)
        counter = RequestCounter(before_attempt=clock.before, after_attempt=clock.after)
        while gate.enter():
            try:
                if not take_range(stats, counter):
                    gate.over()
                    break
            finally:
                gate.leave()
        return stats

    def take_range(stats: Any, counter: RequestCounter) -> bool:
        """List one range from the pool; False when there is none left."""
        if (rng := pool.get()) is None:
            return False
        with progress.lock:
            progress.streams_active = pool.active
        try:
            res = list_range(
                s3,
                bucket,
                prefix,
                rng,
                writer=make_writer(rng.id),
                stats=stats,
                counter=counter,
                wanted=pool.wanted,
                give=give,
                new_id=new_id,
                should_stop=stop,
                options=options,
                on_page=progress.page,
            )
        except BaseException as err:
            pool.fail(err)
            raise
        finally:
            pool.finish()
        # fold this range's buffered pages into the stream's statistics now, while the others list,
        # rather than every stream's at once after the last page (the merge: ~0.5 s for 32 streams)
        fold = getattr(stats, "fold", None)
        if fold is not None:
            fold()
        with lock:
            results.append(res)
            remainder.extend(res.subranges)
        with progress.lock:
            progress.ranges_done += 1
            progress.streams_active = pool.active
        return True

    with progress.lock:
        progress.ranges_total += len(seeds)
        progress.phase = "listing"
    per_stream = []
    first_error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="stream") as ex:
        for f in [ex.submit(stream) for _ in range(max(1, workers))]:
            try:
                per_stream.append(f.result())
            except BaseException as err:  # noqa: BLE001 - the first failure is raised below
                first_error = first_error or err
    if first_error is not None:
        raise first_error
    remainder.extend(pool.close())
    merged = new_stats()
    for st in per_stream:
        merged.merge(st)
    return StreamsOutcome(results=results, remainder=remainder, stats=merged, splits=pool.splits)


def run_inventory(
    s3: Any,
    bucket: str,
    prefix: str,
    store: OutputStore,
    opts: InventoryOptions | None = None,
    *,
    progress: Progress | None = None,
) -> dict[str, Any]:
    opts = opts or InventoryOptions()
    progress = progress or Progress()
    started = datetime.now(UTC)
    workers = max(1, opts.workers)
    seeds = seeds_from_hints(opts.hints, workers) if opts.hints else [KeyRange(id="r0")]
    stats_cls = stats_class(opts.listing.source)
    if opts.processes > 1:
        from .procs import run_processes

        out = run_processes(
            s3,
            bucket,
            prefix,
            store,
            seeds,
            processes=opts.processes,
            workers=workers,
            listing=opts.listing,
            started=started,
            stats_cls=stats_cls,
            progress=progress,
            spare=opts.spare_processes,
        )
    else:
        out = run_streams(
            s3,
            bucket,
            prefix,
            seeds,
            workers=workers,
            make_writer=part_writer(store, bucket, opts.listing),
            options=opts.listing,
            started=started,
            stats_factory=lambda: stats_cls(prefix=prefix, depth=opts.listing.stats_depth, now=started),
            progress=progress,
        )
    with progress.lock:
        progress.phase = "writing summary"
    return finalize(
        store,
        bucket=bucket,
        prefix=prefix,
        seeds=seeds,
        results=out.results,
        stats=out.stats,
        started=started,
        destination_arn=opts.destination_arn or store.uri(),
        manifest_key_prefix=opts.manifest_key_prefix,
        previous_summary=opts.previous_summary,
        previous_store=opts.previous_store,
        extra={**(opts.extra_summary or {}), **({"processes": out.processes} if out.processes else {})},
        hive=opts.hive,
    )


def finalize(
    store: OutputStore,
    *,
    bucket: str,
    prefix: str,
    seeds: Sequence[KeyRange],
    results: Sequence[ShardResult],
    stats: InventoryStats,
    started: datetime,
    destination_arn: str,
    manifest_key_prefix: str = "",
    previous_summary: dict[str, Any] | None = None,
    previous_store: OutputStore | None = None,
    extra_requests: int = 0,
    extra: dict[str, Any] | None = None,
    hive: OutputStore | None = None,
) -> dict[str, Any]:
    """Check completeness, write manifest, summary.json, report.txt, report.html and ranges.json.

    ``stats`` are the merged statistics of every stream; ``extra_requests`` are LIST requests made outside
    the listed ranges' results (a lister that died after sending them: they are billed all the same).
    """
    check_tiling(results)
    parts = [p for r in results for p in r.parts]
    write_manifest(
        store,
        bucket,
        parts,
        destination_arn=destination_arn,
        key_prefix=manifest_key_prefix,
        created_ms=int(started.timestamp() * 1000),
        file_schema=getattr(stats, "file_schema", FILE_SCHEMA),
        hive=hive,
    )
    finished = datetime.now(UTC)
    summary = build_summary(
        bucket=bucket,
        prefix=prefix,
        stats=stats,
        results=results,
        probe_requests=extra_requests,
        started=started,
        finished=finished,
        output_uri=store.uri(),
        planned_ranges=len(seeds),
    )
    summary["ranges_given"] = sum(r.given for r in results)
    if isinstance(stats, VersionStats):
        summary["versions"] = stats.summary()
    summary.update(extra or {})
    if previous_summary is not None:
        summary["diff"] = diff_summaries(previous_summary, summary)
        if previous_store is not None:
            # object-level: added, removed and changed, by streaming both inventories in key order
            previous_parts = [
                f["key"] for f in json.loads(previous_store.get_bytes("manifest.json"))["files"]
            ]
            summary["diff"]["exact"] = diff_inventories(
                previous_parts,
                [p.key for p in parts],
                prefix=prefix,
                depth=stats.depth,
                open_previous=previous_store.open,
                open_current=store.open,
            )
    put_all(
        [
            (store, "summary.json", json.dumps(summary, indent=2).encode()),
            (store, "report.txt", render_report(summary).encode()),
            (store, "report.html", render_html(summary).encode()),
            (store, "ranges.json", json.dumps(ranges_document(results)).encode()),
        ]
    )
    return summary
