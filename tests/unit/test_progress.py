"""The progress display's plain lines and the run's timeline (pure parts: no terminal, no timing)."""

from __future__ import annotations

import io

from hpcstage.inventory.runner import Progress
from hpcstage.progress import ProgressDisplay, Timeline, status_line


def test_timeline_halves_when_full_and_samples_half_as_often() -> None:
    progress = Progress()
    tl = Timeline(cap=4)
    for t in range(4):
        progress.page(10, 100)
        tl.sample(float(t), progress)
    assert [r["t"] for r in tl.rows] == [0.0, 2.0] and tl.every == 2.0
    tl.sample(4.5, progress)  # before the next due time (3 + 2): skipped
    tl.sample(5.0, progress)
    assert [r["t"] for r in tl.rows] == [0.0, 2.0, 5.0]
    assert tl.rows[-1]["objects"] == 40 and tl.rows[-1]["requests"] == 4


def test_status_line() -> None:
    progress = Progress(objects=1500, bytes=3 << 20, ranges_done=2, ranges_total=5, list_requests=7)
    progress.streams_active, progress.phase = 3, "listing"
    assert status_line(progress, 75.0) == (
        "listing: 1,500 objects, 3.00 MiB, 20 obj/s, 3 streams, ranges 2/5, 7 LIST, 1:15"
    )


def test_lines_mode_ends_with_the_totals() -> None:
    out = io.StringIO()
    progress = Progress(phase="listing")
    with ProgressDisplay(progress, mode="lines", interval=60, stream=out):
        progress.page(12, 1024)
    assert out.getvalue().splitlines()[-1].startswith("done: 12 objects, 1.00 KiB, ")
    assert "\r" not in out.getvalue()


def test_off_mode_prints_nothing_but_keeps_the_timeline() -> None:
    out = io.StringIO()
    progress = Progress()
    with ProgressDisplay(progress, mode="off", stream=out) as display:
        progress.page(5, 50)
    assert out.getvalue() == ""
    assert (display.timeline.rows[0]["objects"], display.timeline.rows[-1]["objects"]) == (0, 5)
