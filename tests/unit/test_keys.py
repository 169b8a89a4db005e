"""Key-space arithmetic: orderings and bounds the cut points rely on."""

from __future__ import annotations

import bisect

from hpcstage.inventory.keys import (
    Alphabet,
    ByteInterval,
    Interval,
    ceil_utf8,
    encode,
    floor_utf8,
)
from hypothesis import given, settings
from hypothesis import strategies as st

keys = st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s)


def test_floor_and_ceil_utf8_on_invalid_bytes() -> None:
    assert floor_utf8(b"ab\xc3") == "ab"
    assert ceil_utf8(b"ab\xc3\x00") == "ab\u00c0"  # smallest 2-byte char starting 0xC3
    assert ceil_utf8(b"\x80") == "\u0080"
    assert ceil_utf8(b"\xff") is None
    assert ceil_utf8(b"plain") == "plain"


@given(st.binary(min_size=1, max_size=12))
def test_floor_utf8_is_valid_and_not_above(raw: bytes) -> None:
    f = floor_utf8(raw)
    assert encode(f) <= raw


@given(st.binary(min_size=1, max_size=12))
def test_ceil_utf8_is_valid_and_not_below(raw: bytes) -> None:
    c = ceil_utf8(raw)
    if c is not None:
        assert encode(c) >= raw


@settings(max_examples=300)
@given(keys, keys, st.floats(min_value=0, max_value=1))
def test_byte_interval_points_fall_strictly_inside(a: str, b: str, frac: float) -> None:
    lo, hi = sorted((encode(a), encode(b)))
    if lo == hi:
        return
    p = ByteInterval(lo, hi).at(frac)
    if p is not None:
        assert lo < encode(p) < hi


@settings(max_examples=300)
@given(st.lists(keys, max_size=20), keys, keys, st.floats(min_value=0, max_value=1))
def test_interval_points_fall_strictly_inside(sample: list[str], a: str, b: str, frac: float) -> None:
    lo, hi = sorted((a, b))
    if lo == hi:
        return
    alpha = Alphabet()
    for k in (*sample, lo, hi):
        alpha.add(k)
    p = Interval(lo, hi, alpha).at(frac)
    if p is not None:
        assert lo < p < hi
        assert encode(lo) < encode(p) < encode(hi)  # the same in S3's order
        p.encode("utf-8")  # a key S3 takes: no surrogate


@settings(max_examples=200)
@given(st.lists(keys, min_size=1, max_size=30), st.lists(keys, min_size=2, max_size=10))
def test_alphabet_coordinates_are_monotone(samples: list[str], probes: list[str]) -> None:
    alpha = Alphabet()
    for s in samples:
        alpha.add(s)
    ordered = sorted(probes, key=encode)
    coords = [alpha.coord(p, 0, 16) for p in ordered]
    assert coords == sorted(coords)


def test_vectorised_bit_length_is_exact() -> None:
    import random

    import pyarrow as pa
    from hpcstage.inventory.stats import bit_length

    rng = random.Random(1)
    values = [0, 1, 2, 3, 4, 7, 8, 2**42 - 1, 2**42, 5 * 2**40, 2**52 - 1, 2**53 + 1, 2**62, 2**63 - 1]
    values += [rng.getrandbits(rng.randint(1, 63)) for _ in range(20_000)]
    assert bit_length(pa.array(values, pa.int64())).to_pylist() == [v.bit_length() for v in values]


def test_code_run_learns_the_code_a_page_of_keys_ends_in() -> None:
    from hpcstage.inventory.keys import code_run

    hexes = sorted(f"11a1{i * 7919 % 65536:04x}" for i in range(300))
    run = code_run(hexes, 0)
    assert run is not None and (run.start, run.end) == (0, 8)  # "11a1" is hex too: the code starts at 0
    assert run.alphabet == frozenset(b"0123456789abcdef")
    assert run.top(hexes[0]) == "g"

    b36 = sorted(f"logs/hot/0c{c1}{c2}.dat" for c1 in "05acz" for c2 in "0123456789xyz")
    run = code_run(b36, 0)
    assert run is not None and (run.start, run.end) == (9, 13)  # "0c" and the varying two; not ".dat"
    assert run.alphabet == frozenset(b"05acz0123456789xyz")

    parts = sorted(f"day=05/part-{i:05d}.parquet" for i in range(100, 400))
    run = code_run(parts, 0)
    assert run is not None and (run.start, run.end) == (12, 17)  # "00" before the varying digits, not "-"

    assert code_run(sorted(["a/x", "a/y"]), 0) is None  # two values: too little evidence
    assert code_run(["only"], 0) is None


def test_positions_are_characters_so_names_of_wide_characters_line_up() -> None:
    """Names of 2-, 3- and 4-byte characters: each character is one position, so the code is found at the
    same positions as for ASCII names, its alphabet is the characters, and the first key past it is the
    character after the largest one."""
    from hpcstage.inventory.keys import code_run

    chars = "é中𝔸ж"  # 2, 3, 4 and 2 bytes in UTF-8
    names = sorted(f"data/{a}{b}{c}.bin" for a in chars for b in chars for c in chars)
    run = code_run(names, 5)
    assert run is not None and (run.start, run.end) == (5, 8)
    assert run.alphabet == frozenset(ord(c) for c in chars)
    assert run.top(names[0]) == "data/\U0001d539"  # the character after U+1D538 ("𝔸")

    alpha = Alphabet(code=run)
    for k in names:
        alpha.add(k)
    # three positions of four values each: the key space in between is 4**3 names, evenly spaced
    frame = Interval("data/", "data/\U0001d539", alpha)
    coords = [frame.coord(k) for k in names]
    assert coords == sorted(coords) and len(set(coords)) == len(names)
    half = frame.at(0.5)
    assert half is not None and sum(1 for k in names if k <= half) == len(names) // 2


def _coord_one_key_at_a_time(alpha: Alphabet, key: str, start: int, n: int) -> int:
    """The mixed-radix value digit by digit (the definition ``Alphabet.coord`` shortcuts)."""
    value, mode = 0, 0
    for p in range(start, start + n):
        col = alpha.values[p] if p < len(alpha.values) else []
        r = max(1, len(col))
        if mode == 0:
            v = ord(key[p]) if p < len(key) else -1
            i = bisect.bisect_right(col, v) - 1
            if i < 0:
                d, mode = 0, -1
            else:
                d = i
                mode = 1 if col[i] != v else (-1 if v == -1 else 0)
        else:
            d = 0 if mode < 0 else r - 1
        value = value * r + d
    return value


@settings(max_examples=300)
@given(
    st.lists(st.text(alphabet="ab/09é🚀\x01", max_size=12), min_size=1, max_size=20),
    st.lists(st.text(alphabet="ab/09é🚀\x01z", max_size=14), min_size=1, max_size=8),
    st.integers(0, 4),
    st.booleans(),
)
def test_a_window_of_positions_learns_what_every_key_added_alone_learns_there(
    samples: list[str], probes: list[str], start: int, close: bool
) -> None:
    whole = Alphabet(close_singletons=close)
    for k in samples:
        whole.add(k)
    window = Alphabet(close_singletons=close)
    window.add_keys(samples, start, start + 6)
    for p in range(start, start + 6):
        w = window.values[p] if p < len(window.values) else []
        assert w == (whole.values[p] if p < len(whole.values) else [])
    for probe in probes:
        expected = _coord_one_key_at_a_time(whole, probe, start, 6)
        assert whole.coord(probe, start, 6) == expected
        assert window.coord(probe, start, 6) == expected
