"""The work-stealing core lists every key exactly once, whatever the keys and however the streams split.

Streams run as real threads (hpcstage's own loop, runner.run_streams) against an in-memory ListObjectsV2
(tests/fakes.py) with small pages, so a run splits many times; every run is compared key for key with a
brute-force listing.
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import CountStats, FakeS3, answer_explores
from hpcstage.errors import IncompleteInventoryError
from hpcstage.inventory import runner
from hpcstage.inventory.keys import encode
from hpcstage.inventory.lister import ListOptions
from hpcstage.inventory.model import KeyRange, ShardResult
from hpcstage.inventory.report import check_tiling
from hpcstage.inventory.runner import StreamsOutcome
from hpcstage.inventory.steal import Cursor, SplitPolicy, cut_points
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

any_key = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00", max_codepoint=0x10FFFF),
    min_size=1,
    max_size=40,
)
shaped = st.builds(
    lambda a, b, c: f"{a}/{b}/{c}",
    st.sampled_from(["genomics", "imaging", "Z", "ü", "中", "a b", "x=1"]),
    st.integers(0, 40).map(lambda i: f"2024-{i:02d}"),
    st.integers(0, 10**6).map(lambda i: f"{i:08x}.dat"),
)


class KeysWriter:
    """Collects the keys written (stands in for the Parquet writer)."""

    def __init__(self, sink: list[str], lock: threading.Lock) -> None:
        self.sink, self.lock, self.buf = sink, lock, []

    def add_page(self, objects: Any) -> None:
        self.buf += [o["Key"] for o in objects]

    def close(self) -> list[Any]:
        with self.lock:
            self.sink += self.buf
        return []

    def abort(self) -> None:
        self.buf = []


def run_streams(
    s3: Any, prefix: str, workers: int, page: int, seeds: Sequence[KeyRange] = ()
) -> tuple[list[str], list[ShardResult], StreamsOutcome]:
    """hpcstage's own listing loop (runner.run_streams), writing keys to a list instead of Parquet."""
    listed: list[str] = []
    lock = threading.Lock()
    out = runner.run_streams(
        s3,
        "bkt",
        prefix,
        seeds or [KeyRange(id="r0")],
        workers=workers,
        make_writer=lambda range_id: KeysWriter(listed, lock),
        options=ListOptions(page_size=page, policy=SplitPolicy(min_split_pages=1, page_keys=page)),
        started=datetime.now(UTC),
        stats_factory=CountStats,
    )
    return listed, out.results, out


def expected(keys: Sequence[str], prefix: str) -> list[str]:
    return sorted(k for k in set(keys) if k.startswith(prefix))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(st.one_of(any_key, shaped), min_size=0, max_size=300), workers=st.integers(1, 12))
def test_streams_list_every_key_once(keys: list[str], workers: int) -> None:
    listed, results, _ = run_streams(FakeS3(keys), "", workers, page=4)
    assert sorted(listed) == expected(keys, "")
    assert len(listed) == len(set(listed))
    check_tiling(results)
    assert sum(r.objects for r in results) == len(expected(keys, ""))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(shaped, min_size=1, max_size=300), data=st.data())
def test_streams_under_a_prefix(keys: list[str], data: st.DataObject) -> None:
    prefix = data.draw(st.sampled_from(["", "genomics/", "ü/2024-0", "Z/2024-1", "none/"]))
    listed, results, _ = run_streams(FakeS3(keys), prefix, 8, page=3)
    assert sorted(listed) == expected(keys, prefix)
    check_tiling(results)


HOSTILE = {
    "every byte": [chr(c) + "k" for c in range(1, 0x80)] + [f"x{chr(c)}" for c in range(1, 0x80)],
    "long keys": [("d/" + "é" * 400 + f"{i:05d}" + "z" * 200)[:1024] for i in range(300)],
    "long common prefix": [f"{'p/' * 200}run-{i:06d}" for i in range(500)],
    "one key": ["only"],
    "empty": [],
    "top of unicode": ["\U0010ffff" * 3, "\U0010fffe", "\uffff", "\u0080", "\x7f", "~"]
    + [f"a{i}" for i in range(50)],
    "newlines and entities": [f"a\n{i}&amp;<x>" for i in range(100)] + [f"b\r{i}" for i in range(100)],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_keys(name: str) -> None:
    keys = HOSTILE[name]
    listed, results, _ = run_streams(FakeS3(keys), "", 16, page=5)
    assert sorted(listed) == expected(keys, "")
    check_tiling(results)


class SlowFakeS3(FakeS3):
    """Answers after 1 ms, as an endpoint would: an instant fake lets one stream list everything before
    the others are even waiting, and then nothing is shared."""

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        time.sleep(0.001)
        return super().list_objects_v2(**p)


def test_streams_share_work() -> None:
    """From one range, idle streams get work: a 2,000-key bucket in pages of 10 is split many times."""
    keys = [f"{i:05d}/{'abcdef'[i % 6]}" for i in range(2000)]
    listed, results, out = run_streams(SlowFakeS3(keys), "", 8, page=10)
    assert sorted(listed) == sorted(keys)
    # every one of the 7 idle streams was fed at least once (a split may hand out several pieces)
    assert sum(r.given for r in results) >= 7
    assert len({r.range.id for r in results}) == len(results) >= 8


def test_seeds_from_a_previous_run_tile() -> None:
    keys = [f"k{i:04d}" for i in range(500)]
    seeds = [
        KeyRange(id="a", start_after=None, end="k0100"),
        KeyRange(id="b", start_after="k0100", end="k0300"),
        KeyRange(id="c", start_after="k0300", end=None),
    ]
    listed, results, _ = run_streams(FakeS3(keys), "", 6, page=7, seeds=seeds)
    assert sorted(listed) == keys
    check_tiling(results)


@settings(max_examples=200, deadline=None)
@given(
    lo=st.one_of(st.none(), any_key),
    hi=st.one_of(st.none(), any_key),
    sample=st.lists(any_key, max_size=20),
    ways=st.integers(2, 40),
    prefix=st.sampled_from(["", "a", "ü/"]),
)
def test_cut_points_lie_strictly_inside(
    lo: str | None, hi: str | None, sample: list[str], ways: int, prefix: str
) -> None:
    if lo is not None:
        lo = prefix + lo
    if hi is not None:
        hi = prefix + hi
    cuts = cut_points(lo, hi, prefix, [prefix + s for s in sample], ways)
    assert len(cuts) <= ways - 1 or hi is None
    prev = encode(lo) if lo is not None else encode(prefix)
    for c in cuts:
        assert encode(c) > prev
        assert hi is None or encode(c) < encode(hi)
        assert c.startswith(prefix)
        prev = encode(c)


def test_open_split_spreads_over_the_space_above() -> None:
    """An open remainder after a page of path-like keys is cut where keys can still be, not only near lo:
    the next siblings at every level of the counter "run-NNN" (learned as a digit code from the page), and a
    few cuts into the unknown space above "run-"."""
    page = [f"run-{i:03d}/part-{'0' * 5}.gz" for i in range(256)]
    cuts = cut_points(page[-1], None, "", page, 16)
    assert {"run-256", "run-26", "run-3"} <= set(cuts)  # next sibling at each digit of the counter
    assert all("/" not in c for c in cuts)  # never inside the constant "/part-00000.gz"
    assert 1 <= sum(not c.startswith("run-") for c in cuts) <= 4  # few cuts into the unknown space above


def test_open_split_of_hex_directories_covers_the_hex_space() -> None:
    """Directories named by hex digits: the names are the code, so the space up to "g" is cut evenly by
    interpolation, each cut a directory name (never inside the constant "/part-00000.gz")."""
    page = [f"00{i:02x}/part-{'0' * 5}.gz" for i in range(256)]
    cuts = cut_points(page[-1], None, "", page, 16)
    assert cuts == [f"{d}{d}ff" for d in "123456789abcde"] + ["g"]


def test_a_remainder_past_hex_named_directories_s3_named_in_part_is_cut_evenly() -> None:
    """5,000 tenants named by 8 hex digits; S3 named the first 1,000 after pos (a Delimiter answer cut
    short), all of them starting 0-3. The names are the code: the cuts spread over the whole hex space, so
    every piece holds a similar share of the tenants (as an open remainder, the last three pieces held 93 %)."""
    rnd = random.Random(5)
    tenants = sorted(f"{t}/" for t in {f"{rnd.getrandbits(32):08x}" for _ in range(5000)})
    page = sorted(f"{tenants[0]}files/{rnd.getrandbits(40):010x}" for _ in range(1000))
    sample = sorted({*page[::16], *tenants[1:1001:15], tenants[1000]})
    assert tenants[1000] < "4"
    cuts = cut_points(page[-1], None, "", sample, 16)
    assert cuts[-1] == "g" and all(len(c) == 8 for c in cuts[:-1])
    bounds = [bisect.bisect_left(tenants, c) for c in cuts]
    shares = [b - a for a, b in itertools.pairwise([1, *bounds])]
    assert len(shares) == 15 and max(shares) < 2 * len(tenants) / 15


def test_open_split_of_hex_names_interpolates_up_to_the_last_hex_digit() -> None:
    """Hex names (every byte listed is a hex digit): the space above lo is bounded by "g", cut evenly in
    base 16, and what lies above "g" (most likely nothing) is one last open piece."""
    page = [f"00{i:02x}{'0' * 30}" for i in range(256)]
    cuts = cut_points(page[-1], None, "", page, 16)
    assert len(cuts) == 15 and cuts[-1] == "g"
    assert [c[0] for c in cuts[:-1]] == list("123456789abcde")  # one piece per sixteenth of the space
    assert all(set(c) <= set("0123456789abcdef") for c in cuts[:-1])


def test_hex_names_are_estimated_and_cut_in_base_16_from_one_page() -> None:
    """A page of sorted hex names shows one value at its shallow positions; the estimate and the cuts still
    take all sixteen there. The page below covers "11a1..." only; its range runs to "2", so nearly all of
    "1" (and "12".."1f", never seen) is ahead."""
    rng = random.Random(3)
    keys = sorted("11a1" + f"{rng.getrandbits(112):028x}" for _ in range(1000))

    def x(key: str) -> float:  # a key's place in the key space, as a hex fraction
        return int(key[:12].ljust(12, "0"), 16) / 16**12

    cur = Cursor(KeyRange(id="x", start_after="11", end="2"))
    cur.take(keys, True, "token")
    expected = 1000 * (x("2") - x(keys[-1])) / (x(keys[-1]) - x(keys[0])) / 1000  # pages from pos to "2"
    est = cur.remaining_pages(1000)
    assert est is not None and abs(est - expected) / expected < 0.01
    cuts = cut_points(cur.pos, "2", "", cur.sample, 5)
    assert len(cuts) == 4
    for i, c in enumerate(cuts, 1):  # at i/5 of the way from pos to "2"
        ideal = x(keys[-1]) + i / 5 * (x("2") - x(keys[-1]))
        assert abs(x(c) - ideal) < 0.01 * (x("2") - x(keys[-1]))


def test_open_split_of_non_ascii_keys() -> None:
    page = sorted(f"{a}{b}{c}" for a in "中文한" for b in "국어Ωλ" for c in "жд😀")
    cuts = cut_points(page[-1], None, "", page, 8)
    assert len(cuts) >= 3
    assert all(encode(c) > encode(page[-1]) for c in cuts)


def test_a_directory_of_wide_character_names_is_cut_into_even_pieces() -> None:
    """Names of 1- to 4-byte characters in one directory, the remainder bounded just past the directory
    ("logs0": nothing but the rest of "logs/" lies before it). The cuts interpolate in the alphabet of
    characters learned from the last page: every piece holds a fair share of the keys left, none is empty."""
    chars = "(AS_jz~éüж中한😀🚀"  # sorted by code point, as S3 orders
    keys = sorted(f"logs/{a}{b}{c}.txt" for a in chars for b in chars for c in chars)
    at = 300
    page = keys[at - 100 : at + 1]
    cuts = cut_points(keys[at], "logs0", "", page, 5)
    assert len(cuts) == 4 and all(c.startswith("logs/") for c in cuts)
    bounds = [keys[at], *cuts, "logs0"]
    pieces = [sum(1 for k in keys if lo < k <= hi) for lo, hi in zip(bounds, bounds[1:], strict=False)]
    left = len(keys) - at - 1
    assert sum(pieces) == left
    assert min(pieces) > 0.5 * left / 5 and max(pieces) < 1.5 * left / 5, pieces


def test_open_split_goes_to_sibling_directories() -> None:
    page = [f"data/2024/{i:04d}.nc" for i in range(1000)]
    cuts = cut_points(page[-1], None, "", page, 16)
    assert {"data/2024/1", "data/2025"} <= set(cuts)
    assert not any(c.startswith("data/2024/0999") for c in cuts)  # not in the ".nc" suffix


def test_bounded_split_interpolates_in_the_learned_alphabet() -> None:
    """Between two keys sharing a long prefix, the cut falls between them in the varying part."""
    base = "projects/genome/run-2024/sample-"
    sample = [f"{base}{i:06d}" for i in range(0, 1000, 10)]
    cuts = cut_points(f"{base}000990", f"{base}999999", "", sample, 2)
    assert len(cuts) == 1
    assert cuts[0].startswith(base)
    assert f"{base}3" < cuts[0] < f"{base}7"


def test_cursor_split_keeps_the_lower_part() -> None:
    keys = [f"{i:07d}" for i in range(0, 10_000_000, 701)]  # ids spread over their space, not a counter
    cur = Cursor(KeyRange(id="r", start_after=None, end="9999999"))
    n = cur.take(keys[:100], True, keys[99])
    assert n == 100
    given_ = cur.split(4, SplitPolicy(min_split_pages=1, page_keys=100), iter(["x", "y", "z"]).__next__)
    assert [g.id for g in given_] == ["x", "y", "z"]
    bounds = [cur.range.start_after, cur.range.end] + [g.end for g in given_]
    assert bounds[0] is None and bounds[-1] == "9999999"
    assert cur.range.end == given_[0].start_after
    assert all(a.end == b.start_after for a, b in zip(given_, given_[1:], strict=False))
    # the donor's next page is cut at its new end
    nxt = [k for k in keys if k > keys[99]][:100]
    taken = cur.take(nxt, True, nxt[-1])
    assert all(k <= cur.range.end for k in nxt[:taken])
    assert taken == len(nxt) or cur.done


def test_too_small_a_remainder_is_not_split() -> None:
    keys = [f"{i:04d}" for i in range(1000)]
    cur = Cursor(KeyRange(id="r", start_after=None, end="0120"))
    cur.take(keys[:100], True, keys[99])
    assert cur.split(8, SplitPolicy(min_split_pages=8, page_keys=100), lambda: "n") == []


def test_a_gap_or_an_overlap_fails_the_run() -> None:
    def res(a: str | None, b: str | None) -> ShardResult:
        return ShardResult(
            range=KeyRange(id=f"{a}", start_after=a, end=b),
            objects=0,
            bytes=0,
            list_requests=0,
            retries=0,
            done=True,
        )

    check_tiling([res(None, "m"), res("m", None)])
    with pytest.raises(IncompleteInventoryError, match="gap"):
        check_tiling([res(None, "m"), res("n", None)])
    with pytest.raises(IncompleteInventoryError, match="overlap"):
        check_tiling([res(None, "m"), res("l", None)])
    with pytest.raises(IncompleteInventoryError, match="nothing listed after"):
        check_tiling([res(None, "m")])


def test_seeds_from_hints_keep_empty_ranges() -> None:
    from hpcstage.errors import InputError
    from hpcstage.inventory.runner import seeds_from_hints

    rows = [
        {"start_after": None, "end": "b", "objects": 600},
        {"start_after": "b", "end": "c", "objects": 0},
        {"start_after": "c", "end": "d", "objects": 0},
        {"start_after": "d", "end": "e", "objects": 300},
        {"start_after": "e", "end": None, "objects": 0},
    ]
    seeds = seeds_from_hints(rows, 2)
    assert [(s.start_after, s.end) for s in seeds] == [(None, "b"), ("b", None)]
    # empty rows join the seed that follows them; nothing between "b" and "e" is lost
    assert [(s.start_after, s.end) for s in seeds_from_hints(rows, 100)] == [
        (None, "b"),
        ("b", "e"),
        ("e", None),
    ]
    with pytest.raises(InputError, match="tile"):
        seeds_from_hints([rows[0], rows[3], rows[4]], 2)
    # uneven rows: a seed closes before a row that would overshoot its share by more
    uneven = [
        {"start_after": None, "end": "m", "objects": 1019},
        {"start_after": "m", "end": None, "objects": 1981},
    ]
    assert [(s.start_after, s.end, s.estimate) for s in seeds_from_hints(uneven, 2)] == [
        (None, "m", 1019),
        ("m", None, 1981),
    ]


# -- directories: a remainder that crosses them is cut where S3 says they are ---------------------------


def dated_keys(days_per_month: int = 28, per_day: int = 40) -> list[str]:
    """events/year=Y/month=MM/day=DD/part-<hex>.gz: 3 years x 12 months x ``days_per_month`` days."""
    rng = random.Random(7)
    return sorted(
        f"events/year={y}/month={m:02d}/day={d:02d}/part-{rng.getrandbits(32):08x}.gz"
        for y in (2022, 2023, 2024)
        for m in range(1, 13)
        for d in range(1, days_per_month + 1)
        for _ in range(per_day)
    )


def test_a_remainder_across_directories_is_asked_about_level_by_level() -> None:
    keys = dated_keys()
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r"))
    cur.take(keys[:100], True, "t")  # 2022/01/01 .. 2022/01/03
    policy = SplitPolicy(min_split_pages=2, page_keys=100)
    sent = answer_explores(cur, s3, 8, policy)
    pos = keys[99]
    assert pos.startswith("events/year=2022/month=01/day=03/")
    # the shallowest level from pos (its directories after pos are the cut points), then each level
    # holding pos from its start (their fan-out sizes the directories above)
    assert sent == [
        {"Delimiter": "/", "MaxKeys": 1000, "StartAfter": pos},
        {"Delimiter": "/", "MaxKeys": 1000, "StartAfter": "events/", "Prefix": "events/"},
        {"Delimiter": "/", "MaxKeys": 1000, "StartAfter": "events/year=2022/", "Prefix": "events/year=2022/"},
        {
            "Delimiter": "/",
            "MaxKeys": 1000,
            "StartAfter": "events/year=2022/month=01/",
            "Prefix": "events/year=2022/month=01/",
        },
    ]
    assert cur.fanout == {"events/": 3, "events/year=2022/": 12, "events/year=2022/month=01/": 28}
    assert cur.explore(8, policy) is None  # each level is asked once
    # keys left: 25 days of this month, 11 months, 2 years, each sized from the day being listed
    est = cur.remaining_pages(100)
    true = (len(keys) - 100) / 100
    assert est is not None and 0.5 * true < est < 2 * true
    given_ = cur.split(8, policy, iter(f"p{i}" for i in range(8)).__next__)
    # cut at real directories into pieces of about an eighth, as far as the known directories allow (a
    # year is cut later, by whoever lists it)
    assert [g.start_after for g in given_] == [
        "events/year=2022/month=06/",
        "events/year=2022/month=10/",
        "events/year=2023/",
        "events/year=2024/",
    ]
    assert cur.range.end == given_[0].start_after
    bounds = [pos, *[g.start_after for g in given_], None]
    sizes = [
        sum(1 for k in keys if k > a and (b is None or k <= b))
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    assert sizes == [5500, 4480, 3360, 13440, 13440]
    for size, rng in zip(sizes, [cur.range, *given_], strict=True):  # each piece carries its estimate
        assert size / 1.5 < rng.estimate < size * 1.5


def test_no_directory_request_inside_one_directory_or_for_a_small_remainder() -> None:
    keys = dated_keys()
    policy = SplitPolicy(min_split_pages=2, page_keys=100)
    # the remainder ends inside the directory being listed: nothing to ask
    cur = Cursor(KeyRange(id="r", start_after=None, end="events/year=2022/month=01/day=01/part-f"))
    cur.take(keys[:20], True, "t")
    assert cur.explore(8, policy) is None
    # a remainder its donor's estimate says is too small to split
    cur = Cursor(KeyRange(id="r", start_after=None, end="events/year=2022/month=01/day=05/", estimate=150))
    cur.take(keys[:100], True, "t")
    assert cur.inherited_pages(100) == 0.5
    assert cur.explore(8, policy) is None
    # keys without directories
    flat = [f"{i:08x}" for i in range(0, 2**20, 997)]
    cur = Cursor(KeyRange(id="r"))
    cur.take(flat[:100], True, "t")
    assert cur.explore(8, policy) is None


def test_many_directories_estimated_too_small_are_halved_by_count() -> None:
    """Skewed tenants: the ones listed are small, so the tree estimate of the rest is below the split
    threshold. With BISECT_DIRS or more named directories left the remainder is cut in two at the middle
    one (a hidden big tenant gets a stream of its own sooner); with fewer it is not cut."""
    from hpcstage.inventory.steal import BISECT_DIRS

    def run(tenants: int) -> tuple[Cursor, list[KeyRange]]:
        names = [f"t{i:02d}/" for i in range(tenants)]
        rnd = random.Random(7)
        keys = sorted(
            f"{t}files/{rnd.getrandbits(32):08x}"
            for i, t in enumerate(names)
            for _ in range(40 if i != 9 else 4000)
        )
        s3 = FakeS3(keys)
        cur = Cursor(KeyRange(id="r"))
        cur.take(keys[:60], True, "t")  # t00/ and half of t01/
        policy = SplitPolicy(min_split_pages=10, page_keys=100)
        answer_explores(cur, s3, 8, policy)
        est = cur.remaining_pages(100)
        # sized like t01 (40 keys a tenant): the big t09/ is not seen
        assert est is not None and est < 2 * policy.min_split_pages
        return cur, cur.split(8, policy, iter(f"p{i}" for i in range(8)).__next__)

    cur, given_ = run(40)  # t02/ .. t39/ named after pos: cut before the 20th of them
    assert [g.start_after for g in given_] == ["t21/"]
    assert cur.range.end == "t21/" and given_[0].end is None
    cur, given_ = run(BISECT_DIRS + 1)  # BISECT_DIRS - 1 named after t01/: too few
    assert given_ == [] and cur.range.end is None


def test_a_truncated_directory_answer_still_covers_the_rest() -> None:
    """5,000 top-level directories: S3 names the first 1,000; the cuts still spread over all of them."""
    tenants = sorted(f"{random.Random(i).getrandbits(32):08x}/" for i in range(5000))
    keys = [f"{t}f{j}" for t in tenants for j in range(3)]
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r"))
    cur.take(keys[:100], True, "t")
    policy = SplitPolicy(min_split_pages=1, page_keys=100)
    assert len(answer_explores(cur, s3, 16, policy)) == 1
    assert cur.dirs_known_upto == tenants[1032]  # 100 keys = 34 tenants listed, then 1,000 named
    given_ = cur.split(16, policy, iter(f"p{i}" for i in range(16)).__next__)
    assert len(given_) >= 8
    assert given_[-1].start_after > tenants[2500]  # pieces reach past what S3 named


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(st.one_of(shaped, any_key), min_size=1, max_size=400), workers=st.integers(2, 12))
def test_streams_with_directory_requests_list_every_key_once(keys: list[str], workers: int) -> None:
    s3 = FakeS3(keys)
    listed, results, _ = run_streams(s3, "", workers, page=4)
    assert sorted(listed) == expected(keys, "")
    check_tiling(results)


def test_a_cursor_with_no_key_taken_yet_splits_by_the_estimate_it_came_with() -> None:
    """A versioned page whose rows are all versions of one key is carried whole to the next page: the cursor has
    taken a page but no key. Its split uses the donor's estimate (nothing listed to size a directory from)
    instead of failing, and the pieces tile the range."""
    cur = Cursor(KeyRange(id="r", start_after="a/x", end="c", estimate=50_000))
    assert cur.take([], True, "token") == 0 and not cur.done and cur.first is None
    given_ = cur.split(4, SplitPolicy(), iter(f"p{i}" for i in range(4)).__next__)
    assert cur.range == KeyRange(id="r", start_after="a/x", end="b", estimate=25_000)
    assert given_ == [KeyRange(id="p0", start_after="b", end="c", estimate=25_000)]


def test_the_empty_space_past_the_last_directory_goes_with_the_last_piece() -> None:
    """A remainder (pos, "d/y/"] whose only directory is pos's own (d/x/): every level asked named nothing
    past pos, so past d/x/ lie at most the files those answers named (none). The last piece reaches to the
    end instead of a piece (d/x0, d/y/] that would cost a request to find empty: no page comes back empty."""
    keys = sorted(f"d/x/{i * 4099 % 65536:04x}" for i in range(1000))  # ids over their space, not a counter
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=1, page_keys=100)
    cur = Cursor(KeyRange(id="r", start_after=None, end="d/y/"))
    cur.take(keys[:100], True, keys[99])
    assert answer_explores(cur, s3, 4, policy) == [
        {"Delimiter": "/", "MaxKeys": 1000, "StartAfter": keys[99], "Prefix": "d/"}
    ]
    given_ = cur.split(4, policy, iter(f"p{i}" for i in range(4)).__next__)
    assert len(given_) == 3
    assert given_[-1].end == "d/y/" and all(g.start_after < "d/x0" for g in given_)  # type: ignore[operator]
    listed = keys[:100]
    for rng in [cur.range, *given_]:
        piece = cur if rng is cur.range else Cursor(rng)
        while not piece.done:
            resp = s3.list_objects_v2(Bucket="bkt", **piece.request(100))
            got = [o["Key"] for o in resp.get("Contents", [])]
            assert got  # no page came back empty
            listed += got[: piece.take(got, resp["IsTruncated"], resp.get("NextContinuationToken"))]
    assert listed == keys


def test_a_level_answered_in_part_keeps_the_space_past_the_directory_apart() -> None:
    """When S3 cut a level's answer short (a thousand names, none a directory past pos), files may fill the
    space past pos's directory: it stays a piece of its own, as far as the remainder reaches."""
    keys = [f"d/x/{i * 37:05d}" for i in range(400)] + [f"d/x{i:05d}" for i in range(1500)]
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=1, page_keys=100)
    cur = Cursor(KeyRange(id="r", start_after=None, end="d/y/"))
    cur.take(keys[:100], True, keys[99])
    answer_explores(cur, s3, 4, policy)
    assert cur.level_upto == {"d/": "d/x/"}
    given_ = cur.split(4, policy, iter(f"p{i}" for i in range(4)).__next__)
    assert [g.start_after for g in given_][-1] == "d/x0" and given_[-1].end == "d/y/"


def test_a_remainder_past_the_directory_being_listed_holds_one_more_like_it() -> None:
    """Cursor._crossing_pages, when the cursor has no estimate of its own (no tree: its levels were not asked;
    no interpolation over its keys): a piece whose donor sized it small, listed near the end of a large
    directory with more after it, is estimated at least at the rest of that directory plus one like it, so
    its levels are asked (and it can be split) instead of waiting for the donor's estimate to run out."""
    step = 16**6 // 2000
    big = [f"b/x/{i * step:06x}" for i in range(2000)] + [f"b/y/{i * step:06x}" for i in range(2000)]
    policy = SplitPolicy(min_split_pages=2, page_keys=100)
    # from the 1,700th key of b/x/, with the donor's estimate of 300 keys: 50 left once 250 are listed
    cur = Cursor(KeyRange(id="r", start_after=big[1699], end="c/", estimate=300))
    for i in range(1700, 1950, 50):
        cur.take(big[i : i + 50], True, "t")
    cur._estimate = lambda _page_keys: (None, None)  # type: ignore[method-assign]  # noqa: SLF001
    assert cur.inherited_pages(100) == 0.5
    rest, size = cur._leaf_size("b/x/")  # type: ignore[misc]  # noqa: SLF001
    assert 0 < rest < 100 and 1_800 < size < 2_200  # by the density of the keys listed
    est, tree = cur._crossing_pages(100)  # noqa: SLF001
    assert tree is None and est == (rest + size) / 100  # not max(0.5, rest / 100): under 2 x 2 pages
    query = cur.explore(4, policy)
    assert query is not None and query["Delimiter"] == "/" and query["StartAfter"] == big[1949]


dir_key = st.text(alphabet=st.sampled_from(["a", "b", "/", "é", "😀"]), min_size=0, max_size=10)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(dir_key, any_key, shaped), min_size=1, max_size=12),
    st.sampled_from(["", "a", "a/", "b/"]),
)
def test_the_one_child_pattern_is_refuted_exactly_where_two_keys_show_two_subdirectories(
    keys: list[str], prefix: str
) -> None:
    """Cursor._refute_single skips pairs of files of one directory; on arbitrary keys it refutes exactly what
    the definition does: for each pair of neighbours, their deepest common directory D (below the prefix)
    when both reach into a subdirectory of D, D's parent."""
    ordered = sorted(set(keys))
    cur = Cursor(KeyRange(id="r"), prefix=prefix)
    cur.single = {"marker/": 1}
    cur._refute_single(ordered)
    expected = {"marker/": 1}
    for a, b in itertools.pairwise(ordered):
        common = a[
            : next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        ]
        cut = common.rfind("/") + 1
        d = a[:cut]
        if len(d) > len(prefix) and d.startswith(prefix) and "/" in a[cut:] and "/" in b[cut:]:
            expected[d[: d.rfind("/", 0, len(d) - 1) + 1]] = -1
    assert cur.single == expected
