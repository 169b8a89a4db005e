"""Keyspace models: keys sorted in S3 order, and rank arithmetic that agrees with a brute-force index."""

from __future__ import annotations

import bisect
import random

import pytest

from bench import keyspace as K
from bench.sim.des_shapes import CHECK_SHAPES, make_any


@pytest.mark.parametrize("shape", [*sorted(K.SHAPES), *sorted(CHECK_SHAPES), "random-hex"])
def test_keys_sorted_and_ranks_exact(shape: str) -> None:
    # Given a small instance of every shape, materialised in full
    ks = make_any(shape, 4_000)
    assert ks.n == 4_000
    keys = [ks.key(r) for r in range(ks.n)]
    # Then keys are distinct and in UTF-8 binary order (= code-point order) ...
    assert keys == sorted(keys)
    assert sorted(k.encode() for k in keys) == [k.encode() for k in keys]
    assert len(set(keys)) == ks.n
    # ... and count_le / count_lt agree with bisection for keys, their prefixes and perturbations
    rnd = random.Random(shape)
    probes = [
        "",
        "\U0010ffff",
        "a",
        "events/",
        "logs/hot/",
        " ",
        "exp/",
        "frames/0000001",
        "results/",
        "scans/",
    ]
    for _ in range(400):
        k = rnd.choice(keys)
        cut = rnd.randrange(len(k) + 1)
        probes += [k, k[:cut], k[:cut] + chr(rnd.randrange(0x20, 0xD7FF)), k + "\x7f"]
    for x in probes:
        assert ks.count_le(x) == bisect.bisect_right(keys, x), x
        assert ks.count_lt(x) == bisect.bisect_left(keys, x), x
    # and byte totals come from O(1) prefix sums that match per-object sizes
    assert ks.bytes_between(0, ks.n) == sum(ks.size(r) for r in range(ks.n)) == ks.total_bytes
    assert ks.bytes_between(100, 2_345) == sum(ks.size(r) for r in range(100, 2_345))


def test_billion_key_model_answers_without_storing_keys() -> None:
    ks = K.make("multi-tenant", 1_000_000_000)
    last = ks.key(ks.n - 1)
    assert ks.count_le(last) == ks.n
    assert ks.count_lt(last) == ks.n - 1
    mid = ks.key(123_456_789)
    assert ks.count_lt(mid) == 123_456_789
    assert ks.last_modified(5).tzinfo is not None


def test_prefix_counts() -> None:
    ks = K.make("unicode", 20_000)
    keys = [ks.key(r) for r in range(ks.n)]
    for p in ("da", "日本", "😀", "Z", " ", "x/", "~"):
        assert ks.count_prefix(p) == sum(k.startswith(p) for k in keys)


def test_counters_fill_the_low_end_of_their_width() -> None:
    c = K.Counter(1_500, 6, ".tif")
    assert [c.key(0), c.key(1_499)] == ["000000.tif", "001499.tif"]
    assert c.count_le("000999.tif") == 1_000 and c.count_le("001") == 1_000 and c.count_le("9") == 1_500
    with pytest.raises(ValueError):
        K.Counter(10, 1, step=2)
    frames = make_any("frames", 100_000)
    assert frames.key(0).endswith("/frame_000000.tif")
