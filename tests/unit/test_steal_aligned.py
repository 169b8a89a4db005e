"""A flat remainder is cut into pieces of whole pages less a margin (steal.PAGE_MARGIN), so that each piece's
last page, a billed request, is nearly full."""

from __future__ import annotations

import bisect
import itertools
import math
import random

from fakes import FakeS3, cursor_after_pages, list_ranges
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import PAGE_MARGIN, Cursor, SplitPolicy

PAGE = 1000


def _listed(keys: list[str], start_after: str | None, end: str) -> int:
    lo = 0 if start_after is None else bisect.bisect_right(keys, start_after)
    return bisect.bisect_right(keys, end) - lo


def _requests_beyond_keys(n: int) -> float:
    """A range of n keys listed from its start costs ceil(n / PAGE) requests: this many beyond n / PAGE."""
    return math.ceil(n / PAGE) - n / PAGE


def _split_after(keys: list[str], pages: int, ways: int, prefix: str = "") -> tuple[Cursor, list[KeyRange]]:
    cur = Cursor(KeyRange(id="r", start_after=None, end=keys[-1]), prefix=prefix)
    for p in range(pages):
        cur.take(keys[p * PAGE : (p + 1) * PAGE], True, f"token-{p}")
    ids = itertools.count()
    given = cur.split(ways, SplitPolicy(min_split_pages=2, page_keys=PAGE), lambda: f"p{next(ids)}")
    return cur, given


def test_pieces_of_regular_ids_hold_whole_pages_less_the_margin() -> None:
    """Ids at regular steps spread over their space (not a counter: see test_steal_counters.py)."""
    keys = [f"scan/{i:08d}.dcm" for i in range(0, 40_000_000, 300)]
    cur, given = _split_after(keys, pages=3, ways=6, prefix="scan/")
    assert cur.cut_path == "flat"
    assert len(given) == 5
    bounds = [cur.pos, cur.range.end, *(g.end for g in given)]
    assert bounds[-1] == keys[-1]
    held = [_listed(keys, a, b) for a, b in itertools.pairwise(bounds)]
    assert sum(held) == len(keys) - 3 * PAGE
    # every piece but the last (which ends where the range did) ends a tenth of a page short of a whole page
    for n in held[:-1]:
        assert 20 * PAGE < n < 22 * PAGE
        assert abs(_requests_beyond_keys(n) - PAGE_MARGIN) < 0.02
    # and their estimates say so: whole pages (21 or 22, the remainder being 21.7 a piece) less the margin
    estimates = [cur.range.estimate, *(g.estimate for g in given[:-1])]
    assert estimates == [22 * PAGE - 100, 21 * PAGE - 100, 22 * PAGE - 100, 22 * PAGE - 100, 22 * PAGE - 100]


def test_random_keys_are_cut_into_tiling_pieces_near_whole_pages() -> None:
    rnd = random.Random(7)
    keys = sorted({f"{rnd.getrandbits(64):016x}" for _ in range(120_000)})
    cur, given = _split_after(keys, pages=4, ways=8)
    assert cur.cut_path == "flat"
    bounds = [cur.pos, cur.range.end, *(g.end for g in given)]
    assert all(a < b for a, b in itertools.pairwise(bounds))
    assert bounds[-1] == keys[-1]
    held = [_listed(keys, a, b) for a, b in itertools.pairwise(bounds)]
    assert sum(held) == len(keys) - 4 * PAGE
    # a random sample's count in a span varies by about its square root: within two pages of 14.5 pages
    assert all(abs(n - 14.5 * PAGE) < 2 * PAGE for n in held)


def test_pieces_under_a_page_are_not_aligned() -> None:
    """A remainder of under a page a piece is cut at equal fractions, as before."""
    keys = [f"{i:07d}" for i in range(0, 3_000_000, 700)]
    cur = Cursor(KeyRange(id="r", start_after=None, end=keys[-1]))
    cur.take(keys[:100], True, "t")
    ids = itertools.count()
    given = cur.split(8, SplitPolicy(min_split_pages=0.1, page_keys=PAGE), lambda: f"p{next(ids)}")
    assert cur.cut_path == "flat"
    assert len(given) == 7
    held = [
        _listed(keys, a, b) for a, b in itertools.pairwise([cur.pos, cur.range.end, *(g.end for g in given)])
    ]
    assert sum(held) == len(keys) - 100
    assert all(abs(n - (len(keys) - 100) / 8) < 10 for n in held)


def test_the_files_of_the_directory_being_listed_are_cut_into_whole_pages() -> None:
    """The leaf path: a remainder past the directory pos is in (d/x/), where S3 named no other directory, is
    cut among d/x/'s files, sized by the density listed there; each piece but the last holds whole pages less
    the margin, and the pieces, listed, give every key once. (The names spread over their code's space, as
    hashes or ids do; a counter that fills only its low end is sized as if it filled it all.)"""
    page = 100
    keys = [f"d/x/{i:06d}.h5" for i in range(0, 1_000_000, 50)]
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=1, page_keys=page)
    cur = cursor_after_pages(s3, keys, "d/y/", 3, page, 5, policy)
    given = cur.split(5, policy, iter(f"p{i}" for i in range(5)).__next__)
    assert cur.cut_path == "leaf"
    assert len(given) == 4
    bounds = [cur.pos, cur.range.end, *(g.end for g in given)]
    held = [_listed(keys, a, b) for a, b in itertools.pairwise(bounds)]
    assert sum(held) == len(keys) - 3 * page
    for n in held[:-1]:
        assert n % page == page - PAGE_MARGIN * page
    listed = keys[: 3 * page] + list_ranges(s3, given, page)
    kept = [k for k in keys if cur.pos < k <= cur.range.end]  # type: ignore[operator]
    assert sorted(listed + kept) == keys


def test_directories_of_one_key_each_are_cut_as_keys_into_whole_pages() -> None:
    """The named path: S3 named only the first thousand directories of the remainder, each holding one key
    ("results/<id>/out.json"): the keys listed size the pieces, in whole pages less the margin."""
    page = 100
    keys = [f"results/{i * 838:06x}/out.json" for i in range(20_000)]
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=1, page_keys=page)
    cur = cursor_after_pages(s3, keys, None, 3, page, 5, policy)
    assert cur.dirs_known_upto is not None  # S3's answer was cut short: the named path
    given = cur.split(5, policy, iter(f"p{i}" for i in range(5)).__next__)
    assert cur.cut_path == "named"
    bounds = [cur.pos, cur.range.end, *(g.end for g in given)]
    assert bounds[-1] is None
    held = [_listed(keys, a, b if b is not None else keys[-1]) for a, b in itertools.pairwise(bounds)]
    assert sum(held) == len(keys) - 3 * page
    assert len(held) == 5
    for n in held[:-1]:
        assert n % page == page - PAGE_MARGIN * page


def test_a_tree_remainder_mostly_in_pos_directory_is_cut_among_its_files_too() -> None:
    """The tree path: the remainder is the rest of t/m/ and the directories t/n/ and t/o/ (each as large). The
    rest of t/m/ is worth two pieces of a six-way split, so t/m/'s files are cut too (the donor keeping about
    half of them, whole pages less the margin), and the piece after it goes on into t/n/; before, the donor
    kept the whole rest of t/m/ and gave only t/n/ and t/o/. Listed, the pieces give every key once."""
    page = 100
    rnd = random.Random(3)
    keys = sorted({f"t/{d}/{rnd.getrandbits(40):010x}.dat" for d in "mno" for _ in range(20_000)})
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=2, page_keys=page)
    cur = cursor_after_pages(s3, keys, None, 30, page, 6, policy)
    assert cur.pos is not None and cur.pos.startswith("t/m/")
    given = cur.split(6, policy, iter(f"p{i}" for i in range(9)).__next__)
    assert cur.cut_path == "tree+leaf"
    assert cur.range.end is not None and cur.range.end.startswith("t/m/")
    assert [g.end for g in given][-2:] == ["t/o/", None]
    assert given[0].start_after == cur.range.end and given[0].end == "t/n/"
    left_in_m = _listed(keys, cur.pos, "t/m/~")
    kept = _listed(keys, cur.pos, cur.range.end)
    assert 0.4 * left_in_m < kept < 0.6 * left_in_m
    assert cur.range.estimate % page == page - PAGE_MARGIN * page  # the donor's pages end nearly full
    donor = KeyRange(id="kept", start_after=cur.pos, end=cur.range.end)
    listed = keys[: 30 * page] + list_ranges(s3, [donor, *given], page)
    assert sorted(listed) == keys


ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def test_a_directory_whose_names_repeat_its_date_is_sized_by_their_random_tail() -> None:
    """CloudTrail-style names: every name of a day's directory repeats the date ("..._20250115T") before eight
    random characters. The date's constant characters are in the tail's alphabet, but they are not its lowest
    in the directory's first name, so they are the names' fixed text, not leading code positions that one page
    did not vary: the directory is sized near its 3,000 keys (read as code: ~3.6e19). A directory of hex names
    listed from its first name ("000...", the alphabet's lowest) is still sized over its leading positions."""
    rnd = random.Random(5)

    def names(day: str, n: int) -> list[str]:
        tail = {"".join(rnd.choice(ALNUM) for _ in range(8)) for _ in range(n)}
        return sorted(
            f"logs/{day}/123456789012_CloudTrail_eu-west-1_{day.replace('-', '')}T{t}.json.gz" for t in tail
        )

    keys = names("2025-01-15", 3000) + names("2025-01-16", 3000)
    cur = Cursor(KeyRange(id="r", start_after=None, end=None), prefix="logs/")
    cur.take(keys[:PAGE], True, "t")
    size = cur._leaf_size("logs/2025-01-15/")  # noqa: SLF001
    assert size is not None
    left, total = size
    assert 0.8 * 3000 < total < 1.25 * 3000
    assert 0.8 * 2000 < left < 1.25 * 2000
    hexes = sorted({f"logs/x/{rnd.getrandbits(64):016x}.bin" for _ in range(200_000)})
    cur = Cursor(KeyRange(id="r", start_after=None, end=None), prefix="logs/")
    cur.take(hexes[:PAGE], True, "t")
    size = cur._leaf_size("logs/x/")  # noqa: SLF001
    assert size is not None and 0.8 * len(hexes) < size[1] < 1.25 * len(hexes)
