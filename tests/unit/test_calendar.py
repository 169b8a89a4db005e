"""Calendar fields in names (keys.calendar_limits): the tens digits of a month, day, hour, minute and second take
few values, and an alphabet closes them over those only; and an estimate of more keys than S3 holds does not size
a directory of fields (steal.MAX_ESTIMATE_KEYS)."""

from __future__ import annotations

import random

from hpcstage.inventory.keys import Alphabet, Interval, calendar_limits, code_run
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import MAX_ESTIMATE_KEYS, Cursor, cut_points
from hypothesis import given, settings
from hypothesis import strategies as st

PAGE = 1000


def _read(key: str) -> dict[int, str]:
    """calendar_limits of one key as {position: its allowed digits, as a string}."""
    return {p: "".join(sorted(chr(c) for c in v)) for p, v in calendar_limits([key]).items()}


def test_dates_and_times_are_read_where_they_stand_alone() -> None:
    assert _read("logs/2025-01-01-10-3049B0CE12345678") == {10: "01", 13: "0123", 16: "012"}
    assert _read("logs/2025-01-01-10-20-30-35E2AAAA") == {
        10: "01",
        13: "0123",
        16: "012",
        19: "012345",
        22: "012345",
    }
    # a compact date before a random tail; the directory's date too; no hour in "T1234abcd"
    trail = "AWSLogs/1/CloudTrail/eu-west-1/2025/01/15/1_CloudTrail_eu-west-1_20250115T1234abcd.json.gz"
    assert _read(trail) == {36: "01", 39: "0123", 69: "01", 71: "0123"}
    assert _read("x/dt=2025-01-15/hour=10/a.json") == {10: "01", 13: "0123"}
    # digits that only look like a date: inside an id, inside a counter, a month 13
    assert _read("SMP201012_S1_L001") == {}
    assert _read("frames/0020250115.png") == {}
    assert _read("x/2025-13-01/a") == {}


def test_a_position_two_keys_read_differently_is_left_out() -> None:
    # position 11: the day's tens digit of the first name, the month's of the second
    both = calendar_limits(["ab/2025-01-15", "abcde/2025-01-15"])
    assert {p: "".join(sorted(chr(c) for c in v)) for p, v in both.items()} == {8: "01", 14: "0123"}


def test_an_alphabet_closes_a_calendar_tens_digit_over_its_values_only() -> None:
    keys = [f"logs/2025-01-0{d}-0{h}-x" for d in range(1, 4) for h in range(3)]
    closed = Alphabet(close_singletons=True)
    limited = Alphabet(close_singletons=True, limits=calendar_limits(keys))
    for a in (closed, limited):
        a.add_keys(keys)
    # the day's and the hour's tens digits: one value seen ("0") each
    assert [chr(v) for v in closed.values[13]] == list("0123456789")
    assert [chr(v) for v in limited.values[13]] == list("0123")
    assert [chr(v) for v in limited.values[16]] == list("012")
    assert [chr(v) for v in limited.values[14]] == list("0123456789")  # a units digit: all ten
    # a value seen outside the calendar's stays (a name read as a date that is none)
    odd = Alphabet(close_singletons=True, limits=calendar_limits(keys))
    odd.add_keys([*keys, "logs/2025-01-71-00-x"])
    assert [chr(v) for v in odd.values[13]] == list("01237")


@settings(max_examples=100)
@given(
    st.lists(
        st.from_regex(r"logs/20[0-9]{2}-[01][0-9]-[0-3][0-9]-[0-2][0-9]-[0-9A-F]{4}", fullmatch=True),
        min_size=2,
    ),
    st.lists(st.text(min_size=1, max_size=30), min_size=2, max_size=10),
)
def test_coordinates_under_calendar_limits_are_monotone(sample: list[str], probes: list[str]) -> None:
    alpha = Alphabet(close_singletons=True, limits=calendar_limits(sample))
    alpha.add_keys(sample)
    ordered = sorted(probes)
    coords = [alpha.coord(p, 0, 32) for p in ordered]
    assert coords == sorted(coords)
    lo, hi = min(sample), max(sample)
    if lo < hi:
        p = Interval(lo, hi, alpha).at(0.5)
        assert p is None or lo < p < hi


def test_the_rest_of_a_month_of_access_logs_is_sized_by_its_days_and_hours() -> None:
    """A piece of one month of access logs (10 keys an hour): after a page (four days and three hours) the rest of
    January, 6,440 keys, is estimated at 8.4 pages over days up to 39 and hours up to 29; over every digit (days
    and hours up to 99, as before the calendar's limits) it was estimated at 23.5 pages."""
    rnd = random.Random(4)
    keys = sorted(
        f"logs/2025-01-{d:02d}-{h:02d}-{rnd.getrandbits(64):016X}"
        for d in range(1, 32)
        for h in range(24)
        for _ in range(10)
    )
    cur = Cursor(KeyRange(id="r", start_after="logs/2025-01", end="logs/2025-02"))
    cur.take(keys[:PAGE], True, "token-0")
    assert cur.pos is not None and cur.pos.startswith("logs/2025-01-05-03")
    pages = cur.remaining_pages(PAGE)
    assert pages is not None and round(pages, 1) == 8.4
    assert len(keys) - PAGE == 6440


def test_an_estimate_of_more_keys_than_s3_holds_does_not_size_a_directory_of_fields() -> None:
    """A piece whose donor estimated it by an interpolation no name fills (3.4e20 keys) holds a flat directory of
    access logs whose hour has rolled over: the estimate does not size it, and the directory is of unknown extent
    (cut at its fields' next values), as in a piece that came with none; a donor's plausible estimate sizes it."""
    rnd = random.Random(5)
    keys = sorted(
        f"logs/b/2025-{m:02d}-{d:02d}-{h:02d}-{rnd.getrandbits(64):016X}"
        for m in range(1, 4)
        for d in range(1, 29)
        for h in range(24)
        for _ in range(25)
    )

    def cursor(estimate: int) -> Cursor:
        cur = Cursor(KeyRange(id="r", start_after="logs/a/", end="logs/c/", estimate=estimate))
        cur.take(keys[:PAGE], True, "token-0")
        return cur

    assert cursor(0)._leaf_open("logs/b/")  # noqa: SLF001
    assert cursor(339_322_644_054_386_868_224)._leaf_open("logs/b/")  # noqa: SLF001
    assert not cursor(40_000)._leaf_open("logs/b/")  # noqa: SLF001
    assert not cursor(MAX_ESTIMATE_KEYS)._leaf_open("logs/b/")  # noqa: SLF001


def test_a_code_does_not_reach_back_over_the_date_its_names_repeat() -> None:
    """A day's CloudTrail names repeat the day's date before a random tail ("..._20250707T<random>"): the code a
    page of them ends in starts after the date, where they differ, so cuts of what is left of the day stay among
    its names. Extended over the date, as over a digest's leading characters, the code's 62 values at each of its
    positions put the cuts at "..._5kWww", "..._9V1ot": past every name of the day."""
    leaf = "AWSLogs/642616328707/CloudTrail/eu-west-1/2025/07/07/"
    rnd = random.Random(6)
    alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    names = sorted(
        f"{leaf}642616328707_CloudTrail_eu-west-1_20250707T{''.join(rnd.choice(alnum) for _ in range(8))}.json.gz"
        for _ in range(3000)
    )
    page = names[1000:1064]  # a thief's page in the middle of the day
    code = code_run(page, len(leaf))
    assert code is not None
    date_at = page[0].index("20250707T")
    assert code.start >= date_at + 9  # after "20250707T"
    cuts = cut_points(page[-1], f"{leaf[:-3]}08/", "", page, 8)
    assert len(cuts) >= 4
    assert all(c.startswith(f"{leaf}642616328707_CloudTrail_eu-west-1_20250707T") for c in cuts)
    # a digest's leading characters, shared by a page, are still part of its code
    hexes = sorted(f"d/3a{rnd.getrandbits(56):014x}" for _ in range(64))
    hex_code = code_run(hexes, 2)
    assert hex_code is not None and hex_code.start == 2
