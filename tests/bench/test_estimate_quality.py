"""bench.estimate_quality: the engine's estimates against the truth, split by split, in the simulator."""

from __future__ import annotations

import pytest

from bench.estimate_quality import measure


def test_every_directory_request_comes_with_a_split_and_the_truth_asks_less_for_small_remainders() -> None:
    own = measure("users", 300_000)
    oracle = measure("users", 300_000, oracle=True)
    assert own["exact"] and oracle["exact"]
    # the engine asks S3 about directories only before a split: the recorder sees every such request
    assert own["dir_requests_of_splits"] == own["dir_requests"] > 0
    assert oracle["dir_requests_of_splits"] == oracle["dir_requests"]
    assert own["pieces"] > 0 and 0 <= own["pieces_under_8_pages"] <= own["pieces"]
    # on Zipf-sized users the engine sizes unlisted directories like the one it lists: too high
    assert own["log2_est_over_true"]["p50"] > 1.0
    assert oracle["dir_requests_for_small_remainders"] < own["dir_requests_for_small_remainders"]


def test_on_uniform_keys_the_estimates_are_within_a_fifth_and_no_directory_is_asked() -> None:
    m = measure("uniform", 300_000)
    assert m["exact"] and m["dir_requests"] == 0
    assert all(abs(v) <= 0.25 for v in m["log2_est_over_true"].values()), m["log2_est_over_true"]


def test_the_pieces_by_path_add_up_and_users_pieces_are_cut_by_directory_sizes() -> None:
    m = measure("users", 300_000)
    paths = m["by_path"]
    assert set(paths) <= {"bisect", "tree", "named", "known", "leaf", "flat"}
    assert sum(g["pieces"] for g in paths.values()) == m["pieces"]
    assert sum(g["under_8_pages"] for g in paths.values()) == m["pieces_under_8_pages"]
    for g in paths.values():
        assert 0 <= g["empty"] <= g["under_1_page"] <= g["under_8_pages"] <= g["pieces"]
        # each piece costs less than one request beyond its keys / 1,000, an empty one exactly one
        assert g["empty"] <= g["excess_requests"] <= g["pieces"]
    # a tree of Zipf-sized users: most pieces are cut by the sizes of the directories in the remainder
    assert max(paths, key=lambda p: paths[p]["pieces"]) == "tree"


def test_uniform_keys_are_cut_by_interpolation_only() -> None:
    paths = measure("uniform", 300_000)["by_path"]
    # no directory to cut at; a cut past the last key may find nothing, at the cost of one request
    assert list(paths) == ["flat"] and paths["flat"]["empty"] <= 1 < paths["flat"]["pieces"]


def test_excess_requests_of_a_piece() -> None:
    from bench.estimate_quality import excess_requests

    assert excess_requests(0) == 1
    assert excess_requests(1000) == 0
    assert excess_requests(1001) == pytest.approx(0.999)
    assert excess_requests(250) == 0.75


def test_crossing_estimates_are_counted_per_split_attempt_and_add_up() -> None:
    m = measure("users", 300_000)
    c = m["crossing"]
    # users' remainders reach past a user's directory before its level is asked: some attempts see them
    assert c["attempts"] > 0
    assert c["both_over"] + c["only_estimate_over"] + c["only_truth_over"] + c["both_under"] == c["attempts"]
    assert 0 < c["with_donor_estimate"] <= c["attempts"]
    assert 0 <= c["donor_agrees"] <= c["with_donor_estimate"]
    assert 0 <= c["own_agrees_with_donor_estimate"] <= c["with_donor_estimate"]
    # keys without directories never cross one
    assert measure("uniform", 300_000)["crossing"]["attempts"] == 0


def test_crossing_counts_the_floor_test_against_the_truth() -> None:
    from bench.estimate_quality import Quality, crossing

    # floor 16 pages: the test is at 32,000 keys; (engine's estimate in pages, true keys, donor's in pages)
    q = Quality(crossing=[(40, 70_000, 10), (40, 1_000, 80), (2, 70_000, None), (2, 1_000, 1)])
    c = crossing(q, 16)
    assert (c["both_over"], c["only_estimate_over"], c["only_truth_over"], c["both_under"]) == (1, 1, 1, 1)
    assert c["with_donor_estimate"] == 3
    assert c["own_agrees_with_donor_estimate"] == 2  # right on the first and the last
    assert c["donor_agrees"] == 1  # the last only
    assert c["both_estimates_alike"] == 2  # the second (both over) and the last (both under)
    assert c["both_estimates_alike_and_right"] == 1  # the last: the second's truth is under
    assert c["attempts"] == 4
