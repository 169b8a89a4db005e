"""fleet.endgame_floor and fleet.FleetPace: how small the endgame splits, from what the listers told."""

from __future__ import annotations

import math

import pytest
from hpcstage.inventory.fleet import PACE_MIN_S, FleetPace, endgame_floor

LO, HI = 4.0, 16.0


def test_unknown_pace_or_page_time_gives_the_endgame_minimum() -> None:
    assert endgame_floor(10_000, None, 0.18, LO, HI) == LO
    assert endgame_floor(10_000, 0.0, 0.18, LO, HI) == LO
    assert endgame_floor(10_000, 5_000, None, LO, HI) == LO
    assert endgame_floor(10_000, 5_000, 0.0, LO, HI) == LO
    assert endgame_floor(math.inf, 5_000, 0.18, LO, HI) == LO


def test_the_floor_is_what_a_stream_lists_while_the_fleet_lists_what_is_left() -> None:
    # 1,800 pages at 5,000 a second: 0.36 s, two pages of 0.18 s... below the minimum
    assert endgame_floor(1_800, 5_000, 0.18, LO, HI) == LO
    # 9,000 pages: 1.8 s, ten pages
    assert endgame_floor(9_000, 5_000, 0.18, LO, HI) == pytest.approx(10.0)
    # 50,000 pages: 10 s, 55 pages: the policy's floor bounds it
    assert endgame_floor(50_000, 5_000, 0.18, LO, HI) == HI


def test_what_was_listed_since_the_listers_told_is_taken_off() -> None:
    # told 10,000, a quarter second old at 4,000 a second: 9,000 left, 2.25 s, 12.5 pages of 0.18 s
    assert endgame_floor(10_000, 4_000, 0.18, LO, HI, stale_s=0.25) == pytest.approx(12.5)
    # never below nothing
    assert endgame_floor(500, 4_000, 0.18, LO, HI, stale_s=0.25) == LO


def test_the_fleet_pace_is_the_difference_of_two_reads_far_enough_apart() -> None:
    pace = FleetPace()
    assert pace.read(100.0, 1_000) is None  # one read: no pace
    assert pace.read(100.0 + PACE_MIN_S / 2, 2_000) is None  # too soon: the next difference spans both
    assert pace.read(100.0 + PACE_MIN_S, 3_000) == pytest.approx(2_000 / PACE_MIN_S)
    assert pace.read(101.0, 3_000) == pytest.approx(0.0)  # nothing listed since
    # a sum that went down (a shard's item expired, a test's new run): start again, keep the last pace
    assert pace.read(102.0, 10) == pytest.approx(0.0)
    assert pace.read(103.0, 1_010) == pytest.approx(1_000.0)


def test_a_streams_pacer_reports_the_time_from_its_slot_to_each_answer_but_a_503s() -> None:
    """fleet._Throttle: the lister's page time (``Lister._latency``) comes from the attempts S3 answered with
    anything but 503 SlowDown, from the slot the attempt was sent at to its answer."""
    from hpcstage.inventory.fleet import _Throttle

    now = [100.0]
    seen: list[float] = []
    slowdowns: list[int] = []
    throttle = _Throttle(
        lambda: False,
        clock=lambda: now[0],
        on_slowdown=lambda: slowdowns.append(1),
        on_latency=seen.append,
    )
    throttle.wait()  # unpaced: sent at once
    now[0] += 0.25
    throttle.answered(slowdown=False)
    assert seen == [pytest.approx(0.25)]
    throttle.answered(slowdown=False)  # no attempt in flight: nothing to time
    throttle.wait()
    now[0] += 0.01
    throttle.answered(slowdown=True)  # a 503 is not a page time
    assert seen == [pytest.approx(0.25)] and slowdowns == [1]
    throttle.wait()
    now[0] += 0.5
    throttle.answered(slowdown=False)  # a 500 or a reset answers too
    assert seen == [pytest.approx(0.25), pytest.approx(0.5)]


def test_the_listers_page_time_is_a_moving_average_of_a_twentieth() -> None:
    from types import SimpleNamespace

    from hpcstage.inventory.fleet import Lister

    lister = SimpleNamespace(_page_s=None)
    Lister._latency(lister, 0.2)  # type: ignore[arg-type]  # noqa: SLF001
    assert lister._page_s == pytest.approx(0.2)  # noqa: SLF001 - the first answer as it is
    Lister._latency(lister, 0.4)  # type: ignore[arg-type]  # noqa: SLF001
    assert lister._page_s == pytest.approx(0.21)  # noqa: SLF001
