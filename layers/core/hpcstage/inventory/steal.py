"""Work stealing over key ranges: the one listing algorithm of the laptop, the Lambda fleet and the simulator.

A *stream* lists one range ``(start_after, end]`` with ListObjectsV2. Its state is a ``Cursor``: what to ask
S3 next, how many keys of a page belong to the range, and -- when another stream is idle -- how to give away
the upper part of what it has not listed yet. Splitting only ever lowers the donor's own ``end`` and hands out
``(cut, old_end]``, so the ranges in play always tile the key space exactly once, whatever the cut points are
(tests/unit/test_steal_props.py checks this on arbitrary keys). The cut points decide only the balance.

Cut points come from what the donor has read, never from an assumed alphabet:
- a bounded remainder ``(pos, end]`` is cut by interpolation in a mixed radix over the byte values seen at
  each position of the donor's recent keys (``keys.Alphabet``): constant segments (a long common prefix,
  "/part-") take no room, a hex position counts 16 values, not 256;
- an open remainder ``(pos, +inf)`` (nothing known above ``pos``) is cut at the first position after the
  common prefix, at byte values spread over what can still follow: the classes the donor has seen there
  first, then the rest of printable ASCII, then non-ASCII. A cut that lands in empty space costs the thief
  one request; the next split of a bounded piece then uses interpolation.

Nothing here does I/O: the caller sends the request ``Cursor.request()`` describes and feeds the answer to
``Cursor.take``. ``LocalPool`` is the in-memory meeting point of the streams of one process; the fleet's
pool (hpcstage.inventory.fleet) keeps the same protocol in DynamoDB.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .keys import Alphabet, Interval, ceil_utf8, encode
from .model import KeyRange

# Keys kept per stream to learn the alphabet of the key space near its position: the last page's keys,
# thinned to this many (a page of 1,000 keys already shows every value a position takes near here).
SAMPLE_KEYS = 64
# A remainder is split only when each piece is worth its cost: every cut adds at most one LIST request (the
# donor's last partial page, or one empty page when the cut lands in empty space). Pieces of at least this
# many estimated pages keep that overhead small; unknown (open) remainders are always splittable.
DEFAULT_MIN_SPLIT_PAGES = 8.0


@dataclass
class SplitPolicy:
    min_split_pages: float = DEFAULT_MIN_SPLIT_PAGES
    page_keys: int = 1000
    max_ways: int = 64  # pieces one split may hand out at once (an open root feeding many idle streams)


def _common_prefix_len(keys: Sequence[bytes]) -> int:
    if not keys:
        return 0
    lo, hi = min(keys), max(keys)
    n = min(len(lo), len(hi))
    i = 0
    while i < n and lo[i] == hi[i]:
        i += 1
    return i


# Byte classes in the order an open remainder's cut points are spread over, after the classes seen.
_CLASSES: tuple[tuple[int, int], ...] = (
    (0x30, 0x39),  # digits
    (0x61, 0x7A),  # lower case
    (0x41, 0x5A),  # upper case
    (0x21, 0x2F),  # ! " # ... /
    (0x3A, 0x40),
    (0x5B, 0x60),
    (0x7B, 0x7E),
    (0x20, 0x20),
)


def _open_cut_bytes(seen: Iterable[int], above: int, ways: int) -> list[int]:
    """Up to ``ways - 1`` byte values greater than ``above`` at which to cut an open remainder.

    Values of classes seen at this position come first (spread evenly over them), then the other ASCII
    classes, and one cut at the start of non-ASCII (0xC2..: every multi-byte UTF-8 character sorts there).
    """
    seen = set(seen)
    seen_classes = [c for c in _CLASSES if any(c[0] <= v <= c[1] for v in seen)]
    other = [c for c in _CLASSES if c not in seen_classes]
    candidates: list[int] = []
    for lo, hi in seen_classes + other:
        candidates += [v for v in range(lo, hi + 1) if v > above]
    candidates.append(0xC2)
    candidates = [v for v in candidates if v > above]
    want = ways - 1
    if not candidates or want <= 0:
        return []
    # Weight the classes seen here 4:1 against the rest, so most pieces fall where the keys are.
    n_seen = sum(1 for v in candidates if any(c[0] <= v <= c[1] for c in seen_classes))
    picks: list[int] = []
    if n_seen:
        k_seen = max(1, min(n_seen, round(want * 0.8) if len(candidates) > n_seen else want))
        step = n_seen / k_seen
        picks += [candidates[int(i * step)] for i in range(k_seen)]
    rest = candidates[n_seen:]
    k_rest = min(len(rest), want - len(picks))
    if k_rest > 0:
        step = len(rest) / k_rest
        picks += [rest[int(i * step)] for i in range(k_rest)]
    return sorted(set(picks))


def cut_points(
    lo: str | None,
    hi: str | None,
    prefix: str,
    sample: Sequence[str],
    ways: int,
) -> list[str]:
    """Increasing keys strictly inside ``(lo, hi)`` that cut it into about ``ways`` pieces.

    ``lo``/``hi`` of None stand for the two ends of the prefix's key space. The pieces are meant to hold
    similar numbers of keys; coverage never depends on it.
    """
    if ways < 2:
        return []
    lo_b = encode(lo) if lo is not None else encode(prefix)
    hi_b = encode(hi) if hi is not None else None
    sample_b = sorted({encode(k) for k in sample})
    points: list[str] = []
    if hi_b is None:
        points = _open_points(lo_b, prefix, sample_b, ways)
    else:
        if lo_b >= hi_b:
            return []
        alphabet = Alphabet()
        for k in (*sample_b, lo_b, hi_b):
            alphabet.add(k)
        try:
            frame = Interval(lo_b, hi_b, alphabet)
        except ValueError:
            return []
        for i in range(1, ways):
            p = frame.at(i / ways)
            if p is not None:
                points.append(p)
    # strictly increasing, strictly inside (lo, hi)
    out: list[str] = []
    last = lo_b
    for p in points:
        pb = encode(p)
        if pb > last and (hi_b is None or pb < hi_b) and pb.startswith(encode(prefix)):
            out.append(p)
            last = pb
    return out


# A position whose sampled keys show at least this many byte values is taken as fully seen: its alphabet
# is what was observed. Below it, the position is extended to the rest of the character class it shows.
RICH_POSITION = 4


def _class_of(v: int) -> tuple[int, int] | None:
    return next((c for c in _CLASSES if c[0] <= v <= c[1]), None)


def _open_points(lo_b: bytes, prefix: str, sample_b: Sequence[bytes], ways: int) -> list[str]:
    """Cut points above ``lo_b`` when nothing above it is known.

    A key above lo shares lo's first d bytes and has a larger byte at position d, for some d. For each d,
    deepest first, the candidates are the byte values that can follow lo[:d] above lo[d]:
    - at a position where the sampled keys show a rich alphabet (>= RICH_POSITION values), the values seen
      there above lo[d] (none: this level is exhausted, no cut);
    - at a sparse position (a constant "0" in "2024/0999", a year digit), the rest of the class it shows
      (digits after "0": the next sibling directories);
    - at the prefix itself, every class (the space above is unknown), seen classes first, then non-ASCII.
    Each level takes at most half of the cuts still to place, so pieces near lo (likely dense) and the
    far space (unknown) are both covered. A cut in empty space costs its thief one request.
    """
    base = len(encode(prefix))
    # The deepest position where neighbouring sampled keys differ: deeper bytes are a constant suffix
    # (".nc", zero padding), where no key above lo is likely to differ first.
    ordered = sorted({*sample_b, lo_b})
    depth = max([base] + [_common_prefix_len([a, b]) for a, b in itertools.pairwise(ordered)])
    depth = min(depth, max(base, len(lo_b) - 1))
    points: list[bytes] = []
    for d in range(depth, base - 1, -1):
        room = ways - 1 - len(points)
        if room <= 0:
            break
        above = lo_b[d] if d < len(lo_b) else -1
        seen = {k[d] for k in sample_b if len(k) > d and k[:d] == lo_b[:d]}
        if d == base:
            values = _open_cut_bytes(seen, above, room + 1)
        elif len(seen) >= RICH_POSITION:
            values = sorted(v for v in seen if v > above)
        else:
            classes = {c for v in seen if (c := _class_of(v)) is not None}
            values = sorted(v for c in classes for v in range(c[0], c[1] + 1) if v > above)
        if not values:
            continue
        take = room if d == base else max(1, min(len(values), room // 2))
        step = len(values) / take
        for i in range(min(take, len(values))):
            v = values[int(i * step)]
            points.append(lo_b[:d] + (bytes([v]) if v < 0x80 else b"\xc2\x80"))
    out = []
    for raw in sorted(set(points)):
        key = ceil_utf8(raw)
        if key is not None:
            out.append(key)
    return sorted(set(out), key=encode)


@dataclass
class Cursor:
    """One stream's position in its range: what to request next, what a page means, how to split the rest."""

    range: KeyRange
    prefix: str = ""
    pos: str | None = None  # the last key taken; the remainder is (pos, end]
    token: str | None = None
    done: bool = False
    pages: int = 0
    objects: int = 0
    sample: list[str] = field(default_factory=list)
    # keys per page seen lately, and the span they covered (for estimates of what remains)
    _span: tuple[str, str, int] | None = None

    def __post_init__(self) -> None:
        if self.pos is None:
            self.pos = self.range.start_after

    @property
    def end(self) -> str | None:
        return self.range.end

    def request(self, max_keys: int = 1000) -> dict[str, Any]:
        """Parameters of the next ListObjectsV2 call (the caller adds Bucket and EncodingType)."""
        params: dict[str, Any] = {"MaxKeys": max_keys}
        if self.prefix:
            params["Prefix"] = self.prefix
        if self.token:
            params["ContinuationToken"] = self.token
        elif self.pos is not None:
            params["StartAfter"] = self.pos
        return params

    def take(self, keys: Sequence[str], truncated: bool, next_token: str | None) -> int:
        """Account for one page: how many of its leading keys lie in the range (the rest are past ``end``)."""
        self.pages += 1
        n = len(keys)
        end = self.range.end
        if end is not None and n and keys[-1] > end:
            n = bisect.bisect_right(keys, end)
            self.done = True
        if n:
            first = keys[0]
            self.pos = keys[n - 1]
            self.objects += n
            self._span = (first, self.pos, n)
            step = max(1, n // SAMPLE_KEYS)
            self.sample = [keys[i] for i in range(0, n, step)]
            if self.sample[-1] != self.pos:
                self.sample.append(self.pos)
        if not self.done:
            if not truncated:
                self.done = True
            elif not next_token:
                raise RuntimeError("S3 answered IsTruncated without a continuation token")
            else:
                self.token = next_token
        return n

    def remaining_pages(self, page_keys: int = 1000) -> float | None:
        """Estimated pages left in (pos, end]; None when unknown (an open range, or nothing read yet)."""
        if self.done:
            return 0.0
        if self.range.end is None or self._span is None:
            return None
        first, last, n = self._span
        lo_b, hi_b, first_b = encode(last), encode(self.range.end), encode(first)
        if lo_b >= hi_b:
            return 0.0
        alphabet = Alphabet()
        for k in (*map(encode, self.sample), hi_b):
            alphabet.add(k)
        try:
            frame = Interval(min(first_b, lo_b), hi_b, alphabet)
        except ValueError:
            return 0.0
        read = frame.coord(lo_b) - frame.lo_c
        if read <= 0:
            return None
        rest = frame.hi_c - frame.coord(lo_b)
        return n * rest / read / page_keys

    def split(self, ways: int, policy: SplitPolicy, new_id: Any) -> list[KeyRange]:
        """Give away the upper part of the remainder in up to ``ways - 1`` ranges; this cursor keeps the first.

        ``new_id()`` names each new range. Returns [] when the remainder is too small to be worth cutting or
        no cut point exists (a remainder with no room for a key between its bounds).
        """
        if self.done or ways < 2 or not self.pages:
            return []  # nothing read yet: no keys to learn cut points from
        est = self.remaining_pages(policy.page_keys)
        if est is not None:
            ways = min(ways, int(est // policy.min_split_pages))
            if ways < 2:
                return []
        ways = min(ways, policy.max_ways)
        cuts = cut_points(self.pos, self.range.end, self.prefix, self.sample, ways)
        if not cuts:
            return []
        bounds = [*cuts, self.range.end]
        each = int((est or 0) * policy.page_keys / len(bounds))
        given = [
            KeyRange(id=str(new_id()), start_after=a, end=b, estimate=each)
            for a, b in itertools.pairwise(bounds)
        ]
        self.range = KeyRange(
            id=self.range.id, start_after=self.range.start_after, end=cuts[0], estimate=each
        )
        # The donor may already hold a continuation token past the new end: its next page is cut there.
        if self.pos is not None and encode(self.pos) >= encode(cuts[0]):
            self.done = True
        return given


class LocalPool:
    """Where the streams of one process meet: a queue of ranges nobody lists yet, and who is idle.

    A stream that finds the queue empty waits in ``get``; a listing stream calls ``wanted()`` after each page
    and, when it is positive, splits its remainder and ``give``s the pieces. ``get`` returns None once every
    range is finished (no stream listing, nothing queued), which ends every stream.
    """

    def __init__(self, ranges: Iterable[KeyRange] = ()) -> None:
        self._cv = threading.Condition()
        self._queue: deque[KeyRange] = deque(ranges)
        self._idle = 0
        self._active = 0
        self._ids = itertools.count(1)
        self.failed: BaseException | None = None
        self.closed = False
        self.splits = 0

    def new_id(self) -> str:
        with self._cv:
            return f"s{next(self._ids)}"

    def get(self, timeout: float | None = None) -> KeyRange | None:
        with self._cv:
            self._idle += 1
            try:
                while not self._queue or self.closed:
                    if self.failed is not None or self.closed or self._active == 0:
                        self._cv.notify_all()
                        return None
                    if not self._cv.wait(timeout):
                        return None
                self._active += 1
                return self._queue.popleft()
            finally:
                self._idle -= 1

    def wanted(self) -> int:
        """How many more ranges idle streams could take right now (idle minus queued)."""
        return 0 if self.closed else self._idle - len(self._queue)

    def give(self, ranges: Sequence[KeyRange]) -> None:
        if not ranges:
            return
        with self._cv:
            self._queue.extend(ranges)
            self.splits += 1
            self._cv.notify(len(ranges))

    def finish(self) -> None:
        with self._cv:
            self._active -= 1
            if self._active == 0 and not self._queue:
                self._cv.notify_all()

    def close(self) -> list[KeyRange]:
        """Stop handing out ranges (a Lambda near its deadline); returns the ranges nobody took."""
        with self._cv:
            self.closed = True
            left = list(self._queue)
            self._queue.clear()
            self._cv.notify_all()
            return left

    def fail(self, err: BaseException) -> None:
        with self._cv:
            if self.failed is None:
                self.failed = err
            self._cv.notify_all()

    @property
    def active(self) -> int:
        return self._active


def root_ranges(hints: Sequence[KeyRange] | None = None) -> list[KeyRange]:
    """What a run starts from: one range over the whole prefix, or a previous run's ranges as seeds."""
    if hints:
        return list(hints)
    return [KeyRange(id="r0")]
