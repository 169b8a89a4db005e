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
- a bounded remainder whose donor sits inside a directory its end is not in is cut at the sibling
  directories the donor's own path suggests (interpolation would treat the directories between as filled);
- an open remainder ``(pos, +inf)`` (nothing known above ``pos``) is cut level by level at the values that
  can follow each prefix of ``pos`` (see ``_open_points``). A cut that lands in empty space costs the thief
  one request; the next split of a bounded piece then interpolates.

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

from .keys import Alphabet, CodeRun, Interval, ceil_utf8, code_run, common_prefix, encode
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
    max_ways: int = 16  # pieces one split may hand out at once


# Byte classes in the order an open remainder's cut points are spread over, after the classes seen.
_CLASSES: tuple[tuple[int, int], ...] = (
    (0x30, 0x39),  # digits
    (0x61, 0x66),  # lower-case hex letters: a position that shows only a-f is taken as hex
    (0x67, 0x7A),  # the rest of lower case
    (0x41, 0x46),  # upper-case hex letters
    (0x47, 0x5A),
    (0x21, 0x2F),  # ! " # ... /
    (0x3A, 0x40),
    (0x5B, 0x60),
    (0x7B, 0x7E),
    (0x20, 0x20),
    (0xC2, 0xF4),  # UTF-8 lead bytes: every non-ASCII character starts with one
    (0x80, 0xBF),  # UTF-8 continuation bytes (a position inside a multi-byte character)
)
# Cuts placed at the prefix's own level when nothing there was sampled: the space above is unknown, and
# every cut that lands in empty space costs a request, so only a few.
UNKNOWN_LEVEL_CUTS = 4


def _open_cut_bytes(seen: Iterable[int], above: int, ways: int) -> list[int]:
    """Up to ``ways - 1`` byte values greater than ``above`` at which to cut an open remainder.

    Values of classes seen at this position come first (spread evenly over them), then the other classes
    (ASCII punctuation, UTF-8 lead bytes for non-ASCII characters).
    """
    seen = set(seen)
    seen_classes = [c for c in _CLASSES if any(c[0] <= v <= c[1] for v in seen)]
    other = [c for c in _CLASSES if c not in seen_classes]
    candidates: list[int] = []
    for lo, hi in seen_classes + other:
        candidates += [v for v in range(lo, hi + 1) if v > above]
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
    code = code_run(sample_b, len(encode(prefix)))
    top = code_top(code, sample_b, prefix)
    if hi_b is None and top is not None and lo_b < encode(top) and ways > 2:
        # the keys are a code: the space above lo ends past the alphabet's last character; cut it as a
        # bounded range and leave what lies above (most likely nothing: one request) as the last, open piece
        return [*cut_points(lo, top, prefix, sample, ways - 1), top]
    if hi_b is None:
        points = _open_points(lo_b, prefix, sample_b, ways, code)
    else:
        if lo_b >= hi_b:
            return []
        split_at = len(common_prefix(lo_b, hi_b))
        if b"/" in lo_b[split_at:]:
            # lo sits inside a directory that end is not in: between them lie sibling directories, which
            # interpolation would treat as a filled space ("month=15"). Cut at the siblings lo's own path
            # suggests, below end, as for an open remainder.
            points = [c for c in _open_points(lo_b, prefix, sample_b, ways, code) if encode(c) < hi_b]
            if points:
                return points
        alphabet = Alphabet(code=code)
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


def code_top(code: CodeRun | None, sample_b: Sequence[bytes], prefix: str) -> str | None:
    """When the keys under ``prefix`` are one code (hex names, ids; no directories): the first key past
    every key the code's alphabet can spell (``prefix + "g"`` for hex names); else None."""
    if code is None or not sample_b or code.start != len(encode(prefix)):
        return None
    top = code.top(sample_b[0])
    if top is None:
        return None
    try:
        return top.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _class_of(v: int) -> tuple[int, int] | None:
    return next((c for c in _CLASSES if c[0] <= v <= c[1]), None)


def _open_points(
    lo_b: bytes, prefix: str, sample_b: Sequence[bytes], ways: int, code: CodeRun | None = None
) -> list[str]:
    """Cut points above ``lo_b`` when nothing above it is known.

    A key above lo shares lo's first d bytes and has a larger byte at position d, for some d. For each d up
    to the deepest position where neighbouring sampled keys differ, the byte values expected above lo[d]:
    - where the sampled keys differ at d: the values seen there above lo[d] (from other branches), or, if
      none, the rest of the smallest classes that hold the values seen (hex digits after "6": "7".."9";
      a position showing only a-f letters is not extended to g-z);
    - where every sampled key has the same byte: only a digit is expected to change (the next directory
      "2024/1", the next year "2025"); a constant word ("files") is not cut;
    - at the prefix itself, when constant, the space above is unknown: a few cuts over every class, seen
      classes first.
    The cuts are shared out round-robin between the levels, shallowest first. A cut in empty space costs its
    thief one request; pieces near lo (likely dense) and far (unknown) are both covered.
    """
    base = len(encode(prefix))
    ordered = sorted({*sample_b, lo_b})
    diffs = [len(common_prefix(a, b)) for a, b in itertools.pairwise(ordered)]
    deepest = min(max([base, *diffs]), max(base, len(lo_b) - 1))
    levels: list[tuple[int, list[int]]] = []
    for d in range(deepest, base - 1, -1):
        above = lo_b[d] if d < len(lo_b) else -1
        everywhere = {k[d] for k in ordered if len(k) > d}
        if code is not None and code.covers(d) and above in code.alphabet:
            # inside the code the keys end in: every position takes the code's whole alphabet, whatever
            # one page showed of it
            values = sorted(v for v in code.alphabet if v > above)
        elif len(everywhere) > 1:
            values = sorted(v for v in everywhere if v > above)
            if not values:
                classes = {c for v in everywhere if (c := _class_of(v)) is not None}
                values = sorted(v for c in classes for v in range(c[0], c[1] + 1) if v > above)
        elif d == base:
            values = _open_cut_bytes(everywhere, above, UNKNOWN_LEVEL_CUTS + 1)
        else:
            values = list(range(max(above + 1, 0x31), 0x3A)) if 0x30 <= above <= 0x39 else []
        if values:
            levels.append((d, values))
    # The cuts are shared out evenly between the levels (a level gets no more than it has values),
    # shallowest first: the far space, where most of an open remainder's keys usually are, is never left in
    # one piece, and pieces near lo exist too, whichever the key space turns out to be.
    levels.reverse()
    share = [0] * len(levels)
    left = ways - 1
    while left > 0 and any(share[i] < len(v) for i, (_, v) in enumerate(levels)):
        for i, (_, values) in enumerate(levels):
            if left and share[i] < len(values):
                share[i] += 1
                left -= 1
    points: list[bytes] = []
    for (d, values), take in zip(levels, share, strict=True):
        step = len(values) / take if take else 0
        for i in range(take):
            points.append(lo_b[:d] + bytes([values[int(i * step)]]))
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
    first: str | None = None  # the first key this cursor took: with pos and objects, the listed span
    page_n: int = 0  # keys taken from the last page (its first key is sample[0])

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
            if self.first is None:
                self.first = keys[0]
            self.pos = keys[n - 1]
            self.objects += n
            self.page_n = n
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
        """Estimated pages left in (pos, end]; None when unknown (nothing read yet, or an open range whose
        keys are not one code: see ``code_top``).

        Density is what this cursor has listed so far (``objects`` keys from ``first`` to ``pos``), or the last
        page's when the listed span crosses directories; it is measured in a mixed radix over the sampled keys
        where a position showing one value counts its whole character class, and a position inside the code
        the keys end in its whole alphabet (``keys.code_run``): a constant seen so far may still change further
        on, and an estimate that is too low would refuse splits the run needs (an over-estimate costs at most
        one request per cut).
        """
        if self.done:
            return 0.0
        if self.first is None or self.pos is None:
            return None
        end = self.range.end
        if end is None:
            # an open range of keys ending in a code ends (for the estimate) where the code's alphabet does
            seen = sorted({encode(self.first), *map(encode, self.sample)})
            end = code_top(code_run(seen, len(encode(self.prefix))), seen, self.prefix)
            if end is None:
                return None
        first_b, lo_b, hi_b = encode(self.first), encode(self.pos), encode(end)
        if lo_b >= hi_b:
            return 0.0
        objects = self.objects
        page_b = sorted({encode(k) for k in self.sample})
        code = code_run(page_b, len(encode(self.prefix)))
        if code is not None and first_b[: code.start] != lo_b[: code.start]:
            # the listed span crosses directories (a sparse one, then this code): the density ahead, in the
            # same code, is the last page's
            first_b, objects = page_b[0], self.page_n - 1
        if first_b >= lo_b or objects <= 0:
            return None
        sample_b = sorted({first_b, *page_b})
        alphabet = Alphabet(close_singletons=True, code=code)
        for k in (*sample_b, hi_b):
            alphabet.add(k)
        try:
            frame = Interval(first_b, hi_b, alphabet)
        except ValueError:
            return 0.0
        at = frame.coord(lo_b)
        read = at - frame.lo_c
        if read <= 0:
            return None
        return objects * (frame.hi_c - at) / read / page_keys

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
        self.failed: BaseException | None = None
        self.closed = False
        self.splits = 0

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
