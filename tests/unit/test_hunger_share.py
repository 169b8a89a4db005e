"""fleet.hunger_share and straggler_share: how many pieces a busy lister serves at one read of the hunger items."""

from __future__ import annotations

import math

import pytest
from hpcstage.inventory.fleet import (
    PROGRESS_CLIP_FLOORS,
    STRAGGLER_RATIO,
    hunger_share,
    progress_pages,
    progress_ranges,
    straggler_share,
)

PAGE = 1000
FLOOR = 16.0


def test_no_hunger_no_piece() -> None:
    assert hunger_share(0, 1000, math.inf, PAGE, FLOOR) == 0
    assert hunger_share(0, 1000, 10_000_000, PAGE, FLOOR) == 0


def test_one_hungry_lister_draws_a_piece_from_every_busy_lister() -> None:
    # rounded up: the fleet's pool of open ranges is refilled from every busy lister's largest remainder
    # (the docstring's measurements); a share rounded down or at random would give 0 here
    assert hunger_share(1, 1000, math.inf, PAGE, FLOOR) == 1
    assert hunger_share(1, 1000, 0.0, PAGE, FLOOR) == 1
    assert hunger_share(3, 1000, 5_000.0, PAGE, FLOOR) == 1


@pytest.mark.parametrize(
    ("hungry", "live", "expected"),
    [(10, 30, 1), (20, 30, 4), (30, 40, 6), (39, 40, 39), (5, 5, 5)],
)
def test_the_fair_share_is_twice_the_hunger_over_the_busy_capped_by_the_hunger(
    hungry: int, live: int, expected: int
) -> None:
    assert hunger_share(hungry, live, math.inf, PAGE, FLOOR) == expected


def test_a_large_remainder_serves_one_piece_of_twice_the_floor_per_hungry_lister() -> None:
    # 320 pages held, pieces of 32: ten pieces, more than the fair share of one
    assert hunger_share(20, 1000, 320_000.0, PAGE, FLOOR) == 10
    # never more than the hungry listers
    assert hunger_share(4, 1000, 320_000.0, PAGE, FLOOR) == 4
    # a smaller floor (the endgame's) cuts smaller pieces: more of them
    assert hunger_share(20, 1000, 320_000.0, PAGE, FLOOR / 4) == 20
    # a spent estimate falls back to the fair share
    assert hunger_share(20, 1000, -5.0, PAGE, FLOOR) == 1


def test_a_straggler_gives_pieces_of_about_ratio_times_the_fleets_mean_remainder() -> None:
    """fleet.straggler_share: with the fleet's mean remainder at 10 pages a range, a stream holding more than
    16 x 10 pages (STRAGGLER_RATIO) gives enough pieces that each is about 160 pages, at most one split's; at or
    below that, or below PROGRESS_CLIP_FLOORS split floors, none."""
    assert STRAGGLER_RATIO == 16.0
    assert straggler_share(160 * PAGE, 10.0, PAGE, 2.0, 15) == 0
    assert straggler_share(161 * PAGE, 10.0, PAGE, 2.0, 15) == 1
    assert straggler_share(320 * PAGE, 10.0, PAGE, 2.0, 15) == 1
    assert straggler_share(321 * PAGE, 10.0, PAGE, 2.0, 15) == 2
    assert straggler_share(10_000 * PAGE, 10.0, PAGE, 2.0, 200) == 62
    assert straggler_share(10_000 * PAGE, 10.0, PAGE, 2.0, 15) == 15
    # below 4 split floors of 16 pages (64) nothing, however small the mean
    assert straggler_share(64 * PAGE, 1.0, PAGE, FLOOR, 15) == 0
    assert straggler_share(65 * PAGE, 1.0, PAGE, FLOOR, 15) == 4
    assert straggler_share(100 * PAGE, 10.0, PAGE, 2.0, 15, ratio=2.0) == 4


@pytest.mark.parametrize("left", [math.inf, -math.inf, 0.0, -5.0, math.nan])
def test_an_unknown_or_spent_estimate_is_no_straggler(left: float) -> None:
    assert straggler_share(left, 10.0, PAGE, 2.0, 15) == 0


@pytest.mark.parametrize("mean", [0.0, -1.0])
def test_no_mean_told_no_straggler(mean: float) -> None:
    """Nothing told yet (the ramp's first reads, or a fleet before the attribute): no straggler's piece."""
    assert straggler_share(1e9, mean, PAGE, 2.0, 15) == 0


def test_the_pages_told_clipped_and_not() -> None:
    """fleet.progress_pages: each range at most PROGRESS_CLIP_FLOORS split floors, or not clipped (held)."""
    keys = [3_000.0, math.inf, 500_000.0, 0.0, -1.0]
    assert progress_pages(keys, PAGE, FLOOR) == 3 + PROGRESS_CLIP_FLOORS * 16
    assert progress_pages(keys, PAGE, FLOOR, clip_floors=math.inf) == 503


def test_the_ranges_told_are_those_with_a_known_estimate() -> None:
    assert progress_ranges([3_000.0, math.inf, 500_000.0, 0.0, -1.0, math.nan]) == 2
    assert progress_ranges([]) == 0
