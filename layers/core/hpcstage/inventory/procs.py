"""The local runner on several processes: P worker processes of T streams each, stealing work across them.

One process's streams share one GIL, and listing costs CPU (request path, page parsing, Parquet: 7-9
CPU-s per million keys in bench/RESULTS.md), so on a machine with more than one core the command
line's runner lists in P processes. Worker 0 is the parent's own streams (a thread of it, with the clients
the parent already has); workers 1..P-1 are processes started with the "spawn" method (no fork of a
process whose threads are running), which make their S3 clients again from the same settings
(``s3util.ClientSpec``: endpoint, region, timeouts, access; credentials from the same chain).

Work stealing crosses processes while they run, with the engine's own splits: the parent's coordinator
thread hears from each worker over a pipe whether its streams are hungry (more than half of them idle,
or none listing) and asks the busiest worker to split off pieces of the ranges it is listing (the same
``Cursor.split`` its streams use for each other: the pool's ``wanted()`` counts the pieces owed to other
processes, ``give`` sends them to the coordinator), and hands them over. Seeds all start in worker 0.

Messages (worker -> coordinator): ("state", need, starved, received, active); ("ranges", [KeyRange]) pieces
owed to others; ("progress", counts); ("result", WorkerResult); ("error", exception).
(coordinator -> worker): ("ranges", [KeyRange]) to list; ("split", k) owe k pieces (0: no longer);
("done",) every range is listed; ("stop",) another worker failed.

The run is finished when every worker is starved (no stream listing, nothing queued) and has received every
range sent to it: a range is always queued, listed, or in one pipe (pipes keep order, so a worker's pieces
reach the coordinator before its later "starved"). Each worker writes its own Parquet parts and returns its
results (ShardResult list, merged statistics) to the parent, which runs the same ``finalize``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from multiprocessing.connection import Connection, wait
from typing import Any

from ..errors import HpcstageError, InputError
from ..s3util import ClientSpec, client_spec, in_process_mock
from .lister import ListOptions, part_writer
from .model import KeyRange, ShardResult
from .output import LocalStore, OutputStore, S3Store
from .runner import Progress, StreamsOutcome, run_streams
from .stats import InventoryStats
from .steal import LocalPool

# A worker's counters reach the parent this often (the progress display and the choice of donor).
REPORT_S = 0.25
# The coordinator's wait for messages, at most (it also wakes on every message).
TICK_S = 0.2
# A worker asked for pieces is asked again, by another if one is busier, after this long without them.
ASK_AGAIN_S = 1.0
# How long a stopped worker process may take to end before it is terminated.
JOIN_S = 30.0
# The coordinator's decisions, for diagnosis: logging.getLogger("hpcstage.inventory.procs") at DEBUG.
log = logging.getLogger(__name__)


def usable_cores() -> int:
    """Cores this process may run on (a container's or ``taskset``'s limit, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_processes() -> int:
    """Processes for this machine: one per usable core, at most 8.

    Each process's streams are bound by its GIL (listing is CPU-bound once a few dozen streams hide the
    page latency), so a second core gives a second process work; more processes than cores only add
    start-up (~1 CPU-s each: imports and a client) and contention. Beyond 8 the coordinator and S3's
    per-prefix request rate bind before CPU does.
    """
    return max(1, min(8, usable_cores()))


class WorkerError(HpcstageError):
    """A worker process failed in a way that cannot be shown as its own error (it died, or its error
    could not be sent)."""


@dataclass(frozen=True)
class StoreSpec:
    """How to open the run's output store again in another process."""

    root: str
    bucket: str | None = None  # an S3 store's bucket (None: a local folder)
    client: ClientSpec | None = None

    def make(self) -> OutputStore:
        if self.bucket is None:
            return LocalStore(self.root)
        assert self.client is not None
        return S3Store(self.client.make(), self.bucket, self.root)


def store_spec(store: OutputStore) -> StoreSpec | None:
    if isinstance(store, LocalStore):
        return StoreSpec(str(store.root))
    if isinstance(store, S3Store) and (spec := client_spec(store.s3)) is not None:
        return StoreSpec(store.prefix, store.bucket, spec)
    return None


def processes_possible(s3: Any, store: OutputStore) -> str | None:
    """None when the listing can run in several processes, else why not (one line)."""
    if in_process_mock():
        return "an in-process mock (moto's mock_aws) answers S3 here, and other processes would not see it"
    if client_spec(s3) is None:
        return "the S3 client was not made by hpcstage (make_s3_client), so it cannot be made again"
    if store_spec(store) is None:
        return "the output store's client cannot be made again in another process"
    return None


@dataclass(frozen=True)
class WorkerJob:
    """Everything a worker process needs (picklable)."""

    index: int
    processes: int
    streams: int
    bucket: str
    prefix: str
    listing: ListOptions
    started: datetime
    stats_cls: Callable[..., InventoryStats]  # the class (picklable by name)
    id_base: str
    client: ClientSpec | None
    store: StoreSpec | None


@dataclass
class WorkerResult:
    results: list[ShardResult]
    stats: Any  # InventoryStats or VersionStats, pending pages folded in
    splits: int
    counts: tuple[int, ...]


class Link:
    """One end of a worker's pipe; sends from any thread."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, msg: Any) -> None:
        with self._lock:
            self.conn.send(msg)


class LinkedPool(LocalPool):
    """steal.LocalPool's protocol for the streams of one worker process, linked to the coordinator.

    Unlike LocalPool, a pool with nothing queued and no stream listing is not finished: it reports itself
    starved and waits for ranges from other processes, until the coordinator says the run is done.
    """

    def __init__(self, link: Link, streams: int) -> None:
        super().__init__()
        self._streams = streams
        self._owed = 0  # pieces the coordinator asked this worker to split off for others
        self._received = 0  # ranges received from the coordinator
        self._last: tuple[int, bool, int] | None = None
        self._link = link
        self.done = False
        self.stopping = False

    # --- the streams' side (LocalPool's methods) ---

    def get(self, timeout: float | None = None) -> KeyRange | None:
        with self._cv:
            self._idle += 1
            try:
                while True:
                    if self.failed is not None or self.closed or self.done or self.stopping:
                        self._cv.notify_all()
                        return None
                    if self._queue:
                        self._active += 1
                        return self._queue.popleft()
                    self._report()
                    self._cv.wait()
            finally:
                self._idle -= 1
                self._report()

    def wanted(self) -> int:
        if self.closed or self.done or self.stopping:
            return 0
        return self._idle - len(self._queue) + self._owed

    def give(self, ranges: Sequence[KeyRange]) -> None:
        if not ranges:
            return
        with self._cv:
            owed = min(self._owed, len(ranges))
            keep, out = list(ranges[: len(ranges) - owed]), list(ranges[len(ranges) - owed :])
            self._owed -= owed
            self.splits += 1
            if keep:
                self._queue.extend(keep)
                self._cv.notify(len(keep))
            if out:
                self._link.send(("ranges", out))
            self._report()

    def finish(self) -> None:
        with self._cv:
            self._active -= 1
            self._report()

    def resize(self, streams: int) -> None:
        """The streams that list at once now (runner.StreamGate): "hungry" is more than half of these idle."""
        with self._cv:
            self._streams = streams

    def fail(self, err: BaseException) -> None:
        self.stopping = True  # this worker's other streams stop at their next page: the run is lost
        super().fail(err)

    # --- the coordinator's side ---

    def deliver(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        with self._cv:
            if kind == "ranges":
                self._queue.extend(msg[1])
                self._received += len(msg[1])
                self._cv.notify(len(msg[1]))
            elif kind == "split":
                # pieces already queued here and not about to be taken go first; the rest are split off
                spare = min(msg[1], max(0, len(self._queue) - self._idle))
                if spare:
                    self._link.send(("ranges", [self._queue.pop() for _ in range(spare)]))
                self._owed = msg[1] - spare if self._active else 0
            elif kind == "done":
                self.done = True
                self._cv.notify_all()
            elif kind == "stop":
                self.stopping = True
                self._cv.notify_all()
            self._report()

    def _report(self) -> None:
        """Tell the coordinator when this worker turns hungry or fed, starved or not (called under the lock)."""
        starved = self._active == 0 and not self._queue
        if starved:
            self._owed = 0  # nothing to split
        hungry = starved or 2 * self._idle > self._streams
        need = max(0, self._idle - len(self._queue)) if hungry else 0
        # the need in powers of two: more idle streams are told, without a message per stream
        state = (need.bit_length(), starved, self._received if starved else -1)
        if state != self._last:
            self._last = state
            self._link.send(("state", need, starved, self._received, self._active))


def _receive(conn: Connection, pool: LinkedPool) -> None:
    """A worker's receiving thread: the coordinator's messages to the pool, until the run ends."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            pool.deliver(("stop",))  # the parent is gone
            return
        pool.deliver(msg)
        if msg[0] in ("done", "stop"):
            return


def _portable(err: BaseException) -> BaseException:
    """``err`` if it survives pickling (botocore's and hpcstage's errors do), else a WorkerError saying it."""
    try:
        pickle.loads(pickle.dumps(err))  # noqa: S301 - our own bytes, a moment ago
    except Exception:  # noqa: BLE001 - any pickling failure: send the text instead
        return WorkerError(f"{type(err).__name__}: {err}")
    return err


def serve_worker(conn: Connection, job: WorkerJob, s3: Any = None, store: OutputStore | None = None) -> None:
    """Run one worker's streams until the coordinator says done; send the result (or the error)."""
    link = Link(conn)
    finished = threading.Event()
    reporter: threading.Thread | None = None
    try:
        s3 = s3 if s3 is not None else job.client.make(pool=job.streams + 8)  # type: ignore[union-attr]
        store = store if store is not None else job.store.make()  # type: ignore[union-attr]
        pool = LinkedPool(link, job.streams)
        progress = Progress(phase="listing")
        threading.Thread(target=_receive, args=(conn, pool), name="link", daemon=True).start()

        def report() -> None:
            while not finished.wait(REPORT_S):
                link.send(("progress", progress.counts()))

        reporter = threading.Thread(target=report, name="report", daemon=True)
        reporter.start()
        out = run_streams(
            s3,
            job.bucket,
            job.prefix,
            [],
            workers=job.streams,
            make_writer=part_writer(store, job.bucket, job.listing),
            options=job.listing,
            started=job.started,
            stats_factory=partial(
                job.stats_cls, prefix=job.prefix, depth=job.listing.stats_depth, now=job.started
            ),
            should_stop=lambda: pool.stopping,
            progress=progress,
            pool=pool,
            id_base=job.id_base,
            id_numbers=itertools.count(job.index + 1, job.processes),
        )
        message: tuple[Any, ...] = (
            "result",
            WorkerResult(out.results, out.stats, out.splits, progress.counts()),
        )
    except BaseException as err:  # noqa: BLE001 - every failure goes to the parent, which raises it
        message = ("error", _portable(err))
    finished.set()
    if reporter is not None:
        reporter.join()  # its last message before the result, none after
    link.send(message)


def _child(conn: Connection) -> None:
    """A worker process's entry point: wait for its job (the parent may start it before it has one)."""
    try:
        try:
            job = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return  # the parent ended (or was interrupted) before the listing began
        serve_worker(conn, job)
    finally:
        conn.close()


class ListerProcesses:
    """``count`` worker processes, started now (each imports hpcstage and makes its client once it has a
    job: about a second of CPU), so that a caller can start them before its own checks and the listing
    begins with them ready. A context manager: on exit, processes not given a job end, the others are
    waited for (terminated after ``JOIN_S``)."""

    def __init__(self, count: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pipes: list[tuple[Connection, Connection]] = []
        self.processes: list[Any] = []
        self.given: set[int] = set()
        try:
            for i in range(count):
                parent_end, child_end = ctx.Pipe()
                p = ctx.Process(
                    target=_child, args=(child_end,), name=f"hpcstage-lister-{i + 1}", daemon=True
                )
                p.start()
                child_end.close()  # it lives in the child now
                self.pipes.append((parent_end, child_end))
                self.processes.append(p)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.processes)

    def __enter__(self) -> ListerProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for parent_end, _ in self.pipes:
            parent_end.close()  # a process still waiting for its job ends
        for i, p in enumerate(self.processes):
            if i not in self.given:
                p.terminate()  # never given a job (the checks failed, a directory bucket): nothing to lose
            p.join(timeout=JOIN_S)
            if p.is_alive():
                p.terminate()
                p.join()
        self.pipes, self.processes = [], []

    def give(self, i: int, job: WorkerJob) -> None:
        self.given.add(i)
        self.pipes[i][0].send(job)


class Coordinator:
    """The parent's side: who is hungry, who can give, and when the run is over."""

    def __init__(self, links: list[Link], progress: Progress, extra_ranges: int) -> None:
        n = len(links)
        self.links = links
        self.progress = progress
        self.extra_ranges = extra_ranges  # the seeds, counted in ranges_total once
        self.need = [0] * n
        self.starved = [True] * n
        self.received = [0] * n
        self.sent = [0] * n
        self.active = [0] * n
        self.counts: list[tuple[int, ...]] = [(0,) * len(Progress.COUNTERS)] * n
        self.asked: dict[int, tuple[int, float]] = {}  # hungry worker -> (donor, when asked)
        self.owed = [0] * n  # what each donor was last asked for
        self.results: list[WorkerResult | None] = [None] * n
        self.error: BaseException | None = None
        self.finished: set[int] = set()
        self.done_sent = False
        self.stop_sent = False

    def send_ranges(self, i: int, ranges: list[KeyRange]) -> None:
        self.sent[i] += len(ranges)
        self.links[i].send(("ranges", ranges))

    def handle(self, i: int, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind not in ("progress", "result"):
            log.debug("worker %d: %s %s (active %s)", i, kind, msg[1:], self.active)
        if kind == "state":
            _, self.need[i], self.starved[i], self.received[i], self.active[i] = msg
            if self.need[i] == 0:
                self.asked.pop(i, None)
        elif kind == "progress":
            self.counts[i] = msg[1]
            self.active[i] = msg[1][Progress.COUNTERS.index("streams_active")]
        elif kind == "ranges":
            self.forward(i, list(msg[1]))
        elif kind == "result":
            self.results[i] = msg[1]
            self.counts[i] = msg[1].counts
            self.finished.add(i)
        elif kind == "error":
            self.fail(msg[1])
            self.finished.add(i)

    def forward(self, donor: int, ranges: list[KeyRange]) -> None:
        """Pieces a donor split off: to the workers that asked it, then any hungry one, the hungriest first;
        back to the donor when nobody is hungry any more."""
        hungry = sorted(
            (h for h in range(len(self.links)) if h != donor and self.need[h] > 0),
            key=lambda h: (self.asked.get(h, (-1, 0.0))[0] != donor, -self.need[h]),
        )
        for h in hungry:
            if not ranges:
                return
            take, ranges = ranges[: self.need[h]], ranges[self.need[h] :]
            self.need[h] -= len(take)
            if self.need[h] <= 0:
                self.asked.pop(h, None)
            self.send_ranges(h, take)
        if ranges:
            self.send_ranges(donor, ranges)

    def match(self, now: float) -> None:
        """Ask the busiest workers to split off pieces for the hungry ones (a donor owes what the workers
        that asked it still need)."""
        n = len(self.links)
        for h in sorted(range(n), key=lambda h: -self.need[h]):
            if self.need[h] <= 0:
                continue
            if h in self.asked:
                d, when = self.asked[h]
                if now - when < ASK_AGAIN_S and self.active[d] > 0:
                    continue
            # the busiest worker that is listing, a fed one before a hungry one (a hungry one still has
            # ranges to split: at the start, worker 0 has the only one)
            donors = [d for d in range(n) if d != h and self.active[d] > 0]
            if donors:
                best = max(donors, key=lambda d: (not self.need[d], self.active[d]))
                self.asked[h] = (best, now)
            else:
                self.asked.pop(h, None)
        for d in range(n):
            want = sum(self.need[h] for h, (dd, _) in self.asked.items() if dd == d)
            if want != self.owed[d]:
                self.owed[d] = want
                log.debug("worker %d owes %d pieces", d, want)
                self._send_quietly(self.links[d], ("split", want))

    def fail(self, err: BaseException) -> None:
        if self.error is None:
            self.error = err
        if not self.stop_sent:
            self.stop_sent = True
            for i, link in enumerate(self.links):
                if i not in self.finished:
                    self._send_quietly(link, ("stop",))

    def check_done(self) -> None:
        if self.done_sent or self.error is not None:
            return
        if all(s and r == n for s, r, n in zip(self.starved, self.received, self.sent, strict=True)):
            self.done_sent = True
            for link in self.links:
                self._send_quietly(link, ("done",))

    def idle(self) -> list[int]:
        """Once the run is done, the workers that never had a range and have not answered yet: a listing
        over before they were ready (a small prefix, while a process still imports). They hold nothing, so
        the run need not wait for them."""
        if not self.done_sent:
            return []
        return [i for i in range(len(self.links)) if i not in self.finished and self.sent[i] == 0]

    @staticmethod
    def _send_quietly(link: Link, msg: tuple[Any, ...]) -> None:
        try:
            link.send(msg)
        except OSError:
            pass  # that worker is gone; its end is handled where its pipe closes

    def show(self) -> None:
        self.progress.set_sums(self.counts)
        with self.progress.lock:
            self.progress.ranges_total += self.extra_ranges


def run_processes(
    s3: Any,
    bucket: str,
    prefix: str,
    store: OutputStore,
    seeds: Sequence[KeyRange],
    *,
    processes: int,
    workers: int,
    listing: ListOptions,
    started: datetime,
    stats_cls: Callable[..., InventoryStats],
    progress: Progress,
    spare: ListerProcesses | None = None,
) -> StreamsOutcome:
    """List ``seeds`` with ``workers`` streams spread over ``processes`` processes (this one included).

    ``spare``: processes the caller started early (``ListerProcesses``); else they are started here."""
    why_not = processes_possible(s3, store)
    if why_not is not None:
        raise InputError(f"cannot list in {processes} processes: {why_not}; use one process")
    streams = max(1, -(-workers // processes))
    id_base = seeds[0].id if len(seeds) == 1 else "s"
    jobs = [
        WorkerJob(
            index=i,
            processes=processes,
            streams=streams,
            bucket=bucket,
            prefix=prefix,
            listing=listing,
            started=started,
            stats_cls=stats_cls,
            id_base=id_base,
            client=client_spec(s3),
            store=store_spec(store),
        )
        for i in range(processes)
    ]
    with contextlib.ExitStack() as stack:
        if spare is None or len(spare) < processes - 1:
            spare = stack.enter_context(ListerProcesses(processes - 1))
        own_end, own_worker_end = multiprocessing.Pipe()
        stack.callback(own_worker_end.close)
        stack.callback(own_end.close)
        conns = {0: own_end, **{i + 1: end for i, (end, _) in enumerate(spare.pipes[: processes - 1])}}
        children = {i + 1: p for i, p in enumerate(spare.processes[: processes - 1])}
        coord = Coordinator([Link(conns[i]) for i in range(processes)], progress, extra_ranges=len(seeds))
        own = threading.Thread(
            target=serve_worker, args=(own_worker_end, jobs[0], s3, store), name="worker-0", daemon=True
        )
        try:
            for i in range(1, processes):
                spare.give(i - 1, jobs[i])
            own.start()
            coord.send_ranges(0, list(seeds))
            _coordinate(coord, conns, children)
        except BaseException as err:
            coord.fail(err)
            raise
        finally:
            own.join(timeout=JOIN_S)
    if coord.error is not None:
        raise coord.error
    done = [r for r in coord.results if r is not None]
    merged = stats_cls(prefix=prefix, depth=listing.stats_depth, now=started)
    for r in done:
        merged.merge(r.stats)
    coord.show()
    return StreamsOutcome(
        results=[res for r in done for res in r.results],
        remainder=[],
        stats=merged,
        splits=sum(r.splits for r in done),
        processes=[
            {
                "objects": r.stats.objects,
                "bytes": r.stats.bytes,
                "list_requests": sum(x.list_requests for x in r.results),
                "ranges": len(r.results),
                "splits": r.splits,
            }
            if r is not None
            else {"objects": 0, "bytes": 0, "list_requests": 0, "ranges": 0, "splits": 0}  # dismissed
            for r in coord.results
        ],
    )


def _coordinate(coord: Coordinator, conns: dict[int, Connection], children: dict[int, Any]) -> None:
    """The coordinator's loop: until every worker has sent its result or its error."""
    by_conn = {id(c): i for i, c in conns.items()}
    by_sentinel = {p.sentinel: i for i, p in children.items()}
    while len(coord.finished) < len(conns):
        waiting = [c for i, c in conns.items() if i not in coord.finished]
        sentinels = [s for s, i in by_sentinel.items() if i not in coord.finished]
        for obj in wait([*waiting, *sentinels], timeout=TICK_S):
            if isinstance(obj, Connection):
                i = by_conn[id(obj)]
                _drain(coord, i, obj, children.get(i))
            else:
                i = by_sentinel[obj]
                _drain(coord, i, conns[i], children[i])
        if coord.error is None:
            coord.match(time.monotonic())
            coord.check_done()
        for i in coord.idle():
            if i in children:  # a process given no range: ended now instead of waited for
                children[i].terminate()
                coord.finished.add(i)  # with no result: the summary gives it nothing
        coord.show()


def _drain(coord: Coordinator, i: int, conn: Connection, proc: Any) -> None:
    """Every message waiting on worker i's pipe; a worker whose pipe closed without a result failed."""
    try:
        while i not in coord.finished and conn.poll():
            coord.handle(i, conn.recv())
    except (EOFError, OSError):
        pass
    else:
        if proc is None or proc.is_alive() or i in coord.finished:
            return
    if i not in coord.finished:
        if proc is not None:
            # its pipe closed when it died, a moment before the parent can reap it: wait for the exit code
            # (under load the pipe's end was seen first, and the error said "exit code None")
            proc.join(timeout=5)
        code = proc.exitcode if proc is not None else None
        coord.fail(WorkerError(f"listing process {i} ended (exit code {code}) before it finished its ranges"))
        coord.finished.add(i)
