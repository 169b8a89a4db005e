"""Counters (frame_000000.tif, frame_000001.tif, ...) are sized by how far they have reached, not by the space
of their padded width (steal.counter_left, COUNTER_AHEAD)."""

from __future__ import annotations

import bisect
import itertools

import pytest
from fakes import FakeS3, cursor_after_pages
from hpcstage.inventory.keys import code_run
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import COUNTER_AHEAD, Cursor, SplitPolicy, counter_left

PAGE = 100


def _code(keys: list[str], start: int):  # type: ignore[no-untyped-def]
    code = code_run(sorted(keys), start)
    assert code is not None
    return code


def test_a_dense_counter_is_taken_to_go_on_as_far_again_as_it_reached() -> None:
    keys = [f"frame_{i:06d}.tif" for i in range(1000)]
    code = _code(keys, len("frame_"))
    assert code.value(keys[0]) == 0 and code.value(keys[-1]) == 999 and code.space == 10**6
    assert counter_left(code, keys[0], keys[-1], 999) == pytest.approx(COUNTER_AHEAD * 1000)
    # from the middle of it: the values reached count, not the keys listed
    assert counter_left(code, keys[500], keys[-1], 499) == pytest.approx(COUNTER_AHEAD * 1000)
    # a counter stepping by 5 is still one: a key every 5 values
    step5 = [f"t{i:07d}" for i in range(0, 5000, 5)]
    assert counter_left(_code(step5, 1), step5[0], step5[-1], 999) == pytest.approx(999 / 4995 * 4996)


def test_ids_spread_over_their_space_and_codes_naming_directories_are_no_counters() -> None:
    sparse = [f"{i * 7919:08d}" for i in range(1000)]  # one id every 7,919 values
    assert counter_left(_code(sparse, 0), sparse[0], sparse[-1], 999) is None
    # directories named by a 4-hex code, 380 keys each: more keys than values
    tops = [f"{i:04x}" for i in range(300)]
    assert counter_left(_code(tops, 0), tops[0], tops[-1], 300 * 380) is None
    # a character outside the alphabet learnt
    assert counter_left(_code(sparse, 0), sparse[0], "0000x000", 999) is None


def test_a_counter_near_its_space_end_is_bounded_by_it() -> None:
    keys = [f"{i:03d}" for i in range(900, 990)]
    code = _code(keys, 0)
    assert counter_left(code, keys[0], keys[-1], 89) == pytest.approx(89 / 89 * (999 - 989))


def test_a_directory_of_frames_listed_from_its_start_is_not_cut_into_empty_pieces() -> None:
    """d/x/ holds 1,500 frames numbered from 0 (6 digits: a space of a million): after 3 pages the rest is
    sized at about 3 pages, and a split's three pieces all hold frames. (Sized by the space, at 10,933 pages,
    the cuts fell at frame_250224, frame_500149 and frame_750074: the donor kept all 1,200 frames left and
    the three pieces it gave were empty.)"""
    keys = [f"d/x/frame_{i:06d}.tif" for i in range(1500)] + [f"d/y/frame_{i:06d}.tif" for i in range(10)]
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=1, page_keys=PAGE)
    cur = cursor_after_pages(s3, keys, "d/y/", 3, PAGE, 4, policy)
    est = cur.remaining_pages(PAGE)
    assert est is not None and 2.5 < est < 3.5
    given = cur.split(4, policy, iter(f"p{i}" for i in range(4)).__next__)
    assert cur.cut_path == "leaf"
    assert len(given) == 2
    bounds = [cur.pos, cur.range.end, *(g.end for g in given)]
    held = [
        bisect.bisect_right(keys, b) - bisect.bisect_right(keys, a) for a, b in itertools.pairwise(bounds)
    ]  # type: ignore[arg-type]
    assert held == [90, 90, 1020]  # a page less the margin each; the last reaches to the end
    assert all(n > 0 for n in held)


def test_a_counter_is_sized_by_its_reach_only_where_its_range_reaches_the_directorys_end() -> None:
    """Where the range reaches past d/x/ the rest of its frames is as many again as listed; in an open range
    (the frontier nobody else explores) and in a piece ending at a cut inside d/x/ (sized by its donor), the
    space up to there counts."""
    keys = [f"d/x/frame_{i:06d}.tif" for i in range(1500)]
    s3 = FakeS3([*keys, "d/y/0"])
    policy = SplitPolicy(min_split_pages=1, page_keys=PAGE)
    estimates = []
    for end in ("d/y/", None, "d/x/frame_100000.tif"):
        cur = cursor_after_pages(s3, keys, end, 3, PAGE, 4, policy)
        estimates.append(cur.remaining_pages(PAGE))
    past, open_, cut = estimates
    assert past is not None and 2.5 < past < 3.5  # as many again as the 300 listed
    assert open_ is not None and open_ > 9_000  # the space: 999,700 frames
    assert cut is not None and cut == pytest.approx((100_000 - 299) / PAGE, rel=0.01)


def test_a_counter_behind_a_long_code_is_not_bounded() -> None:
    """Dense values at the end of a 600-character code: a bound past any float is no bound."""
    base = "7" * 600
    keys = [f"{base}{i:06d}" for i in range(1000)]
    code = _code(keys, 0)
    assert code.end - code.start == 606
    assert counter_left(code, keys[0], keys[-1], 999) is None


def test_a_counter_sized_under_two_floors_gives_its_rest_away() -> None:
    """d/x/ holds 30,000 frames; after 3 pages the rest is sized at 3 by its reach, under two floors of 2: the
    donor keeps what the estimate holds (3 pages less the margin) and gives the rest of the directory, and what
    lies past it, as one piece."""
    keys = [f"d/x/frame_{i:06d}.tif" for i in range(30_000)] + [f"d/y/frame_{i:06d}.tif" for i in range(10)]
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=2, page_keys=PAGE)
    cur = cursor_after_pages(s3, keys, "d/y/", 3, PAGE, 4, policy)
    est = cur.remaining_pages(PAGE)
    assert est is not None and 2 <= est < 4 and cur.capped == cur.rev
    given = cur.split(4, policy, iter(f"p{i}" for i in range(4)).__next__)
    assert len(given) == 1 and given[0].end == "d/y/"
    kept = bisect.bisect_right(keys, cur.range.end) - bisect.bisect_right(keys, cur.pos)  # type: ignore[arg-type]
    assert kept == 3 * PAGE - 10  # what the estimate holds, in whole pages less the margin
    assert (
        bisect.bisect_right(keys, "d/y/") - bisect.bisect_right(keys, given[0].start_after)
        == 30_000 - 600 + 10
    )


def test_a_counter_is_read_in_all_ten_digits_though_its_sample_shows_fewer() -> None:
    """A page's sample of a counter's first 113 keys shows 8 of the 10 digits (no 6, no 9): read in those 8, the
    values of frame_000000 .. frame_000112 span 74, fewer than the keys, and the counter was taken for no
    counter (its remainder sized by the space of six digits). Its code is read in the ten digits."""
    sample = [f"b/frame_{i:06d}.tif" for i in (0, 13, 28, 43, 58, 73, 88, 103, 112)]
    code = _code(sample, len("b/"))
    assert code.alphabet != frozenset(map(ord, "0123456789"))
    assert code.decimal().alphabet == frozenset(map(ord, "0123456789"))
    assert code.decimal().value(sample[-1]) == 112
    assert counter_left(code, sample[0], sample[-1], 112) == pytest.approx(COUNTER_AHEAD * 113)
    hexes = _code([f"{i * 977:08x}" for i in range(300)], 0)
    assert hexes.decimal() is hexes  # not decimal digits only: as learnt


def test_a_directory_entered_in_the_middle_of_a_page_is_sized_by_its_own_keys() -> None:
    """The page ends 113 frames into exp/b/: its first frame and the keys taken since are known exactly
    (``Cursor.leaf_first``, ``entered``), so it is a counter reached to 112 and as large again, and its files are
    cut by whole pages. (From the page's sample, 9 of its 64 keys, it was no counter, and cut over six digits.)"""
    keys = [f"exp/a/frame_{i:06d}.tif" for i in range(9000, 9887)]
    keys += [f"exp/b/frame_{i:06d}.tif" for i in range(113)]
    cur = Cursor(KeyRange(id="r", start_after="exp/a/frame_008999.tif", end="exp/c/"))
    cur.take(keys, True, "t")
    assert cur.leaf_first == "exp/b/frame_000000.tif"
    assert cur._leaf_listed("exp/b/") == ("exp/b/frame_000000.tif", 113)  # noqa: SLF001
    leaf = cur._leaf_size("exp/b/")  # noqa: SLF001
    assert leaf is not None and leaf[0] == pytest.approx(113.0)  # as far again as it reached
    model = cur._leaf_cut_model("exp/b/")  # noqa: SLF001
    assert model is not None and model[2] == pytest.approx(1.0) and model[3] == pytest.approx(113.0)
    # a directory the range starts in: counted from the range's first key, as before
    inside = Cursor(KeyRange(id="i", start_after="exp/b/frame_000099.tif", end="exp/c/"))
    inside.take([f"exp/b/frame_{i:06d}.tif" for i in range(100, 200)], True, "t")
    assert inside._leaf_listed("exp/b/") == ("exp/b/frame_000100.tif", 100)  # noqa: SLF001
