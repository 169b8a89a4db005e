"""fleet.hunger_share: how many pieces a busy lister serves at one read of the hunger items."""

from __future__ import annotations

import math

import pytest
from hpcstage.inventory.fleet import hunger_share

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
