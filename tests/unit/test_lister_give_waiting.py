"""list_range's donor hooks for the fleet (fleet.Lister.wanted): a stream gives while its next page is awaited
(ListOptions.give_while_waiting_s), says when a split it was asked for gave nothing (``refused``), and shows its
cursor (``on_cursor``), whose ``left_by_estimate`` orders a lister's donors."""

from __future__ import annotations

import math
import threading
from typing import Any

from fakes import CountStats, FakeS3, Written
from hpcstage.inventory.lister import ListOptions, list_range
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import Cursor, SplitPolicy

PAGE = 10
KEYS = [f"k{i:05d}" for i in range(400)]  # 40 pages


class HeldS3(FakeS3):
    """Holds the answer to its ``hold_at``-th request until ``release`` is set (or ``timeout`` passes), and
    notes whether it was released or timed out."""

    def __init__(self, keys: list[str], hold_at: int, timeout: float = 5.0) -> None:
        super().__init__(keys)
        self.hold_at = hold_at
        self.timeout = timeout
        self.release = threading.Event()
        self.holding = threading.Event()
        self.released: bool | None = None

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        if self.calls + 1 == self.hold_at:
            self.holding.set()
            self.released = self.release.wait(self.timeout)
        return super().list_objects_v2(**p)


def listing(
    s3: Any, every: float | None, wanted: Any, *, min_pages: float = 2
) -> tuple[Any, Written, list[KeyRange], list[str], list[Cursor]]:
    written = Written()
    pieces: list[KeyRange] = []
    events: list[str] = []
    cursors: list[Cursor] = []
    ids = iter(range(10**6))

    def give(ps: Any) -> None:
        events.append(f"give {len(ps)} after {len(written.keys)} keys")
        pieces.extend(ps)
        if isinstance(s3, HeldS3):
            s3.release.set()

    res = list_range(
        s3,
        "bkt",
        "",
        KeyRange(id="r0", end=KEYS[-1]),
        writer=written,
        stats=CountStats(),
        wanted=wanted,
        give=give,
        new_id=lambda: f"p{next(ids)}",
        options=ListOptions(
            page_size=PAGE,
            policy=SplitPolicy(min_split_pages=min_pages, page_keys=PAGE),
            prefetch=True,
            give_while_waiting_s=every,
        ),
        on_cursor=cursors.append,
        refused=lambda: events.append("refused"),
    )
    return res, written, pieces, events, cursors


def covered(written: list[str], pieces: list[KeyRange]) -> list[str]:
    """Every key, once: those the donor wrote and those inside the pieces it gave."""
    out = list(written)
    for p in pieces:
        out += [
            k for k in KEYS if (p.start_after is None or k > p.start_after) and (p.end is None or k <= p.end)
        ]
    return sorted(out)


def hunger_while_held(s3: HeldS3) -> Any:
    """A ``wanted`` that counts one hungry stream from its second call after the held request was sent (the
    first may be the one after the page before it) until the request is released."""
    seen = [0]

    def wanted() -> int:
        if not s3.holding.is_set() or s3.release.is_set():
            return 0
        seen[0] += 1
        return 1 if seen[0] >= 2 else 0

    return wanted


def test_a_stream_gives_while_its_next_page_is_awaited_and_lists_exactly_its_part() -> None:
    # the third request (the page sent ahead after the second) is held until the stream gives: only a stream
    # that gives while waiting releases it
    s3 = HeldS3(KEYS, hold_at=3)
    asks = [0]
    hungry = hunger_while_held(s3)

    def wanted() -> int:
        asks[0] += 1
        return int(hungry())

    res, written, pieces, events, _ = listing(s3, 0.01, wanted)
    assert s3.released is True  # released by the give, not by the timeout
    assert events == ["give 1 after 20 keys"]  # two pages written, the third still awaited
    assert len(pieces) == 1 and pieces[0].end == KEYS[-1]
    assert res.done and res.range.end == pieces[0].start_after
    assert written.keys == [k for k in KEYS if k <= pieces[0].start_after]
    assert covered(written.keys, pieces) == KEYS
    assert asks[0] > 2  # asked while waiting, not only after the pages


def test_without_give_while_waiting_the_stream_gives_only_after_its_page() -> None:
    s3 = HeldS3(KEYS, hold_at=3, timeout=0.3)
    res, written, pieces, events, _ = listing(s3, None, hunger_while_held(s3))
    assert s3.released is False  # nobody gave while the page was held
    assert events == ["give 1 after 40 keys"]  # asked after the third page, given after the fourth
    assert covered(written.keys, pieces) == KEYS and res.done


def test_a_split_asked_for_that_gives_nothing_is_refused() -> None:
    # 40 pages, a minimum piece of 30: asked after every page, the stream can never give
    res, written, pieces, events, _ = listing(FakeS3(KEYS), None, lambda: 1, min_pages=30)
    assert pieces == [] and written.keys == KEYS and res.done
    assert events == ["refused"] * 39  # after each page but the last (done: nothing asked)


def test_the_cursor_is_shown_and_its_keys_left_by_estimate_follow_the_listing() -> None:
    s3 = FakeS3(KEYS)
    _, written, _, _, cursors = listing(s3, None, lambda: 0)
    assert len(cursors) == 1 and cursors[0].done and written.keys == KEYS
    cur = Cursor(KeyRange(id="a", end=KEYS[-1]))
    assert cur.left_by_estimate() == math.inf  # no estimate: counted as the largest
    cur = Cursor(KeyRange(id="b", end=KEYS[-1], estimate=400))
    cur.take(KEYS[:10], True, KEYS[9])
    assert cur.left_by_estimate() == 390
    assert cur.left_by_estimate(objects=25) == 375  # the caller's count (the simulator's)
    pieces = cur.split(2, SplitPolicy(min_split_pages=2, page_keys=PAGE), iter(["p1"]).__next__)
    assert len(pieces) == 1
    kept = cur.range.estimate
    assert 0 < kept < 390 and cur.left_by_estimate() == kept  # the split's estimate, from its own count
    cur.take(KEYS[10:20], True, KEYS[19])
    assert cur.left_by_estimate() == kept - 10
