"""Remainders that cross a directory level holding more than a page of directories (users under "home/"):
S3 names at most 1,000 of them an answer, so what a cursor knows of the level depends on where it asked from.
Checked against brute force on a fake S3."""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Any

from fakes import FakeS3
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import Cursor, SplitPolicy

POLICY = SplitPolicy(min_split_pages=2, page_keys=100)


def user_keys(names: list[str]) -> list[str]:
    """home/<user>/proj_<k>/<hex>.dat: 1-3 projects of 2 files each per user."""
    rng = random.Random(5)
    return sorted(
        f"home/{u}/proj_{p}/{rng.getrandbits(24):06x}.dat"
        for i, u in enumerate(names)
        for p in range(1 + i % 3)
        for _ in range(2)
    )


def first_page_and_explore(keys: list[str], start_after: str) -> tuple[Cursor, list[dict[str, Any]]]:
    """A thief's cursor after its first page and every directory request it wants before a 4-way split."""
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r", start_after=start_after))
    resp = s3.list_objects_v2(Bucket="bkt", **cur.request(100))
    cur.take([o["Key"] for o in resp["Contents"]], resp["IsTruncated"], resp.get("NextContinuationToken"))
    asked: list[dict[str, Any]] = []
    for _ in range(5):
        queries = cur.explore_all(4, POLICY)
        if not queries:
            break
        for q in queries:
            r = s3.list_objects_v2(Bucket="bkt", **q)
            cur.take_dirs(q, [p["Prefix"] for p in r.get("CommonPrefixes", [])], r["IsTruncated"])
            asked.append(q)
    return cur, asked


def keys_per_part(keys: list[str], cur: Cursor, pieces: list[KeyRange]) -> list[int]:
    """Keys after pos in the donor's remainder and in each piece; asserts they cover (pos, end] once."""
    assert cur.pos is not None
    bounds = [(cur.pos, cur.range.end), *((p.start_after, p.end) for p in pieces)]
    for (_, a_end), (b_start, _) in itertools.pairwise(bounds):
        assert a_end == b_start  # contiguous: nothing skipped, nothing twice
    assert bounds[-1][1] is None
    counts = []
    for lo, hi in bounds:
        i = bisect.bisect_right(keys, lo)
        j = len(keys) if hi is None else bisect.bisect_right(keys, hi)
        counts.append(j - i)
    assert sum(counts) == len(keys) - bisect.bisect_right(keys, cur.pos)
    return counts


def test_a_level_asked_from_its_start_whose_answer_ends_before_pos_is_asked_again_from_pos() -> None:
    # 3,000 users: asked from "home/", S3 names u0000..u0999, all before the thief's position in u2000
    keys = user_keys([f"u{i:04d}" for i in range(3000)])
    cur, asked = first_page_and_explore(keys, "home/u2000/")
    assert cur.pos is not None and cur.pos.startswith("home/u20")
    home = [q for q in asked if q.get("Prefix") == "home/"]
    assert [q["StartAfter"] for q in home] == ["home/", cur.pos]
    pieces = cur.split(4, POLICY, (f"p{i}" for i in itertools.count()).__next__)
    assert len(pieces) == 3  # the users after pos are known, so the remainder is cut four ways
    counts = keys_per_part(keys, cur, pieces)
    assert max(counts) <= 0.4 * sum(counts)


def test_a_remainder_of_which_s3_named_the_first_directories_is_cut_over_the_whole_level() -> None:
    # 20,000 users of random lowercase names; the thief starts in one of the first ("b..."): S3 names the
    # next 1,000 (up to "bu..."), the cuts must still spread to "z"
    rng = random.Random(3)
    names = sorted(
        {
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
            for _ in range(20_000)
        }
    )
    keys = user_keys(names)
    start = next(n for n in names if n.startswith("b"))
    cur, _ = first_page_and_explore(keys, f"home/{start}/")
    assert cur.dirs_known_upto is not None and cur.dirs_known_upto < "home/c"  # S3 named only "b..." users
    pieces = cur.split(4, POLICY, (f"p{i}" for i in itertools.count()).__next__)
    assert len(pieces) == 3
    counts = keys_per_part(keys, cur, pieces)
    # about a quarter each (names are not uniform over the alphabet): none holds half the remainder
    assert max(counts) < 0.5 * sum(counts), counts
    assert min(counts) > 0.1 * sum(counts), counts


def test_many_small_directories_are_halved_only_once_the_range_outran_its_estimate() -> None:
    """BISECT_DIRS: a remainder of several directories estimated under twice the split floor is halved by
    count only when the estimate it came with is used up (or it came without one): within it, its directories
    are as small as they look, and halving them again and again made pieces of a page or two (simulator, 25M
    hashed-prefix: 9,965 splits, 26 % more LIST requests than keys / 1,000)."""
    keys = [f"t{i:02d}/f{j:03d}" for i in range(10) for j in range(40)]
    ids = (f"p{i}" for i in itertools.count()).__next__

    def cursor(estimate: int) -> Cursor:
        cur = Cursor(KeyRange(id="r", start_after=keys[0], estimate=estimate))
        cur.take(keys[1:101], True, "t")  # t00/f001 .. t02/f020
        request = {"Delimiter": "/", "MaxKeys": 1000, "StartAfter": cur.pos}
        cur.take_dirs(request, [f"t{i:02d}/" for i in range(3, 10)], False)
        cur._crossing_pages = lambda _page_keys: (3.0, None)  # type: ignore[method-assign]  # noqa: SLF001
        return cur

    assert cursor(estimate=500).split(4, POLICY, ids) == []  # 100 of its 500 keys listed: 3 pages is right
    for used_up in (cursor(estimate=100), cursor(estimate=0)):  # 100 of 100 listed; no estimate at all
        pieces = used_up.split(4, POLICY, ids)
        assert [(p.start_after, p.end) for p in pieces] == [("t06/", None)]  # t03/..t09/ halved
        assert used_up.range.end == "t06/"
