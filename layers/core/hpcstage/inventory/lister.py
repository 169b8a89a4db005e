"""list_range: one stream listing one key range, streaming rows into Parquet and giving work away.

After every page the stream asks whether other streams are idle (``wanted``); if so it splits the rest of
its range (``Cursor.split``) and hands the upper pieces to ``give`` while it goes on with the lower one.
A stream told to stop (``should_stop``: a Lambda near its deadline) stops after a whole page: its rows up to
the checkpoint are in its parts, and the unlisted remainder (checkpoint, end] comes back as a new range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..errors import AccessDeniedError
from ..s3util import LIST_MAX_KEYS, RequestCounter, head, list_dirs, list_page, page_objects
from .model import KeyRange, PartFile, ShardResult
from .output import OutputStore, PartWriter
from .steal import MAX_EXPLORE, Cursor, SplitPolicy


class Writer(Protocol):
    def add_page(self, objects: Any) -> None: ...

    def close(self) -> list[PartFile]: ...

    def abort(self) -> None: ...


class Stats(Protocol):
    objects: int
    bytes: int

    def add_page(self, objects: Any) -> None: ...


@dataclass
class ListOptions:
    stats_depth: int = 1
    page_size: int = LIST_MAX_KEYS
    row_group_rows: int = 50_000
    part_rows: int = 1_000_000
    tmpdir: str | None = None
    policy: SplitPolicy = field(default_factory=SplitPolicy)
    # While ``list_range``'s ``endgame()`` gives a floor, split down to it instead of the policy's
    # ``min_split_pages``, but not below this many pages (None: never). The fleet's endgame: the partition has
    # stopped throttling, so its streams outnumber the work left, and the last ranges decide when the run ends
    # (fleet.Lister.endgame, fleet.endgame_floor).
    endgame_min_split_pages: float | None = None
    # Where pages come from: None is ListObjectsV2; hpcstage.inventory.versions.VERSIONS lists every version.
    source: Any = None
    # Send the next ListObjectsV2 request as soon as a page is parsed, so that S3 prepares it while this
    # stream writes the page (Parquet, statistics, checkpoints) and decides on splits. A split leaves the
    # stream's next request as it was (only its range's end moves), so the request sent ahead is the one
    # the stream would send; one sent ahead and not used (the stream stopped) is still counted.
    # Off by default: the simulator runs list_range on a virtual clock, one thread per stream.
    prefetch: bool = False
    # While the page sent ahead is awaited (it may wait for a paced slot: fleet._Throttle), ask ``wanted``
    # every this many seconds and give then, instead of only after the page (None: only after pages).
    give_while_waiting_s: float | None = None


def part_writer(store: OutputStore, bucket: str, opts: ListOptions) -> Callable[[str], Writer]:
    """A factory of Parquet part writers, one per range (a range's parts hold its keys in order)."""

    writer_class: Any = PartWriter
    if opts.source is not None:
        from .versions import writer_class as source_writer

        writer_class = source_writer(opts.source)

    def make(range_id: str) -> Writer:
        return writer_class(  # type: ignore[no-any-return]
            store,
            bucket,
            range_id,
            row_group_rows=opts.row_group_rows,
            part_rows=opts.part_rows,
            tmpdir=opts.tmpdir,
        )

    return make


def list_range(
    s3: Any,
    bucket: str,
    prefix: str,
    rng: KeyRange,
    *,
    writer: Writer,
    stats: Stats,
    counter: RequestCounter | None = None,
    wanted: Callable[[], int] = lambda: 0,
    give: Callable[[Sequence[KeyRange]], None] | None = None,
    new_id: Callable[[], str] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    options: ListOptions | None = None,
    on_page: Callable[[int, int], None] | None = None,
    endgame: Callable[[], float | None] = lambda: None,
    on_cursor: Callable[[Cursor], None] | None = None,
    refused: Callable[[], None] | None = None,
) -> ShardResult:
    """List the keys of ``rng`` under ``prefix`` into ``writer`` and ``stats``; split on demand.

    The result's ``range`` is the range as finally listed (its end lowered by the splits); when the stream
    stopped early, ``done`` is False, ``checkpoint`` is the last key written and ``subranges`` holds the
    remainder. ``given`` counts the ranges handed to other streams. While ``endgame()`` gives a floor (pages;
    None: no endgame), splits go down to it, within ``options.endgame_min_split_pages`` and the policy's
    ``min_split_pages``. ``on_cursor`` gets the stream's cursor once, before the first
    request (the fleet orders its donors by ``Cursor.left_by_estimate``); ``refused()`` is called when
    ``wanted()`` asked for pieces and the split gave none.
    """
    opts = options or ListOptions()
    policy = replace(opts.policy, page_keys=opts.page_size)

    def cut_policy() -> SplitPolicy:
        floor = endgame() if opts.endgame_min_split_pages is not None else None
        if floor is None:
            return policy
        lo = min(policy.min_split_pages, opts.endgame_min_split_pages or 0)
        return replace(policy, min_split_pages=min(policy.min_split_pages, max(lo, floor)))

    counter = counter if counter is not None else RequestCounter()
    before_requests, before_retries = counter.requests, counter.retries
    source = opts.source
    cursor = source.cursor(rng, prefix) if source is not None else Cursor(rng, prefix=prefix)
    if on_cursor is not None:
        on_cursor(cursor)
    given = 0
    objects_before, bytes_before = stats.objects, stats.bytes

    def fetch(req: dict[str, Any]) -> dict[str, Any]:
        return list_page(  # type: ignore[no-any-return]
            s3,
            bucket,
            prefix,
            start_after=req.get("StartAfter"),
            token=req.get("ContinuationToken"),
            max_keys=opts.page_size,
            counter=counter,
        )

    ahead_pool = (
        ThreadPoolExecutor(1, thread_name_prefix="list-ahead") if opts.prefetch and source is None else None
    )
    ahead: tuple[dict[str, Any], Future[dict[str, Any]]] | None = None
    dirs_pool: ThreadPoolExecutor | None = None  # directory requests sent beside the stream's own

    def explore(ways: int, split_policy: SplitPolicy) -> None:
        """A remainder that crosses directories is cut at the directories S3 names: the levels it spans are
        asked at once (each request asks about a level of its own), so a split waits for one answer, not
        for one after the other (the fleet's ramp: bench/RESULTS.md)."""
        nonlocal dirs_pool
        sent = 0
        while sent < MAX_EXPLORE:
            queries = cursor.explore_all(ways, split_policy, MAX_EXPLORE - sent)
            if not queries:
                return
            if len(queries) > 1 and dirs_pool is None:
                dirs_pool = ThreadPoolExecutor(MAX_EXPLORE - 1, thread_name_prefix="list-dirs")
            rest = (
                [dirs_pool.submit(list_dirs, s3, bucket, q, counter=counter) for q in queries[1:]]
                if dirs_pool
                else []
            )
            answers = [list_dirs(s3, bucket, queries[0], counter=counter), *(f.result() for f in rest)]
            for query, answer in zip(queries, answers, strict=True):
                cursor.take_dirs(query, *answer)
            sent += len(queries)

    def serve() -> None:
        """Give to the streams ``wanted()`` counts, if any (after a page, or while one is awaited)."""
        nonlocal given
        if give is None or new_id is None:
            return
        w = wanted()
        if w <= 0:
            return
        cut = cut_policy()
        if source is None:
            explore(w + 1, cut)
        pieces = cursor.split(w + 1, cut, new_id)
        if pieces:
            given += len(pieces)
            give(pieces)
        elif refused is not None:
            refused()

    def awaited(fut: Future[dict[str, Any]]) -> dict[str, Any]:
        """The page sent ahead; while it is not there, serve hungry streams every give_while_waiting_s."""
        every = opts.give_while_waiting_s
        if every is not None:
            while not fut.done() and not cursor.done:
                wait([fut], timeout=every)
                if not fut.done() and not should_stop():
                    serve()
        return fut.result()

    try:
        while not cursor.done:
            if source is not None:
                keys, objects, truncated, token = source.page(
                    s3, bucket, prefix, cursor, opts.page_size, counter
                )
                n = cursor.take(keys, truncated, token)
            else:
                req = cursor.request(opts.page_size)
                resp = awaited(ahead[1]) if ahead is not None and ahead[0] == req else fetch(req)
                ahead = None
                if cursor.done:
                    break  # a split while the page was awaited left nothing past pos (not expected: cuts > pos)
                keys, objects = page_objects(resp)
                n = cursor.take(keys, bool(resp.get("IsTruncated")), resp.get("NextContinuationToken"))
                if ahead_pool is not None and not cursor.done:
                    following = cursor.request(opts.page_size)
                    ahead = (following, ahead_pool.submit(fetch, following))
            if n:
                objects = head(objects, n)
                o, b = stats.objects, stats.bytes
                writer.add_page(objects)
                stats.add_page(objects)
                if on_page is not None:
                    on_page(stats.objects - o, stats.bytes - b)
            if cursor.done or should_stop():
                break
            serve()
        parts = writer.close()
    except AccessDeniedError as err:
        # Name the part of the bucket S3 refused, so that a partial listing is never mistaken for a total.
        writer.abort()
        after = f"after {cursor.pos!r}" if cursor.pos is not None else "from the first key"
        upto = f"up to {cursor.range.end!r}" if cursor.range.end is not None else "to the last key"
        raise AccessDeniedError(f"{err} [keys under {prefix!r} {after} {upto}: not listed]") from err
    except BaseException:
        writer.abort()
        raise
    finally:
        if ahead_pool is not None:
            # a request sent ahead and not used: wait for it, so that it is counted before the counts are read
            # (its outcome, an error included, no longer matters)
            ahead_pool.shutdown(wait=True)
        if dirs_pool is not None:
            dirs_pool.shutdown(wait=True)
    final = cursor.range
    remainder: list[KeyRange] = []
    checkpoint = None
    if not cursor.done:
        checkpoint = cursor.pos
        assert new_id is not None, "a stream that may stop needs new_id for its remainder"
        remainder = [KeyRange(id=new_id(), start_after=checkpoint, end=final.end)]
    return ShardResult(
        range=final,
        objects=stats.objects - objects_before,
        bytes=stats.bytes - bytes_before,
        list_requests=counter.requests - before_requests,
        retries=counter.retries - before_retries,
        done=cursor.done,
        checkpoint=checkpoint,
        subranges=remainder,
        parts=parts,
        given=given,
    )
