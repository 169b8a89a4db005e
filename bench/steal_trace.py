"""Where one simulated fleet run's time and LIST requests go (bench/sim/des.py): the diagnostics behind the
"where the time goes" paragraphs of bench/RESULTS.md, kept so that anyone can measure them again.

    python -m bench.steal_trace --size 1e9 --shape uniform --seed 1 --every 0.5 --until 14
    python -m bench.steal_trace --size 25e6 --shape multi-tenant --ranges

Prints, every ``--every`` seconds of the run up to ``--until``: the streams listing and idle, the pieces
waiting in the store's open ranges (and the pages they hold), the hungry listers (and in brackets the hunger
items' count, what busy listers read: the two differ by the ADDs in flight), the pieces split off since the
sample before (for other listers / for the donor's own idle streams); and per S3 partition
(``SimParams.s3.objects_per_partition`` keys each, as the simulator throttles them): the streams listing
there, the pages left in their ranges, how many of them their pacer holds below the unpaced rate, and the pages
of the open ranges that start there.
``--ranges``: every range the run listed, by its size in pages, with the LIST requests it took beyond
keys / 1,000 (a range's last page is partial: its overhead, with the directory requests, is the run's); and the
ranges by that overhead in tenths of a request (how full their last pages were: ``steal.PAGE_MARGIN``).
``--account``: where the streams' time went between the first lister's start and the listing's end (``Account``):
pages answered, failed attempts, retry and pacer waits, the lister's CPU, checkpoints, directory requests, and the
time without a piece (in the ramp, the middle and the tail); then the run's start-up and reduce.
``--admitted``: each second of the run, the page requests S3 admitted in each partition (the simulator admits at
most ``SimParams.s3.partition_rate_limit`` a partition a second and answers the rest 503 SlowDown): how near the
run stays to the partitions' cap, and when it leaves it.
``--splits T``: every split attempt before second T: the donor's position and range end, its estimate of the
remainder (pages) before and after the split's directory requests, the pieces it gave and how it cut them
(``Cursor.cut_path``): where the ramp's pieces came from and why some attempts gave none.
``--pieces``: the ranges listed (as ``--ranges``) by the second their donor cut them, by whether its lister was in
its endgame then (``fleet.ENDGAME_QUIET_S``: its split floor lowered), by the pages the donor estimated them at
against the pages they held, and by how the donor cut them (``Cursor.cut_path``; and those it estimated under four
pages): which pieces cost the run's partial pages.
``--dirs``: the split attempts' directory requests by the depth of the level asked (its '/'s: 0 is the bucket's
root), whether it was asked from its start (for its fan-out, to size the directories above) or from the donor's
position (for cut points), and whether the attempt then gave pieces: the directory requests that bought no split.

The figures are the simulator's state, sampled when the first page of each interval is answered.
"""

from __future__ import annotations

import argparse
import bisect
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from hpcstage.inventory.fleet import MIN_SPLIT_PAGES
from hpcstage.inventory.model import KeyRange

from bench.sim.des import OK, PAGE, Config, Lease, Result, Sim, Stream
from bench.sim.des_shapes import ALL_SHAPES, make_any
from bench.sim.params import DEFAULT, SimParams

# the bounds of the --ranges table, in pages, and its classes
SIZE_BOUNDS = (1, 4, 16, 64, 256)
SIZE_LABELS = (*(f"< {b}" for b in SIZE_BOUNDS), f">= {SIZE_BOUNDS[-1]}")


@dataclass
class Sample:
    t: float
    listing: int
    idle: int
    pool_pieces: int
    pool_pages: int
    hungry: int
    # the hunger items' count (what busy listers read: Shard.hunger summed)
    hunger_items: int
    # pieces split off since the previous sample: for other listers (the share of the fleet's hunger a busy
    # lister serves, published to the open ranges) and for the lister's own idle streams
    remote_pieces: int
    local_pieces: int
    # per partition: streams listing there, pages left in their ranges, streams paced, pages of the open ranges
    # that start there
    streams: list[int]
    pages_left: list[int]
    paced: list[int]
    pool_left: list[int]


@dataclass
class RangeDone:
    """A range listed: its keys and LIST requests; and (``--pieces``) when its donor cut it (None: the bucket's
    first range), whether the donor's lister was in its endgame then, the pages the donor estimated it at (0:
    none), and how the donor cut it (``Cursor.cut_path``)."""

    keys: int
    requests: int
    cut: float | None = None
    endgame: bool = False
    estimate: float = 0.0
    path: str = ""

    @property
    def overhead(self) -> float:
        """LIST requests beyond the keys' own share (keys / 1,000 pages)."""
        return self.requests - self.keys / PAGE


@dataclass
class Account:
    """Stream-seconds by what a stream was doing (``TracedSim``), and the steps of the count of streams holding a
    piece (time, count after the change), from which the time without a piece follows."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    steps: list[tuple[float, int]] = field(default_factory=list)

    def holding(self, t0: float, t1: float) -> float:
        """Stream-seconds with a piece between t0 and t1."""
        total = 0.0
        count, at = 0, t0
        for t, n in self.steps:
            if t > t0:
                total += count * (min(t, t1) - at)
                at = min(t, t1)
            count = n
            if t >= t1:
                break
        return total + count * max(0.0, t1 - at)

    def full_span(self, streams: int, t0: float, t1: float, idle_share: float = 0.01) -> tuple[float, float]:
        """The first and the last moment in [t0, t1] with at most ``idle_share`` of the streams without a piece:
        the ramp ends at the first, the tail begins after the last (t0, t1 when never)."""
        full = [t for t, n in self.steps if t0 <= t <= t1 and streams - n <= idle_share * streams]
        if not full:
            return t0, t0
        last = full[-1]
        later = [t for t, _ in self.steps if t > last]
        return full[0], (later[0] if later else t1)


@dataclass
class Trace:
    every: float
    until: float
    samples: list[Sample] = field(default_factory=list)
    ranges: list[RangeDone] = field(default_factory=list)
    account: Account = field(default_factory=Account)
    # pieces split off in the whole run: for other listers, for the donor's own idle streams
    remote_pieces: int = 0
    local_pieces: int = 0
    # (--admitted) (partition, second) -> page requests S3 admitted, and the page requests sent (503s included)
    admitted: dict[tuple[int, int], int] = field(default_factory=dict)
    sent: int = 0
    # (--splits) split attempts before this second are recorded in ``splits``
    splits_until: float = 0.0
    splits: list[SplitSeen] = field(default_factory=list)
    # (--dirs) (depth of the level asked, asked from its start, the attempt gave pieces) -> directory requests
    dirs: dict[tuple[int, bool, bool], int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class SplitSeen:
    """One split attempt (``--splits``): when, the donor's position and range end, its estimate of the remainder
    in pages before and after the split's directory requests (None: unknown), the pieces given, the cut's path."""

    t: float
    pos: str | None
    end: str | None
    before: float | None
    after: float | None
    pieces: int
    path: str


class TracedSim(Sim):
    """The simulator, sampled (``Trace.samples``) and with every range's keys and requests (``Trace.ranges``)."""

    def __init__(self, *args: Any, trace: Trace, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trace = trace
        self._next_sample = 0.0
        self._requests: dict[int, int] = defaultdict(int)  # id(stream) -> requests of its current range
        # a split under way asked for by maybe_split_local (the donor's own idle streams), else by on_busy_poll
        self._local = False
        self._sampled_pieces = (0, 0)  # (remote, local) pieces at the last sample
        # the stream-time account: when each stream's request was due (before the pacer's slot), when its
        # checkpoint began, and the streams holding a piece
        self._due: dict[int, float] = {}
        self._ck: dict[int, float] = {}
        self._holding = 0
        # piece id -> (when it was cut, its donor's lister in its endgame, the donor's estimate in pages, the cut's path)
        self._cut: dict[str, tuple[float, bool, float, str]] = {}
        self._asked: list[dict[str, Any]] | None = None  # the directory requests of the split under way

    def _held(self, change: int) -> None:
        self._holding += change
        self.trace.account.steps.append((self.now, self._holding))

    def next_page(self, st: Stream, t: float) -> None:
        self.trace.account.seconds["the lister's CPU"] += t - self.now  # the page's CPU, and waiting for it
        super().next_page(st, t)

    def checkpoint(self, st: Stream, t: float, final: bool) -> None:
        self.trace.account.seconds["the lister's CPU"] += t - self.now
        self._ck[id(st)] = t
        super().checkpoint(st, t, final)

    def on_ckpt(self, st: Stream, epoch: int, final: bool) -> None:
        began = self._ck.pop(id(st), None)
        if began is not None and st.epoch == epoch:
            what = "checkpoints: the range's last" if final else "checkpoints: within a range"
            self.trace.account.seconds[what] += self.now - began
        super().on_ckpt(st, epoch, final)

    def issue(self, st: Stream, t: float, attempt: int = 0) -> None:
        acct = self.trace.account.seconds
        if attempt:
            acct["retry waits (botocore, the pacer's window)"] += t - self.now
        if st.hold > t:
            acct["directory requests of a split"] += st.hold - t
        self._due[id(st)] = max(t, st.hold)
        super().issue(st, t, attempt)

    def send(self, st: Stream, t: float, attempt: int) -> None:
        self.trace.account.seconds["pacer waits"] += t - self._due.pop(id(st), t)
        self.trace.sent += 1
        super().send(st, t, attempt)

    def maybe_split_local(self, st: Stream) -> None:
        self._local = True
        try:
            super().maybe_split_local(st)
        finally:
            self._local = False

    def engine_split(self, st: Stream, ways: int) -> tuple[list[KeyRange], float]:
        cur = st.cursor
        seen = None
        if self.now < self.trace.splits_until and cur is not None and st.last is not None:
            self.sync(st)  # the cursor takes its last page (Sim.engine_split does so first too)
            before = cur._crossing_pages(PAGE)[0]  # noqa: SLF001 - the estimate the split starts from
            seen = SplitSeen(self.now, cur.pos, cur.range.end, before, None, 0, "")
        self._asked = []
        try:
            pieces, delay = super().engine_split(st, ways)
            asked = self._asked
        finally:
            self._asked = None
        for q in asked:
            level = q.get("Prefix", "")
            self.trace.dirs[(level.count("/"), q.get("StartAfter") == level, bool(pieces))] += 1
        for p in pieces:
            self._cut[p.id] = (
                self.now,
                self.endgame(st.node),
                p.estimate / PAGE,
                cur.cut_path if cur else "",
            )
        if seen is not None and cur is not None:
            if pieces:
                # what the cut was sized by: the pieces' estimates and what the donor kept (all 0: none)
                keys = cur.range.estimate + sum(p.estimate for p in pieces)
                seen.after = keys / PAGE if keys > 0 else None
                seen.pieces, seen.path = len(pieces), cur.cut_path
            else:
                seen.after = cur._crossing_pages(PAGE)[0]  # noqa: SLF001
            self.trace.splits.append(seen)
        if self._local:
            self.trace.local_pieces += len(pieces)
        else:
            self.trace.remote_pieces += len(pieces)
        return pieces, delay

    def dir_listing(self, params: dict[str, Any]) -> tuple[list[str], bool]:
        if self._asked is not None:
            self._asked.append(params)
        return super().dir_listing(params)

    def _range_done(self, st: Stream, keys: int) -> None:
        cut, endgame, estimate, path = self._cut.get(st.pid, (None, False, 0.0, ""))
        self.trace.ranges.append(RangeDone(keys, self._requests.pop(id(st), 0), cut, endgame, estimate, path))

    def start_piece(self, st: Stream, piece: KeyRange, lease: Lease | None, t: float) -> None:
        self._requests[id(st)] = 0
        self._held(1)
        super().start_piece(st, piece, lease, t)

    def on_reply(self, st: Stream, epoch: int, outcome: int, attempt: int, r0: int, r1: int) -> None:
        if self.now >= self._next_sample and self.now <= self.trace.until:
            self._next_sample = (math.floor(self.now / self.trace.every) + 1) * self.trace.every
            self.trace.samples.append(self.sample())
        if st.epoch == epoch and st.node.alive:
            what = "pages answered" if outcome == OK else "failed attempts (503, 500, resets)"
            self.trace.account.seconds[what] += self.now - st.sent_at
        if st.epoch == epoch and st.node.alive and outcome == OK:
            self._requests[id(st)] += 1  # Sim.on_reply counts it in list_requests
        super().on_reply(st, epoch, outcome, attempt, r0, r1)

    def piece_done(self, st: Stream, t: float) -> None:
        self._range_done(st, st.rank - st.start_rank)
        self._held(-1)
        super().piece_done(st, t)

    def drop(self, st: Stream) -> None:
        # a lease taken over: what this stream listed is listed again by the new owner
        self._range_done(st, 0)
        self._held(-1)
        super().drop(st)

    def account_rows(self, res: Result) -> list[tuple[str, float]]:
        """(what, stream-seconds) between the first lister's start and the listing's end, the time without a
        piece split into the ramp (until at most 1 % of the streams are without one), the middle and the tail
        (after the last such moment); "other" is time with a piece not counted above (a piece queued while its
        stream is dispatched, a claim of the lister's own pieces)."""
        acct = self.trace.account
        streams = sum(node.k for node in self.nodes)
        t0 = min(node.started for node in self.nodes if node.started)
        t1 = res.phases.get("list_end", self.now)
        full, tail = acct.full_span(streams, t0, t1)
        rows = sorted(acct.seconds.items(), key=lambda kv: -kv[1])
        holding = acct.holding(t0, t1)
        rows.append(("other, with a piece", holding - sum(v for _, v in rows)))
        for label, a, b in (
            (f"without a piece: the ramp ({t0:.1f}-{full:.1f} s)", t0, full),
            (f"without a piece: the middle ({full:.1f}-{tail:.1f} s)", full, tail),
            (f"without a piece: the tail ({tail:.1f}-{t1:.1f} s)", tail, t1),
        ):
            rows.append((label, streams * (b - a) - acct.holding(a, b)))
        return rows

    def sample(self) -> Sample:
        parts = self.partitions
        streams, left, paced = [0] * parts, [0] * parts, [0] * parts
        listing = idle = hungry = 0
        for node in self.nodes:
            listing += node.listing
            idle += len(node.idle)
            hungry += node.hungry
            for st in node.streams:
                if st.state != "list":
                    continue
                p = bisect.bisect_right(self.part_bounds, st.rank)
                streams[p] += 1
                left[p] += max(0, st.end_rank - st.rank) // PAGE
                pacer = self.pacer_of(st)
                paced[p] += pacer.rate is not None
        pool = [p for shard in self.opens for p in shard]
        pages = 0
        pool_left = [0] * parts
        for piece in pool:
            a = 0 if piece.start_after is None else self.ks.count_le(piece.start_after)
            b = self.n if piece.end is None else self.ks.count_le(piece.end)
            pages += (b - a) // PAGE
            pool_left[bisect.bisect_right(self.part_bounds, a)] += (b - a) // PAGE
        now_pieces = (self.trace.remote_pieces, self.trace.local_pieces)
        remote, local = (a - b for a, b in zip(now_pieces, self._sampled_pieces, strict=True))
        self._sampled_pieces = now_pieces
        return Sample(
            self.now,
            listing,
            idle,
            len(pool),
            pages,
            hungry,
            sum(sh.hunger for sh in self.shards),
            remote,
            local,
            streams,
            left,
            paced,
            pool_left,
        )


def fleet_config(listers: int = 1000, per_lister: int = 8) -> Config:
    """The fleet as bench.steal_bench runs it by default: paced listers, the fleet's split floor."""
    return Config(
        mode="fleet", pace=True, min_split_pages=MIN_SPLIT_PAGES, listers=listers, per_lister=per_lister
    )


def run(
    shape: str,
    n: int,
    seed: int = 1,
    cfg: Config | None = None,
    params: SimParams = DEFAULT,
    every: float = 0.5,
    until: float = math.inf,
    splits_until: float = 0.0,
) -> tuple[Result, Trace, list[tuple[str, float]]]:
    """One fleet run of ``n`` keys of ``shape`` (bench.sim.des_shapes), traced, and its stream-time account
    (``TracedSim.account_rows``); split attempts before ``splits_until`` are recorded (``Trace.splits``)."""
    cfg = cfg if cfg is not None else fleet_config()
    trace = Trace(every, until, splits_until=splits_until)
    sim = TracedSim(make_any(shape, n), cfg, seed, params, trace=trace)
    res = sim.run()
    trace.admitted = dict(sim.s3_win)
    return res, trace, sim.account_rows(res)


def by_size(ranges: list[RangeDone]) -> list[tuple[str, int, float]]:
    """(size class in pages, ranges, their LIST requests beyond keys / 1,000)."""
    rows: dict[str, list[float]] = {label: [0, 0.0] for label in SIZE_LABELS}
    for r in ranges:
        row = rows[_size_class(r.keys / PAGE)]
        row[0] += 1
        row[1] += r.overhead
    return [(label, int(c), o) for label, (c, o) in rows.items()]


def piece_rows(pieces: list[RangeDone], key: Any) -> list[tuple[Any, int, float, float, int]]:
    """(class, ranges, pages held, LIST requests beyond keys / 1,000, ranges under a page) by ``key(piece)``."""
    rows: dict[Any, list[float]] = {}
    for p in pieces:
        row = rows.setdefault(key(p), [0, 0.0, 0.0, 0])
        row[0] += 1
        row[1] += p.keys / PAGE
        row[2] += p.overhead
        row[3] += p.keys < PAGE
    return [(k, int(c), pages, over, int(small)) for k, (c, pages, over, small) in rows.items()]


def by_last_page(ranges: list[RangeDone]) -> list[tuple[str, int]]:
    """(LIST requests beyond keys / 1,000 a range, in tenths of a request, ranges): how full the ranges' last
    pages were (0.1: nine tenths full; ">= 1": a page came back with none of the range's keys)."""
    labels = [f"{i / 10:.1f}" for i in range(10)] + [">= 1"]
    counts = dict.fromkeys(labels, 0)
    for r in ranges:
        over = r.overhead
        counts[labels[10] if over >= 1 - 1e-9 else labels[max(0, int(over * 10 + 1e-9))]] += 1
    return list(counts.items())


def _size_class(pages: float) -> str:
    """The --ranges class (``SIZE_LABELS``) of a size in pages."""
    return SIZE_LABELS[bisect.bisect_right(SIZE_BOUNDS, pages)]


def print_pieces(pieces: list[RangeDone]) -> None:
    """The ``--pieces`` tables."""
    head = "| ranges | pages held | LIST requests beyond keys / 1,000 | ranges under a page |"

    def table(title: str, rows: list[tuple[Any, int, float, float, int]]) -> None:
        print(f"\n| {title} {head}")
        print("|---|---|---|---|---|")
        for k, c, pages, over, small in rows:
            print(f"| {k} | {c} | {pages:.0f} | {over:.0f} | {small} |")

    def second(p: RangeDone) -> str:
        return "the first range" if p.cut is None else str(int(p.cut))

    by_second = piece_rows(pieces, second)
    table("cut in second", sorted(by_second, key=lambda r: (r[0] != "the first range", len(r[0]), r[0])))
    table("donor's lister in its endgame", sorted(piece_rows(pieces, lambda p: "yes" if p.endgame else "no")))
    bounds = ["none", *SIZE_LABELS]
    cut = [p for p in pieces if p.cut is not None]
    rows = piece_rows(cut, lambda p: _size_class(p.estimate) if p.estimate > 0 else "none")
    table("donor's estimate (pages)", sorted(rows, key=lambda r: bounds.index(r[0])))
    table("cut by", sorted(piece_rows(cut, lambda p: p.path or "?")))
    small = [p for p in cut if 0 < p.estimate < 4]
    table("estimated under 4 pages, cut by", sorted(piece_rows(small, lambda p: p.path or "?")))


def _pages(estimate: float | None) -> str:
    return "unknown" if estimate is None else f"{estimate:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=float, default=25e6)
    ap.add_argument("--shape", default="uniform", choices=sorted(ALL_SHAPES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--listers", type=int, default=1000)
    ap.add_argument("--per-lister", type=int, default=8)
    ap.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    ap.add_argument("--until", type=float, default=math.inf, help="the last sample's time")
    ap.add_argument("--ranges", action="store_true", help="the ranges listed, by size, and their overhead")
    ap.add_argument("--account", action="store_true", help="where the streams' time went")
    ap.add_argument(
        "--admitted", action="store_true", help="page requests S3 admitted each second, per partition"
    )
    ap.add_argument(
        "--splits", type=float, default=0.0, metavar="T", help="every split attempt before second T"
    )
    ap.add_argument(
        "--pieces", action="store_true", help="the ranges by when they were cut, the endgame, and estimate"
    )
    ap.add_argument(
        "--dirs", action="store_true", help="directory requests by level depth, asked from, and outcome"
    )
    ap.add_argument(
        "--oracle-estimates",
        action="store_true",
        help="bench.sim.des.Config.oracle_estimates: every cursor's estimate is the keys its range holds",
    )
    ap.add_argument(
        "--yield-util",
        type=float,
        default=0.0,
        help="bench.sim.des.Config.yield_util (0: never, as the fleet)",
    )
    ap.add_argument(
        "--yield-push-ratio", type=float, default=0.0, help="bench.sim.des.Config.yield_push_ratio"
    )
    args = ap.parse_args(argv)
    cfg = replace(
        fleet_config(args.listers, args.per_lister),
        yield_util=args.yield_util,
        yield_push_ratio=args.yield_push_ratio,
        oracle_estimates=args.oracle_estimates,
    )
    res, trace, account = run(
        args.shape,
        int(args.size),
        args.seed,
        cfg,
        every=args.every,
        until=args.until,
        splits_until=args.splits,
    )
    print(
        f"{args.shape} {args.size:g} seed {args.seed}: {res.makespan:.1f} s, floor {res.floor:.1f} s, "
        f"LIST requests {res.list_requests} (minimum {res.min_requests}, directory {res.dir_requests}), "
        f"exact {res.exact}"
    )
    print(
        "\n| t | listing | idle | pool pieces | pool pages | hungry (items) | pieces given: remote / local "
        "| per partition: streams / pages left / paced / open ranges' pages |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in trace.samples:
        parts = " · ".join(
            f"{a}/{b}/{c}/{d}"
            for a, b, c, d in zip(s.streams, s.pages_left, s.paced, s.pool_left, strict=True)
        )
        print(
            f"| {s.t:.1f} | {s.listing} | {s.idle} | {s.pool_pieces} | {s.pool_pages} | {s.hungry} ({s.hunger_items}) "
            f"| {s.remote_pieces} / {s.local_pieces} | {parts} |"
        )
    if args.ranges:
        print("\n| range size (pages) | ranges | LIST requests beyond keys / 1,000 |")
        print("|---|---|---|")
        for label, count, over in by_size(trace.ranges):
            print(f"| {label} | {count} | {over:.0f} |")
        total = sum(r.overhead for r in trace.ranges)
        print(f"| all | {len(trace.ranges)} | {total:.0f} (+ {res.dir_requests} directory requests) |")
        print("\n| LIST requests beyond keys / 1,000, a range (its last page's emptiness) | ranges |")
        print("|---|---|")
        for label, count in by_last_page(trace.ranges):
            print(f"| {label} | {count} |")
    if args.admitted:
        parts = sorted({p for p, _ in trace.admitted}) or [0]
        seconds = sorted({t for _, t in trace.admitted})
        cap = int(DEFAULT.s3.partition_rate_limit)
        print(f"\n| second | page requests admitted, per partition (cap {cap} a second) |")
        print("|---|---|")
        for t in seconds:
            print(f"| {t} | {' · '.join(str(trace.admitted.get((p, t), 0)) for p in parts)} |")
    if trace.splits:
        print("\n| t | donor's position | range end | estimate before / after (pages) | pieces | cut |")
        print("|---|---|---|---|---|---|")
        for sp in trace.splits:
            print(
                f"| {sp.t:.2f} | {sp.pos} | {sp.end} | {_pages(sp.before)} / {_pages(sp.after)} | {sp.pieces} "
                f"| {sp.path or '-'} |"
            )
    if args.pieces:
        print_pieces(trace.ranges)
    if args.dirs:
        print("\n| level depth | asked from | requests, the attempt gave pieces | requests, it gave none |")
        print("|---|---|---|---|")
        for depth, start in sorted({(d, f) for d, f, _ in trace.dirs}):
            gave, none = trace.dirs.get((depth, start, True), 0), trace.dirs.get((depth, start, False), 0)
            print(f"| {depth} | {'its start' if start else 'the position'} | {gave} | {none} |")
        print(
            f"| all | | {sum(v for k, v in trace.dirs.items() if k[2])} | {sum(v for k, v in trace.dirs.items() if not k[2])} |"
        )
    if args.account:
        streams = args.listers * args.per_lister
        window = sum(v for _, v in account)
        print(f"\n| where the streams' time went ({streams} streams) | stream-s | share | s of the fleet |")
        print("|---|---|---|---|")
        for what, v in account:
            print(f"| {what} | {v:.0f} | {100 * v / window:.1f} % | {v / streams:.2f} |")
        end = res.phases.get("list_end", res.makespan)
        t0 = end - window / streams  # the first lister's start
        print(
            f"| all, from the first lister's start to the listing's end | {window:.0f} | 100 % | {window / streams:.2f} |\n"
            f"\nmakespan {res.makespan:.2f} s = start-up {t0:.2f} + listing {window / streams:.2f} + reduce and "
            f"notification {res.makespan - end:.2f}; floor {res.floor:.2f} s (efficiency {res.floor / res.makespan:.2f})"
        )
    return 0 if res.exact else 1


if __name__ == "__main__":
    sys.exit(main())
