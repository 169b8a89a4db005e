"""A discrete-event simulator of the work-stealing listing engine (hpcstage.inventory.steal).

Virtual time, one thread, one ``random.Random(seed)``: the same seed gives the same numbers. It drives the
engine's real ``Cursor`` (request / take / split / remaining_pages) and reproduces ``LocalPool``'s protocol
(idle streams wait; after each page a listing stream asks ``wanted() = idle - queued`` and, when positive,
splits ``wanted + 1`` ways and queues the pieces) in virtual time, for:

- ``host``: S streams of one process; page = latency draw; one CPU (the GIL) that every page's processing
  queues on; a shared per-partition S3 request-rate limiter.
- ``fleet``: a launcher Lambda starts L listers with asynchronous Invoke; each runs K streams over a local
  pool; across listers a DynamoDB store (modelled: latency draws and per-partition capacity) holds open
  ranges in S shards, a sharded hunger counter, leases with their checkpoints, and an outstanding-range
  counter whose decrement to zero ends the listing (the winning lister reduces, then SendTaskSuccess:
  ``Config.reduce_in_lister``; or SendTaskSuccess, then a Reduce Lambda). As in fleet.py, a
  split for the lister's own idle streams goes through the store too: a donate transaction, a claim by the
  stream that takes the piece, and a finish transaction on the counter (before 2026-11-23 the simulator
  kept such pieces in memory: no DynamoDB latency, no write on the counter item). The counter is spread over
  ``counter_shards`` items as fleet.py's (COUNTER_SHARDS, a range counted in the item its id hashes to); after
  each finish the finisher reads its own item (1 read unit) and, when that is 0, all of them in one
  TransactGetItems (2 read units each), as fleet.notify_if_done does; the run ends when that read sees 0.
- ``static``: the peer of 1,000 equal-width byte ranges, one Lambda each, no splitting.

Pages are O(1) in Python: a page is ranks [r0, r1) of the keyspace model. The cursor is given a page only
when the engine must decide something from it (a split): ``Cursor.take`` is then called with the *last*
page as a lazy sequence that builds a key string only when indexed (~70 of them: the sample, the bisect at
the end). Take only uses its last page for what split reads (position, sample, span), so the engine's
decision is the one it would make had it seen every page; the simulator itself keeps the exact counts and
checks ``take``'s answer against them.

Every run is checked for exactness: the committed rank intervals (each checkpoint commits the pages since
the previous one) must tile [0, n) exactly once, and the committed objects and bytes must equal the model's.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, overload

from hpcstage.inventory.fleet import (
    COUNTER_SHARDS,
    ENDGAME_MIN_SPLIT_PAGES,
    ENDGAME_QUIET_S,
    HUNGER_SHARDS,
    LAUNCH_THREADS,
    LEASE_READERS,
    LEASE_SHARDS,
    OPEN_SHARDS,
    REDUCE_MARGIN_S,
    ROLLUP_READS,
    ROLLUP_SHARDS,
    ROLLUP_WAIT_S,
    STRAGGLER_RATIO,
    FleetPace,
    endgame_floor,
    hunger_share,
    page_time,
    progress_told,
    straggler_share,
)
from hpcstage.inventory.keys import ByteInterval
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.pacing import Pacer
from hpcstage.inventory.steal import MAX_EXPLORE, Cursor, SplitPolicy, dir_levels

from bench.keyspace import Keyspace
from bench.sim.params import DEFAULT, SimParams

PAGE = 1000
# Config.yield_util: a lister looks at most this often (a Query of its home shard of open ranges, Limit 10, from a
# random start) whether open ranges not given back wait; its paced streams use the last look meanwhile
YIELD_LOOK_S = 1.0
# Config.yield_push_ratio: how recent the fleet's last 503 must be for unpaced streams to give pieces
YIELD_PUSH_S = 2.0
OK, SLOWDOWN, ERR500, RESET = 0, 1, 2, 3
FAULT_NAMES = {SLOWDOWN: "503", ERR500: "500", RESET: "reset"}


def claim_order(ranges: Sequence[KeyRange], rnd: random.Random) -> list[KeyRange]:
    """The open ranges a scan found in random order, each first with a probability proportional to its estimate
    (weighted sampling without replacement, Efraimidis and Spirakis: ascending ``-ln(u) / weight``); a range
    without an estimate weighs as the mean of those with one, 1 when none has. ``Config.claim_weighted``: a
    variant measured and not kept (bench/RESULTS.md, 2026-11-28); the fleet tries them uniformly."""
    known = [r.estimate for r in ranges if r.estimate > 0]
    fill = sum(known) / len(known) if known else 1.0
    keyed = [
        (-math.log(1.0 - rnd.random()) / (r.estimate if r.estimate > 0 else fill), i)
        for i, r in enumerate(ranges)
    ]
    return [ranges[i] for _, i in sorted(keyed)]


def keys_in(ks: Keyspace, start_after: str | None, end: str | None) -> int:
    """The keys of ``ks`` in the range (start_after, end] (None: the key space's start, its end)."""
    lo = 0 if start_after is None else ks.count_le(start_after)
    hi = ks.n if end is None else ks.count_le(end)
    return hi - lo


# Which of the engine's estimates an OracleCursor replaces by the truth (Config.oracle_scope): every one; those
# not from a tree (``Cursor._flat_pages``, the tree estimates stay the engine's); of those, only the ones of a
# remainder that reaches past pos's directory before its tree is known, or only the ones of a remainder inside it.
ORACLE_SCOPES = ("all", "flat", "crossing", "within")


class OracleCursor(Cursor):
    """Config.oracle_estimates: the engine's cursor, whose estimates of its remainder are the model's truth.

    Wherever ``Cursor._estimate_now`` gives an estimate, this one gives the keys truly left in (pos, end]; a
    tree estimate's directories are sized by the keys truly between each and the next (the last up to the
    end) and its rest by the keys before the first. Where the engine has none (an open range of no known
    alphabet) there is none here either. Everything else (cut points, directory requests, the split floor)
    is the engine's. ``scope`` (ORACLE_SCOPES) narrows which estimates are replaced; the others stay the
    engine's."""

    ks: Keyspace | None = None  # the model's keys (set by the simulator)
    scope: str = "all"

    def _estimate_now(self, page_keys: int) -> tuple[float | None, Any]:
        est, tree = super()._estimate_now(page_keys)
        if self.done or self.first is None or self.pos is None or (est is None and tree is None):
            return est, tree
        assert self.ks is not None
        if tree is not None and self.scope != "all":
            return est, tree
        if (
            tree is None
            and self.scope in ("crossing", "within")
            and (self._leaf_crossed() is not None) != (self.scope == "crossing")
        ):
            return est, tree
        left = keys_in(self.ks, self.pos, self.range.end)
        if tree is None:
            return left / page_keys, None
        names = [d for d, _ in tree[2]]
        sizes = [
            (d, float(keys_in(self.ks, d, nxt))) for d, nxt in itertools.pairwise([*names, self.range.end])
        ]
        rest = float(keys_in(self.ks, self.pos, names[0]) if names else left)
        return left / page_keys, (float(left), rest, sizes)


def depth_means(ks: Keyspace) -> dict[int, float]:
    """Keys per directory at each depth below the key space's root (depth 1: "a/", 2: "a/b/", ...): every
    directory's keys, walked with Delimiter listings of the model (one pass, minutes at 25M and more)."""
    counts: dict[int, list[int]] = {}
    frontier, depth = [""], 0
    while frontier:
        deeper = []
        for prefix in frontier:
            a, b = ks.prefix_range(prefix)
            while a < b:
                _, common, a = ks.delimited(prefix, a, b, PAGE, "/")
                for cp in common:
                    lo, hi = ks.prefix_range(cp)
                    c = counts.setdefault(depth + 1, [0, 0])
                    c[0] += 1
                    c[1] += hi - lo
                    deeper.append(cp)
        frontier, depth = deeper, depth + 1
    return {d: keys / n for d, (n, keys) in counts.items()}


class DepthMeanCursor(Cursor):
    """Config.depth_means: the engine's cursor, whose tree estimates size every directory by the true mean
    keys per directory at its depth (``depth_means``) instead of the one being listed: the best a count of
    directories learnt fleet-wide could give, a bound (bench/RESULTS.md, 2026-11-28, fourth session)."""

    means: dict[int, float] | None = None  # depth -> keys per directory (set by the simulator)

    def _level_units(self, unit: dict[str, float]) -> dict[str, float]:
        assert self.means is not None
        out = dict(unit)
        for level in unit:
            mean = self.means.get(level[len(self.prefix) :].count("/") + 1)
            if mean is not None:
                out[level] = mean
        return out


@dataclass
class Config:
    mode: str = "fleet"  # fleet | host | static
    # host
    streams: int = 64
    host_cpu_per_page_s: float = 0.0044  # measured here (bench.sim.params.LambdaParams.cpu_per_page_s)
    host_cpus: float = 1.0  # one Python process: the GIL serialises page processing
    # fleet
    listers: int = 1000
    per_lister: int = 8
    # hunger items (fleet.HUNGER_SHARDS) and shards of open ranges (fleet.OPEN_SHARDS), each on a partition
    # key of its own as in the fleet's table (the model before 2026-11-25's third session put a shard's hunger item and its
    # open ranges on one key, so the t503 notes and hunger counts took write units from the claims)
    shards: int = HUNGER_SHARDS
    open_shards: int = OPEN_SHARDS
    poll_s: float = 0.5  # busy listers read the hunger shards this often
    # a variant measured and not kept (bench/RESULTS.md, 2026-11-29): busy listers read them this fraction of poll_s
    # apart during the ramp (no 503 in the run, the fleet's pace not yet known to the lister) while their last read
    # showed more listers hungry than busy; 1.0: every poll_s, as the fleet
    hungry_poll: float = 1.0
    idle_poll_s: float = 0.25  # an idle lister re-reads the shards this often
    publish_ways: int = 15  # pieces one stream's split may publish (fleet: SplitPolicy.max_ways - 1)
    lease_s: float = 10.0
    ckpt_pages: int = 50
    static_ranges: int = 1000
    # engine
    min_split_pages: float = 8.0
    # the endgame (fleet.ENDGAME_QUIET_S): a lister that saw a 503 SlowDown writes the time into its hunger
    # item (at most once a window); a busy lister whose read of the hunger items shows no 503 for
    # endgame_quiet_s, after the run was throttled once, stops pacing and splits down to
    # endgame_min_split_pages until its own next 503. 0: off (the fleet before 2026-11-25)
    endgame_quiet_s: float = ENDGAME_QUIET_S
    endgame_min_split_pages: float = ENDGAME_MIN_SPLIT_PAGES
    # the endgame's split floor follows the fleet's pace (fleet.endgame_floor: the listers tell their pages
    # left and listed in their hunger items at each read of them), between endgame_min_split_pages and the
    # policy's floor; False: always endgame_min_split_pages (the fleet before 2026-11-26's sixth session)
    endgame_pace: bool = True
    # a claim (fleet.FleetStore.claim) is a Put of the lease item (attribute_not_exists), then a Delete of the
    # open item by the winner: a lost claim writes nothing to the open shard; False: one transaction of both
    # (2 units a KB of the open item on its shard, lost claims included: the fleet before 2026-11-26's seventh
    # session)
    claim_put_first: bool = True
    # a split's directory requests go at once (lister.list_range); False: one after the other (the fleet
    # before 2026-11-23)
    parallel_explore: bool = True
    # a busy lister reads the hunger shards after a page, at most every poll_s (fleet.Lister.wanted);
    # False: on a timer every poll_s (the simulator before 2026-11-23)
    page_poll: bool = True
    # fleet.Lister.wanted: the hunger a lister read goes to its stream with the most keys left by estimate,
    # which gives at once (after its page, or while it awaits one); False: to whichever stream's page comes
    # first, in random order (the fleet before 2026-11-26's second session)
    largest_first: bool = True
    # fleet.hunger_share: a lister whose largest stream holds more than its fair share of the hunger
    # serves a piece of twice the split floor per hungry lister; False: the fair share only (the fleet before)
    share_by_size: bool = True
    # fleet.straggler_share: a busy lister whose largest stream holds more than this many times the fleet's
    # mean remainder a range (told unclipped in the hunger items) gives pieces of it, hungry listers or not; 0:
    # never (the fleet before 2026-11-27's second session)
    straggler_ratio: float = STRAGGLER_RATIO
    # a scan claims the largest open range it found (by estimate): a variant measured with the stragglers'
    # rule and not kept (bench/RESULTS.md, 2026-11-27, second session); False: one at random, as the fleet
    claim_largest: bool = False
    # a scan tries the ranges it found in random order weighted by their estimates (``claim_order``): a variant
    # measured and not kept (bench/RESULTS.md, 2026-11-28); False: uniformly, as the fleet
    claim_weighted: bool = False
    # a stream its pacer holds below this share of its unpaced rate (rate x the lister's page time) gives the rest
    # of its range back to the open ranges, as a range stopped at its checkpoint (fleet.FleetStore.stop_at), while
    # open ranges not given back wait (its lister's look at its home shard, at most every YIELD_LOOK_S); it then
    # claims as an idle stream does, ranges not given back first, with a pacer anew. At most once a pacer window a
    # stream, and only a remainder of yield_min_pages or more by estimate. A variant measured and not kept
    # (bench/RESULTS.md, 2026-11-28, second session); 0: never, as the fleet
    yield_util: float = 0.0
    yield_min_pages: float = 16.0
    # with yield_util: only a stream paced for this long (seconds since its pacer set a rate) gives its remainder
    # back (measured at 1 and 3 s, not kept: bench/RESULTS.md)
    yield_after_s: float = 0.0
    # while the fleet saw a 503 in the last YIELD_PUSH_S, a busy lister's largest unpaced stream gives pieces of
    # its remainder as a straggler's (fleet.straggler_share) at this ratio, hungry listers or not: an unpaced
    # stream is in a partition below its cap, which more streams would list faster. Measured with yield_util and
    # not kept; 0: no such pieces, as the fleet
    yield_push_ratio: float = 0.0
    # the engine's estimates of a remainder replaced by the model's true counts wherever the engine makes one
    # (``OracleCursor``): what perfect estimates would buy, a bound for estimators, not a fleet's behaviour
    # (bench/RESULTS.md, 2026-11-28, third session); False: the engine's own, as the fleet
    oracle_estimates: bool = False
    # which of them (ORACLE_SCOPES): "all"; "flat", those not from a tree; "crossing", those of a remainder reaching
    # past pos's directory before its tree is known; "within", those of a remainder inside it
    oracle_scope: str = "all"
    # the tree estimates' directories sized by the true mean keys per directory at their depth (``DepthMeanCursor``):
    # a bound for count-based sizes learnt fleet-wide, not a fleet's behaviour; False: the engine's own
    depth_means: bool = False
    # a Delimiter answer about a level any stream asked before costs nothing and no time (whatever position it was
    # asked from): a bound for sharing the answers fleet-wide, not a fleet's behaviour; False: each is a request
    shared_dir_answers: bool = False
    # fleet.Lister.wanted: a run that never saw a 503 enters the endgame once the fleet's pace is known and the
    # lister has run endgame_quiet_s; False: only after a throttled phase (the fleet before 2026-11-27's second
    # session)
    endgame_unthrottled: bool = True
    # whose requests one Pacer paces: "stream" (each its own, as fleet.Lister.throttle_for) or "lister" (all its
    # streams: the fleet before 2026-11-26's second session)
    pace_per: str = "stream"
    # fleet.Lister: idle streams scan again every scan interval while they stay idle, and a lister whose last
    # idle stream got a queued piece is no longer hungry; False: no scan after a claim until a stream frees
    # (the model before 2026-11-23, which left the streams of a lister holding one unsplittable piece idle for
    # seconds)
    rescan: bool = True
    # open ranges one scan may claim (fleet.Lister._scan): 1, the lister's other idle streams being fed by
    # its own splits or its next scan; more (every range found, one per idle stream, as the fleet did before
    # 2026-11-23) made hungry listers race for the same few items at the end of a run
    claim_found: int = 1
    max_ways: int = 64
    memo: bool = (
        False  # skip split attempts on a cursor whose last attempt returned nothing (faster, inexact model)
    )
    split_cpu_s: float = 0.0  # CPU charged per split attempt (0: free; measured cost in the report)
    # faults
    faults: float = 0.0  # fraction of LIST attempts that fail: 503 SlowDown, 500, reset (equally)
    kill: float = 0.0  # fraction of listers killed at a uniformly random time in kill_window
    kill_window: tuple[float, float] | None = None  # default: (start-up, start-up + 0.8 x listing floor)
    pace: bool = False  # the listers pace their pages (hpcstage.inventory.pacing.Pacer), as the fleet does
    # items the outstanding-range counter is spread over, a range's count kept in the item its id hashes to
    # (fleet.py: COUNTER_SHARDS; 1 models the fleet before issue 9's change: the count on the meta item, no
    # read after a finish)
    counter_shards: int = COUNTER_SHARDS
    # platform
    ddb_median_s: float = 0.006
    ddb_sigma: float = 0.3
    ddb_wcap: int = 1000  # write units per partition per second
    ddb_rcap: int = 3000
    sfn_start_s: float = 0.1
    launcher_threads: int = LAUNCH_THREADS  # fleet.launch's Invokes at once
    invoke_s: float = 0.02
    send_success_s: float = 0.05
    reduce_fixed_s: float = 1.0  # the Reduce Lambda's cold start (and Step Functions' hop to it)
    reduce_parallel: int = 64
    # fleet.reduce_run, measured by bench/reduce_cost.py (see bench/RESULTS.md): the CPU it takes on this
    # machine (base, per lease item, per segment, per roll-up; scaled to the Lambda by LambdaParams.vcpu),
    # and the bytes of a lease item (plus per segment it holds) that its Query pages through
    # (`python -m bench.reduce_cost`, four builds from 200 leases/400 segments/100 roll-ups to 400/1,200/1,000,
    # 0.22-0.53 CPU-s at load 4-7, a rough fit: 0.19 s + 0.1 ms a lease + 0.05 ms a segment + 0.17 ms a
    # roll-up; then less what fleet._plain saved converting a lease item, measured alternately in one process:
    # 0.082 -> 0.031 ms for an item of three segments, ~0.01 ms a lease and ~0.013 ms a segment. bench/RESULTS.md)
    reduce_cpu_s: tuple[float, float, float, float] = (0.19, 0.00009, 0.000037, 0.00017)
    reduce_lease_item_bytes: int = 461
    reduce_segment_bytes: int = 184
    # fleet._done_from_rollups: the CPU of a lease record read from a roll-up (per record, per segment it
    # holds: decompression, JSON, Lease.from_record, the id and sidecar sets, Lease.result; 35,000 records
    # timed in one process, 20-24 us a record of one segment, 37-40 of two, 49-60 of four; bench/RESULTS.md).
    # bench.reduce_cost's builds of 200 and 800 leases (100 roll-ups) differ by less than its noise (0.07-0.08
    # CPU-s each). A roll-up's compressed bytes without records (~50 prefixes), and a record's (35 records of
    # dated keys with one or two segments, zlib: 112 bytes each)
    # With the collector paused during the reduce (fleet.gc_paused, 2026-11-25): `python -m bench.reduce_records
    # --records 50000` (the whole records path: decompression, JSON, records, statistics merged, results,
    # tiling) 17.0 us a record of one segment and 20.0 of two, against 30.1 and 39.1 with it running; so
    # 14 us + 3 us a segment (before: 12 + 10, timed without the merge and the tiling, collector running)
    reduce_record_cpu_s: tuple[float, float] = (0.000014, 0.000003)
    # the records path's fixed CPU: `python -m bench.reduce_cost` with records, 200-400 leases, 100-1,000
    # roll-ups, four rounds each (2026-11-25, load ~2): 0.063-0.068 CPU-s with 100 roll-ups, 0.21 with 1,000,
    # i.e. 0.17 ms a roll-up (reduce_cpu_s's figure) and ~0.04 s besides. reduce_cpu_s's 0.19 s base came
    # from builds measured at load 4-7 and stays the lease path's
    reduce_records_base_s: float = 0.04
    reduce_rollup_bytes: int = 3300
    reduce_record_bytes: int = 115
    # a 1 MB Query page (assumption: DynamoDB publishes no latency per page size)
    ddb_page_s: float = 0.05
    # The lister that ends the listing reduces the run itself (fleet.Lister.reduce_here) when its Lambda has
    # REDUCE_MARGIN_S of lister_timeout_s left: its reads and writes, then SendTaskSuccess, no Reduce Lambda.
    # False: the path before (and the fallback): SendTaskSuccess, then the Reduce Lambda (reduce_fixed_s).
    reduce_in_lister: bool = True
    lister_timeout_s: float = 900.0
    cold_sigma: float = 0.2

    def label(self) -> str:
        if self.mode == "host":
            return f"host S={self.streams}"
        if self.mode == "static":
            return f"static {self.static_ranges}"
        return f"fleet {self.listers}x{self.per_lister}"


class PageKeys(Sequence[str]):
    """The keys of ranks [r0, r0 + n), built when indexed."""

    __slots__ = ("_key", "r0", "n")

    def __init__(self, key: Callable[[int], str], r0: int, n: int) -> None:
        self._key = key
        self.r0 = r0
        self.n = n

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self._key(self.r0 + i)

    def __iter__(self) -> Iterator[str]:
        for i in range(self.n):
            yield self._key(self.r0 + i)


# Range bounds as comparable tuples: start None = -inf, end None = +inf.
def _lo(x: str | None) -> tuple[int, str]:
    return (0, "") if x is None else (1, x)


def _hi(x: str | None) -> tuple[int, str]:
    return (2, "") if x is None else (1, x)


def complement(root: KeyRange, pieces: Sequence[tuple[str | None, str | None]]) -> list[tuple[Any, Any]]:
    """The parts of ``root`` = (start_after, end] not covered by the disjoint ``pieces`` (lo, hi]."""
    out: list[tuple[Any, Any]] = []
    cur = _lo(root.start_after)
    for lo, hi in sorted(pieces, key=lambda p: _lo(p[0])):
        a, b = _lo(lo), _hi(hi)
        if a > cur:
            out.append((cur, a))
        cur = max(cur, b)
    end = _hi(root.end)
    if cur < end:
        out.append((cur, end))
    return out


# An open-range item's attributes other than its bounds and the donor's directory knowledge (keys, names,
# estimate, expiry), bytes: a write costs one unit per KB of the item (a delete, per KB of the item deleted).
OPEN_ITEM_BASE_BYTES = 120


def open_item_bytes(p: KeyRange) -> int:
    """The size of one open-range item (fleet.FleetStore._open_put)."""
    size = OPEN_ITEM_BASE_BYTES + sum(len(x.encode()) for x in (p.start_after or "", p.end or ""))
    text = p.known_text()
    if text is not None:
        size += len(text.encode()) + len("known")
    return size


def open_item_kb(p: KeyRange) -> int:
    """Write units of one open-range item: 1 per KB."""
    return max(1, math.ceil(open_item_bytes(p) / 1024))


def _bound(t: tuple[int, str]) -> str | None:
    return None if t[0] != 1 else t[1]


class Lease:
    __slots__ = ("lid", "root", "owner", "renewed", "committed", "donated", "live", "done", "shard", "part")

    def __init__(self, lid: int, root: KeyRange, owner: Node, now: float) -> None:
        self.lid = lid
        self.root = root
        self.owner = owner
        self.renewed = now
        self.committed: dict[str, tuple[str | None, str | None]] = {}
        self.donated: list[KeyRange] = []
        self.live = 0  # pieces of this lease its owner still holds (listing, queued, being published)
        self.done = False
        self.shard = (lid * 2654435761) % LEASE_SHARDS  # fleet: a hash of the range id
        self.part = f"lease:{self.shard}"


class Stream:
    __slots__ = (
        "sid",
        "node",
        "state",
        "cursor",
        "lease",
        "pid",
        "piece_sa",
        "start_rank",
        "rank",
        "end_rank",
        "ck_rank",
        "since_ck",
        "last",
        "synced",
        "nosplit",
        "epoch",
        "hold",
        "pacer",
        "sent_at",
        "yielded_at",
        "paced_since",
    )

    def __init__(self, sid: int, node: Node) -> None:
        self.sid = sid
        self.node = node
        self.state = "idle"
        self.cursor: Cursor | None = None
        self.lease: Lease | None = None
        self.pid = ""
        self.piece_sa: str | None = None
        self.start_rank = self.rank = self.end_rank = self.ck_rank = 0
        self.since_ck = 0
        self.last: tuple[int, int, bool] | None = None
        self.synced = True
        self.nosplit = False
        self.epoch = 0
        self.hold = 0.0  # its next LIST waits for the directory requests of a split (Cursor.explore)
        self.pacer = Pacer(0.0)  # its own, when Config.pace_per is "stream"
        self.sent_at = 0.0  # when its attempt in flight was sent
        self.yielded_at = -math.inf  # when it last gave its remainder back (Config.yield_util)
        # since when its pacer holds a rate, as its answers saw (Config.yield_after_s)
        self.paced_since: float | None = None


class Node:
    """One process: the host, or one lister Lambda."""

    __slots__ = (
        "nid",
        "streams",
        "idle",
        "queue",
        "listing",
        "cpu_free",
        "cpu_per_page",
        "k",
        "pacer",
        "quota",
        "alive",
        "invoked",
        "started",
        "ended",
        "leases",
        "hungry",
        "claiming",
        "home",
        "scan_home",
        "last_exp",
        "pages",
        "scan_step",
        "scan_plan",
        "scan_turn",
        "lease_turn",
        "fleet_size",
        "scan_every",
        "unrolled",
        "unrolled_done",
        "rolled",
        "t503_written",
        "fleet_t503",
        "endgame",
        "last_poll",
        "pending",
        "hunger_counted",
        "told_left",
        "told_pages",
        "told_held",
        "told_ranges",
        "page_s",
        "pace",
        "eg_floor",
        "fresh_open",
        "poll_factor",
    )

    def __init__(self, nid: int, k: int, cpu_per_page: float, quota: int, home: int) -> None:
        self.nid = nid
        self.k = k
        self.streams = [Stream(i, self) for i in range(k)]
        self.idle: deque[Stream] = deque(self.streams)
        self.queue: deque[tuple[KeyRange, Lease | None]] = deque()
        self.listing = 0  # streams holding a piece (listing, waiting for a paced slot or checkpointing)
        self.cpu_free = 0.0
        self.cpu_per_page = cpu_per_page
        self.pacer = Pacer(0.0)
        self.quota = quota
        self.alive = True
        self.invoked = 0.0
        self.started = 0.0
        self.ended: float | None = None
        self.leases: list[Lease] = []
        self.hungry = False
        # its ADD +1 is in its hunger item (on_hunger_inc): what unhunger takes back
        self.hunger_counted = False
        self.claiming = False
        self.home = home  # its hunger item
        self.scan_home = home  # the shard of open ranges it scans first (set by the sim)
        self.last_exp = -1e9
        self.pages = 0
        self.last_poll = -1e9
        # its next read of the hunger items comes this times Config.poll_s after the last (Config.hungry_poll)
        self.poll_factor = 1.0
        self.pending = 0  # claims in flight (Config.claim_found)
        self.scan_step = 0
        self.scan_plan: list[int] = []  # the other shards the scan under way reads after the home one
        self.scan_turn = 0  # fleet.Lister.scan_shards' rotation (a random start, set by the sim)
        self.lease_turn = 0  # fleet.Lister.lease_scan_shards' rotation (set by the sim, as scan_turn)
        self.fleet_size = 1  # the listers it counts alive (fleet.Lister._fleet_size)
        self.scan_every = 0.25
        self.unrolled = 0  # sidecars committed since the lister's last roll-up (fleet.Lister.write_rollup)
        # leases this lister finished since its last roll-up: their records are not in the store yet
        # (fleet.Lister.finished_lease)
        self.unrolled_done = 0
        self.rolled = False  # a roll-up of this lister is in the store
        self.t503_written = -math.inf  # when it last wrote a 503's time into its hunger item
        self.fleet_t503 = -math.inf  # the latest 503 it read in the hunger items
        self.endgame = False  # its last read of the hunger items showed no 503 for Config.endgame_quiet_s
        # fleet.Lister.tell_progress / endgame_floor: what it last told its hunger item of its pages left and
        # listed, its page time (a moving average of its answered attempts), the fleet's pace from its reads,
        # and the endgame's split floor of its last read
        self.told_left = 0
        self.told_pages = 0
        self.told_held = 0
        self.told_ranges = 0
        self.page_s: float | None = None
        self.pace = FleetPace()
        self.eg_floor = ENDGAME_MIN_SPLIT_PAGES
        # Config.yield_util: when it last looked, and whether open ranges not given back were there
        self.fresh_open = (-math.inf, False)


@dataclass
class Shard:
    """A hunger item (fleet.FleetStore.hunger_key)."""

    hunger: int = 0
    # the last 503 SlowDown a lister of this hunger shard wrote (Config.endgame_quiet_s)
    t503: float = -math.inf
    # its listers' pages left by estimate and pages listed, as they told (fleet.FleetStore.add_progress)
    left: int = 0
    pages: int = 0
    held: int = 0  # the same pages left, not clipped (fleet.HungerRead.held), in this many ranges
    ranges: int = 0


@dataclass
class Result:
    shape: str
    n: int
    mode: str
    label: str
    seed: int
    makespan: float = 0.0
    floor: float = 0.0
    efficiency: float = 0.0
    list_requests: int = 0  # answered (billed) LIST requests
    list_attempts: int = 0
    min_requests: int = 0
    overhead: float = 0.0
    empty_pages: int = 0
    dir_requests: int = 0  # ListObjectsV2 with Delimiter sent to find directories (in list_requests)
    # Config.shared_dir_answers: answers about a level asked before (not requests)
    shared_dir_answers: int = 0
    dir_faults: int = 0  # failed attempts of those (Config.faults; in faults and list_attempts)
    known_pieces: int = 0  # pieces given with their donor's directory knowledge (steal.Cursor.knowledge)
    known_dirs: int = 0  # directory names those pieces carried
    split_attempts: int = 0
    splits: int = 0  # successful engine splits (local and published)
    published: int = 0  # ranges published to the fleet
    publishes: int = 0
    publish_failed: int = 0
    claims: int = 0
    claim_conflicts: int = 0
    throttled: int = 0  # 503 from the partition rate limit
    faults: dict[str, int] = field(default_factory=dict)
    giveups: int = 0
    killed: int = 0
    adoptions: int = 0
    relisted_objects: int = 0
    ddb_calls: dict[str, int] = field(default_factory=dict)
    ddb_wru: int = 0
    ddb_rru: int = 0
    ddb_waits: int = 0
    ddb_peak_write: int = 0
    ddb_peak_read: int = 0
    ddb_peak_write_part: str = ""
    parts: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    exact: bool = False
    exact_detail: str = ""
    objects: int = 0
    bytes: int = 0
    lambda_gb_s: float = 0.0
    cost: dict[str, float] = field(default_factory=dict)
    min_pace_rate: float = 0.0  # the lowest pacing rate any lister set, requests/s (0: never paced)
    rollups: int = 0  # roll-ups the listers wrote (fleet.Lister.write_rollup)
    local_claims: int = 0  # local pieces their donor's own streams claimed
    reduce_leases: int = 0  # lease items the reduce read (0 when the roll-ups' records sufficed)
    reduce_records: int = 0  # lease records the reduce read in the roll-ups
    reduce_rollups: int = 0  # roll-up items the reduce read (a Query per roll-up shard)
    reduce_cpu_s: float = 0.0  # the reduce's CPU on the reducing Lambda
    straggler_shares: int = 0  # hunger reads that gave a straggler's pieces (fleet.straggler_share)
    yields: int = 0  # remainders paced streams gave back (Config.yield_util)
    pushes: int = 0  # splits of unpaced streams while the fleet was throttled (Config.yield_push_ratio)
    local_stolen: int = 0  # local pieces another lister claimed before their donor's streams could
    reduce_reads: int = 0  # statistics sidecars the reduce read: those no roll-up covers
    reduce_in_lister: bool = (
        False  # the winning lister reduced the run (Config.reduce_in_lister, and time left)
    )
    # per second of the run: [pages answered, 503s, split attempts, splits, directory requests]
    timeline: list[list[int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Sim:
    def __init__(self, ks: Keyspace, cfg: Config, seed: int = 1, params: SimParams = DEFAULT) -> None:
        self.ks = ks
        self.n = ks.n
        self.key = ks.root.key
        self.cfg = cfg
        self.p = params
        self.seed = seed
        self._depth_means: dict[int, float] | None = None  # Config.depth_means: computed at the first piece
        # the levels any stream asked S3 about (Config.shared_dir_answers)
        self.levels_asked: set[str] = set()
        self.rng = random.Random(seed * 1_000_003 + 17)
        self.q: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self.now = 0.0
        sp = params.s3
        self.partitions = max(1, math.ceil(self.n / sp.objects_per_partition))
        self.part_bounds = [self.n * i // self.partitions for i in range(1, self.partitions)]
        self.s3_limit = int(sp.partition_rate_limit)
        self.s3_win: dict[tuple[int, int], int] = {}
        self.policy = SplitPolicy(min_split_pages=cfg.min_split_pages, page_keys=PAGE, max_ways=cfg.max_ways)
        self.endgame_policy = SplitPolicy(
            min_split_pages=min(cfg.min_split_pages, cfg.endgame_min_split_pages),
            page_keys=PAGE,
            max_ways=cfg.max_ways,
        )
        self._ids = itertools.count(1)
        self.committed: list[tuple[int, int]] = []
        self.objects = 0
        self.bytes = 0
        self.res = Result(ks.name, self.n, cfg.mode, cfg.label(), seed)
        self.res.faults = {v: 0 for v in FAULT_NAMES.values()}
        self.nodes: list[Node] = []
        self.shards = [Shard() for _ in range(cfg.shards)]  # hunger items
        self.opens: list[list[KeyRange]] = [[] for _ in range(cfg.open_shards)]  # open ranges by shard
        self.counter = 0
        self.live = 0  # listers started and not exited (a killed one stays counted, as in the store)
        self.done_flag = False
        self.leases: list[Lease] = []
        self.dead_leases: list[Lease] = []
        self.ddb_w: dict[tuple[str, int], int] = {}
        self.ddb_r: dict[tuple[str, int], int] = {}
        self.list_end: float | None = None
        self.end: float | None = None
        self.min_rate = math.inf
        self.tl: dict[int, list[int]] = {}
        self.local: set[str] = set()  # ids of the pieces a lister split off for its own streams (fleet)
        # the local pieces still queued at their donor, by id: open items in the store like any donated piece
        # (fleet.Lister.give donates every piece), so another lister may claim one first (steal_local)
        self.local_queued: dict[str, Node] = {}
        self.item_counts: dict[str, int] = {}  # ranges each counter item counts (counter_shards > 1)
        self.yielded: set[str] = set()  # ids of the remainders paced streams gave back (Config.yield_util)

    # -- the event loop ------------------------------------------------------------------------
    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.q, (t, next(self._seq), fn, args))

    def run(self) -> Result:
        cfg = self.cfg
        if cfg.mode == "host":
            self._start_host()
        else:
            self._start_fleet()
        q = self.q
        while q:
            t, _, fn, args = heapq.heappop(q)
            self.now = t
            fn(*args)
        return self._finish()

    def new_id(self) -> str:
        return f"p{next(self._ids)}"

    def lognorm(self, sigma: float) -> float:
        return math.exp(sigma * self.rng.gauss(0.0, 1.0))

    # -- DynamoDB ------------------------------------------------------------------------------
    def ddb(
        self, t: float, kind: str, reads: dict[str, int] | None = None, writes: dict[str, int] | None = None
    ) -> float:
        """Completion time of one DynamoDB call issued at t (waits for per-partition capacity)."""
        cfg = self.cfg
        calls = self.res.ddb_calls
        calls[kind] = calls.get(kind, 0) + 1
        reads = reads or {}
        writes = writes or {}
        while True:
            sec = int(t)
            if all(self.ddb_w.get((p, sec), 0) + u <= cfg.ddb_wcap for p, u in writes.items()) and all(
                self.ddb_r.get((p, sec), 0) + u <= cfg.ddb_rcap for p, u in reads.items()
            ):
                break
            self.res.ddb_waits += 1
            t = sec + 1.0
        for p, u in writes.items():
            self.ddb_w[(p, sec)] = self.ddb_w.get((p, sec), 0) + u
            self.res.ddb_wru += u
        for p, u in reads.items():
            self.ddb_r[(p, sec)] = self.ddb_r.get((p, sec), 0) + u
            self.res.ddb_rru += u
        return t + cfg.ddb_median_s * self.lognorm(cfg.ddb_sigma)

    # -- S3 pages ------------------------------------------------------------------------------
    def issue(self, st: Stream, t: float, attempt: int = 0) -> None:
        """Send the stream's next LIST at virtual time t (>= now); a paced lister sends every attempt, a
        retry included, at its pacer's next slot (fleet: the before-send hook waits for it)."""
        t = max(t, st.hold)
        if self.cfg.pace:
            if t > self.now:  # ask the pacer when the attempt is due, as the fleet's before-send hook does
                self.at(t, self.paced_issue, st, st.epoch, attempt)
                return
            self.paced_issue(st, st.epoch, attempt)
            return
        self.send(st, t, attempt)

    def paced_issue(self, st: Stream, epoch: int, attempt: int) -> None:
        """A paced attempt is due: send it at its slot, or ask again a window later (Pacer.slot)."""
        if st.epoch != epoch or not st.node.alive:
            return
        pacer = self.pacer_of(st)
        if pacer.rate is not None and self.endgame(st.node):
            pacer.release(self.now)
        at = pacer.slot(self.now)
        if at is None:
            self.at(self.now + pacer.window_s, self.paced_issue, st, epoch, attempt)
            return
        self.send(st, at, attempt)

    def send(self, st: Stream, t: float, attempt: int) -> None:
        st.sent_at = t
        r0 = st.rank
        r1 = min(self.n, r0 + PAGE)
        sp = self.p.s3
        w = (bisect.bisect_right(self.part_bounds, r0), int(t))
        c = self.s3_win.get(w, 0)
        if c >= self.s3_limit:
            outcome = SLOWDOWN
            self.res.throttled += 1
            dt = sp.slowdown_latency_s
        else:
            self.s3_win[w] = c + 1
            if self.cfg.faults and self.rng.random() < self.cfg.faults:
                outcome = 1 + self.rng.randrange(3)
                self.res.faults[FAULT_NAMES[outcome]] += 1
                dt = sp.slowdown_latency_s
                if outcome == RESET:  # the connection dies mid-answer
                    dt = self.rng.random() * (sp.latency_fixed_s + sp.latency_per_key_s * (r1 - r0))
            else:
                outcome = OK
                dt = (sp.latency_fixed_s + sp.latency_per_key_s * (r1 - r0)) * self.lognorm(sp.latency_sigma)
        self.at(t + dt, self.on_reply, st, st.epoch, outcome, attempt, r0, r1)

    def on_reply(self, st: Stream, epoch: int, outcome: int, attempt: int, r0: int, r1: int) -> None:
        node = st.node
        if st.epoch != epoch or not node.alive:
            return
        now = self.now
        res = self.res
        res.list_attempts += 1
        rp = self.p.retry
        if self.cfg.pace:
            self.paced(st, now, outcome == SLOWDOWN)
        if outcome == SLOWDOWN:
            self.tick(1)
        else:
            # fleet.Lister._latency: the page time, a moving average of the attempts S3 answered but with 503
            node.page_s = page_time(node.page_s, now - st.sent_at)
        if outcome != OK:
            # a paced lister retries a 503 SlowDown after at most one pacer window, whatever botocore's
            # retry quota says (fleet._Throttle.retry_delay through s3util's needs-retry hook); every other
            # retry is botocore's standard mode
            paced_slowdown = self.cfg.pace and outcome == SLOWDOWN
            if attempt + 1 >= rp.max_attempts or (
                node.quota < rp.throttling_retry_cost and not paced_slowdown
            ):
                res.giveups += 1
                self.abandon(st, now)
                return
            if node.quota >= rp.throttling_retry_cost:
                node.quota -= rp.throttling_retry_cost
            if paced_slowdown:
                cap = min(2.0**attempt, self.pacer_of(st).window_s)
            else:
                base = rp.base_scale_s if outcome == SLOWDOWN else rp.non_throttling_base_s
                cap = min(base * 2**attempt, rp.max_backoff_s)
            self.issue(st, now + self.rng.random() * cap, attempt + 1)
            return
        node.quota = min(
            rp.quota_capacity, node.quota + (rp.throttling_retry_cost if attempt else rp.success_refund)
        )
        res.list_requests += 1
        node.pages += 1
        self.tick(0)
        end_rank = st.end_rank
        n_in = min(r1, end_rank) - r0
        truncated = r1 < self.n
        done = r1 > end_rank or not truncated
        if n_in == 0:
            res.empty_pages += 1
        st.rank = r0 + n_in
        st.since_ck += 1
        st.last = (r0, r1, truncated)
        st.synced = False
        tc = max(now, node.cpu_free) + node.cpu_per_page
        node.cpu_free = tc
        if done:
            self.checkpoint(st, tc, final=True)
            return
        if self.cfg.yield_util and self.cfg.mode == "fleet" and self.should_yield(st):
            self.yield_rest(st, tc)
            return
        if self.cfg.mode != "host" and st.since_ck >= self.cfg.ckpt_pages:
            self.checkpoint(st, tc, final=False)
            return
        due = self.cfg.poll_s * node.poll_factor
        if self.cfg.page_poll and self.cfg.mode == "fleet" and self.now - node.last_poll >= due:
            # fleet.Lister.wanted, asked after every page: the hunger shards are read at most every poll_s
            self.poll_hunger(node)
        # fleet.Lister.wanted: the lister's idle streams are fed first, by this split; the remote share read
        # from the hunger items follows (on_busy_poll), cut from what the donor kept
        self.maybe_split_local(st)
        self.next_page(st, max(tc, node.cpu_free))

    def should_yield(self, st: Stream) -> bool:
        """Config.yield_util: whether the stream gives the rest of its range back now."""
        cfg, node, now = self.cfg, st.node, self.now
        pacer = self.pacer_of(st)
        if pacer.rate is None:
            st.paced_since = None
            return False
        if st.paced_since is None:
            st.paced_since = now
        if now - st.paced_since < cfg.yield_after_s:
            return False
        if node.page_s is None or pacer.rate * node.page_s >= cfg.yield_util:
            return False
        if now - st.yielded_at < pacer.window_s or st.rank <= st.start_rank or st.cursor is None:
            return False
        if self.left(st) < cfg.yield_min_pages * PAGE:
            return False
        looked, fresh = node.fresh_open
        if now - looked >= YIELD_LOOK_S:
            fresh = any(p.id not in self.yielded for p in self.query_window(self.opens[node.scan_home]))
            self.ddb(now, "query_open", reads={f"open:{node.scan_home}": 1})
            node.fresh_open = (now, fresh)
        return fresh

    def yield_rest(self, st: Stream, t: float) -> None:
        """The stream gives the rest of its range back to the open ranges (committing what it listed: one
        transaction, as fleet.FleetStore.stop_at) and is idle; its next claim prefers ranges not given back."""
        node, cur, lease = st.node, st.cursor, st.lease
        assert cur is not None and lease is not None
        rest_sa = self.key(st.rank - 1)
        left = self.left(st)
        estimate = int(left) if math.isfinite(left) else 0  # unknown: none, as the fleet's deadline remainder
        rest = KeyRange(id=self.new_id(), start_after=rest_sa, end=cur.range.end, estimate=estimate)
        lease.committed[st.pid] = (st.piece_sa, rest_sa)
        lease.live += 1
        self.count_listed(st)
        self.yielded.add(rest.id)
        self.res.yields += 1
        st.yielded_at = self.now
        st.pacer = Pacer(t)
        st.paced_since = None
        self.at(
            self.ddb(t, "yield", writes=self.donate_writes(lease, [rest])),
            self.on_publish,
            node,
            lease,
            [rest],
        )
        self.piece_done(st, t)

    def pacer_of(self, st: Stream) -> Pacer:
        return st.pacer if self.cfg.pace_per == "stream" else st.node.pacer

    def paced(self, st: Stream, now: float, slowdown: bool) -> None:
        """An attempt is answered: the stream's pacer (Config.pace_per) learns it, and whether it was 503 SlowDown, at once
        (as the fleet's needs-retry hook tells it, RequestCounter.on_attempt)."""
        node = st.node
        pacer = self.pacer_of(st)
        pacer.record(now, 1, int(slowdown))
        if pacer.rate is not None:
            self.min_rate = min(self.min_rate, pacer.rate)
        fleet = self.cfg.mode == "fleet"
        if slowdown and fleet and self.cfg.endgame_quiet_s and now - node.t503_written >= pacer.window_s:
            # fleet: the 503's time into the lister's hunger item, at most once a window
            node.t503_written = now
            node.fleet_t503 = max(node.fleet_t503, now)
            t = self.ddb(now, "t503", writes={f"hunger:{node.home}": 1})
            self.at(t, self.on_t503, node.home, now)
        if slowdown:
            # fleet.Lister._slowdown: any 503 of its own ends a lister's endgame
            node.endgame = False

    def on_t503(self, shard: int, t503: float) -> None:
        sh = self.shards[shard]
        sh.t503 = max(sh.t503, t503)

    def tick(self, what: int, n: int = 1) -> None:
        """Count an event in this second of the timeline (see Result.timeline)."""
        row = self.tl.get(int(self.now))
        if row is None:
            row = self.tl[int(self.now)] = [0, 0, 0, 0, 0]
        row[what] += n

    def next_page(self, st: Stream, t: float) -> None:
        self.issue(st, t)

    # -- the engine ------------------------------------------------------------------------------
    def sync(self, st: Stream) -> None:
        """Give the cursor its last page (lazily), and check the engine agrees with the model's count."""
        if st.synced or st.last is None or st.cursor is None:
            return
        r0, r1, truncated = st.last
        # The real cursor takes every page; the simulator hands it only the last one, so first set what the
        # earlier pages would have left: the first key of the range listed and the count taken before r0.
        if r0 > st.start_rank:
            st.cursor.first = self.key(st.start_rank)
            st.cursor.objects = r0 - st.start_rank
            # and where each directory on the last key's path began (Cursor.entered), as take() noted it
            last = self.key(r0 - 1)
            st.cursor.entered = {
                d: max(self.ks.count_lt(d), st.start_rank) - st.start_rank
                for d in dir_levels(last, st.cursor.prefix)[1:]
            }
        n = st.cursor.take(PageKeys(self.key, r0, r1 - r0), truncated, str(r1) if truncated else None)
        if n != st.rank - r0 or st.cursor.done:
            raise AssertionError(
                f"engine and model disagree: take={n} model={st.rank - r0} done={st.cursor.done}"
            )
        st.synced = True

    def dir_listing(self, params: dict[str, Any]) -> tuple[list[str], bool]:
        """S3's CommonPrefixes for a ListObjectsV2 with Delimiter="/" (one page of at most MaxKeys entries)."""
        prefix = params.get("Prefix", "")
        a, b = self.ks.prefix_range(prefix)
        r0 = min(b, max(a, self.ks.count_le(params["StartAfter"])))
        _, common, r1 = self.ks.delimited(prefix, r0, b, params["MaxKeys"], "/")
        return common, r1 < b

    def endgame(self, node: Node) -> bool:
        """fleet.Lister.endgame: no 503 SlowDown in the hunger items for endgame_quiet_s."""
        return node.endgame

    def split_policy(self, node: Node) -> SplitPolicy:
        """The policy of the lister's splits (lister.list_range's): the endgame's floor while in it."""
        if not self.endgame(node):
            return self.policy
        if not self.cfg.endgame_pace:
            return self.endgame_policy
        return replace(self.policy, min_split_pages=node.eg_floor)

    def node_left(self, node: Node) -> tuple[int, int, int]:
        """fleet.Lister.tell_progress: the pages the lister holds by estimate (its listing streams' ranges and
        the pieces queued for its idle ones), each at most PROGRESS_CLIP_FLOORS split floors, and not clipped,
        and the ranges those are in."""
        keys_left = [float(p.estimate) for p, _ in node.queue]
        keys_left += [
            self.left(st) for st in node.streams if st.state == "list" and st.cursor is not None and st.last
        ]
        return progress_told(keys_left, PAGE, self.policy.min_split_pages)

    def tell_progress(self, node: Node, t: float) -> None:
        """fleet.Lister.tell_progress: the change in its pages left and listed, into its hunger item."""
        if not self.cfg.endgame_pace or self.cfg.mode != "fleet":
            return
        left, held, ranges = self.node_left(node)
        d_left, d_pages = left - node.told_left, node.pages - node.told_pages
        d_held, d_ranges = held - node.told_held, ranges - node.told_ranges
        if not d_left and not d_pages and not d_held and not d_ranges:
            return
        node.told_left, node.told_pages, node.told_held, node.told_ranges = left, node.pages, held, ranges
        self.at(
            self.ddb(t, "progress", writes={f"hunger:{node.home}": 1}),
            self.on_progress,
            node.home,
            d_left,
            d_pages,
            d_held,
            d_ranges,
        )

    def on_progress(self, shard: int, d_left: int, d_pages: int, d_held: int = 0, d_ranges: int = 0) -> None:
        sh = self.shards[shard]
        sh.left += d_left
        sh.pages += d_pages
        sh.held += d_held
        sh.ranges += d_ranges

    def engine_split(self, st: Stream, ways: int) -> tuple[list[KeyRange], float]:
        """The donor's split (as lister.list_range does it: directory requests first, when the remainder
        crosses directories); returns the pieces and how long the directory requests took."""
        if st.cursor is None or st.last is None or (self.cfg.memo and st.nosplit):
            return [], 0.0
        self.sync(st)
        self.res.split_attempts += 1
        self.tick(2)
        node = st.node
        if self.cfg.split_cpu_s:
            node.cpu_free = max(self.now, node.cpu_free) + self.cfg.split_cpu_s
        delay = 0.0
        sp = self.p.s3
        sent = 0
        policy = self.split_policy(node)
        while sent < MAX_EXPLORE:
            limit = MAX_EXPLORE - sent if self.cfg.parallel_explore else 1
            queries = st.cursor.explore_all(ways, policy, limit)
            if not queries:
                break
            slowest = 0.0
            for query in queries:
                st.cursor.take_dirs(query, *self.dir_listing(query))
                level = query.get("Prefix", "")
                if self.cfg.shared_dir_answers and level in self.levels_asked:
                    self.res.shared_dir_answers += 1  # the bound: an answer about this level is the fleet's
                    continue
                self.levels_asked.add(level)
                self.res.list_requests += 1
                self.res.list_attempts += 1
                self.res.dir_requests += 1
                self.tick(4)
                lat = self.dir_faults_s()
                lat += (sp.latency_fixed_s + sp.latency_per_key_s * PAGE) * self.lognorm(sp.latency_sigma)
                slowest = max(slowest, lat)
            sent += len(queries)
            delay += slowest  # sent at once (lister.list_range)
        if delay:
            st.hold = max(st.hold, self.now + delay)
        pieces = st.cursor.split(ways, policy, self.new_id)
        if not pieces:
            st.nosplit = True
            return [], delay
        for p in pieces:
            if p.known is not None:
                self.res.known_pieces += 1
                self.res.known_dirs += len(p.known.dirs)
        if st.cursor.done:
            raise AssertionError("a split left its donor done")
        end = st.cursor.range.end
        st.end_rank = self.n if end is None else self.ks.count_le(end)
        if st.end_rank < st.rank:
            raise AssertionError("a split cut below the donor's position")
        self.res.splits += 1
        self.tick(3)
        return pieces, delay

    def dir_faults_s(self) -> float:
        """The failed attempts of one directory request (Config.faults, as for pages: 503, 500 or a reset, each
        retried by botocore's standard mode after its jittered wait): their count goes to the faults and the
        attempts, their time (answer and wait) is returned. The answered attempt follows."""
        cfg = self.cfg
        if not cfg.faults:
            return 0.0
        sp, rp = self.p.s3, self.p.retry
        spent = 0.0
        attempt = 0
        while attempt + 1 < rp.max_attempts and self.rng.random() < cfg.faults:
            outcome = 1 + self.rng.randrange(3)
            self.res.faults[FAULT_NAMES[outcome]] += 1
            self.res.dir_faults += 1
            self.res.list_attempts += 1
            answer = sp.slowdown_latency_s
            if outcome == RESET:
                answer = self.rng.random() * (sp.latency_fixed_s + sp.latency_per_key_s * PAGE)
            base = rp.base_scale_s if outcome == SLOWDOWN else rp.non_throttling_base_s
            spent += answer + self.rng.random() * min(base * 2**attempt, rp.max_backoff_s)
            attempt += 1
        return spent

    def maybe_split_local(self, st: Stream) -> None:
        node = st.node
        if self.cfg.mode == "static":
            return
        w = len(node.idle) - len(node.queue)
        if w <= 0:
            return
        pieces, delay = self.engine_split(st, w + 1)
        if not pieces:
            return
        lease = st.lease
        if lease is not None:
            lease.live += len(pieces)
        t = self.now + delay
        if self.cfg.mode == "fleet" and lease is not None:
            # fleet.Lister.give: every piece, a local one too, is donated through the store (one transaction:
            # the donor's lease, an open item per piece, the outstanding count), then claimed (dispatch)
            self.local.update(p.id for p in pieces)
            t = self.ddb(t, "donate_local", writes=self.donate_writes(lease, pieces))
            self.count(p.id for p in pieces)
        if t > self.now:
            self.at(t, self.queue_pieces, node, lease, pieces)
        else:
            self.queue_pieces(node, lease, pieces)

    def open_shard(self, range_id: str) -> int:
        """The open-range shard a piece is put in (fleet.FleetStore._open_put: by a hash of its id)."""
        return zlib.crc32(range_id.encode()) % len(self.opens)

    def donate_writes(self, lease: Lease, pieces: Sequence[KeyRange]) -> dict[str, int]:
        """Write units of one donate transaction (fleet.FleetStore.donate): the donor's lease, an open item per
        piece (by its size), and the counter items of the pieces' ids."""
        writes = {lease.part: 2}
        for p in pieces:
            counter = self.counter_item(p.id)
            writes[counter] = writes.get(counter, 0) + 2
            shard = f"open:{self.open_shard(p.id)}"
            writes[shard] = writes.get(shard, 0) + 2 * open_item_kb(p)
        return writes

    def counter_item(self, range_id: str) -> str:
        """The item holding the outstanding count of a range (Config.counter_shards; fleet.counter_shard)."""
        n = self.cfg.counter_shards
        return "counter" if n <= 1 else f"counter:{zlib.crc32(range_id.encode()) % n}"

    def count(self, created: Iterator[str] | Sequence[str] = (), finished: str | None = None) -> int:
        """Apply a transaction's counter changes; the finished range's item count after it (0 if none)."""
        for rid in created:
            item = self.counter_item(rid)
            self.item_counts[item] = self.item_counts.get(item, 0) + 1
        if finished is None:
            return 0
        item = self.counter_item(finished)
        self.item_counts[item] = self.item_counts.get(item, 0) - 1
        return self.item_counts[item]

    def completion_read(self, t: float, finished: str, left: int, last: bool) -> float:
        """fleet.notify_if_done after a finish: a consistent GetItem of the finisher's counter item, then, when
        that is 0 (or the run is done), one TransactGetItems of every counter item. Returns its end time."""
        n = self.cfg.counter_shards
        if n <= 1:
            return t  # the fleet before issue 9: the count on the meta item, no read (not modelled)
        t = self.ddb(t, "count_own", reads={self.counter_item(finished): 1})
        if left <= 0 or last:
            t = self.ddb(t, "count_all", reads={f"counter:{i}": 2 for i in range(n)})
        return t

    def queue_pieces(self, node: Node, lease: Lease | None, pieces: list[KeyRange]) -> None:
        for p in pieces:
            if p.id in self.local and lease is not None:
                self.opens[self.open_shard(p.id)].append(p)
                self.local_queued[p.id] = node
        node.queue.extend((p, lease) for p in pieces)
        self.dispatch(node, self.now)

    def steal_local(self, pick: KeyRange) -> None:
        """Another lister claimed a local piece still queued at its donor (its open item went first): the piece
        leaves the donor's queue and lease and becomes a range of its own, as a published piece is."""
        donor = self.local_queued.pop(pick.id)
        at = next((i for i, (piece, _) in enumerate(donor.queue) if piece is pick), None)
        if at is None:
            raise AssertionError(f"local piece {pick.id} not queued at its donor")
        lease = donor.queue[at][1]
        del donor.queue[at]
        assert lease is not None
        self.local.discard(pick.id)
        lease.donated.append(pick)
        lease.live -= 1
        self.counter += 1
        self.res.local_stolen += 1
        if lease.live == 0 and lease.owner is donor and donor.alive:
            self.lease_complete(lease, donor, self.now)

    def dispatch(self, node: Node, t: float) -> None:
        while node.idle and node.queue:
            piece, lease = node.queue.popleft()
            st = node.idle.popleft()
            if piece.id in self.local and lease is not None:
                # a local piece is claimed like any open range (fleet.Lister._claim_queued)
                if self.local_queued.pop(piece.id, None) is not None:
                    self.opens[self.open_shard(piece.id)].remove(piece)
                self.res.local_claims += 1
                shard = f"open:{self.open_shard(piece.id)}"
                if self.cfg.claim_put_first:
                    t_put = self.ddb(t, "claim_local", writes={lease.part: 1})
                    t_claim = self.ddb(t_put, "claim_open_delete", writes={shard: open_item_kb(piece)})
                else:
                    t_claim = self.ddb(
                        t, "claim_local", writes={shard: 2 * open_item_kb(piece), lease.part: 2}
                    )
                self.start_piece(st, piece, lease, t_claim)
            else:
                self.start_piece(st, piece, lease, t)
        if self.cfg.rescan and node.hungry and not node.idle:
            # fleet.Lister.acquire: the lister's last idle stream got work (here a queued piece): not hungry
            self.unhunger(node)
            self.ddb(t, "hunger_dec", writes={f"hunger:{node.home}": 1})

    def start_piece(self, st: Stream, piece: KeyRange, lease: Lease | None, t: float) -> None:
        node = st.node
        if self.cfg.oracle_estimates:
            cur = OracleCursor(piece)
            cur.ks = self.ks
            cur.scope = self.cfg.oracle_scope
        elif self.cfg.depth_means:
            cur = DepthMeanCursor(piece)
            if self._depth_means is None:
                self._depth_means = depth_means(self.ks)
            cur.means = self._depth_means
        else:
            cur = Cursor(piece)
        st.cursor = cur
        req = cur.request(PAGE)
        sa = req.get("StartAfter")
        r = 0 if sa is None else self.ks.count_le(sa)
        st.start_rank = st.rank = st.ck_rank = r
        st.end_rank = self.n if piece.end is None else self.ks.count_le(piece.end)
        st.piece_sa = piece.start_after
        st.pid = piece.id
        st.lease = lease
        st.since_ck = 0
        st.last = None
        st.synced = True
        st.nosplit = False
        st.state = "list"
        st.epoch += 1
        node.listing += 1
        self.next_page(st, t)

    # -- checkpoints and the end of a piece ---------------------------------------------------------
    def count_listed(self, st: Stream) -> None:
        """The keys the stream listed since its last checkpoint join the run's committed keys."""
        if st.rank > st.ck_rank:
            self.committed.append((st.ck_rank, st.rank))
            self.objects += st.rank - st.ck_rank
            self.bytes += self.ks.bytes_between(st.ck_rank, st.rank)
            st.ck_rank = st.rank

    def commit(self, st: Stream, final: bool) -> None:
        self.count_listed(st)
        lease = st.lease
        if lease is not None and st.cursor is not None and (final or st.rank > st.start_rank):
            hi = st.cursor.range.end if final else self.key(st.rank - 1)
            lease.committed[st.pid] = (st.piece_sa, hi)
        st.ck_rank = st.rank
        st.since_ck = 0

    def checkpoint(self, st: Stream, t: float, final: bool) -> None:
        if self.cfg.mode == "host":
            self.commit(st, final)
            if final:
                self.piece_done(st, t)
            else:
                self.next_page(st, t)
            return
        st.state = "ckpt"
        sp = self.p.s3
        t1 = t + sp.put_latency_s * self.lognorm(sp.latency_sigma)
        assert st.lease is not None
        t2 = self.ddb(t1, "checkpoint", writes={st.lease.part: 1})
        self.at(t2, self.on_ckpt, st, st.epoch, final)

    def on_ckpt(self, st: Stream, epoch: int, final: bool) -> None:
        node = st.node
        if st.epoch != epoch or not node.alive:
            return
        lease = st.lease
        assert lease is not None
        if lease.owner is not node:  # the lease was taken over: its new owner re-lists what we did not commit
            self.drop(st)
            return
        self.commit(st, final)
        lease.renewed = self.now
        self.res.parts += 1
        node.unrolled += 1
        if final:
            self.piece_done(st, self.now)
        else:
            st.state = "list"
            self.maybe_split_local(st)
            self.next_page(st, max(self.now, node.cpu_free))

    def abandon(self, st: Stream, t: float) -> None:
        """Retries exhausted: commit what was listed and queue the remainder again (same lease)."""
        node = st.node
        cur = st.cursor
        assert cur is not None
        rest_sa = cur.range.start_after if st.rank == st.start_rank else self.key(st.rank - 1)
        rest = KeyRange(id=self.new_id(), start_after=rest_sa, end=cur.range.end)
        if self.cfg.mode != "host":
            lease = st.lease
            assert lease is not None
            if st.rank > st.start_rank:
                lease.committed[st.pid] = (st.piece_sa, rest_sa)
            lease.live += 1
        self.count_listed(st)
        node.queue.append((rest, st.lease))
        # the requeued piece starts after a pause: the stream is idle at t + 1 s
        self.piece_done(st, t)

    def drop(self, st: Stream) -> None:
        node = st.node
        st.state = "idle"
        st.cursor = None
        st.epoch += 1
        node.listing -= 1
        node.idle.append(st)
        self.check_idle(node, self.now)

    def piece_done(self, st: Stream, t: float) -> None:
        node = st.node
        st.state = "idle"
        st.cursor = None
        st.epoch += 1
        node.listing -= 1
        lease = st.lease
        st.lease = None
        node.idle.append(st)
        if lease is not None and st.pid in self.local:
            # fleet.FleetStore.finish: a local piece is a lease of its own, done in one transaction
            self.local.discard(st.pid)
            node.unrolled_done += 1
            t_fin = self.ddb(t, "finish_local", writes={lease.part: 2, self.counter_item(st.pid): 2})
            self.completion_read(t_fin, st.pid, self.count(finished=st.pid), last=False)
        if lease is not None:
            lease.live -= 1
            if lease.live == 0:
                self.lease_complete(lease, node, t)
        self.dispatch(node, t)
        self.check_idle(node, t)

    def check_idle(self, node: Node, t: float) -> None:
        mode = self.cfg.mode
        if mode == "fleet":
            if not node.listing and node.alive:
                self.tell_progress(node, t)  # fleet.Lister.acquire: nothing listing here
            if not node.listing and node.unrolled and node.alive:
                # fleet.Lister.write_rollup: nothing listing here, so the lister writes its roll-up (a PUT,
                # then the item naming it; the listing goes on meanwhile)
                sp = self.p.s3
                t_put = t + sp.put_latency_s * self.lognorm(sp.latency_sigma)
                self.ddb(t_put, "rollup", writes={"rollup": 1})
                node.unrolled = 0
                node.unrolled_done = 0
                node.rolled = True
                self.res.rollups += 1
            # like fleet.Lister.acquire: any idle stream with nothing queued locally looks for work in the store
            if node.idle and not node.queue:
                self.claim_poll(node, t)
            return
        if node.listing or node.queue:
            return
        if mode == "host":
            self.list_end = t
            self.end = t
        else:
            self.exit(node, t)

    def exit(self, node: Node, t: float) -> None:
        if node.ended is None:
            node.ended = t
            if self.cfg.mode == "fleet":
                self.live -= 1

    # -- host --------------------------------------------------------------------------------------
    def _start_host(self) -> None:
        cfg = self.cfg
        node = Node(0, cfg.streams, cfg.host_cpu_per_page_s / cfg.host_cpus, self.p.retry.quota_capacity, 0)
        self.nodes.append(node)
        node.queue.append((KeyRange(id="r0"), None))
        self.dispatch(node, 0.0)

    # -- fleet: launch -------------------------------------------------------------------------------
    def _start_fleet(self) -> None:
        cfg = self.cfg
        lp = self.p.lam
        t = cfg.sfn_start_s + lp.cold_start_s * self.lognorm(cfg.cold_sigma)
        self.res.phases["launcher_ready"] = t
        if cfg.mode == "static":
            count = cfg.static_ranges
            ranges = static_ranges(count)
            k = 1
            self.counter = len(ranges)
        else:
            count = cfg.listers
            ranges = []
            k = cfg.per_lister
            root = KeyRange(id="r0")
            t = self.ddb(
                t, "put_root", writes={f"open:{self.open_shard(root.id)}": 2, self.counter_item("r0"): 2}
            )
            self.count(["r0"])
            self.opens[self.open_shard(root.id)].append(root)
            self.counter = 1
        first = None
        last = 0.0
        for i in range(count):
            issued = t + (i // cfg.launcher_threads + 1) * cfg.invoke_s
            # Lambda scaling: a token bucket of scale_burst environments refilled at scale_per_s
            if i >= lp.scale_burst:
                issued = max(issued, t + (i - lp.scale_burst + 1) / lp.scale_per_s)
            start = issued + lp.cold_start_s * self.lognorm(cfg.cold_sigma)
            node = Node(i, k, lp.cpu_per_page_s, self.p.retry.quota_capacity, i % cfg.shards)
            node.invoked = issued
            node.started = start
            # the rotation's start (random in the fleet; a hash of the index here, so that the seeded draws
            # of the rest of the run stay as they were)
            # fleet.launch: the first listers look first in their seed's shard, the others in their hunger shard's
            node.scan_home = (
                self.open_shard("r0") if i == 0 or cfg.mode != "fleet" else node.home % cfg.open_shards
            )
            node.scan_turn = (i * 2654435761) % max(1, cfg.open_shards - 1)
            node.lease_turn = (i * 40503) % LEASE_SHARDS
            node.fleet_size = max(1, count)
            self.nodes.append(node)
            first = start if first is None else min(first, start)
            last = max(last, start)
            if cfg.mode == "static":
                rng_ = ranges[i % len(ranges)] if i < len(ranges) else None
                if rng_ is not None:
                    lease = Lease(len(self.leases), rng_, node, start)
                    lease.live = 1
                    self.leases.append(lease)
                    node.leases.append(lease)
                    node.queue.append((rng_, lease))
                self.at(start, self._node_start, node)
            else:
                self.at(start, self._node_start, node)
                self.at(start + self.rng.random() * cfg.poll_s, self.busy_timer, node)
        self.res.phases["launcher_done"] = t + (count // cfg.launcher_threads + 1) * cfg.invoke_s
        self.res.phases["first_lister"] = first or 0.0
        self.res.phases["last_lister"] = last
        if cfg.kill and cfg.mode == "fleet":
            lo, hi = cfg.kill_window or (last, last + 0.8 * self.listing_floor())
            victims = self.rng.sample(range(count), round(cfg.kill * count))
            for v in sorted(victims):
                self.at(self.rng.uniform(lo, hi), self.kill, self.nodes[v])

    def _node_start(self, node: Node) -> None:
        if self.cfg.mode == "static":
            self.dispatch(node, self.now)
            self.check_idle(node, self.now)
        else:
            self.live += 1  # fleet.Lister.run: +1 on its hunger shard's live count
            self.claim_poll(node, self.now)

    def kill(self, node: Node) -> None:
        if not node.alive or node.ended is not None:
            return
        node.alive = False
        node.ended = self.now
        self.res.killed += 1
        for lease in node.leases:
            if not lease.done and lease.owner is node:
                self.dead_leases.append(lease)

    # -- fleet: claiming ---------------------------------------------------------------------------
    def claim_poll(self, node: Node, t: float) -> None:
        """An idle stream looks for work (fleet.Lister._scan): its home shard of open ranges first, then the
        next ⌈(shards - 1) / listers alive⌉ others of its rotation (fleet.Lister.scan_shards); one Query each."""
        if node.claiming or not node.alive or node.ended is not None:
            return
        node.claiming = True
        if node.scan_step == 0:
            shard = node.scan_home
            others = self.cfg.open_shards - 1
            k = min(others, max(1, -(-others // node.fleet_size))) if others else 0
            turn = node.scan_turn
            node.scan_turn = (turn + k) % others if others else 0
            node.scan_plan = [o + (o >= shard) for o in ((turn + j) % others for j in range(k))]
        else:
            shard = node.scan_plan[node.scan_step - 1]
        # a Query reads 1 unit per 4 KB of the items it returns (Limit 10)
        size = sum(open_item_bytes(p) for p in self.opens[shard][:10])
        reads = {f"open:{shard}": max(1, math.ceil(size / 4096))}
        self.at(self.ddb(t, "query_open", reads=reads), self.on_query, node, shard)

    def query_window(self, found: list[KeyRange]) -> list[KeyRange]:
        """The open ranges one Query of a shard returns (Limit 10): fleet.FleetStore.open_ranges starts it at a
        random position of the shard (wrapping), so that hungry listers scanning one shard do not all try the same
        first items."""
        if len(found) <= 10:
            return found[:10]
        at = self.rng.randrange(len(found))
        return [found[(at + i) % len(found)] for i in range(10)]

    def on_query(self, node: Node, shard: int) -> None:
        if not node.alive:
            return
        now = self.now
        cfg = self.cfg
        node.claiming = False
        if not node.idle or node.queue:
            return
        if self.done_flag:
            if not node.listing:
                self.exit(node, now)
            return
        found = self.opens[shard]
        items = self.query_window(found) if cfg.rescan else found[:10]
        if items:
            node.scan_step = 0
            node.scan_every = cfg.idle_poll_s
            if cfg.claim_largest:
                # not the fleet's (Config.claim_largest): the largest found first, equal ones in random order
                self.rng.shuffle(items)
                items.sort(key=lambda p: -(p.estimate or 0))
                items = items[: max(1, min(len(node.idle), cfg.claim_found))]
            if cfg.yield_util:
                # Config.yield_util: ranges paced streams gave back are claimed last
                items = [p for p in items if p.id not in self.yielded] or items
            take = max(1, min(len(items), len(node.idle), cfg.claim_found))
            if cfg.claim_weighted:
                # not the fleet's (Config.claim_weighted): the ranges found, in random order weighted by size
                picks = claim_order(items, self.rng)[:take]
            else:
                picks = self.rng.sample(items, take)
            node.claiming = True
            node.pending = len(picks)
            for i, pick in enumerate(picks):
                lid = len(self.leases) + i
                part = f"lease:{(lid * 2654435761) % LEASE_SHARDS}"
                if cfg.claim_put_first:
                    # the lease's Put (1 unit: a new lease item is under 1 KB); the winner deletes the open item
                    # after (on_claim)
                    writes = {part: 1}
                else:
                    # the transactional delete of the open item costs 2 units per KB of it
                    writes = {f"open:{shard}": 2 + 2 * open_item_kb(pick), part: 2}
                if node.hungry and i == len(picks) - 1:
                    # the lister's hunger ADD -1: on its own (1 unit), or in the claim's transaction (2)
                    writes[f"hunger:{node.home}"] = 1 if cfg.claim_put_first else 2
                self.at(self.ddb(now, "claim", writes=writes), self.on_claim, node, shard, pick)
            return
        if node.scan_step < len(node.scan_plan):
            node.scan_step += 1  # this shard was empty: the next one of the scan at once
            self.claim_poll(node, now)
            return
        node.scan_step = 0
        node.fleet_size = max(1, self.live)  # the meta item's live, read by a scan that found nothing
        if now - node.last_exp >= cfg.lease_s / 4:
            # fleet.Lister._scan: at most every lease_s / 4, the next ⌈64 / listers alive⌉ lease partitions of
            # its rotation, one Query each (at once); a Query reads every item of its partition (the filter
            # on state and lease_until drops the rest after the read): a unit per 4 KB
            node.last_exp = now
            node.claiming = True
            k = min(LEASE_SHARDS, max(1, -(-LEASE_SHARDS // node.fleet_size)))
            shards = [(node.lease_turn + j) % LEASE_SHARDS for j in range(k)]
            node.lease_turn = (node.lease_turn + k) % LEASE_SHARDS
            per_shard = (self.res.claims + self.res.local_claims + 1) / LEASE_SHARDS
            units = max(1, math.ceil(per_shard * cfg.reduce_lease_item_bytes / 4096))
            reads = {f"lease:{sh}": units for sh in shards}
            self.at(self.ddb(now, "query_expired", reads=reads), self.on_exp_query, node, set(shards))
            return
        if not node.hungry:
            node.hungry = True
            node.claiming = True
            self.at(self.ddb(now, "hunger_inc", writes={f"hunger:{node.home}": 1}), self.on_hunger_inc, node)
            return
        # nothing anywhere it looked: back off (up to 8x) until something is found
        wait = node.scan_every
        node.scan_every = min(8 * cfg.idle_poll_s, 2 * node.scan_every)
        self.at(now + wait, self.claim_poll, node, now + wait)

    def on_hunger_inc(self, node: Node) -> None:
        if not node.alive:
            return
        # fleet.Lister._set_hungry: the lister's ADD +1 and its later ADD -1 go one after the other (its
        # hunger lock), so the count is exact. Here the +1 lands a write's latency after the lister turned
        # hungry: when it got work meanwhile (unhunger before this), the pair cancels out. (The model before
        # 2026-11-26's third session added the +1 anyway and skipped a -1 that found the item at 0: a 1B run
        # kept one hungry lister in the items from t = 18 s to its end, with no lister hungry, and every busy
        # lister gave a piece every poll; bench/RESULTS.md.)
        if node.hungry and not node.hunger_counted:
            self.shards[node.home].hunger += 1
            node.hunger_counted = True
        node.claiming = False
        self.claim_poll(node, self.now)

    def unhunger(self, node: Node) -> None:
        """fleet.Lister._set_hungry(False): the lister's +1 leaves its hunger item (if it landed)."""
        node.hungry = False
        if node.hunger_counted:
            node.hunger_counted = False
            self.shards[node.home].hunger -= 1

    def on_claim(self, node: Node, shard: int, pick: KeyRange) -> None:
        if not node.alive:
            return
        node.pending -= 1
        last = node.pending <= 0
        if last:
            node.claiming = False
        s = self.opens[shard]
        if pick not in s:
            self.res.claim_conflicts += 1
            if last:
                self.claim_poll(node, self.now)
            return
        s.remove(pick)
        if pick.id in self.local_queued:
            self.steal_local(pick)
        self.res.claims += 1
        if node.hungry and len(node.idle) <= 1:
            self.unhunger(node)
        lease = Lease(len(self.leases), pick, node, self.now)
        lease.live = 1
        self.leases.append(lease)
        node.leases.append(lease)
        node.queue.append((pick, lease))
        t = self.now
        if self.cfg.claim_put_first:
            # fleet.FleetStore.claim: the lease is this lister's; it deletes the open item before it lists
            t = self.ddb(t, "claim_open_delete", writes={f"open:{shard}": open_item_kb(pick)})
        self.dispatch(node, t)
        if last and self.cfg.rescan and node.idle and not node.queue:
            # fleet.Lister.acquire: the streams still idle scan again, at most every scan interval
            self.at(self.now + node.scan_every, self.claim_poll, node, self.now + node.scan_every)

    def on_exp_query(self, node: Node, shards: set[int]) -> None:
        if not node.alive:
            return
        now = self.now
        cands = [
            lz
            for lz in self.dead_leases
            if not lz.done and lz.renewed + self.cfg.lease_s < now and lz.shard in shards
        ]
        if not cands:
            node.claiming = False
            if not node.hungry:
                self.claim_poll(node, now)
            else:
                self.at(now + self.cfg.idle_poll_s, self.claim_poll, node, now + self.cfg.idle_poll_s)
            return
        lease = min(cands, key=lambda lz: (lz.renewed, lz.lid))
        self.at(self.ddb(now, "adopt", writes={lease.part: 1}), self.on_adopt, node, lease, lease.owner)

    def on_adopt(self, node: Node, lease: Lease, old: Node) -> None:
        if not node.alive:
            return
        node.claiming = False
        if lease.owner is not old or lease.done or old.alive:
            self.claim_poll(node, self.now)
            return
        self.dead_leases.remove(lease)
        lease.owner = node
        lease.renewed = self.now
        node.leases.append(lease)
        self.res.adoptions += 1
        # the dead donor's local pieces still queued are open items: they stay open, as donated pieces
        for piece, queued in list(old.queue):
            if queued is lease and self.local_queued.get(piece.id) is old:
                self.steal_local(piece)
        covered = list(lease.committed.values()) + [(d.start_after, d.end) for d in lease.donated]
        gaps = complement(lease.root, covered)
        lease.live = len(gaps)
        for a, b in gaps:
            piece = KeyRange(id=self.new_id(), start_after=_bound(a), end=_bound(b))
            node.queue.append((piece, lease))
            self.res.relisted_objects += max(0, keys_in(self.ks, piece.start_after, piece.end))
        if lease.live == 0:
            self.lease_complete(lease, node, self.now)
        self.dispatch(node, self.now)
        self.check_idle(node, self.now)

    # -- fleet: hunger and publishing ------------------------------------------------------------------
    def busy_timer(self, node: Node) -> None:
        if not node.alive or node.ended is not None:
            return
        now = self.now
        cfg = self.cfg
        self.at(now + cfg.poll_s, self.busy_timer, node)
        if not node.listing:
            return
        for lease in node.leases:
            if not lease.done and lease.owner is node and now - lease.renewed > cfg.lease_s / 3:
                self.at(self.ddb(now, "heartbeat", writes={lease.part: 1}), self.on_heartbeat, node, lease)
        if not cfg.page_poll:
            self.poll_hunger(node)

    def poll_hunger(self, node: Node) -> None:
        node.last_poll = self.now
        self.tell_progress(node, self.now)
        reads = {f"hunger:{i}": 1 for i in range(self.cfg.shards)}
        self.at(self.ddb(self.now, "poll_busy", reads=reads), self.on_busy_poll, node)

    def on_heartbeat(self, node: Node, lease: Lease) -> None:
        if node.alive and lease.owner is node:
            lease.renewed = self.now

    def on_busy_poll(self, node: Node) -> None:
        if not node.alive or not node.listing:
            return
        node.fleet_t503 = max(node.fleet_t503, max(s.t503 for s in self.shards))
        q = self.cfg.endgame_quiet_s
        node.endgame = bool(q) and node.fleet_t503 > -math.inf and self.now - node.fleet_t503 >= q
        pace = node.pace.read(self.now, max(0, sum(s.pages for s in self.shards)))
        if (
            self.cfg.endgame_unthrottled
            and q
            and node.fleet_t503 == -math.inf
            and pace is not None
            and self.now - node.started >= q
        ):
            # fleet.Lister.wanted: a run never throttled, once the pace is known (ENDGAME_QUIET_S)
            node.endgame = True
        if node.endgame and self.cfg.endgame_pace:
            hi = self.policy.min_split_pages
            lo = self.endgame_policy.min_split_pages
            told = max(0, sum(s.left for s in self.shards))
            node.eg_floor = endgame_floor(told, pace, node.page_s, lo, hi, stale_s=self.cfg.poll_s / 2)
        # fleet.Lister.wanted: the hunger shards hold the hungry listers and the live ones; each busy
        # lister serves its share of the hunger (twice over: shares are uneven) in each poll window
        hunger = sum(s.hunger for s in self.shards)
        # Config.hungry_poll (not the fleet's): the next read sooner during the ramp while the fleet is mostly hungry
        ramp = node.fleet_t503 == -math.inf and pace is None
        node.poll_factor = self.cfg.hungry_poll if ramp and hunger > self.live - hunger else 1.0
        if hunger <= 0 and not self.cfg.straggler_ratio:
            return
        # fleet.Lister.wanted/give: the hunger read goes to the lister's stream with the most keys left by
        # estimate (Cursor.left_by_estimate, unknown first), then, when its split gives nothing, to the next.
        # It gives at once: after its page, or while its next page is awaited (every GIVE_WHILE_WAITING_S).
        cands = [s for s in node.streams if s.state == "list" and s.cursor is not None and s.last]
        self.rng.shuffle(cands)
        if self.cfg.largest_first:
            cands.sort(key=lambda s: -self.left(s))
        # the lister's share (fleet.hunger_share): by what its largest stream holds, or the fair share only
        largest = self.left(cands[0]) if cands else 0.0
        left = largest if self.cfg.share_by_size else 0.0
        floor = self.split_policy(node).min_split_pages
        k = hunger_share(hunger, self.live, left, PAGE, floor) if hunger > 0 else 0
        if self.cfg.straggler_ratio and cands:
            # fleet.straggler_share: the largest stream's pieces, hungry listers or not, beside the hunger's
            most = self.cfg.publish_ways
            strag = straggler_share(
                largest, self.mean_remainder(), PAGE, floor, most, self.cfg.straggler_ratio
            )
            if strag:
                self.res.straggler_shares += 1
            k += strag
        for st in cands:
            if k <= 0:
                break
            pieces, delay = self.engine_split(st, min(k, self.cfg.publish_ways) + 1)
            if pieces:
                k -= len(pieces)
                self.publish(st, pieces, delay)
        if self.cfg.yield_push_ratio and self.now - node.fleet_t503 < YIELD_PUSH_S:
            self.push(node, cands)

    def publish(self, st: Stream, pieces: list[KeyRange], delay: float) -> None:
        """Donate ``pieces`` of ``st``'s range to the open ranges (fleet.FleetStore.donate)."""
        lease = st.lease
        assert lease is not None
        lease.live += len(pieces)
        t = self.ddb(self.now + delay, "publish", writes=self.donate_writes(lease, pieces))
        self.at(t, self.on_publish, st.node, lease, pieces)

    def mean_remainder(self) -> float:
        """The fleet's mean remainder a range, from the hunger items (fleet.Lister.wanted: held / ranges)."""
        held = max(0, sum(s.held for s in self.shards))
        ranges = sum(s.ranges for s in self.shards)
        return held / ranges if ranges > 0 else 0.0

    def push(self, node: Node, cands: list[Stream]) -> None:
        """Config.yield_push_ratio: the lister's largest unpaced stream gives pieces as a straggler's at that
        ratio (the fleet saw a 503 lately: streams are paced elsewhere, and this partition is below its cap)."""
        unpaced = [
            s for s in cands if s.state == "list" and s.cursor is not None and self.pacer_of(s).rate is None
        ]
        if not unpaced:
            return
        st = max(unpaced, key=self.left)
        floor = self.split_policy(node).min_split_pages
        k = straggler_share(
            self.left(st),
            self.mean_remainder(),
            PAGE,
            floor,
            self.cfg.publish_ways,
            self.cfg.yield_push_ratio,
        )
        if k <= 0:
            return
        pieces, delay = self.engine_split(st, k + 1)
        if pieces:
            self.res.pushes += 1
            self.publish(st, pieces, delay)

    @staticmethod
    def left(st: Stream) -> float:
        """fleet._Stream.left: the keys left in the stream's range by its estimate (the model's count of keys
        listed: the cursor holds only the last page)."""
        assert st.cursor is not None
        return st.cursor.left_by_estimate(st.rank - st.start_rank)

    def on_publish(self, node: Node, lease: Lease, pieces: list[KeyRange]) -> None:
        if not node.alive:
            return
        k = len(pieces)
        if lease.owner is node:
            # hunger is the hungry listers' own count (fleet.Lister._set_hungry): donors do not lower it.
            # Each piece goes to the shard its id hashes to (fleet.FleetStore._open_put).
            for p in pieces:
                self.opens[self.open_shard(p.id)].append(p)
            self.count(p.id for p in pieces)
            self.counter += k
            lease.donated.extend(pieces)
            lease.live -= k
            self.res.publishes += 1
            self.res.published += k
            if lease.live == 0:
                self.lease_complete(lease, node, self.now)
        else:
            self.res.publish_failed += 1
            node.queue.extend((p, lease) for p in pieces)
            self.dispatch(node, self.now)

    # -- completion ----------------------------------------------------------------------------------
    def lease_complete(self, lease: Lease, node: Node, t: float) -> None:
        t2 = self.ddb(t, "lease_done", writes={lease.part: 2, self.counter_item(lease.root.id or "r0"): 2})
        self.at(t2, self.on_lease_done, lease, node)

    def on_lease_done(self, lease: Lease, node: Node) -> None:
        if not node.alive or lease.owner is not node or lease.done:
            return
        lease.done = True
        node.unrolled_done += 1
        self.counter -= 1
        rid = lease.root.id or "r0"
        t = self.completion_read(self.now, rid, self.count(finished=rid), last=self.counter == 0)
        if self.counter == 0:
            if t > self.now:
                self.at(t, self.all_done, t, node)
            else:
                self.all_done(self.now, node)

    def reduce_work_s(self, get_mean: float, put_mean: float) -> float:
        """fleet.reduce_run's time once the listing is done: its requests, one after another where the code
        waits for each, then its CPU on the reducing Lambda (bench/reduce_cost.py; Config.reduce_*).

        The listers' roll-ups record the leases they finished (fleet.Lister.finished_lease); when they record
        every lease the run created, the reduce reads no lease item (fleet._done_from_rollups). A lister killed
        with records not yet in its roll-up leaves them missing: the reduce reads the roll-ups ROLLUP_READS
        times, ROLLUP_WAIT_S apart, then every lease item, as before records."""
        cfg = self.cfg
        ddb = cfg.ddb_median_s * math.exp(cfg.ddb_sigma**2 / 2)
        rollups = sum(1 for node in self.nodes if node.rolled)
        unrolled = sum(node.unrolled for node in self.nodes)
        leases = self.res.claims + self.res.local_claims + 1  # every piece claimed is a lease item, and r0
        segments = self.res.parts
        missing = sum(node.unrolled_done for node in self.nodes if not node.alive)
        self.res.reduce_reads = unrolled
        self.res.reduce_rollups = rollups
        self.res.reduce_records = leases - missing
        base, per_lease, per_segment, per_rollup = cfg.reduce_cpu_s
        per_record, per_record_segment = cfg.reduce_record_cpu_s
        # the roll-up Queries, one per shard at once: the records make the roll-ups larger
        rollup_mb = (rollups * cfg.reduce_rollup_bytes + leases * cfg.reduce_record_bytes) / 1e6
        rollup_read = ddb + cfg.ddb_page_s * max(1.0, rollup_mb / ROLLUP_SHARDS)
        # the meta item, the counters' TransactGetItems, the roll-ups
        t = ddb + ddb + rollup_read
        cpu = cfg.reduce_records_base_s + per_rollup * (rollups + unrolled) + per_record * leases
        cpu += per_record_segment * segments
        if missing:
            self.res.reduce_leases = leases
            lease_bytes = leases * cfg.reduce_lease_item_bytes + segments * cfg.reduce_segment_bytes
            # read again while waiting for records, then the lease Queries, one per lease partition,
            # LEASE_READERS at a time (each a call, and ddb_page_s per MB it reads)
            t += (ROLLUP_READS - 1) * (ROLLUP_WAIT_S + rollup_read)
            rounds = math.ceil(LEASE_SHARDS / LEASE_READERS)
            t += rounds * (ddb + lease_bytes / LEASE_SHARDS / 1e6 * cfg.ddb_page_s)
            cpu += base - cfg.reduce_records_base_s + per_lease * leases + per_segment * segments
            cpu += (ROLLUP_READS - 1) * per_rollup * rollups
        else:
            self.res.reduce_leases = 0
        # the sidecars no roll-up covers, 64 GETs at a time
        t += math.ceil(unrolled / cfg.reduce_parallel) * get_mean
        if self.res.adoptions:
            # a lease was taken over: the reduce lists data/ for orphan parts (remove_orphan_parts)
            t += get_mean + math.ceil(self.res.parts / PAGE) * self.mean_page_s()
        # the manifest's three objects at once, then the summary and reports, athena.sql, the _latest pointer
        t += 4 * put_mean
        self.res.reduce_cpu_s = cpu / self.p.lam.vcpu
        return t + self.res.reduce_cpu_s

    def all_done(self, t: float, winner: Node | None = None) -> None:
        """The listing ended at ``t``, seen by ``winner`` (the lister whose finish brought the count to 0)."""
        cfg = self.cfg
        sp = self.p.s3
        self.list_end = t
        get_mean = sp.get_latency_s * math.exp(sp.latency_sigma**2 / 2)
        put_mean = sp.put_latency_s * math.exp(sp.latency_sigma**2 / 2)
        work_s = self.reduce_work_s(get_mean, put_mean)
        in_lister = (
            cfg.reduce_in_lister
            and cfg.mode == "fleet"
            and winner is not None
            and cfg.lister_timeout_s - (t - winner.invoked) >= REDUCE_MARGIN_S
        )
        self.res.reduce_in_lister = in_lister
        if in_lister:  # reduce, then SendTaskSuccess; AllListed goes straight to NotifyCompleted
            reduce_s = work_s
            self.end = t + reduce_s + cfg.send_success_s
        else:  # SendTaskSuccess, then the Reduce state's Lambda
            reduce_s = cfg.reduce_fixed_s + work_s
            self.end = t + cfg.send_success_s + reduce_s
        self.res.phases["list_end"] = t
        self.res.phases["reduce_s"] = reduce_s
        writes = {f"hunger:{i}": 1 for i in range(cfg.shards)}
        self.at(self.ddb(t, "done_flag", writes=writes), self._set_done)

    def _set_done(self) -> None:
        self.done_flag = True

    # -- results -----------------------------------------------------------------------------------
    def mean_page_s(self) -> float:
        sp = self.p.s3
        return (sp.latency_fixed_s + sp.latency_per_key_s * PAGE) * math.exp(sp.latency_sigma**2 / 2)

    def listing_floor(self) -> float:
        cfg = self.cfg
        pages = max(1, math.ceil(self.n / PAGE))
        rate = pages / (self.partitions * self.p.s3.partition_rate_limit)
        if cfg.mode == "host":
            cpu = cfg.host_cpu_per_page_s / cfg.host_cpus
            return max(pages * (self.mean_page_s() + cpu) / cfg.streams, rate, pages * cpu)
        cpu = self.p.lam.cpu_per_page_s
        streams = cfg.static_ranges if cfg.mode == "static" else cfg.listers * cfg.per_lister
        return max(pages * (self.mean_page_s() + cpu) / streams, rate)

    def _finish(self) -> Result:
        res = self.res
        cfg = self.cfg
        lp = self.p.lam
        res.makespan = self.end if self.end is not None else math.inf
        startup = 0.0 if cfg.mode == "host" else cfg.sfn_start_s + 2 * lp.cold_start_s + cfg.invoke_s
        res.floor = self.listing_floor() + startup
        res.efficiency = res.floor / res.makespan if res.makespan > 0 else 0.0
        res.min_requests = max(1, math.ceil(self.n / PAGE))
        res.overhead = res.list_requests / res.min_requests - 1
        res.objects = self.objects
        res.bytes = self.bytes
        res.min_pace_rate = 0.0 if self.min_rate == math.inf else self.min_rate
        res.timeline = [self.tl.get(sec, [0, 0, 0, 0, 0]) for sec in range(max(self.tl, default=-1) + 1)]
        # exactness: committed rank intervals tile [0, n) once; counts and bytes agree with the model
        problems = []
        pos = 0
        for a, b in sorted(self.committed):
            if a > pos:
                problems.append(f"gap [{pos},{a})")
            elif a < pos:
                problems.append(f"overlap [{a},{min(pos, b)})")
            pos = max(pos, b)
        if pos != self.n:
            problems.append(f"ends at {pos} != {self.n}")
        if self.objects != self.n:
            problems.append(f"objects {self.objects} != {self.n}")
        if self.bytes != self.ks.bytes_between(0, self.n):
            problems.append("bytes differ")
        if self.end is None:
            problems.append("never finished")
        if cfg.mode != "host":
            for lease in self.leases:
                covered = list(lease.committed.values()) + [(d.start_after, d.end) for d in lease.donated]
                if not lease.done:
                    problems.append(f"lease {lease.lid} not done")
                elif complement(lease.root, covered):
                    problems.append(f"lease {lease.lid} not covered")
        res.exact = not problems
        res.exact_detail = "; ".join(problems[:5])
        if cfg.mode != "host":
            self._fleet_costs(res)
        else:
            res.cost = {"list": res.list_requests * self.p.s3.list_price_per_1000 / 1000}
            res.cost["total"] = res.cost["list"]
        return res

    def _fleet_costs(self, res: Result) -> None:
        lp = self.p.lam
        end = self.end if self.end is not None else self.now
        gb_s = 0.0
        for node in self.nodes:
            stop = node.ended if node.ended is not None else end
            gb_s += max(0.0, stop - node.invoked) * lp.memory_gb
        launcher = res.phases.get("launcher_done", 0.0) - self.cfg.sfn_start_s
        reduce_s = res.phases.get("reduce_s", 0.0)
        # the Reduce function has 2 GB; a lister that reduces bills it at its own memory
        gb_s += launcher * 1.0 + reduce_s * (lp.memory_gb if res.reduce_in_lister else 2.0)
        res.lambda_gb_s = gb_s
        for (p, _), c in self.ddb_w.items():
            if c > res.ddb_peak_write:
                res.ddb_peak_write, res.ddb_peak_write_part = c, p
        res.ddb_peak_read = max(self.ddb_r.values(), default=0)
        # a lister that reduces spares the Reduce state (one transition) and the Reduce function's invoke
        transitions = 5 if res.reduce_in_lister else 6
        invokes = len(self.nodes) + (1 if res.reduce_in_lister else 2)
        res.cost = {
            "list": res.list_requests * self.p.s3.list_price_per_1000 / 1000,
            "lambda": gb_s * lp.price_gb_s + invokes * lp.price_per_request,
            "sfn": transitions * self.p.sfn.price_per_transition,
            "dynamodb": res.ddb_wru * 1.25e-6 + res.ddb_rru * 0.25e-6,
            # PUTs: each part and its sidecar, the roll-ups, the reduce's outputs; GETs: the reduce's reads
            "s3_put_get": (res.parts * 2 + res.rollups + 1) * 0.005 / 1000 + res.reduce_reads * 0.0004 / 1000,
        }
        res.cost["total"] = sum(res.cost.values())
        res.phases["listers_exited"] = max((nd.ended or 0.0) for nd in self.nodes)


def static_ranges(count: int) -> list[KeyRange]:
    """``count`` ranges of equal width over the UTF-8 byte space (no hints, no learned alphabet)."""
    frame = ByteInterval(b"", b"\xf4\x90")
    cuts: list[str] = []
    for i in range(1, count):
        c = frame.at(i / count)
        if c is not None and (not cuts or c > cuts[-1]):
            cuts.append(c)
    bounds: list[str | None] = [None, *cuts, None]
    return [KeyRange(id=f"s{i}", start_after=a, end=b) for i, (a, b) in enumerate(itertools.pairwise(bounds))]


def sequential_time(n: int, params: SimParams = DEFAULT, cpu_per_page_s: float = 0.0044) -> float:
    """One paginator: the mean page time times the pages (the sum of ~n/1000 i.i.d. draws)."""
    sp = params.s3
    pages = max(1, math.ceil(n / PAGE))
    mean = (sp.latency_fixed_s + sp.latency_per_key_s * PAGE) * math.exp(sp.latency_sigma**2 / 2)
    return pages * (mean + cpu_per_page_s)


def simulate(ks: Keyspace, cfg: Config, seed: int = 1, params: SimParams = DEFAULT) -> Result:
    return Sim(ks, cfg, seed, params).run()
