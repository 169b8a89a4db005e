"""bench.estimate_quality: the engine's estimates against the truth, split by split, in the simulator."""

from __future__ import annotations

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
