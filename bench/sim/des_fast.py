"""A faster ``hpcstage.inventory.keys.Alphabet.add`` with the same result, for the simulator only.

The engine's ``Alphabet.add`` recomputes a position's closed value set (and counts every class with a
generator) each time the position sees a new byte value; ``remaining_pages`` and ``cut_points`` build a fresh
Alphabet from ~65 sampled keys on every split attempt, so this is most of their CPU (2-40 ms a call,
measured). ``fast_add`` keeps per-position class counts and updates the sorted list incrementally; the state
it leaves (``values``, ``_seen``) is identical (tests/bench/test_des.py checks this on random keys).
``patched()`` installs it for the duration of a simulation and restores the original afterwards.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from contextlib import contextmanager

from hpcstage.inventory import keys as _keys

_CLASSES = _keys.Alphabet.CLASSES
_END = _keys.END
_ORIGINAL = _keys.Alphabet.add


def fast_add(self: _keys.Alphabet, key: bytes) -> None:
    seen_l = self._seen
    vals = self.values
    cc: list[list[int]] | None = self.__dict__.get("_cc")
    if cc is None or len(cc) != len(seen_l):
        cc = [[sum(1 for x in s if lo <= x <= hi) for lo, hi in _CLASSES] for s in seen_l]
        self.__dict__["_cc"] = cc
    n = len(key)
    # positions before the first byte where key differs from the previous key were all seen then
    last: bytes | None = self.__dict__.get("_last")
    start = 0
    if last is not None:
        lo_, hi_ = 0, min(len(last), n)
        while lo_ < hi_:
            mid = (lo_ + hi_ + 1) // 2
            if key[:mid] == last[:mid]:
                lo_ = mid
            else:
                hi_ = mid - 1
        start = lo_
    self.__dict__["_last"] = key
    for p in range(start, n + 1):
        v = key[p] if p < n else _END
        if p == len(seen_l):
            seen_l.append(set())
            vals.append([])
            cc.append([0, 0, 0])
        seen = seen_l[p]
        if v in seen:
            if v == _END:
                break
            continue
        seen.add(v)
        counts = cc[p]
        col = vals[p]
        for ci in range(3):
            lo, hi = _CLASSES[ci]
            if lo <= v <= hi:
                counts[ci] += 1
                if counts[ci] == 2:
                    merged = set(col)
                    merged.update(range(lo, hi + 1))
                    vals[p] = sorted(merged)
                elif counts[ci] == 1:
                    bisect.insort(col, v)
                break
        else:
            bisect.insort(col, v)
        if v == _END:
            break


@contextmanager
def patched() -> Iterator[None]:
    _keys.Alphabet.add = fast_add  # type: ignore[method-assign]
    try:
        yield
    finally:
        _keys.Alphabet.add = _ORIGINAL  # type: ignore[method-assign]
