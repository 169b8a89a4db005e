"""Planned ranges cover the key space exactly once, for any keys (property tests on a fake S3)."""

from __future__ import annotations

import bisect

from fakes import FakeS3
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.planner import PlannerConfig, plan_from_hints, plan_shards, split_range
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

key = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00", max_codepoint=0x1FFFF),
    min_size=1,
    max_size=30,
)
slashy = st.lists(st.sampled_from(["a", "b", "data", "x=1", "ü", "中", "Z"]), min_size=1, max_size=5).map(
    "/".join
)


def assert_partition(
    ranges: list[KeyRange], keys: list[str], lo: str | None = None, hi: str | None = None
) -> None:
    ordered = sorted(ranges, key=lambda r: r.start_after or "")
    assert ordered[0].start_after == lo
    assert ordered[-1].end == hi
    for a, b in zip(ordered, ordered[1:], strict=False):
        assert a.end is not None and a.end == b.start_after, "gap or overlap between ranges"
        assert a.start_after is None or a.start_after < a.end
    for k in keys:
        assert sum(1 for r in ranges if r.contains(k)) == 1, k


def count_in(keys: list[str], r: KeyRange) -> int:
    lo = 0 if r.start_after is None else bisect.bisect_right(keys, r.start_after)
    hi = len(keys) if r.end is None else bisect.bisect_right(keys, r.end)
    return max(0, hi - lo)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(key, slashy), max_size=400), st.integers(1, 40), st.integers(1, 50))
def test_plan_covers_every_key_once(keys: list[str], shards: int, probe_keys: int) -> None:
    s3 = FakeS3(keys)
    plan = plan_shards(
        s3, "bkt", "", config=PlannerConfig(target_shards=shards, min_shard_objects=1, probe_keys=probe_keys)
    )
    assert 1 <= len(plan.ranges) <= shards
    assert_partition(plan.ranges, s3.keys)
    assert sum(count_in(s3.keys, r) for r in plan.ranges) == len(s3.keys)
    assert len({r.id for r in plan.ranges}) == len(plan.ranges)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(key, slashy), min_size=2, max_size=300), st.integers(2, 9), st.data())
def test_split_range_partitions_the_range(keys: list[str], parts: int, data: st.DataObject) -> None:
    s3 = FakeS3(keys)
    ks = s3.keys
    i = data.draw(st.integers(0, len(ks) - 1))
    j = data.draw(st.integers(i, len(ks) - 1))
    rng = KeyRange(id="r7", start_after=ks[i], end=ks[j] if j > i else None)
    subs = split_range(s3, "bkt", "", rng, parts, probe_keys=5)
    assert 1 <= len(subs) <= parts
    assert all(s.id.startswith("r7.") for s in subs)
    inside = [k for k in ks if rng.contains(k)]
    assert_partition(subs, inside, lo=rng.start_after, hi=rng.end)


def test_plan_under_a_prefix_only_counts_the_prefix() -> None:
    keys = ["a", "data", "data/", "data/1", "data/2/x", "data0", "datb", "z"]
    s3 = FakeS3(keys)
    plan = plan_shards(
        s3, "bkt", "data/", config=PlannerConfig(target_shards=4, min_shard_objects=1, probe_keys=1)
    )
    in_prefix = [k for k in s3.keys if k.startswith("data/")]
    assert sum(count_in(in_prefix, r) for r in plan.ranges) == 3


def test_interleaved_order_keeps_neighbours_apart() -> None:
    keys = [f"{i:06d}" for i in range(20_000)]
    plan = plan_shards(FakeS3(keys), "bkt", "", config=PlannerConfig(target_shards=16, min_shard_objects=10))
    positions = [int(r.id[1:]) for r in plan.ranges]
    assert sorted(positions) == list(range(len(positions)))
    # the first two ranges to start are half the key space apart, not adjacent
    assert abs(positions[0] - positions[1]) == len(positions) // 2


def test_hints_plan_without_probing_and_cover_the_space() -> None:
    keys = [f"k{i:05d}" for i in range(10_000)]
    s3 = FakeS3(keys)
    hints = [
        {"start_after": None, "end": "k02999", "objects": 3000},
        {"start_after": "k02999", "end": "k03999", "objects": 1000},
        {"start_after": "k03999", "end": None, "objects": 6000},
    ]
    plan = plan_from_hints("bkt", "", hints, target_shards=10, min_shard_objects=100)
    assert s3.calls == 0 and plan.method == "hints" and plan.probe_requests == 0
    assert_partition(plan.ranges, s3.keys)
    counts = sorted(count_in(s3.keys, r) for r in plan.ranges)
    assert sum(counts) == 10_000
    assert len(plan.ranges) == 10
    assert max(counts) <= 1200  # per-range hints are exact, so ranges are near 1,000 each


def test_hints_with_a_hole_are_rejected() -> None:
    import pytest
    from hpcstage.errors import InputError

    with pytest.raises(InputError, match="contiguously"):
        plan_from_hints(
            "bkt",
            "",
            [
                {"start_after": None, "end": "m", "objects": 5},
                {"start_after": "n", "end": None, "objects": 5},
            ],
            4,
        )


def test_directory_walk_finds_every_directory_of_a_complete_tree() -> None:
    from hpcstage.inventory.planner import _directory_points
    from hpcstage.s3util import RequestCounter

    keys = [f"data/y={y}/m={m:02d}/f{i}" for y in (2023, 2024) for m in range(1, 4) for i in range(3)] + [
        "top"
    ]
    counter = RequestCounter()
    points, sent = _directory_points(
        FakeS3(keys), "bkt", "", PlannerConfig(), counter, max_dirs=100, max_requests=50
    )
    expected_leaves = {f"data/y={y}/m={m:02d}/" for y in (2023, 2024) for m in range(1, 4)}
    assert set(points) == {"data/", "data/y=2023/", "data/y=2024/"} | expected_leaves
    assert sent == counter.requests == 1 + 1 + 2 + 6  # one Delimiter listing per directory, level by level


def test_directory_walk_stops_at_a_level_it_cannot_see_whole() -> None:
    from hpcstage.inventory.planner import _directory_points
    from hpcstage.s3util import RequestCounter

    keys = [f"d{i:04d}/x" for i in range(1500)]  # 1,500 top-level directories: more than one page
    points, sent = _directory_points(
        FakeS3(keys), "bkt", "", PlannerConfig(), RequestCounter(), max_dirs=100, max_requests=50
    )
    assert (points, sent) == ([], 1)
