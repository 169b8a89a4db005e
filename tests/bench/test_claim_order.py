"""bench.sim.des.claim_order: the simulator's variant of a scan that tries the open ranges it found in random order
weighted by their estimates (``Config.claim_weighted``, measured and not kept: bench/RESULTS.md, 2026-11-28)."""

from __future__ import annotations

import random

from hpcstage.inventory.model import KeyRange

from bench.sim.des import claim_order

DRAWS = 20_000


def ranges(*estimates: int) -> list[KeyRange]:
    return [
        KeyRange(id=f"r{i}", start_after=f"k{i}", end=f"k{i}~", estimate=e) for i, e in enumerate(estimates)
    ]


def first_shares(found: list[KeyRange], seed: int) -> dict[str, float]:
    rnd = random.Random(seed)
    counts = dict.fromkeys((r.id for r in found), 0)
    for _ in range(DRAWS):
        counts[claim_order(found, rnd)[0].id] += 1
    return {k: v / DRAWS for k, v in counts.items()}


def test_nothing_found_nothing_to_try() -> None:
    assert claim_order([], random.Random(1)) == []


def test_every_range_found_is_tried_once() -> None:
    found = ranges(5, 0, 70_000, 1, 0, 300)
    for seed in range(20):
        order = claim_order(found, random.Random(seed))
        assert sorted(r.id for r in order) == sorted(r.id for r in found)
        assert all(any(r is f for f in found) for r in order)


def test_a_range_comes_first_in_proportion_to_its_estimate() -> None:
    shares = first_shares(ranges(1_000, 3_000), seed=7)
    assert abs(shares["r1"] - 0.75) < 0.015


def test_a_range_without_an_estimate_weighs_as_the_mean_of_those_with_one() -> None:
    # weights 4,000 (the mean of 2,000 and 6,000), 2,000, 6,000: the unknown one first a third of the time
    shares = first_shares(ranges(0, 2_000, 6_000), seed=3)
    assert abs(shares["r0"] - 1 / 3) < 0.015
    assert abs(shares["r1"] - 1 / 6) < 0.015


def test_ranges_without_estimates_are_tried_in_uniform_order() -> None:
    shares = first_shares(ranges(0, 0, 0, 0), seed=11)
    assert all(abs(v - 0.25) < 0.015 for v in shares.values())


def test_the_second_is_weighted_among_those_left() -> None:
    # 8,000 first (80 %), then 1,000 against 1,000: each second half of the time it is not first
    rnd = random.Random(5)
    seconds = {"r0": 0, "r1": 0, "r2": 0}
    for _ in range(DRAWS):
        order = claim_order(ranges(8_000, 1_000, 1_000), rnd)
        if order[0].id == "r0":
            seconds[order[1].id] += 1
    total = sum(seconds.values())
    assert abs(total / DRAWS - 0.8) < 0.015
    assert abs(seconds["r1"] / total - 0.5) < 0.02
