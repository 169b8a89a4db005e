"""runner.StreamGate: how many of a process's streams list at once, derived from measured waits and CPU."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fakes import FakeS3
from hpcstage.inventory.lister import ListOptions, part_writer
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.output import LocalStore
from hpcstage.inventory.procs import LinkedPool
from hpcstage.inventory.runner import StreamGate, _AttemptClock, run_streams
from hpcstage.inventory.steal import SplitPolicy


class FakeCpu:
    """A process CPU clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_size_is_headroom_times_wait_plus_cpu_over_cpu() -> None:
    gate = StreamGate(256)
    assert StreamGate.HEADROOM == 1.5
    # the local endpoint: 50 ms pages, 9 ms of CPU a page
    assert gate.size(0.050, 0.009) == math.ceil(1.5 * 0.059 / 0.009) == 10
    # S3 at 100 ms and at 300 ms a page, the same CPU
    assert gate.size(0.100, 0.009) == math.ceil(1.5 * 0.109 / 0.009) == 19
    assert gate.size(0.300, 0.009) == math.ceil(1.5 * 0.309 / 0.009) == 52
    # never more than the streams there are, never fewer than one
    assert StreamGate(32).size(0.300, 0.009) == 32
    assert gate.size(0.0, 0.009) == 2
    assert gate.size(0.050, 0.0) == 256


def test_the_gate_starts_small_and_resizes_from_each_window() -> None:
    cpu = FakeCpu()
    gate = StreamGate(64, cpu_clock=cpu)
    sizes: list[int] = []
    gate.on_resize(sizes.append)
    assert gate.limit == StreamGate.START == 8
    # a window of attempts: waits from 50 to 81 ms, 9 ms of process CPU each
    for i in range(StreamGate.WINDOW - 1):
        gate.answered(0.050 + i / 1000)
    assert gate.limit == 8  # not resized before the window is full
    cpu.now = StreamGate.WINDOW * 0.009
    gate.answered(0.081)
    assert gate.limit == gate.size(0.050, 0.009) == 10  # the least wait of the window, not its mean
    # a later window queued behind a busy core (every wait longer): the least wait of the last MEMORY windows
    cpu.now += StreamGate.WINDOW * 0.009
    for _ in range(StreamGate.WINDOW):
        gate.answered(0.400)
    assert gate.limit == 10
    assert gate.history == [(0.050, 0.009, 10), (0.050, 0.009, 10)]
    # once MEMORY windows have passed without a fast answer, the slower pages count
    for _ in range(StreamGate.MEMORY - 1):
        cpu.now += StreamGate.WINDOW * 0.009
        for _ in range(StreamGate.WINDOW):
            gate.answered(0.400)
    assert gate.limit == 64 == gate.size(0.400, 0.009)
    assert sizes == [8, 10, 10, 10, 10, 64]


def test_the_cpu_a_page_is_that_of_the_last_memory_windows() -> None:
    cpu = FakeCpu()
    gate = StreamGate(256, cpu_clock=cpu)

    def window(cpu_each: float) -> tuple[float, float, int]:
        cpu.now += StreamGate.WINDOW * cpu_each
        for _ in range(StreamGate.WINDOW):
            gate.answered(0.050)
        return gate.history[-1]

    assert window(0.008) == (0.050, 0.008, math.ceil(1.5 * 0.058 / 0.008))
    # a cheap window after it: the mean of the two, not the cheap one (which would let 21 streams in)
    w, c, limit = window(0.004)
    assert c == pytest.approx(0.006) and limit == math.ceil(1.5 * 0.056 / 0.006) == 14
    for _ in range(StreamGate.MEMORY - 1):
        w, c, limit = window(0.004)
    # the 8 ms window has left the memory
    assert (
        c == pytest.approx(0.004) and limit == gate.size(0.050, 0.004) == math.ceil(1.5 * 0.054 / 0.004) == 21
    )


def test_a_client_whose_attempts_are_not_seen_lets_every_stream_in() -> None:
    assert StreamGate(64, measured=False).limit == 64
    assert StreamGate(3).limit == 3


def a_stream_waiting_at(gate: StreamGate) -> tuple[threading.Thread, list[bool]]:
    """The gate at a limit of 1 with one stream inside, and a second stream started that waits to enter
    (``outcome`` gets what its ``enter()`` returned)."""
    gate.limit = 1
    assert gate.enter()
    outcome: list[bool] = []
    waiting = threading.Thread(target=lambda: outcome.append(gate.enter()))
    waiting.start()
    return waiting, outcome


def test_streams_over_the_limit_wait_and_leave_when_the_streams_are_over() -> None:
    gate = StreamGate(2, measured=True)
    waiting, outcome = a_stream_waiting_at(gate)
    waiting.join(0.2)
    assert waiting.is_alive() and outcome == []  # no place
    gate.over()
    waiting.join(10)
    assert outcome == [False]
    gate.leave()
    assert not gate.enter()  # over: nobody enters again


def test_a_larger_limit_lets_waiting_streams_in() -> None:
    cpu = FakeCpu()
    gate = StreamGate(4, cpu_clock=cpu)
    waiting, outcome = a_stream_waiting_at(gate)
    cpu.now = StreamGate.WINDOW * 0.001
    for _ in range(StreamGate.WINDOW):
        gate.answered(0.050)  # wait 50 ms for 1 ms of CPU: every stream
    waiting.join(10)
    assert outcome == [True] and gate.limit == 4


def test_the_attempt_clock_gives_the_wait_without_the_streams_cpu() -> None:
    seen: list[float] = []

    class Recorder(StreamGate):
        def answered(self, wait: float) -> None:
            seen.append(wait)

    clock = _AttemptClock(Recorder(4))
    clock.after(False)  # an answer without a send (a hook registered mid-attempt): nothing to measure
    assert seen == []
    clock.before()
    sum(i * i for i in range(200_000))  # CPU of this thread, not waiting
    clock.after(False)
    assert len(seen) == 1 and seen[0] < 0.05
    # the directory requests a stream sends from other threads are timed in their own thread
    clock.before()
    other = threading.Thread(target=clock.after, args=(False,))
    other.start()
    other.join()
    assert len(seen) == 1
    clock.after(False)
    assert len(seen) == 2


class CountingS3(FakeS3):
    """Records how many ListObjectsV2 calls run at once."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys)
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.release = threading.Event()

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            self.release.wait(0.002)
            return super().list_objects_v2(**p)
        finally:
            with self.lock:
                self.now -= 1


def test_run_streams_lists_every_key_once_with_no_more_streams_than_the_gate_lets_in(tmp_path: Path) -> None:
    keys = [f"{'abcdefgh'[i % 8]}/{i:06d} é+%" for i in range(4000)]
    s3 = CountingS3(keys)
    store = LocalStore(tmp_path)
    listing = ListOptions(page_size=20, policy=SplitPolicy(min_split_pages=1, page_keys=20))
    gate = StreamGate(16, cpu_clock=FakeCpu())  # measured, and nothing measured: START streams
    out = run_streams(
        s3,
        "bkt",
        "",
        [KeyRange(id="r0")],
        workers=16,
        make_writer=part_writer(store, "bkt", listing),
        options=listing,
        started=datetime(2026, 1, 1, tzinfo=UTC),
        gate=gate,
    )
    listed = [
        k
        for res in out.results
        for part in res.parts
        for k in pq.read_table(store.root / part.key, columns=["key"]).column("key").to_pylist()
    ]
    assert sorted(listed) == sorted(keys) and len(listed) == len(keys)
    assert 1 < s3.most <= StreamGate.START


def test_a_worker_pool_is_hungry_by_the_streams_the_gate_lets_in() -> None:
    sent: list[tuple[Any, ...]] = []

    class Link:
        def send(self, msg: Any) -> None:
            sent.append(msg)

    pool = LinkedPool(Link(), streams=32)  # type: ignore[arg-type]
    pool.give([KeyRange(id="a"), KeyRange(id="b")])
    for _ in range(2):
        assert pool.get() is not None
    sent.clear()
    pool._idle = 5  # noqa: SLF001 - five of its streams wait for work
    pool._report()  # noqa: SLF001
    assert sent == []  # 5 idle of 32: not hungry, nothing new to tell
    pool.resize(8)
    pool._report()  # noqa: SLF001
    assert sent[-1] == ("state", 5, False, 0, 2)  # 5 idle of the 8 let in: hungry for 5
