"""list_range with ListOptions(prefetch=True) (the fleet lister's setting): the next page is requested while
the last one is written, the requests and the output are those without it, and a stop costs one request."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from fakes import CountStats, FakeS3, Written
from hpcstage.inventory.lister import ListOptions, list_range
from hpcstage.inventory.model import KeyRange, ShardResult
from hpcstage.inventory.steal import SplitPolicy
from hpcstage.s3util import RequestCounter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PAGE = 10


class RecordingS3(FakeS3):
    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys)
        self.lock = threading.Lock()
        self.requests: list[tuple[tuple[str, Any], ...]] = []

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        with self.lock:
            self.requests.append(tuple(sorted((k, v) for k, v in p.items() if k != "Bucket")))
        return super().list_objects_v2(**p)


def run(
    s3: Any, prefetch: bool, *, want_every: int = 0, stop_after: int = 0, writer: Any = None
) -> tuple[ShardResult, Any, list[KeyRange], RequestCounter]:
    writer = writer or Written()
    given_pieces: list[KeyRange] = []
    counter = RequestCounter()
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
        counter=counter,
        wanted=lambda: 1 if want_every and pages[0] % want_every == 0 else 0,
        give=given_pieces.extend,
        new_id=lambda: f"p{next(ids)}",
        should_stop=lambda: bool(stop_after) and pages[0] >= stop_after,
        options=ListOptions(
            page_size=PAGE, policy=SplitPolicy(min_split_pages=1, page_keys=PAGE), prefetch=prefetch
        ),
        on_page=on_page,
    )
    return res, writer, given_pieces, counter


def sorted_requests(s3: RecordingS3) -> list[Any]:
    return sorted(s3.requests, key=repr)


def shape(pieces: Sequence[KeyRange]) -> list[tuple[str | None, str | None]]:
    return [(p.start_after, p.end) for p in pieces]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(st.text(min_size=1, max_size=12), min_size=0, max_size=200),
    want_every=st.integers(0, 4),
)
def test_the_same_requests_output_and_splits_with_and_without_prefetch(
    keys: list[str], want_every: int
) -> None:
    plain_s3, ahead_s3 = RecordingS3(keys), RecordingS3(keys)
    plain, plain_w, plain_given, plain_count = run(plain_s3, False, want_every=want_every)
    ahead, ahead_w, ahead_given, ahead_count = run(ahead_s3, True, want_every=want_every)

    assert ahead_w.keys == plain_w.keys
    assert shape(ahead_given) == shape(plain_given)
    assert (ahead.range.end, ahead.objects, ahead.done) == (plain.range.end, plain.objects, plain.done)
    # directory requests are sent while a page is in flight, so only the order may differ
    assert sorted_requests(ahead_s3) == sorted_requests(plain_s3)
    assert ahead_count.requests == plain_count.requests == len(plain_s3.requests)


def test_a_stream_told_to_stop_has_sent_one_request_ahead_and_counted_it() -> None:
    keys = [f"k{i:04d}" for i in range(100)]
    plain_s3, ahead_s3 = RecordingS3(keys), RecordingS3(keys)
    plain, plain_w, _, plain_count = run(plain_s3, False, stop_after=3)
    ahead, ahead_w, _, ahead_count = run(ahead_s3, True, stop_after=3)

    assert ahead_w.keys == plain_w.keys == keys[:30]
    assert ahead.checkpoint == plain.checkpoint == "k0029"
    assert (plain_count.requests, ahead_count.requests) == (3, 4)
    assert ahead.list_requests == 4
    assert ahead_s3.requests[3] == (
        ("ContinuationToken", "k0029"),
        ("EncodingType", "url"),
        ("MaxKeys", PAGE),
    )


def test_the_next_page_is_requested_while_a_page_is_written() -> None:
    keys = [f"k{i:04d}" for i in range(35)]
    s3 = RecordingS3(keys)

    class WaitsForTheNextRequest(Written):
        """Writing page n waits until request n + 1 has reached S3 (bounded: fails instead of hanging)."""

        def add_page(self, objects: Any) -> None:
            super().add_page(objects)
            if self.pages < 4:
                for _ in range(3000):
                    with s3.lock:
                        if len(s3.requests) > self.pages:
                            return
                    threading.Event().wait(0.01)
                raise AssertionError(
                    f"request {self.pages + 1} was not sent while page {self.pages} was written"
                )

    res, writer, _, counter = run(s3, True, writer=WaitsForTheNextRequest())
    assert writer.keys == keys
    assert (res.objects, res.done, counter.requests) == (35, True, 4)
