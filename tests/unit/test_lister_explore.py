"""list_range's directory requests before a split: the levels a remainder spans are asked at once, and the
split, the pieces and the listing are those of asking them one after the other."""

from __future__ import annotations

import threading
from typing import Any

from fakes import CountStats, FakeS3, Written
from hpcstage.inventory.lister import ListOptions, list_range
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import MAX_EXPLORE, SplitPolicy

PAGE = 10
# three levels under the root: a remainder from the first key spans the root, "p0/" and "p0/r0/"
KEYS = [f"p{a}/r{b}/d{c}/f{d:02d}" for a in range(3) for b in range(3) for c in range(3) for d in range(12)]


class GatedS3(FakeS3):
    """Directory requests wait at a barrier of ``parties``: they pass only if that many are in flight
    together (a barrier that breaks raises, so requests sent one after the other fail the listing)."""

    def __init__(self, keys: list[str], parties: int, timeout: float = 10) -> None:
        super().__init__(keys)
        self.barrier = threading.Barrier(parties, timeout=timeout)
        self.lock = threading.Lock()
        self.dir_requests: list[tuple[str, str]] = []

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        if "Delimiter" in p:
            with self.lock:
                self.dir_requests.append((p.get("Prefix", ""), p["StartAfter"]))
            self.barrier.wait()
        return super().list_objects_v2(**p)


def listed(s3: Any, want_first: int) -> tuple[list[str], list[KeyRange], Any]:
    writer = Written()
    pieces: list[KeyRange] = []
    pages = [0]
    ids = iter(range(10**6))

    def on_page(_o: int, _b: int) -> None:
        pages[0] += 1

    res = list_range(
        s3,
        "bkt",
        "",
        KeyRange(id="r0"),
        writer=writer,
        stats=CountStats(),
        wanted=lambda: want_first if pages[0] == 1 else 0,
        give=pieces.extend,
        new_id=lambda: f"p{next(ids)}",
        options=ListOptions(page_size=PAGE, policy=SplitPolicy(min_split_pages=1, page_keys=PAGE)),
        on_page=on_page,
    )
    return writer.keys, pieces, res


def test_the_levels_a_remainder_spans_are_asked_at_once() -> None:
    s3 = GatedS3(KEYS, parties=MAX_EXPLORE)
    written, pieces, res = listed(s3, want_first=4)
    # the root from the first page's last key, and the two levels holding it from their start
    assert sorted(s3.dir_requests) == [("", "p0/r0/d0/f09"), ("p0/", "p0/"), ("p0/r0/", "p0/r0/")]
    # cut at the directories the answers named, weighted by their sizes: the donor keeps p0/ up to r2/
    assert [(p.start_after, p.end) for p in pieces] == [("p0/r2/", "p1/"), ("p1/", "p2/"), ("p2/", None)]
    # the donor listed its own part, and the pieces tile the rest: every key once
    assert written == KEYS[: len(written)]
    bounds = [res.range.end, *(p.end for p in pieces)]
    assert [p.start_after for p in pieces] == bounds[:-1] and bounds[-1] is None
    assert res.list_requests == -(-len(written) // PAGE) + MAX_EXPLORE + (len(written) % PAGE == 0)


def test_asked_one_level_at_a_time_the_barrier_breaks() -> None:
    """The gate itself: a barrier of one party more than the levels asked never opens."""
    s3 = GatedS3(KEYS, parties=MAX_EXPLORE + 1, timeout=1)
    try:
        listed(s3, want_first=4)
    except threading.BrokenBarrierError:
        return
    raise AssertionError("the barrier should have broken")
