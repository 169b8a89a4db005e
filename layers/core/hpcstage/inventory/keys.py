"""Key-space arithmetic in S3's order (UTF-8 binary).

S3 lists keys in ascending order of their UTF-8 bytes, which is the order of their code points: Python's
own order of strings. To cut a range of keys we map a key to an integer coordinate, a mixed-radix number
over the characters seen at each position after the range's common prefix (``Alphabet``), interpolate
between two keys in that coordinate and map back to a string, because StartAfter (and every boundary we
hand to S3) is one. Positions are characters, not bytes: one 3-byte character is one position, so keys of
any script line up position by position as keys of ASCII do.

Coverage never depends on this arithmetic being exact: range boundaries are just strings in
increasing order. The arithmetic only decides *where* cuts fall.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import AnyStr

# Bytes of the suffix (after the common prefix) used as the coordinate; 16 bytes resolves
# 2**128 positions between any two bounds, far more than any bucket has keys.
COORD_WIDTH = 16
# The largest byte a UTF-8 string can start a character with is 0xF4; using 0xFF as the
# ceiling is harmless (the ceiling is never sent to S3, only interpolated towards).
_TOP = b"\xff" * (COORD_WIDTH + 1)


def encode(key: str) -> bytes:
    return key.encode("utf-8")


def common_prefix(a: AnyStr, b: AnyStr) -> AnyStr:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return a[:i]


def to_coord(suffix: bytes, width: int = COORD_WIDTH) -> int:
    return int.from_bytes(suffix[:width].ljust(width, b"\x00"), "big")


def from_coord(value: int, width: int = COORD_WIDTH) -> bytes:
    return value.to_bytes(width, "big").rstrip(b"\x00")


def floor_utf8(raw: bytes) -> str:
    """The longest prefix of ``raw`` that is valid UTF-8, as a str (always <= raw in byte order)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return raw[: err.start].decode("utf-8")


def ceil_utf8(raw: bytes) -> str | None:
    """The smallest valid UTF-8 string >= ``raw`` that is no longer than needed, or None.

    Used to turn an interpolated coordinate into a key: flooring would often collapse onto the
    lower bound (any lead byte >= 0x80 followed by non-continuation bytes), ceiling spreads points.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        i = err.start
    window = raw[i : i + 4]
    lo_cp, hi_cp = 0, 0x10FFFF
    # UTF-8 preserves code-point order, so the encodings are monotone: binary search the first
    # code point whose encoding is strictly greater than the bytes at position i.
    best: int | None = None
    while lo_cp <= hi_cp:
        mid = (lo_cp + hi_cp) // 2
        cp = 0xE000 if 0xD800 <= mid <= 0xDFFF else mid
        enc = chr(cp).encode("utf-8")
        if enc > window[: len(enc)]:
            best = cp
            hi_cp = mid - 1
        else:
            lo_cp = mid + 1
    if best is None:
        return None
    return raw[:i].decode("utf-8") + chr(best)


def upper_bound(prefix: str) -> bytes:
    """A byte string greater than every key that starts with ``prefix``."""
    return encode(prefix) + _TOP


END = -1  # the end-of-key marker sorts before every character ("abc" < "abc/...")
ALPHABET_POSITIONS = 48  # characters after the common prefix that a coordinate resolves
MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)  # not characters: no key holds one


def char_after(v: int) -> str | None:
    """The first character whose code point is above ``v``, or None past the last one."""
    v += 1
    if _SURROGATES[0] <= v <= _SURROGATES[1]:
        v = _SURROGATES[1] + 1
    return chr(v) if v <= MAX_CODE_POINT else None


DECIMAL_DIGITS = frozenset(range(ord("0"), ord("9") + 1))
MIN_CODE_ALPHABET = 3  # distinct values a code's varying positions must show before they say anything


@dataclass(frozen=True)
class CodeRun:
    """Where sampled keys end in a code (hex digests, UUIDs, base-36 ids, zero-padded counters, names drawn
    from any set of characters) and the alphabet its characters are drawn from, learned from the positions
    where the sampled keys differ.

    Positions are characters (code points), not bytes: S3's order (UTF-8 bytes) is the order of code points,
    and a name of multi-byte characters keeps every character at its own position.

    A page of sorted keys differs only at its deepest positions; the code's shallower positions show one
    value each, which says nothing of the others the code uses. Positions from ``start`` to the end of the
    code take the whole alphabet: in estimates, in interpolated cuts and in the cuts of an open remainder.
    """

    start: int  # first position of the code (the keys' shared prefix ends here)
    end: int  # one past its last position (a "/" or a constant suffix such as ".parquet" after it)
    alphabet: frozenset[int]  # code points

    def covers(self, p: int) -> bool:
        return self.start <= p < self.end

    def decimal(self) -> CodeRun:
        """This code with every decimal digit in its alphabet, when the alphabet is decimal digits only (a
        counter: a page's few dozen sampled keys seldom show all ten at each position); else itself."""
        if self.alphabet <= DECIMAL_DIGITS and self.alphabet != DECIMAL_DIGITS:
            return CodeRun(self.start, self.end, DECIMAL_DIGITS)
        return self

    def top(self, key: str) -> str | None:
        """A key greater than every key sharing ``key[:start]`` whose code continues with the alphabet's
        characters; None if no character is left above the alphabet."""
        after = char_after(max(self.alphabet))
        return key[: self.start] + after if after is not None else None

    def value(self, key: str) -> int | None:
        """The code of ``key`` read as a number in the alphabet's radix (its characters' ranks, most
        significant first); None when the key is too short or a character is not in the alphabet."""
        if len(key) < self.end:
            return None
        digits = sorted(self.alphabet)
        v = 0
        for ch in key[self.start : self.end]:
            d = bisect.bisect_left(digits, ord(ch))
            if d == len(digits) or digits[d] != ord(ch):
                return None
            v = v * len(digits) + d
        return v

    @property
    def space(self) -> int:
        """How many values the code can spell."""
        return len(self.alphabet) ** (self.end - self.start)


def code_run(keys: Sequence[str], start: int) -> CodeRun | None:
    """The code that ``keys`` (sorted, sharing their first ``start`` characters) end in, if any.

    The varying positions are those from where the first and last key differ to the end of that path
    segment. Their union of values is the alphabet when it has at least MIN_CODE_ALPHABET values; the code
    extends left over constant positions whose values are in the alphabet (no "/" crossed), unless they hold a
    calendar date (see _CALENDAR), and right over positions whose values all are. (Extended over the date a
    day's CloudTrail names repeat, "..._20250707T<random>", a piece's cuts fell at "..._5kWww", "..._9V1ot",
    past every name: simulator, 25M cloudtrail, 1,606 of the leaf path's 1,619 pieces empty.)
    """
    if len(keys) < 2:
        return None
    f = len(common_prefix(keys[0], keys[-1]))
    if f < start:
        return None
    longest = max(len(k) for k in keys)
    alphabet: set[int] = set()
    end = f
    while end < longest:
        col = {ord(k[end]) for k in keys if len(k) > end}
        if 0x2F in col or len(col) < 2 and end > f:
            break
        alphabet |= col
        end += 1
    if len(alphabet) < MIN_CODE_ALPHABET:
        return None
    while end < longest and all(len(k) > end and ord(k[end]) in alphabet for k in keys):
        end += 1  # constant positions after the varying ones, inside the alphabet ("...0a" of a digest)
    begin = f
    first = keys[0]
    while begin > start and ord(first[begin - 1]) in alphabet:
        begin -= 1
    if begin < f and any(begin <= p < f for p in calendar_limits((first,))):
        begin = f  # not over a date: "..._20250115T" before a random tail is the names' fixed text
    return CodeRun(begin, end, frozenset(alphabet))


# Calendar fields. Dates and times in names ("2025-01-15", "20250115T", "2025-01-15-10-20-30", a directory
# "2025/01/15/") are fields whose tens digits take few values: a month's 0-1, a day's 0-3, an hour's 0-2, a
# minute's or second's 0-5. An alphabet that closes each digit position over 0-9 takes a year of hours (8,760) for a
# million values, and cuts spread over it fall on days 40-99 and hours 30-99 (simulator, 25M access-logs-multi:
# 3,968 of 7,382 pieces cut by interpolation empty). Where a name holds a date (a year 1900-2099 not preceded by a
# letter or digit, then month and day, each part followed by no digit; then, each part followed by neither a letter
# nor a digit, an hour, minute and second), the positions of its tens digits close only over those values
# (``calendar_limits``). A value seen there stays whatever it is: a date read where there was none only narrows
# where cuts fall, never what a range holds.
_CALENDAR = re.compile(
    r"(?<![0-9A-Za-z])(?:19|20)[0-9]{2}(?P<s>[-_./]?)(?P<mo>(?=0[1-9]|1[0-2])[01])[0-9]"
    r"(?P=s)(?P<d>(?=0[1-9]|[12][0-9]|3[01])[0-3])[0-9](?![0-9])"
    r"(?:[-_T./: ](?P<h>(?=[01][0-9]|2[0-3])[0-2])[0-9](?![0-9A-Za-z])"
    r"(?:[-_.:](?P<mi>[0-5])[0-9](?![0-9A-Za-z])"
    r"(?:[-_.:](?P<se>[0-5])[0-9](?![0-9A-Za-z]))?)?)?"
)
_CALENDAR_TENS = {
    "mo": frozenset(range(0x30, 0x32)),
    "d": frozenset(range(0x30, 0x34)),
    "h": frozenset(range(0x30, 0x33)),
    "mi": frozenset(range(0x30, 0x36)),
    "se": frozenset(range(0x30, 0x36)),
}


def calendar_limits(keys: Iterable[str]) -> dict[int, frozenset[int]]:
    """Positions of the tens digits of calendar fields in ``keys`` (see _CALENDAR) and the digits (code points)
    each may take; a position two keys read differently is left out."""
    limits: dict[int, frozenset[int]] = {}
    dropped: set[int] = set()
    for key in keys:
        if "19" not in key and "20" not in key:
            continue  # no year
        for m in _CALENDAR.finditer(key):
            for part, allowed in _CALENDAR_TENS.items():
                p = m.start(part)
                if p < 0 or p in dropped:
                    continue
                if limits.setdefault(p, allowed) != allowed:
                    del limits[p]
                    dropped.add(p)
    return limits


@functools.lru_cache(maxsize=4096)
def _closed_column(
    seen: frozenset[int],
    close_singletons: bool,
    code: frozenset[int] | None,
    limit: frozenset[int] | None = None,
) -> tuple[int, ...]:
    """A position's values, sorted, closed over ``Alphabet.CLASSES`` and the code's alphabet (``code``: the
    position is inside the code), the digits the closure adds only those of ``limit`` where given (a calendar
    field's tens digit); the same few columns recur at every split, so they are kept."""
    closed = set(seen)
    if code is not None and not seen.isdisjoint(code):
        closed.update(code)
    for lo, hi in Alphabet.CLASSES:
        members = sum(1 for x in seen if lo <= x <= hi)
        if members >= 2 or (members and close_singletons):
            closed.update(range(lo, hi + 1))
    if limit is not None:
        closed = {v for v in closed if v in seen or v in limit or v not in DECIMAL_DIGITS}
    return tuple(sorted(closed))


class Alphabet:
    """The characters (code points) seen at each position of sampled keys.

    Real key spaces use few of the possible characters at each position (hex digits, a constant
    "/part-", a month 01-12, the few hundred characters of a script). Coordinates in a mixed radix over the
    *observed* values make interpolation roughly proportional to key rank, where coordinates over every
    possible value would overstate an alphabet of 16 by 16x per position and a constant segment without
    bound. Positions count characters, so a name of 2-, 3- or 4-byte UTF-8 characters keeps each character
    at its own position (counting bytes, one wide character shifts every later position).

    ``add`` only records values; each position's column (sorted, closed over classes) is built once,
    when first read after a change.
    """

    # Shallow positions are seen in few samples, so their observed alphabet is incomplete
    # (runs starting with "0" and "3" say nothing of "1", "2" or "9"). A position that shows two
    # members of one of these classes is assumed to use the whole class; a position that shows
    # one value (a constant segment such as "/part-") stays constant -- unless ``close_singletons``,
    # for estimates of how much key space lies ahead, where a constant seen so far may still change.
    # Hex letters are a class of their own: a position that shows only a-f is hex, not the whole alphabet.
    CLASSES = ((0x30, 0x39), (0x41, 0x46), (0x47, 0x5A), (0x61, 0x66), (0x67, 0x7A))

    def __init__(
        self,
        close_singletons: bool = False,
        code: CodeRun | None = None,
        limits: dict[int, frozenset[int]] | None = None,
    ) -> None:
        self.close_singletons = close_singletons
        # code (see ``code_run``): positions inside the code the keys end in take its whole alphabet
        self.code = code
        # position -> the digits its closure may add (``calendar_limits``)
        self.limits = limits or {}
        self._seen: list[set[int]] = []
        self._cols: list[Sequence[int] | None] = []
        # (start, n) -> the columns, their radices and suffix products over that window (see ``coord``)
        self._windows: dict[tuple[int, int], tuple[list[Sequence[int]], list[int], list[int]]] = {}

    def add(self, key: str) -> None:
        self.add_keys((key,))

    def add_keys(self, keys: Iterable[str], start: int = 0, stop: int | None = None) -> None:
        """Record the values ``keys`` show at positions ``start`` to ``stop`` (default: all of them).

        A coordinate only reads positions from the common prefix of its interval's bounds on
        (``Interval``), so ``_frame`` records just those: one column at a time, from all the keys at once
        (the values of the sampled keys at one position are mostly one or two).
        """
        keys = tuple(keys)
        if not keys:
            return
        lengths = {len(k) for k in keys}
        top = max(lengths) + 1  # a key's end marker sits one past its last character
        if stop is not None:
            top = min(top, stop)
        if top <= start:
            return
        seen_l, cols = self._seen, self._cols
        while len(seen_l) < top:
            seen_l.append(set())
            cols.append(None)
        columns = itertools.zip_longest(*(k[start:top] for k in keys))
        for p in range(start, top):
            column = next(columns, ())
            values = {ord(c) for c in set(column) if c is not None}
            if p in lengths:
                values.add(END)
            seen = seen_l[p]
            if not values <= seen:
                seen |= values
                cols[p] = None
                self._windows.clear()

    def _col(self, p: int) -> Sequence[int]:
        if p >= len(self._seen):
            return ()
        col = self._cols[p]
        if col is None:
            code = self.code
            alphabet = code.alphabet if code is not None and code.covers(p) else None
            col = self._cols[p] = _closed_column(
                frozenset(self._seen[p]), self.close_singletons, alphabet, self.limits.get(p)
            )
        return col

    @property
    def values(self) -> list[list[int]]:
        return [list(self._col(p)) for p in range(len(self._seen))]

    def radix(self, p: int) -> int:
        return max(1, len(self._col(p)))

    def _window(self, start: int, n: int) -> tuple[list[Sequence[int]], list[int], list[int]]:
        w = self._windows.get((start, n))
        if w is None:
            cols = [self._col(p) for p in range(start, start + n)]
            radices = [max(1, len(c)) for c in cols]
            # below[i]: the product of the radices after position i (a digit's weight)
            below = [1] * n
            for i in range(n - 2, -1, -1):
                below[i] = below[i + 1] * radices[i + 1]
            w = self._windows[(start, n)] = (cols, radices, below)
        return w

    def coord(self, key: str, start: int, n: int) -> int:
        """Mixed-radix value of key[start:start+n]; monotone non-decreasing in key order."""
        cols, radices, below = self._window(start, n)
        value = 0
        for i in range(n):
            p = start + i
            v = ord(key[p]) if p < len(key) else END
            col = cols[i]
            j = bisect.bisect_right(col, v) - 1
            if j < 0:
                # the key is below every value seen here: the lowest digits from here on
                return value * radices[i] * below[i]
            value = value * radices[i] + j
            if col[j] != v:
                # above the value seen just below it (and below the next): the highest digits after it
                return (value + 1) * below[i] - 1
            if v == END:
                return value * below[i]
        return value

    def key_from(self, value: int, start: int, n: int) -> str:
        digits = []
        for p in reversed(range(start, start + n)):
            r = self.radix(p)
            value, d = divmod(value, r)
            digits.append((p, d))
        out = []
        for p, d in reversed(digits):
            col = self._col(p)
            v = col[d] if d < len(col) else END
            if v == END:
                break
            out.append(chr(v))
        return "".join(out)


class Interval:
    """Coordinates for the open interval (lo, hi) of key space, relative to their common prefix, in the
    mixed radix of an Alphabet learned from keys near it. Keys are strings: Python orders them by code
    point, which is S3's order (UTF-8 bytes)."""

    def __init__(self, lo: str, hi: str, alphabet: Alphabet) -> None:
        if not lo < hi:
            raise ValueError(f"empty interval: {lo!r} >= {hi!r}")
        self.lo = lo
        self.hi = hi
        self.base = common_prefix(lo, hi)
        self.alphabet = alphabet
        n = len(self.base)
        self.npos = ALPHABET_POSITIONS
        self.lo_c = alphabet.coord(lo, n, self.npos)
        self.hi_c = alphabet.coord(hi, n, self.npos)
        if self.hi_c <= self.lo_c:
            # lo is a strict prefix of hi's coordinate window at this width (e.g. lo="a", hi="a\0\0..."):
            # widen by one unit so interpolation stays monotone.
            self.hi_c = self.lo_c + 1

    @property
    def width(self) -> int:
        return self.hi_c - self.lo_c

    def coord(self, key: str) -> int:
        """Coordinate of a key inside (lo, hi); clamped to the interval."""
        if key <= self.lo:
            return self.lo_c
        if key >= self.hi:
            return self.hi_c
        c = self.alphabet.coord(key, len(self.base), self.npos)
        return min(max(c, self.lo_c), self.hi_c)

    def at(self, fraction: float) -> str | None:
        """A key strictly inside (lo, hi) near ``fraction`` of the way, or None."""
        fraction = min(max(fraction, 0.0), 1.0)
        target = self.lo_c + int(self.width * fraction)
        return self.key_at(target)

    def key_at(self, coord: int) -> str | None:
        coord = min(max(coord, self.lo_c), self.hi_c)
        candidate = self.base + self.alphabet.key_from(coord, len(self.base), self.npos)
        candidate = _lift_controls(candidate, len(self.base))
        if self.lo < candidate < self.hi:
            return candidate
        # The coordinate fell back to lo (its width holds no key above lo): step just past lo.
        return key_after(self.lo, self.hi)


class ByteInterval:
    """The interval (lo, hi) read as base-256 numbers of the bytes after the common prefix: equal widths
    of the UTF-8 byte space, knowing nothing of the keys (the simulator's static-range peers)."""

    def __init__(self, lo: bytes, hi: bytes) -> None:
        if not lo < hi:
            raise ValueError(f"empty interval: {lo!r} >= {hi!r}")
        self.lo = lo
        self.hi = hi
        self.base = common_prefix(lo, hi)
        n = len(self.base)
        self.lo_c = to_coord(lo[n:])
        self.hi_c = max(to_coord(hi[n:]), self.lo_c + 1)

    def at(self, fraction: float) -> str | None:
        """A valid UTF-8 key strictly inside (lo, hi) near ``fraction`` of the way, or None."""
        fraction = min(max(fraction, 0.0), 1.0)
        raw = self.base + from_coord(self.lo_c + int((self.hi_c - self.lo_c) * fraction))
        for candidate in (ceil_utf8(raw), floor_utf8(raw)):
            if candidate is None:
                continue
            candidate = _lift_controls(candidate, len(self.base.decode("utf-8", "ignore")))
            if self.lo < encode(candidate) < self.hi:
                return candidate
        after = key_after(self.lo.decode("utf-8", "ignore"), self.hi.decode("utf-8", "ignore"))
        return after if after is not None and self.lo < encode(after) < self.hi else None


def _lift_controls(s: str, keep: int) -> str:
    """Replace the first control character after position ``keep`` (and drop what follows) by a space.

    Interpolated points are only probes and cut points; control characters in them (invalid in
    XML 1.0, which S3 echoes StartAfter in) buy nothing and break some S3 implementations. The
    result is greater than ``s``, so callers re-check it against their bounds.
    """
    for i in range(keep, len(s)):
        if s[i] < " ":
            return s[:i] + " "
    return s


def key_after(lo: str, hi: str) -> str | None:
    """Some key strictly between lo and hi, or None if none is easy to find."""
    for extra in (" ", "\x7f", "\x80", "\U0010ffff"):
        cand = lo + extra
        if lo < cand < hi:
            return cand
    return None
