"""Names made of fields (steal.MIN_GROUP_KEYS, steal.GROUPS): a flat directory of access logs whose date and hour
roll over, and sample directories of lanes, reads and chunks. The first and third tests fail on 62db0db's engine
(before this work), the fourth on 65195de's, the fifth on cd375ae's, the three on series of numbered chunks on
fe2e721's; the second holds on all (an open directory needs fields that have rolled over). The last two guard the
group rules' edges: names of which one is a prefix of another, and any series layout split anywhere tiles its keys."""

from __future__ import annotations

import bisect
import itertools
import random

from fakes import FakeS3, answer_explores, list_ranges
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import Cursor, SplitPolicy, _last_field
from hypothesis import given, settings
from hypothesis import strategies as st

PAGE = 1000


def _held(keys: list[str], rng: KeyRange) -> int:
    lo = 0 if rng.start_after is None else bisect.bisect_right(keys, rng.start_after)
    hi = len(keys) if rng.end is None else bisect.bisect_right(keys, rng.end)
    return hi - lo


def _access_logs(keys_per_hour: int, seed: int = 3) -> list[str]:
    rnd = random.Random(seed)
    return sorted(
        f"logs/2025-{m:02d}-{d:02d}-{h:02d}-{rnd.getrandbits(64):016X}"
        for m in range(1, 13)
        for d in range(1, 8)
        for h in range(24)
        for _ in range(keys_per_hour)
    )


def test_an_open_flat_directory_of_rolling_date_fields_is_cut_across_its_months() -> None:
    """S3 access logs ("logs/2025-MM-DD-HH-<hex>", flat): the first page rolls the hour over, so the names are
    fields and what is left of the directory is of unknown extent. The bucket's first range is cut at the next
    values of those fields (days, months, years): its largest piece holds 33,600 of the 50,400 keys (February
    to September, which its thief cuts again). Before, the range was sized as the rest of the day by the hour's
    code and cut inside January, and its last piece, the rest of the year, held 46,200."""
    keys = _access_logs(keys_per_hour=25)
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=2, page_keys=PAGE)
    cur = Cursor(KeyRange(id="r", start_after=None, end=None))
    cur.take(keys[:PAGE], True, "token-0")
    assert cur.pos is not None and cur.pos[:16] != keys[0][:16]  # the page crossed hours
    answer_explores(cur, s3, 16, policy)
    ids = itertools.count()
    given = cur.split(16, policy, lambda: f"p{next(ids)}")
    assert cur.cut_path == "leaf-open"
    assert len(given) >= 4
    pieces = [cur.range, *given]
    held = [_held(keys, p) for p in pieces]
    assert sum(held) == len(keys)
    assert max(held) < 0.7 * len(keys)
    # at least one piece begins in a later month
    assert any(p.start_after is not None and p.start_after >= "logs/2025-02" for p in given)
    # the pieces tile the key space: listed to their ends, they give every key once
    rest = KeyRange(id="r", start_after=cur.pos, end=cur.range.end)
    assert list_ranges(s3, [rest, *given], PAGE) == keys[PAGE:]


def test_a_directory_listed_within_one_field_group_keeps_its_code_sizes() -> None:
    """The same names listed within one hour (the page does not roll a field over) are sized by their hex tail
    as before: the rule needs the fields to have changed under the cursor."""
    keys = _access_logs(keys_per_hour=2000)
    cur = Cursor(KeyRange(id="r", start_after=None, end=None))
    cur.take(keys[:PAGE], True, "token-0")
    assert cur.pos is not None and cur.pos[:19] == keys[0][:19]  # one hour
    assert not cur._leaf_open("logs/")  # noqa: SLF001
    size = cur._leaf_size("logs/")  # noqa: SLF001
    assert size is not None
    assert 0.8 * 2000 < size[1] < 1.25 * 2000  # the hour's keys


def _fastq(sample: str, s: int, chunks: int) -> list[str]:
    return [
        f"runs/FC1/{sample}-{s:02d}/{sample}_S{s}_L00{lane}_R{read}_{c:03d}.fastq.gz"
        for lane in range(1, 5)
        for read in (1, 2)
        for c in range(1, chunks + 1)
    ]


def test_a_directory_of_lanes_and_reads_is_sized_by_the_group_being_listed() -> None:
    """fastq names ("<sample>_S1_L001_R1_001.fastq.gz"), in a piece its donor sized: a page that runs from read 1
    into read 2 shows the read digit (two values) and the chunk number varying, so its names read as no code from
    the first position they vary at. They are read as the code of pos's own group ("..._L001_R2_"): the
    directory is sized and cut by its chunk numbers. Before, the directory had no size, and the remainder was
    estimated by interpolation across the sample numbers up to the next directory, at about 5e20 pages."""
    keys = sorted(_fastq("SMP000001", 1, 600) + _fastq("SMP000002", 2, 600))
    end = "runs/FC1/SMP000002-02/"
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=2, page_keys=PAGE)
    # the piece of a donor that sized the directory (``inherited_pages``): its extent is not unknown
    cur = Cursor(KeyRange(id="r", start_after="runs/FC1/SMP000001-01/", end=end, estimate=4800))
    cur.take(keys[:PAGE], True, "token-0")
    assert cur.pos is not None and "_L001_R2_" in cur.pos
    answer_explores(cur, s3, 4, policy)
    leaf = "runs/FC1/SMP000001-01/"
    assert not cur._leaf_open(leaf)  # noqa: SLF001
    size = cur._leaf_size(leaf)  # noqa: SLF001
    assert size is not None
    left, total = size
    assert 100 < left < 1000  # the rest of read 2's chunks, by their 3-digit code (200 are left)
    pages = cur.remaining_pages(PAGE)
    assert pages is not None and 0 < pages < 1
    model = cur._leaf_cut_model(leaf)  # noqa: SLF001
    assert model is not None
    frame = model[0]
    assert frame is not None
    prefix = f"{leaf}SMP000001_S1_L001_R2_"
    assert frame.lo.startswith(prefix) and frame.hi.startswith(prefix)


def test_a_directory_of_rolling_fields_that_outgrew_its_siblings_size_is_of_unknown_extent() -> None:
    """Six buckets' access logs, each flat under a prefix of its own: the donor sized the buckets by the hour
    its first page was in, before any field rolled over, and the piece carries that size for its siblings
    (``carried_mean``). Once the piece's own fields roll over and it has listed twice that size in its directory,
    the directory is of unknown extent; within twice the size, or in a piece its donor sized, it is not."""
    keys = [k.replace("logs/", "logs/b/") for k in _access_logs(keys_per_hour=25)]

    def cursor(mean: float, estimate: int = 0) -> Cursor:
        cur = Cursor(KeyRange(id="r", start_after="logs/a/", end="logs/c/", estimate=estimate))
        cur.carried_mean["logs/"] = mean  # the donor's size for the buckets
        cur.take(keys[:PAGE], True, "token-0")
        return cur

    outgrown = cursor(300.0)  # one hour's keys; 1,000 listed
    assert outgrown._sibling_mean("logs/") == 300.0  # noqa: SLF001
    assert outgrown._leaf_open("logs/b/")  # noqa: SLF001
    assert not cursor(800.0)._leaf_open("logs/b/")  # noqa: SLF001
    assert not cursor(300.0, estimate=40_000)._leaf_open("logs/b/")  # noqa: SLF001


def test_the_size_of_a_directory_of_fields_is_not_carried_before_any_field_rolls_over() -> None:
    """At 1B an hour of access logs is 124 pages: the bucket's first page lies within one hour, no field has
    rolled over, and the directory's size by the hex tail is one hour's keys. The tree estimate sizes by it but
    does not record it for thieves (``units``, carried as their siblings' size, which held every piece as sized:
    simulator, 1B access-logs 4,762.6 s). A directory of names whose digits repeat its path's (CloudTrail's
    account and region) is no directory of fields."""
    keys = _access_logs(keys_per_hour=2000)
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=2, page_keys=PAGE)
    cur = Cursor(KeyRange(id="r", start_after=None, end=None))
    cur.take(keys[:PAGE], True, "token-0")
    answer_explores(cur, s3, 16, policy)
    assert cur._fielded("logs/") and not cur._fields_rolled("logs/")  # noqa: SLF001
    assert cur.remaining_pages(PAGE) is not None
    assert cur.units == {}
    rnd = random.Random(9)
    trail = sorted(
        f"AWSLogs/123456789012/CloudTrail/eu-west-1/2025/01/15/123456789012_CloudTrail_eu-west-1_"
        f"20250115T{rnd.getrandbits(40):010x}.json.gz"
        for _ in range(3000)
    )
    ct = Cursor(KeyRange(id="r", start_after=None, end=None))
    ct.take(trail[:PAGE], True, "token-0")
    assert not ct._fielded("AWSLogs/123456789012/CloudTrail/eu-west-1/2025/01/15/")  # noqa: SLF001


def _fastq_big(chunks: int) -> list[str]:
    """Two sample directories of eight lane/read series of ``chunks`` numbered chunks each (5 digits)."""
    return sorted(
        f"runs/FC1/{sample}-{s:02d}/{sample}_S{s}_L00{lane}_R{read}_{c:05d}.fastq.gz"
        for sample, s in (("SMP000001", 1), ("SMP000002", 2))
        for lane in range(1, 5)
        for read in (1, 2)
        for c in range(1, chunks + 1)
    )


def test_a_directory_of_series_is_cut_at_its_next_read_and_lane() -> None:
    """A remainder that starts in the first of eight series ("..._L001_R1_00001" on) of a sample directory and
    reaches past it (GROUPS): the series' counter sizes the rest of that series (2,000 keys, as far again as it
    reached), and the other series are of unknown extent, so the remainder is cut at the next value of each
    field before the counter ("..._R2", "..._L002", "..._S2"), each piece estimated as one series (4,002 keys);
    not at "..._L01" (lanes 10-19). On fe2e721's engine the remainder was cut by interpolation in the first
    series: the donor kept it to "..._R1_03900" and gave one piece, its 28,100 keys estimated at 2,102."""
    keys = _fastq_big(4000)
    leaf = "runs/FC1/SMP000001-01/"
    end = "runs/FC1/SMP000002-02/"
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=2, page_keys=PAGE)
    cur = Cursor(KeyRange(id="r", start_after=leaf, end=end))
    cur.take(keys[: 2 * PAGE], True, "token-0")
    assert cur.pos == f"{leaf}SMP000001_S1_L001_R1_02000.fastq.gz"
    answer_explores(cur, s3, 8, policy)
    ids = itertools.count()
    given = cur.split(8, policy, lambda: f"p{next(ids)}")
    assert cur.cut_path == "group"
    name = f"{leaf}SMP000001_S1_"
    assert [p.start_after for p in given] == [f"{name}L001_R2", f"{name}L002", f"{leaf}SMP000001_S2"]
    assert [p.estimate for p in given] == [4002, 4002, 4002]
    assert cur.range.end == f"{name}L001_R2" and cur.range.estimate == 2001
    # the donor keeps the rest of read 1, lane 1; then read 2 of lane 1, lanes 2-4, and past the sample's number
    assert [_held(keys, p) for p in [cur.range, *given]] == [4000, 4000, 24000, 0]
    rest = KeyRange(id="r", start_after=cur.pos, end=cur.range.end)
    assert list_ranges(s3, [rest, *given], PAGE) == [k for k in keys if cur.pos < k <= end]


def test_a_piece_of_later_series_is_bounded_by_its_series_counter() -> None:
    """A thief's piece from one lane to the next value of the lane's tens digit ("..._L003" to "..._L01"), whose
    page runs from read 1 into read 2: its names read as no code, and the remainder was sized by interpolation
    over the read letter closed to G-Z and the lane digits to 0-9 (fe2e721: 1,282 pages). It is bounded by what
    pos's series' counter has reached (GROUPS): as many chunks again as read 2 shows, 400."""
    keys = _fastq_big(600)
    leaf = "runs/FC1/SMP000001-01/"
    cur = Cursor(KeyRange(id="r", start_after=f"{leaf}SMP000001_S1_L003", end=f"{leaf}SMP000001_S1_L01"))
    first = bisect.bisect_right(keys, f"{leaf}SMP000001_S1_L003")
    cur.take(keys[first : first + PAGE], True, "token-0")
    assert cur.pos == f"{leaf}SMP000001_S1_L003_R2_00400.fastq.gz"
    pages = cur.remaining_pages(PAGE)
    assert pages is not None and 0.35 < pages < 0.45


def test_a_piece_cut_at_a_series_is_split_by_its_donors_estimate() -> None:
    """A thief's piece that starts at a read its donor cut at ("..._L001_R2"), estimated as one series (4,000
    keys): after its first page the counter alone says 1,000 more, and the donor's estimate (3,000 left) stands;
    the series' rest is cut in whole pages (less the margin) at once, and the read after it is probed (fe2e721:
    the donor kept the whole series, and the seven pieces it cut by interpolation past it were empty). A piece
    that starts at the directory itself carries the directory's estimate (32,000 keys), not a series': its
    series is sized by the counter's reach, 1,001 keys, each later piece by twice that."""
    keys = _fastq_big(4000)
    leaf = "runs/FC1/SMP000001-01/"
    name = f"{leaf}SMP000001_S1_"
    policy = SplitPolicy(min_split_pages=1, page_keys=PAGE)
    cur = Cursor(KeyRange(id="r", start_after=f"{name}L001_R2", end=f"{name}L002", estimate=4000))
    first = bisect.bisect_right(keys, f"{name}L001_R2")
    cur.take(keys[first : first + PAGE], True, "token-0")
    ids = itertools.count()
    given = cur.split(8, policy, lambda: f"p{next(ids)}")
    assert cur.cut_path == "group"
    pieces = [cur.range, *given]
    assert [p.end for p in pieces][-1] == f"{name}L002" and given[-1].start_after == f"{name}L001_R3"
    assert [_held(keys, p) for p in pieces] == [1900, 900, 1200, 0]
    whole = Cursor(KeyRange(id="w", start_after=leaf, end="runs/FC1/SMP000002-02/", estimate=32000))
    whole.take(keys[:PAGE], True, "token-0")
    given = whole.split(8, policy, lambda: f"q{next(ids)}")
    assert whole.cut_path == "group"
    assert whole.range.estimate == 1001 and {p.estimate for p in given} == {2002}


def test_the_last_field_of_names_one_of_which_is_a_prefix_of_another() -> None:
    """Where the last sorted name is shorter than the deepest position two others share ("d/b" after "d/aaaa1",
    "d/aaaa2"), the last field is read in the pair that differs there. Read in the last name it raised IndexError
    in a fleet lister once every split read the fields of pos's directory (GROUPS; before the fix,
    tests/system/test_inventory_fleet.py's weird keys)."""
    assert _last_field(["d/aaaa1", "d/aaaa2", "d/b"], 2) == 2  # "aaaa1": one field from the directory's start
    assert _last_field(["d/x_01", "d/x_02", "d/y"], 2) == 4  # "01": after the separator
    assert _last_field(["d/x_01", "d/x_02"], 2) == 4


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 9),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(50, 3000),
    st.integers(0, 3),
    st.integers(2, 16),
    st.integers(0, 2**32),
)
def test_group_cuts_tile_any_series_layout(
    samples: int, s_no: int, lanes: int, reads: int, chunks: int, digits: int, ways: int, seed: int
) -> None:
    """Directories of series of numbered chunks in any count and width, a piece of them from a random key to a
    random end (or open), one page listed, then a split: every piece, the donor's rest included, starts after the
    one before, and listed to their ends they give every key after pos once (GROUPS)."""
    rnd = random.Random(seed)
    width = max(len(str(chunks)), digits)
    keys = sorted(
        f"runs/F/SMP{i:03d}-{i}/SMP{i:03d}_S{s_no + i}_L00{lane}_R{read}_{c:0{width}d}.fastq.gz"
        for i in range(samples)
        for lane in range(1, lanes + 1)
        for read in range(1, reads + 1)
        for c in range(1, chunks + 1)
    )
    s3 = FakeS3(keys)
    lo = rnd.randrange(len(keys) // 2)
    hi = rnd.choice([None, keys[rnd.randrange(lo + 1, len(keys))], "runs/F/SMP~"])
    start = keys[lo] if lo else None
    page = [k for k in keys if (start is None or k > start) and (hi is None or k <= hi)][:PAGE]
    cur = Cursor(KeyRange(id="r", start_after=start, end=hi, estimate=rnd.choice([0, 1000, 10**20])))
    cur.take(page, True, "token-0")
    if cur.done or cur.pos is None:
        return
    policy = SplitPolicy(min_split_pages=rnd.choice([0.5, 1, 2, 8]), page_keys=PAGE)
    answer_explores(cur, s3, ways, policy)
    ids = itertools.count()
    given_pieces = cur.split(ways, policy, lambda: f"p{next(ids)}")
    bounds = [cur.pos, cur.range.end, *(p.end for p in given_pieces)]
    assert all(a is not None and (b is None or a < b) for a, b in itertools.pairwise(bounds[1:]))
    assert cur.range.end is None or cur.pos <= cur.range.end or cur.done
    rest = KeyRange(id="r", start_after=cur.pos, end=cur.range.end)
    want = [k for k in keys if k > cur.pos and (hi is None or k <= hi)]
    assert list_ranges(s3, [rest, *given_pieces], PAGE) == want
