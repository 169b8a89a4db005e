"""Key-space arithmetic in S3's order (UTF-8 binary).

S3 lists keys in ascending order of their UTF-8 bytes. To cut the key space into ranges we
map a key to an integer coordinate: the key's bytes after a shared prefix, read as a base-256
number of fixed width. Between two keys we interpolate in that coordinate and map back to a
valid UTF-8 string, because StartAfter (and every boundary we hand to S3) must be a string.

Coverage never depends on this arithmetic being exact: range boundaries are just strings in
increasing order. The arithmetic only decides *where* cuts fall.
"""

from __future__ import annotations

from collections.abc import Iterator

# Bytes of the suffix (after the common prefix) used as the coordinate; 16 bytes resolves
# 2**128 positions between any two bounds, far more than any bucket has keys.
COORD_WIDTH = 16
# The largest byte a UTF-8 string can start a character with is 0xF4; using 0xFF as the
# ceiling is harmless (the ceiling is never sent to S3, only interpolated towards).
_TOP = b"\xff" * (COORD_WIDTH + 1)


def encode(key: str) -> bytes:
    return key.encode("utf-8")


def common_prefix(a: bytes, b: bytes) -> bytes:
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


class Interval:
    """Coordinates for the open interval (lo, hi) of key space, relative to their common prefix."""

    def __init__(self, lo: bytes, hi: bytes) -> None:
        if not lo < hi:
            raise ValueError(f"empty interval: {lo!r} >= {hi!r}")
        self.lo = lo
        self.hi = hi
        self.base = common_prefix(lo, hi)
        n = len(self.base)
        self.lo_c = to_coord(lo[n:])
        self.hi_c = to_coord(hi[n:])
        if self.hi_c <= self.lo_c:
            # lo is a strict prefix of hi's coordinate window at this width (e.g. lo="a", hi="a\0\0..."):
            # widen by one unit so interpolation stays monotone.
            self.hi_c = self.lo_c + 1

    @property
    def width(self) -> int:
        return self.hi_c - self.lo_c

    def coord(self, key: bytes) -> int:
        """Coordinate of a key inside (lo, hi); clamped to the interval."""
        if key <= self.lo:
            return self.lo_c
        if key >= self.hi:
            return self.hi_c
        n = len(self.base)
        return min(max(to_coord(key[n:]), self.lo_c), self.hi_c)

    def at(self, fraction: float) -> str | None:
        """A valid UTF-8 key strictly inside (lo, hi) near ``fraction`` of the way, or None."""
        fraction = min(max(fraction, 0.0), 1.0)
        target = self.lo_c + int(self.width * fraction)
        return self.key_at(target)

    def key_at(self, coord: int) -> str | None:
        coord = min(max(coord, self.lo_c), self.hi_c)
        raw = self.base + from_coord(coord)
        for candidate in (ceil_utf8(raw), floor_utf8(raw)):
            if candidate is None:
                continue
            candidate = _lift_controls(candidate, len(self.base.decode("utf-8", "ignore")))
            if self.lo < encode(candidate) < self.hi:
                return candidate
        # Flooring to valid UTF-8 (or to the coordinate width) fell back to lo; step just past lo.
        return key_after(self.lo, self.hi)


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


def key_after(lo: bytes, hi: bytes) -> str | None:
    """Some valid UTF-8 key strictly between lo and hi, or None if none is easy to find."""
    for extra in (b" ", b"\x7f", b"\xc2\x80", b"\xf4\x8f\xbf\xbf"):
        cand = lo + extra
        try:
            s = cand.decode("utf-8")
        except UnicodeDecodeError:
            # lo itself ends inside a multi-byte character: not possible for a str-derived lo.
            return None
        if lo < cand < hi:
            return s
    return None


def midpoint(lo: str | None, hi: str | None, prefix: str = "") -> str | None:
    """A key strictly between two bounds (None = the ends of the prefix's space)."""
    lo_b = encode(prefix) if lo is None else encode(lo)
    hi_b = upper_bound(prefix) if hi is None else encode(hi)
    if lo_b >= hi_b:
        return None
    return Interval(lo_b, hi_b).at(0.5)


def bit_reversal_order(n: int) -> list[int]:
    """Indices 0..n-1 in bit-reversed order, so neighbours in the result are far apart in 0..n-1.

    This generalises the seed's 'loop interchange' (00,10,20,...,01,11,...): ranges that start
    together sit in different parts of the key space, so they load different S3 partitions.
    """
    if n <= 0:
        return []
    bits = max(1, (n - 1).bit_length())
    out = []
    for i in range(1 << bits):
        r = int(f"{i:0{bits}b}"[::-1], 2)
        if r < n:
            out.append(r)
    return out


def iter_sorted_unique(keys: Iterator[str]) -> list[str]:
    """Sort keys in S3 order (UTF-8 binary); Python's str order is code-point order, which matches."""
    return sorted(set(keys))
