"""The multi-process runner's protocol (inventory/procs.py), with its workers as threads of this process.

The coordinator and the workers talk over real multiprocessing pipes exactly as across processes; only the
process boundary is left out (tests/system/test_procs_local_endpoint.py runs real worker processes). Every run is
compared key for key with the fake bucket.
"""

from __future__ import annotations

import multiprocessing
import pickle
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fakes import FakeS3
from hpcstage.errors import AccessDeniedError
from hpcstage.inventory.lister import ListOptions
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.output import LocalStore
from hpcstage.inventory.procs import Coordinator, Link, WorkerJob, _coordinate, serve_worker
from hpcstage.inventory.report import check_tiling
from hpcstage.inventory.runner import Progress
from hpcstage.inventory.stats import InventoryStats
from hpcstage.inventory.steal import SplitPolicy
from hpcstage.inventory.versions import VersionPage, VersionStats

STARTED = datetime(2026, 1, 1, tzinfo=UTC)


class SlowFakeS3(FakeS3):
    """The first 50 pages take 20 ms each, the others 1 ms: the first worker is still listing when the others
    ask, even on a machine so busy that starting a worker takes most of a second (at 1 ms a page throughout,
    one worker listed all 300 pages alone once, at a load of 10 on two cores)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.served = 0

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        self.served += 1
        time.sleep(0.02 if self.served <= 50 else 0.001)
        return super().list_objects_v2(**p)


def run_workers(s3: Any, store: LocalStore, workers: int, streams: int, page: int) -> Coordinator:
    """``workers`` workers of ``streams`` streams each, as threads, coordinated as run_processes does."""
    listing = ListOptions(page_size=page, policy=SplitPolicy(min_split_pages=1, page_keys=page))
    pipes = [multiprocessing.Pipe() for _ in range(workers)]
    coord = Coordinator([Link(a) for a, _ in pipes], Progress(), extra_ranges=1)
    threads = []
    for i, (_, worker_end) in enumerate(pipes):
        job = WorkerJob(i, workers, streams, "bkt", "", listing, STARTED, InventoryStats, "r0", None, None)
        threads.append(threading.Thread(target=serve_worker, args=(worker_end, job, s3, store), daemon=True))
        threads[-1].start()
    coord.send_ranges(0, [KeyRange(id="r0")])
    _coordinate(coord, {i: a for i, (a, _) in enumerate(pipes)}, {})
    for t in threads:
        t.join()
    return coord


def parquet_keys(store: LocalStore, coord: Coordinator) -> list[str]:
    keys: list[str] = []
    for r in coord.results:
        assert r is not None
        for res in r.results:
            for part in res.parts:
                keys += pq.read_table(store.root / part.key, columns=["key"]).column("key").to_pylist()
    return keys


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_steal_from_each_other_and_list_every_key_once(tmp_path: Path, workers: int) -> None:
    keys = [f"{'abcdefgh'[i % 8]}/{i:06d}/{'xyz'[i % 3]} é+%" for i in range(6000)]
    store = LocalStore(tmp_path)
    coord = run_workers(SlowFakeS3(keys), store, workers, streams=4, page=20)

    assert coord.error is None
    results = [res for r in coord.results if r is not None for res in r.results]
    check_tiling(results)  # the listed ranges tile the key space exactly once
    listed = parquet_keys(store, coord)
    assert sorted(listed) == sorted(keys)
    assert len(listed) == len(set(listed))
    # every worker was handed work from another while it ran (only worker 0 had a range at the start)
    per_worker = [r.stats.objects for r in coord.results if r is not None]
    assert len(per_worker) == workers and all(n > 0 for n in per_worker)
    assert sum(per_worker) == len(keys)
    # the progress the parent shows is the sum over the workers
    assert coord.progress.objects == len(keys)
    assert coord.progress.ranges_done == len(results)
    assert coord.progress.streams_active == 0


def test_a_failing_worker_stops_the_run_with_its_own_error(tmp_path: Path) -> None:
    class DenyingS3(SlowFakeS3):
        def list_objects_v2(self, **p: Any) -> dict[str, Any]:
            if p.get("StartAfter", "") >= "m":
                raise AccessDeniedError("S3 refused the listing (AccessDenied)")
            return super().list_objects_v2(**p)

    keys = [f"{c}/{i:05d}" for c in "abcdefghijklmnopqrstuvwxyz" for i in range(200)]
    coord = run_workers(DenyingS3(keys), LocalStore(tmp_path), 2, streams=4, page=20)

    assert isinstance(coord.error, AccessDeniedError)
    assert "S3 refused the listing (AccessDenied)" in str(coord.error)
    assert "not listed" in str(coord.error)  # the lister names what it could not list
    assert coord.finished == {0, 1}  # every worker ended: none left waiting for work


def test_an_error_that_cannot_be_pickled_arrives_as_its_text(tmp_path: Path) -> None:
    class Unpicklable(Exception):
        def __init__(self, a: str, b: str) -> None:
            super().__init__(f"{a} {b}")

    class BrokenS3(SlowFakeS3):
        def list_objects_v2(self, **p: Any) -> dict[str, Any]:
            raise Unpicklable("disk", "on fire")

    coord = run_workers(BrokenS3(["a", "b"]), LocalStore(tmp_path), 2, streams=2, page=20)
    assert type(coord.error).__name__ == "WorkerError"
    assert str(coord.error) == "Unpicklable: disk on fire"


@pytest.mark.parametrize("cls", [InventoryStats, VersionStats])
def test_statistics_survive_pickling_and_merge_exactly(cls: type[InventoryStats]) -> None:
    """A worker process's merged statistics travel to the parent pickled; merged there, they are the same
    tables as merged in one process."""

    def page(lo: int, hi: int) -> Any:
        rows = [
            {
                "Key": f"d{i % 7}/k{i:05d}",
                "Size": i * 37 % 5000,
                "LastModified": datetime(2020 + i % 5, 1 + i % 12, 1, tzinfo=UTC),
                "ETag": f'"{i:032x}"' if i % 3 else f'"{i:032x}-2"',
                "StorageClass": ["STANDARD", "GLACIER", "STANDARD_IA"][i % 3],
                "VersionId": f"v{i}",
                "IsLatest": i % 2 == 0,
                "_marker": i % 11 == 0,
            }
            for i in range(lo, hi)
        ]
        return VersionPage.from_rows(rows) if cls is VersionStats else rows

    def stats(pages: list[Any]) -> InventoryStats:
        st = cls(prefix="", depth=1, now=STARTED)
        for p in pages:
            st.add_page(p)
        return st

    a, b = stats([page(0, 400), page(400, 900)]), stats([page(900, 1500)])
    direct = cls(prefix="", depth=1, now=STARTED)
    direct.merge(a)
    direct.merge(b)
    travelled = cls(prefix="", depth=1, now=STARTED)
    for st in (stats([page(0, 400), page(400, 900)]), stats([page(900, 1500)])):
        folded = cls(prefix="", depth=1, now=STARTED)
        folded.merge(st)  # as a worker does before sending
        travelled.merge(pickle.loads(pickle.dumps(folded)))
    assert travelled.to_dict() == direct.to_dict()
    if cls is VersionStats:
        assert isinstance(travelled, VersionStats)
        # 1,500 rows: 137 delete markers (every 11th), the rest versions, current and not
        assert travelled.delete_markers == 137
        assert travelled.objects == 1500 - 137
        assert travelled.summary() == direct.summary()  # type: ignore[attr-defined]
    else:
        assert travelled.objects == 1500


def test_progress_sums_rows() -> None:
    p = Progress()
    p.set_sums([(1, 10, 2, 3, 4, 5), (2, 20, 0, 1, 6, 0)])
    assert p.counts() == (3, 30, 2, 4, 10, 5)
    p.set_sums([])
    assert p.counts() == (0, 0, 0, 0, 0, 0)


def test_a_worker_whose_pipe_closed_before_it_was_reaped_is_reported_with_its_exit_code() -> None:
    """The pipe of a killed worker closes a moment before its parent can reap it: _drain waits for the exit
    code instead of reporting "exit code None" (seen once under load in test_procs_local_endpoint)."""
    from hpcstage.inventory.procs import _drain

    class Closed:
        def poll(self) -> bool:
            raise EOFError

    class Dying:
        exitcode: int | None = None

        def is_alive(self) -> bool:
            return False

        def join(self, timeout: float | None = None) -> None:
            self.exitcode = -9  # reaped

    class Coord:
        finished: set[int] = set()
        failed: list[BaseException] = []

        def handle(self, i: int, msg: Any) -> None:
            raise AssertionError("no message")

        def fail(self, err: BaseException) -> None:
            self.failed.append(err)

    coord = Coord()
    _drain(coord, 1, Closed(), Dying())  # type: ignore[arg-type]
    assert [str(e) for e in coord.failed] == [
        "listing process 1 ended (exit code -9) before it finished its ranges"
    ]
