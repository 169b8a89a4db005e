"""Progress on stderr in rclone's habit, and the run's timeline for the report.

On a terminal: one live line (rich), redrawn four times a second. Anywhere else (a Slurm batch log,
nohup, a CI log): one plain line every ``interval`` seconds, and one when the phase changes, so a log
shows how the run went without carriage-return noise. Either way the counts are sampled once a second
into a ``Timeline`` that the HTML report draws (streams, objects and requests over time).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from .inventory.report import human_bytes
from .inventory.runner import Progress


class Timeline:
    """Samples of the counters over time, at most ``cap`` of them: when full, every other one is
    dropped and the sampling interval doubles, so an hour-long run keeps its whole shape."""

    def __init__(self, cap: int = 600) -> None:
        self.cap = cap
        self.every = 1.0
        self.rows: list[dict[str, Any]] = []
        self._next = 0.0

    def sample(self, t: float, progress: Progress, force: bool = False) -> None:
        if t < self._next and not force:
            return
        with progress.lock:
            row = {
                "t": round(t, 2),
                "objects": progress.objects,
                "bytes": progress.bytes,
                "streams": progress.streams_active,
                "requests": progress.list_requests,
                "ranges_done": progress.ranges_done,
            }
        self.rows.append(row)
        if len(self.rows) >= self.cap:
            self.rows = self.rows[::2]
            self.every *= 2
        self._next = t + self.every


def status_line(progress: Progress, elapsed: float) -> str:
    p = progress
    with p.lock:
        objects, nbytes, streams = p.objects, p.bytes, p.streams_active
        done, total, requests, phase = p.ranges_done, p.ranges_total, p.list_requests, p.phase
    rate = objects / max(elapsed, 1e-6)
    return (
        f"{phase}: {objects:,} objects, {human_bytes(nbytes)}, {rate:,.0f} obj/s, {streams} streams, "
        f"ranges {done:,}/{total:,}, {requests:,} LIST, {_clock(elapsed)}"
    )


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressDisplay:
    """Context manager: shows ``progress`` on ``stream`` (stderr) while the block runs.

    ``mode``: "auto" (live on a terminal, periodic lines otherwise), "lines", or "off" (the
    timeline is still sampled).
    """

    def __init__(
        self,
        progress: Progress,
        *,
        mode: str = "auto",
        interval: float = 10.0,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.progress = progress
        self.stream = stream or sys.stderr
        self.live = mode == "auto" and self.stream.isatty()
        self.lines = mode == "lines" or (mode == "auto" and not self.live)
        self.interval = max(0.5, interval)
        self.timeline = Timeline()
        self._clock = clock
        self._start = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def elapsed(self) -> float:
        return self._clock() - self._start

    def _emit(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def _run_lines(self) -> None:
        next_line = self.interval
        phase = None
        while not self._stop.wait(0.25):
            t = self.elapsed()
            self.timeline.sample(t, self.progress)
            if not self.lines:
                continue
            if self.progress.phase != phase or t >= next_line:
                phase = self.progress.phase
                self._emit(status_line(self.progress, t))
                next_line = t + self.interval

    def _run_live(self) -> None:
        try:
            from rich.console import Console
            from rich.live import Live
        except ImportError:  # the core alone (no [local] extra) has no rich: plain lines instead
            self.lines = True
            self._run_lines()
            return

        with Live(console=Console(file=self.stream), refresh_per_second=4, transient=True) as live:
            while not self._stop.wait(0.25):
                t = self.elapsed()
                self.timeline.sample(t, self.progress)
                live.update(status_line(self.progress, t))

    def __enter__(self) -> ProgressDisplay:
        self.timeline.sample(0.0, self.progress)  # with the sample at exit: every run has a start and an end
        target = self._run_live if self.live else self._run_lines
        self._thread = threading.Thread(target=target, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.timeline.sample(self.elapsed(), self.progress, force=True)
        if self.lines and exc[0] is None:
            with self.progress.lock:
                self.progress.phase = "done"
            self._emit(status_line(self.progress, self.elapsed()))
