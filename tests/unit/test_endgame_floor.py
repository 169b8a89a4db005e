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
