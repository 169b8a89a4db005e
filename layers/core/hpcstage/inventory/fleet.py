"""The Lambda fleet: listers that run several streams each and steal work from each other through DynamoDB.

One inventory run ("run") is a set of key ranges that tile the key space of the bucket/prefix. Every range is
in exactly one of three places, all in one DynamoDB table (PK ``pk``, SK ``sk``, TTL ``expires``):

- **open**: ``pk=run#<run>#open#<s>`` (s = 0..15, by a hash of the range id), ``sk=<range id>``: nobody lists
  it; ``start_after``/``end`` bound it.
- **leased**: ``pk=run#<run>#lease#<l>`` (l = 00..63, by a hash of the range id: write sharding, as the
  counters; a lease is written at every checkpoint and renewal), ``sk=<range id>``: a stream of one lister lists it. The lease records the
  owner, ``lease_until`` (epoch ms), the ``checkpoint`` (the last key durably written), the Parquet ``parts``
  and ``stats`` sidecars written so far, and the objects/bytes/requests/retries they hold. ``state`` is
  ``leased`` or, once listed, ``done``.
- the **meta** item ``pk=run#<run>``, ``sk=meta``: the Step Functions task token of the current launch, its
  ``generation``, ``live`` listers, ``started``, and ``complete`` once the run's completion was reported.
- the **counter** items ``pk=run#<run>#outstanding#<c>``, ``sk=count`` (c = 0..15): ``n``, how many of the
  ranges not done (open + leased) have an id with ``crc32(id) % 16 = c``. Their sum is the run's outstanding
  ranges (see *the outstanding-range counter* below).

Hunger counters (``pk=run#<run>#hunger#<h>``, h = 0..15, ``sk=count``: one partition key each, as the counters;
a thousand busy listers read all sixteen twice a second) say how many listers have idle streams and found
nothing to do; busy streams read them (one BatchGetItem per lister at most every ``hunger_poll_s``) and split.
They also hold the newest 503 SlowDown a lister of the shard saw (``t503``), and its listers' pages left by
estimate and pages listed (``left``, ``pages``: the endgame's split floor, ``endgame_floor``).

The protocol (every write conditional, so a lister that lost a race or its lease never corrupts the run):

- **owner** is unique per acquisition (lister id + a random tag), not per lister: after a takeover two
  streams of one lister could otherwise both pass ``owner = me`` on the same range and count it twice.
- **claim**: Put lease (attribute_not_exists), then Delete open: the lease item decides who owns a
  range, the open item only where to look (``FleetStore.claim``).
- **donate**: TransactWriteItems {Update own lease ``end = cut`` (owner = me, state = leased) + Put each
  piece as an open item + ``ADD n, c`` to the counter items of the pieces' ids, one Update per item (``n``
  the ranges outstanding, ``c`` the ranges ever created)}. Pieces come from ``Cursor.split``, so the
  ranges in play always tile the key space.
- **checkpoint** (every ``checkpoint_pages`` pages): close the segment's Parquet part(s) and write a stats
  sidecar for exactly those rows (unique keys: range id + a per-acquisition tag + a segment number), then
  UpdateItem the lease: set checkpoint, append the parts and the sidecar, add the counters, renew the lease --
  condition owner = me and state = leased. If the condition fails the lease was taken over: the part is an
  orphan that no lease names, so it never enters the manifest and no key is counted twice.
- **finish**: the last segment's checkpoint plus ``state = done`` in one TransactWriteItems with ``n -= 1``
  on the counter item of the range's id.
- **deadline**: near the Lambda's timeout a stream stops at a page boundary; its lease becomes ``done`` with
  ``end = checkpoint`` and the remainder ``(checkpoint, end]`` is put back as a new open range in the same
  transaction, with ``n -= 1`` on the lease's counter item and ``n += 1, c += 1`` on the remainder's (one
  Update when both ids hash to the same item). A lease with nothing listed is simply re-opened under its own id
  (counters unchanged).
- **roll-up**: a lister merges the statistics of each segment whose checkpoint committed; when none of its
  streams is listing, and when it exits, it puts them with the list of sidecars they cover, zlib-compressed,
  in its item ``pk=run#<run>#rollup#<crc32(owner) % S>, sk=<owner>`` (S = ``rollup_shards``: 16, or
  ``max_listers`` when fewer; in an object ``rollups/<owner>-<n>.json`` the item names, when larger than
  ROLLUP_INLINE_MAX). The reduce Queries the S roll-up partitions, merges the roll-ups and reads only the sidecars none covers (a dead lister's last
  segments, a lister still writing): a Query per ~300 listers instead of a GET per checkpoint. A roll-up naming a sidecar no lease holds,
  or one another roll-up covered, is not used, so no segment counts twice. The roll-up also carries the
  record of every lease its lister finished (``Lease.record``: range, counts, parts, sidecars; the lease as
  its item holds it, which the lister mirrors after each of its writes). When the records name as many
  distinct ranges as the counter items' ``c`` says the run created, they are every done lease, and the reduce
  reads no lease item (at 1B objects ~35,000 items, ~8.5 s of the winner's CPU in the simulator); else (a
  lister died between its last finish and its roll-up) it waits a little for late roll-ups, then reads the
  lease items as before.
- **takeover**: an idle lister Queries lease partitions for ``state = leased`` and ``lease_until < now`` (the
  next ⌈64 / listers alive⌉ of its rotation over the 64, at most every ``lease_s / 4``: the listers between
  them read every partition, a lister alone reads all; ``Lister.lease_scan_shards``) and takes one over with ``SET owner = me, lease_until = ...`` conditioned on ``lease_until`` being the value
  it read; it resumes from the checkpoint. A heartbeat thread renews the leases of a lister's live streams
  every ``lease_s / 3``; a lister that dies loses only what it listed after its last checkpoint.
- **completion**: a transaction returns no values, so whoever finishes a range then reads its own counter
  item (consistent GetItem); if that is 0 it reads all 16 in one TransactGetItems and, when they sum to 0,
  tries ``UpdateItem SET notified = task_token, complete = true`` conditioned on ``notified <> task_token``:
  exactly one caller per launch wins and calls SendTaskSuccess {done: true}; a lister that wins first
  reduces the run itself when it has the time (``Lister.reduce_here``) and answers {done: true, reduced:
  <reduce_run's output>}, so the state machine skips its Reduce state. The launcher tries the same
  after writing a new token, so a run that finished while a launch timed out is still reported. The last
  lister of a launch to exit (``live`` reaches 0, the run not ``complete``) reads the sum: with work left it
  reports {done: false} so the state machine launches again without waiting for its task timeout; with none
  (the last finisher died between its finish and its check) it claims the notification itself. Idle listers
  poll only the meta item's ``complete`` (one GetItem), never the 16 counter items.

The outstanding-range counter (write sharding). One item lives on one partition, which serves at most 1,000
write units a second, and a transactional write costs 2 units per item: with every donate (local splits
included) and every finish writing one counter item, the simulator counted 21,451 write waits on it at 100M
objects, none with 16 items (bench/RESULTS.md, issue 9). DynamoDB's guide recommends spreading such a key over several partition keys with
a suffix, random or *calculated* from the item ("Using write sharding to distribute workloads evenly",
docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-sharding.html); here the suffix is
calculated, ``crc32(range id) % 16``, so that each item counts a definite set of ranges:

- *Exact, never negative.* A range is counted in the transaction that creates it (launch seeds, donate, the
  deadline remainder), in the item of its own id, and uncounted in the transaction that makes it done (finish,
  deadline), in the same item; both transactions are conditioned on the lease (owner = me, state = leased),
  so each happens once per range. Every item therefore equals, at every instant, the number of open or leased
  ranges whose id hashes to it. (Updates to one item are combined: DynamoDB refuses two actions on one item in
  one TransactWriteItems.)
- *The completeness read is one TransactGetItems.* DynamoDB serializes TransactGetItems with
  TransactWriteItems (a transaction's writes are seen all or none) and refuses it while a write on one of its
  items is in flight (TransactionCanceledException, TransactionConflict: retried, bounded). A BatchGetItem
  reads each item on its own (read-committed, no snapshot across items) and could see 0 early: it reads item
  B (0: the piece does not exist yet), then a donor's transaction adds a piece to B while the donor still
  counts in A, the donor finishes (A: 1 -> 0), and the batch reads A = 0: sum 0, one range outstanding.
- *Nobody sees 0 early.* A range's count is added in the same transaction that creates it, while its donor
  (or the launch) still counts, so in any serializable snapshot the sum is 0 only when no range is open or
  leased; and 0 is final: only a leased range creates ranges.
- *At least one finisher sees 0.* Each finisher writes (its finish) and then reads; the finish that brings the
  sum to 0 is the last write on the counters, so its finisher's read sees 0 (a consistent GetItem of its item,
  then the TransactGetItems). A finisher whose own item still counts a range (read after its finish) knows
  another finish is to come, whose finisher checks in turn: that spares the transactional read of 16 items
  (2 read units each) on all but the last few finishes. If the read keeps conflicting, or the finisher dies
  before it, the last lister's exit and the next launch check again.

Choices (and why):

- *Every range is a lease item, local splits included.* A split kept in memory inside one lease would make
  the lease's checkpoint ambiguous (two streams writing below and above a cut) and would be lost with the
  lister; one lease per range keeps the checkpoint a single key, makes any range recoverable by any lister,
  and costs one transaction per split. The K streams of a lister still meet as ``LocalPool``'s do (idle
  streams minus queued ranges drive splits), but the queue holds ids of open items that must be claimed:
  ``LocalPool`` itself ends when no stream is active and nothing is queued, which is wrong in a fleet where
  work can appear from other listers.
- *Remote hunger is served at most once per hunger poll per lister*: a hunger counter stays positive until
  the hungry lister has claimed something, and without that bound every busy stream of the fleet would
  split for the same idle lister. Over-splitting is harmless to coverage (pieces are claimed by anyone).
- *Throttling (pacing)*: the lister paces its LIST attempts, botocore's retries included, at a rate set
  once a second from the 503 SlowDown answers it saw (``hpcstage.inventory.pacing.Pacer``: cut by half the
  throttled fraction; unpaced again after a second without a 503). An attempt
  waits for its slot in botocore's before-send hook (its lease stays renewed by the heartbeat) instead of
  adding to a prefix that is already throttled; 500s and resets are retried and are not rate signals.
- *Requests* are counted per attempt (``RequestCounter``) and recorded in the lease at each checkpoint;
  requests of a lease that was lost before its checkpoint are added to ``meta.orphan_requests``, which the
  reduce bills as well. Requests a lister sent after its last checkpoint before dying are not recorded.
- *Errors*: an error that every lister would hit (``BucketError``: no bucket, access denied) is recorded
  once in the meta item and fails the launch task (SendTaskFailure) instead of expiring and relaunching
  forever; any other exception ends the lister without cleanup, like a crashed Lambda.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import math
import random
import re
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple

from ..errors import BucketError, IncompleteInventoryError, InputError
from ..inputs import validate
from ..s3util import AccessOptions, RequestCounter, access_summary, as_page
from .directory import DIRECTORY_SUFFIX
from .lister import ListOptions, list_range
from .model import DirKnowledge, KeyRange, PartFile, ShardResult
from .output import S3Store, hive_ddl, hive_root, latest_key, latest_run, record_latest_run, run_root
from .pacing import WINDOW_S, Pacer
from .report import execution_summary
from .runner import finalize, seeds_from_hints
from .steal import DEFAULT_MIN_SPLIT_PAGES, Cursor, SplitPolicy
from .versions import VERSIONS, stats_class, stats_from_dict, writer_class

HUNGER_SHARDS = 16
OPEN_SHARDS = 16
# partition keys of the lease items (by a hash of the range id). A lease is written at each checkpoint and
# renewal: the simulator counts 1,107 lease write units a second on average and 4,613 at peak in a 25M run, and
# more at 1B; one partition key takes 1,000. The reduce Queries the 64, LEASE_READERS at a time (under the
# DynamoDB client's 10 pooled connections).
LEASE_SHARDS = 64
LEASE_READERS = 8
# items the outstanding-range count is spread over (write sharding: see the module docstring)
COUNTER_SHARDS = 16
# TransactGetItems of the counter items refused because a write on one of them was in flight: tries, and the
# first back-off (doubled each try, full jitter)
COUNT_READ_TRIES = 8
COUNT_READ_BACKOFF_S = 0.02
DEFAULT_LEASE_S = 30.0
DEFAULT_CHECKPOINT_PAGES = 50
DEFAULT_MAX_LISTERS = 10
DEFAULT_STREAMS = 8
DEFAULT_MAX_LAUNCHES = 20
# Asynchronous Invokes the launcher sends at once (``launch``; its Lambda client's connection pool is as large:
# functions/inventory_launch/app.py).
LAUNCH_THREADS = 32
# A lister stops this long before its Lambda timeout: last checkpoint, re-open the rest, report.
DEFAULT_STOP_MARGIN_S = 60.0
# The lister that wins the completion notification reduces the run itself (no Reduce Lambda: at 100M objects
# its cold start was ~1 s of a ~28 s run) when its Lambda has at least this long left, else the Reduce state
# does. What reduce_run does at 1B objects (simulator, 1B uniform): 16 roll-up Queries, the LIST of data/ only
# after a takeover, and the manifest, summary, reports, ranges, Hive and _latest PUTs, with the lease records in
# the roll-ups; when a lister died with records unwritten, also the lease Query (~35,000 items in 1 MB pages)
# and their conversion: ~10 s then, ~8.5 s of it CPU on the lister's 0.58 vCPU (bench/reduce_cost.py,
# bench/RESULTS.md). The margin is set for that slower path.
# The costs are lopsided: a lister killed mid-reduce leaves the run to the Launch task's timeout (lister
# timeout + 120 s) and the relaunch's Reduce state, while falling back costs ~1 s; hence ~12x the estimate.
REDUCE_MARGIN_S = 120.0
# A lister's roll-up (its merged statistics and the sidecars they cover) travels inside its DynamoDB item,
# zlib-compressed, when that takes at most this many bytes, and in an S3 object the item names when larger. The
# reduce then reads ~1,000 roll-ups with a Query per roll-up shard instead of a GET each: measured here, a GET
# of a 3.3 KB roll-up costs the client 3.1-4.2 ms of CPU (botocore's request path), ~5-7 s of a lister's
# 0.58 vCPU for 1,000 listers, while the Queries return ~300 such items a request (1 MB pages). A 100,000-key
# roll-up of ~50 prefixes is 3.3 KB of JSON; 16 KB compressed holds a few thousand prefixes and costs at most
# 16 write units a write (DynamoDB bills a unit per KB), so even 1,000 listers writing at once stay within
# the ROLLUP_SHARDS partitions' 1,000 units a second each for about a second.
ROLLUP_INLINE_MAX = 16 * 1024
ROLLUP_SHARDS = 16


def rollup_shards(cfg: FleetConfig) -> int:
    """The roll-up shards of a run: ROLLUP_SHARDS, or one per lister of a smaller fleet (its listers and its
    reduce both know ``max_listers``). The reduce sends one Query per shard: a fleet of one lister (the demo)
    reads its roll-up with one instead of sixteen (0.45 s of the demo's embedded DynamoDB)."""
    return max(1, min(ROLLUP_SHARDS, cfg.max_listers))


# The reduce reads the roll-ups up to this many times, this far apart, until their lease records account for
# every range the run created (a lister writes its roll-up when none of its streams is listing, so the last
# finishers' records may land a few milliseconds after the winner's finish); then it reads the lease items.
ROLLUP_READS = 4
ROLLUP_WAIT_S = 0.25
# Items kept after a run (TTL), long enough for a slow reduce and for debugging.
RUN_TTL_S = 7 * 24 * 3600
# The Parquet parts a reduce removed as orphans (no done lease names them), in the run's root
ORPHANS_KEY = "orphans.json"
PAGE_SIZE = 1000  # keys per ListObjectsV2 page (tests lower it to get many pages from few keys)
# A fleet splits no range into pieces under 16 pages: it has thousands of streams and far fewer are needed to
# reach a partition's request rate; smaller pieces only add requests (each piece ends in a partial page).
# Simulator, 25M uniform: 8 -> 16 pages took LIST overhead from 4.9 % to 1.4 % (14.7 s -> 13.0 s).
# (Tests lower it, to split a few thousand keys.)
MIN_SPLIT_PAGES = 2 * DEFAULT_MIN_SPLIT_PAGES
# The endgame. A lister that sees a 503 SlowDown writes the time into its hunger item (at most once a pacer
# window); a busy lister reads the sixteen items anyway (``wanted``). When the newest 503 there is at least
# ENDGAME_QUIET_S old, after the run was throttled once, the partition is below its cap while the fleet has
# streams to spare: what is left of the listing is the last ranges, and they decide when it ends. Such a
# lister then runs unpaced (``Pacer.release``) and splits down to ENDGAME_MIN_SPLIT_PAGES instead of
# MIN_SPLIT_PAGES; its own next 503 ends its endgame. Simulator: the eight shapes at 100M end 1.6-3.9 s sooner
# for 0.01-0.25 % more LIST requests, at 25M 1.7-4.1 s sooner for 1-4 % more (bench/RESULTS.md). A quiet
# threshold of 0.5 s fired in lulls of the throttled phase (overhead 5.5 % at 100M), and 2-page pieces cost
# 0.3-0.5 % more requests than 4-page ones for a similar end.
# A run that never saw a 503 (its fleet below the partition's cap all along: 25M objects of a shape whose
# ranges come slowly) enters the endgame too, once the fleet's pace is known and the lister has run
# ENDGAME_QUIET_S: its floor (``endgame_floor``) is the policy's while the pages held take the fleet longer than
# a piece of that size takes a stream, so the ramp is not cut finer. Before, such a run kept its tail at the
# policy's floor (simulator, 25M uuid-projects 17.5 -> 13.1 s, multi-tenant seed 1 13.2 -> 11.3 s;
# bench/RESULTS.md, 2026-11-27, second session).
ENDGAME_QUIET_S = 1.0
ENDGAME_MIN_SPLIT_PAGES = DEFAULT_MIN_SPLIT_PAGES / 2
# How small the endgame splits (``endgame_floor``): a piece that a stream lists in the time the fleet needs for
# the work left at its pace ends with the fleet, so only larger remainders are cut, down to that size. The
# listers tell the fleet what they hold (pages left by estimate) and what they listed through their hunger
# items (``FleetStore.add_progress``, at each read of the items); the pace is the fleet's pages between two
# reads at least PACE_MIN_S apart. Before, the endgame cut every remainder down to ENDGAME_MIN_SPLIT_PAGES:
# at 25M objects it began with half the listing left, while the partition was still at its cap, and its
# pieces put twice the streams the partition serves on it (simulator, 25M dated: 2,528 ranges under 16
# pages, 6.95 % LIST overhead; bench/RESULTS.md, 2026-11-26, sixth session).
PACE_MIN_S = 0.4
# A stream tells at most this many split floors of its remainder (``Lister.tell_progress``): the endgame floor
# is at most one, and a few remainders estimated thousands of pages too high swamped the sum (tree estimates
# over uneven fan-outs; simulator, 100M deep-tree: 4,725 pages estimated where 34 were left, the fleet's sum
# three times the truth in the tail).
PROGRESS_CLIP_FLOORS = 4
# Stragglers. The fleet splits on hunger (``hunger_share``), and a run's ramp publishes more pieces than the
# hungry claim: while they wait in the open ranges nobody is hungry, so no range is split, however large. Ranges
# found large only once their streams listed some of them (Zipf-sized tenants behind 5,000 names: two S3
# partitions' 90,000 pages each in the ranges of 100-200 streams) then wait until the open ranges run dry, and
# are cut up too late for the partitions they lie in: a thousand streams crowd them at the end, at the
# partitions' request rate. So a busy
# lister whose largest stream holds more than STRAGGLER_RATIO times the fleet's mean remainder a range
# (pages held by the listers' estimates, unclipped, over the ranges they hold them in: ``HungerRead.held /
# ranges``) gives pieces of it to the open ranges at each read of the hunger items, beside its share of the
# hunger (``straggler_share``). (Simulator, 1B seed 1: hashed-prefix 42.7 -> 38.6 s, multi-tenant 40.8 -> 40.1,
# users 40.8 -> 39.0; at a ratio of 8, the largest open range claimed first, users 45.2: its estimates run
# thousands of pages high. bench/RESULTS.md, 2026-11-27, second session, with the variants tried.)
STRAGGLER_RATIO = 16.0
# The hunger a lister reads from the store goes to its stream with the most keys left (``Lister.wanted``),
# which gives after its page or, while the page is late (a paced slot at the partition's cap), every this many
# seconds from its own thread (``ListOptions.give_while_waiting_s``).
GIVE_WHILE_WAITING_S = 0.05
# TransactWriteItems holds at most 100 items: a donate writes the lease, the pieces and at most COUNTER_SHARDS
# counter items (1 + 64 + 16 = 81)
MAX_PIECES = 64
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")

Clock = Callable[[], float]

logger = logging.getLogger(__name__)


class HungerRead(NamedTuple):
    """The hunger items summed (``FleetStore.hunger``)."""

    hungry: int  # listers with an idle stream that found nothing to claim
    live: int  # listers running
    t503: int  # the newest 503 SlowDown a lister noted (``note_slowdown``; epoch ms, 0: none)
    left: int  # pages the listers hold, by their estimates, as they last told (``add_progress``)
    pages: int  # pages the listers listed, as they last told
    held: int = 0  # pages the listers hold, by their estimates not clipped (``straggler_share``)
    ranges: int = 0  # the ranges they hold those pages in (an unknown or spent estimate not counted)


class CountersBusy(Exception):
    """The counter items could not be read in one TransactGetItems: writes on them kept conflicting."""


class LeaseLost(Exception):
    """The lease this stream held was taken over (or finished) by someone else: stop, write nothing."""


class _Abandon(Exception):
    """The lister is dying (another stream raised): stop without any cleanup, as a crashed Lambda would."""


# --------------------------------------------------------------------------------------------------
# Configuration (the validated execution input)
# --------------------------------------------------------------------------------------------------


@dataclass
class FleetConfig:
    bucket: str
    prefix: str
    run_id: str
    results_bucket: str
    results_prefix: str
    table: str
    max_listers: int = DEFAULT_MAX_LISTERS
    streams: int = DEFAULT_STREAMS
    lease_seconds: float = DEFAULT_LEASE_S
    checkpoint_pages: int = DEFAULT_CHECKPOINT_PAGES
    stats_depth: int = 1
    audit: bool = False
    max_launches: int = DEFAULT_MAX_LAUNCHES
    launch_timeout_seconds: int = 900 + 120
    stop_margin_seconds: float = DEFAULT_STOP_MARGIN_S
    started: str = ""
    versions: bool = False  # every version and delete marker (ListObjectVersions)
    access: dict[str, Any] = field(default_factory=dict)  # s3util.AccessOptions of the target, as a dict

    @property
    def root(self) -> str:
        return run_root(self.results_prefix, self.bucket, self.run_id)

    @property
    def latest_key(self) -> str:
        """Where the last successful run of this target records its root (what an audit seeds from and compares with)."""
        return latest_key(self.results_prefix, self.bucket, self.prefix)

    def store(self, s3: Any) -> S3Store:
        return S3Store(s3, self.results_bucket, self.root)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FleetConfig:
        return cls(**d)


def validate_input(
    event: Any,
    *,
    run_id: str,
    started: str,
    results_bucket: str,
    table: str,
    results_prefix: str = "inventory",
    lister_timeout_s: int = 900,
) -> FleetConfig:
    """Check an execution input against schemas/inventory-input.schema.json (the one documented input of
    the inventory state machine) and fill its defaults; every message is one line saying what is wrong."""
    cfg = validate(event, "inventory-input")
    bucket, prefix = cfg["bucket"], cfg["prefix"]
    # JSON Schema counts characters; S3 limits a key (so a prefix) to 1,024 bytes of UTF-8
    if len(prefix.encode()) > 1024:
        raise InputError("'prefix' must be at most 1,024 bytes of UTF-8 (S3's limit for a key)")
    if ".." in bucket:
        raise InputError(f"'bucket' must be an S3 bucket name (e.g. \"my-data\"), got {json.dumps(bucket)}")
    if bucket.endswith(DIRECTORY_SUFFIX):
        raise InputError(
            f"{bucket} is an S3 Express One Zone directory bucket: its listings are unordered and take no "
            f"StartAfter, so the fleet's key ranges cannot split it; inventory it with "
            f"`hpcstage inventory s3://{bucket}/` (a parallel '/' walk)"
        )
    if not _NAME.match(run_id):
        raise InputError(f"run id {run_id!r} is not a valid name")
    if cfg["audit"] and cfg["versions"]:
        raise InputError(
            "'audit' compares the current objects of two runs; it cannot be combined with 'versions' "
            "(run the audit without 'versions')"
        )
    access = AccessOptions(**cfg["access"])  # the schema checked the fields; this, how they combine
    return FleetConfig(
        bucket=bucket,
        prefix=prefix,
        run_id=run_id,
        results_bucket=results_bucket,
        results_prefix=results_prefix,
        table=table,
        max_listers=cfg["max_listers"],
        streams=cfg["streams"],
        lease_seconds=float(cfg["lease_seconds"]),
        checkpoint_pages=cfg["checkpoint_pages"],
        stats_depth=cfg["stats_depth"],
        audit=cfg["audit"],
        max_launches=cfg["max_launches"],
        launch_timeout_seconds=int(lister_timeout_s) + 120,
        stop_margin_seconds=min(DEFAULT_STOP_MARGIN_S, max(5.0, lister_timeout_s / 4)),
        started=started,
        versions=cfg["versions"],
        access=access.to_dict(),
    )


# --------------------------------------------------------------------------------------------------
# The store: one DynamoDB table
# --------------------------------------------------------------------------------------------------


def _s(v: str | None) -> dict[str, Any]:
    return {"NULL": True} if v is None else {"S": v}


def _n(v: int | float) -> dict[str, str]:
    return {"N": str(int(v))}


def _plain(av: dict[str, Any]) -> Any:
    """A DynamoDB attribute value as plain Python (numbers as int, binary as bytes).

    The store's own reader: boto3's TypeDeserializer (a Decimal per number, then ``_ints``) took most of the
    reduce's CPU per lease item (0.08-0.16 ms an item of three segments here, bench/RESULTS.md), and the reduce
    reads every lease: 35,000 at 1B objects in the simulator."""
    ((tag, v),) = av.items()
    if tag == "S":
        return v
    if tag == "N":
        return _int(v)
    if tag == "M":
        return {k: _plain(x) for k, x in v.items()}
    if tag == "L":
        return [_plain(x) for x in v]
    if tag == "NULL":
        return None
    if tag == "BOOL":
        return bool(v)
    if tag == "B":
        return bytes(v)
    if tag == "SS":
        return set(v)
    if tag == "NS":
        return {_int(x) for x in v}
    if tag == "BS":
        return {bytes(x) for x in v}
    raise ValueError(f"unknown DynamoDB attribute type {tag!r}")


def _int(n: str) -> int:
    try:
        return int(n)
    except ValueError:  # "1e3", "2.0": DynamoDB's number text, as int() of its Decimal
        return int(Decimal(n))


def _item(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in raw.items()}


def _conditional_failed(err: Exception) -> bool:
    code = _error_code(err)
    if code == "ConditionalCheckFailedException":
        return True
    if code == "TransactionCanceledException":
        return any(r.get("Code") == "ConditionalCheckFailed" for r in _cancellation_reasons(err))
    return False


def _shard(range_id: str, n: int) -> int:
    return int(hashlib.md5(range_id.encode(), usedforsecurity=False).hexdigest()[:8], 16) % n


def counter_shard(range_id: str) -> int:
    """The counter item that counts a range while it is outstanding (the simulator hashes alike:
    bench.sim.des.Sim.counter_item)."""
    return zlib.crc32(range_id.encode()) % COUNTER_SHARDS


def _error_code(err: Exception) -> str | None:
    """The error code of a DynamoDB ClientError (None for anything else)."""
    from botocore.exceptions import ClientError

    if not isinstance(err, ClientError):
        return None
    code = err.response.get("Error", {}).get("Code")
    return str(code) if code is not None else None


def _cancellation_reasons(err: Exception) -> list[dict[str, Any]]:
    """The CancellationReasons of a TransactionCanceledException (a ClientError: ``_error_code``)."""
    return list(getattr(err, "response", {}).get("CancellationReasons") or [])


def _transaction_conflict(err: Exception) -> bool:
    """A TransactGetItems refused because a write on one of its items was in flight (retry: not an error)."""
    if _error_code(err) != "TransactionCanceledException":
        return False
    reasons = _cancellation_reasons(err)
    return any(r.get("Code") == "TransactionConflict" for r in reasons) or not reasons


@dataclass
class Lease:
    id: str
    start_after: str | None
    end: str | None
    owner: str
    lease_until: int
    checkpoint: str | None = None
    objects: int = 0
    bytes: int = 0
    requests: int = 0
    retries: int = 0
    state: str = "leased"
    parts: list[dict[str, Any]] = field(default_factory=list)
    stats: list[str] = field(default_factory=list)
    given: int = 0
    estimate: int = 0  # keys the donor estimated the range to hold when it was split off (0: unknown)
    # what the donor knew of the directories inside the range (from its open item; the lease item does not
    # keep it: a lease taken over restarts without it, and asks S3 itself)
    known: DirKnowledge | None = None

    @classmethod
    def from_item(cls, it: dict[str, Any]) -> Lease:
        return cls(
            id=str(it["sk"]),
            start_after=it.get("start_after"),
            end=it.get("end"),
            owner=str(it.get("owner", "")),
            lease_until=int(it.get("lease_until", 0)),
            checkpoint=it.get("checkpoint"),
            objects=int(it.get("objects", 0)),
            bytes=int(it.get("bytes", 0)),
            requests=int(it.get("requests", 0)),
            retries=int(it.get("retries", 0)),
            state=str(it.get("state", "leased")),
            parts=list(it.get("parts") or []),
            stats=list(it.get("stats") or []),
            given=int(it.get("given", 0)),
            estimate=int(it.get("estimate", 0)),
        )

    def committed(self, seg: Segment) -> None:
        """Mirror a segment the store has just committed to this lease's item (checkpoint, finish, stop_at), so
        that a lease its lister held from claim to finish knows what its item holds without reading it."""
        if seg.checkpoint is not None:
            self.checkpoint = seg.checkpoint
        self.objects += seg.objects
        self.bytes += seg.bytes
        self.requests += seg.requests
        self.retries += seg.retries
        self.parts.extend(p.to_dict() for p in seg.parts)
        if seg.stats_key is not None:
            self.stats.append(seg.stats_key)

    def record(self) -> list[Any]:
        """This done lease as its finisher's roll-up carries it (``from_record`` reads it back): what the
        reduce needs of it, in a list, so that a thousand of them stay small in a compressed roll-up."""
        return [
            self.id,
            self.start_after,
            self.end,
            self.objects,
            self.bytes,
            self.requests,
            self.retries,
            self.given,
            [[p["key"], p["size"], p["md5"], p["rows"]] for p in self.parts],
            self.stats,
        ]

    @classmethod
    def from_record(cls, rec: list[Any]) -> Lease:
        rid, sa, end, objects, nbytes, requests, retries, given, parts, stats = rec
        return cls(
            id=str(rid),
            start_after=sa,
            end=end,
            owner="",
            lease_until=0,
            objects=int(objects),
            bytes=int(nbytes),
            requests=int(requests),
            retries=int(retries),
            state="done",
            parts=[{"key": k, "size": int(z), "md5": m, "rows": int(r)} for k, z, m, r in parts],
            stats=[str(k) for k in stats],
            given=int(given),
        )

    def result(self) -> ShardResult:
        return ShardResult(
            range=KeyRange(id=self.id, start_after=self.start_after, end=self.end),
            objects=self.objects,
            bytes=self.bytes,
            list_requests=self.requests,
            retries=self.retries,
            done=True,
            parts=[PartFile(key=p["key"], size=p["size"], md5=p["md5"], rows=p["rows"]) for p in self.parts],
            given=self.given,
        )


@dataclass
class Segment:
    """What one checkpoint commits: parts, a stats sidecar and the counters for exactly those rows."""

    checkpoint: str | None
    parts: list[PartFile] = field(default_factory=list)
    stats_key: str | None = None
    objects: int = 0
    bytes: int = 0
    requests: int = 0
    retries: int = 0
    stats: Any = field(default=None, repr=False)  # the sidecar's statistics (for the lister's roll-up)

    def update_values(self) -> tuple[str, dict[str, Any]]:
        expr = (
            "SET parts = list_append(parts, :parts), stats = list_append(stats, :stats) "
            "ADD objects :o, #b :b, requests :rq, retries :rt"
        )
        values = {
            ":parts": {"L": [{"M": {k: _av(v) for k, v in p.to_dict().items()}} for p in self.parts]},
            ":stats": {"L": [{"S": self.stats_key}] if self.stats_key else []},
            ":o": _n(self.objects),
            ":b": _n(self.bytes),
            ":rq": _n(self.requests),
            ":rt": _n(self.retries),
        }
        if self.checkpoint is not None:
            expr = expr.replace("SET ", "SET checkpoint = :ck, ", 1)
            values[":ck"] = {"S": self.checkpoint}
        return expr, values


def _av(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"BOOL": v}
    if isinstance(v, int):
        return _n(v)
    return _s(v)


def rollup_json(covers: Sequence[str], stats: dict[str, Any], done: Sequence[list[Any]] = ()) -> bytes:
    """A roll-up's JSON: the sidecars it covers, their merged statistics (``InventoryStats.to_dict``) and the
    records of the leases its lister finished (``Lease.record``)."""
    return json.dumps({"covers": list(covers), "stats": stats, "done": list(done)}).encode()


@dataclass(frozen=True)
class Rollup:
    """A lister's latest roll-up as its item names it: the compressed JSON itself, or the output key holding it."""

    owner: str
    key: str | None
    body: bytes | None

    def read(self, out: Any) -> dict[str, Any]:
        """``rollup_json``'s dictionary: {"covers": [sidecar keys], "stats": {...}, "done": [lease records]}."""
        raw = zlib.decompress(self.body) if self.body is not None else out.get_bytes(self.key)
        return dict(json.loads(raw))


class FleetStore:
    """The run's items in DynamoDB; ``clock`` (seconds since the epoch) is injectable for tests."""

    def __init__(self, ddb: Any, table: str, run_id: str, clock: Clock = time.time) -> None:
        self.ddb = ddb
        self.table = table
        self.run = run_id
        self.clock = clock

    # keys
    @property
    def meta_key(self) -> dict[str, Any]:
        return {"pk": {"S": f"run#{self.run}"}, "sk": {"S": "meta"}}

    def open_pk(self, shard: int) -> str:
        return f"run#{self.run}#open#{shard}"

    def lease_pk(self, shard: int) -> str:
        return f"run#{self.run}#lease#{shard:02d}"

    def hunger_key(self, shard: int) -> dict[str, Any]:
        """One hunger item per partition key: a thousand busy listers read all sixteen every ``hunger_poll_s``
        (0.5 s): 32,000 item reads a second, 16,000 read units (eventually consistent), five times the 3,000 one
        partition serves."""
        return {"pk": {"S": f"run#{self.run}#hunger#{shard}"}, "sk": {"S": "count"}}

    def rollup_pk(self, shard: int) -> str:
        return f"run#{self.run}#rollup#{shard:02d}"

    def counter_key(self, shard: int) -> dict[str, Any]:
        """One counter item per partition key (the shard is a suffix of ``pk``, as write sharding asks: items of
        one partition key share a partition)."""
        return {"pk": {"S": f"run#{self.run}#outstanding#{shard}"}, "sk": {"S": "count"}}

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _expires(self) -> dict[str, str]:
        return _n(self.clock() + RUN_TTL_S)

    def _open_put(self, r: KeyRange, *, fresh: bool = True) -> dict[str, Any]:
        """A transaction's Put of the open item of ``r``: a new id (``fresh``: no item of that id), or a range
        given back under its own id (``release``), which replaces the open item a claimer that died between its
        two writes left behind (``claim``)."""
        item = {
            **self._open_key(r.id),
            "start_after": _s(r.start_after),
            "end": _s(r.end),
            "estimate": _n(r.estimate),
            "expires": self._expires(),
        }
        known = r.known_text()  # compact (model.DirKnowledge.encode): a write costs a unit per KB
        if known is not None:
            item["known"] = {"S": known}
        put: dict[str, Any] = {"TableName": self.table, "Item": item}
        if fresh:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        return {"Put": put}

    def _open_key(self, range_id: str) -> dict[str, Any]:
        return {"pk": {"S": self.open_pk(_shard(range_id, OPEN_SHARDS))}, "sk": {"S": range_id}}

    def _lease_key(self, range_id: str) -> dict[str, Any]:
        return {"pk": {"S": self.lease_pk(_shard(range_id, LEASE_SHARDS))}, "sk": {"S": range_id}}

    # meta
    def meta(self) -> dict[str, Any] | None:
        got = self.ddb.get_item(TableName=self.table, Key=self.meta_key, ConsistentRead=True).get("Item")
        return _item(got) if got else None

    def create(self, token: str, seeds: Sequence[KeyRange], started: str) -> bool:
        """Meta item and the seed ranges, atomically; False if the run exists already."""
        items = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {
                        **self.meta_key,
                        "task_token": {"S": token},
                        "generation": _n(1),
                        "seeds": _n(len(seeds)),
                        "live": _n(0),
                        "orphan_requests": _n(0),
                        "started": {"S": started},
                        "expires": self._expires(),
                    },
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            *(self._open_put(r) for r in seeds),
            *self._count(created=[r.id for r in seeds]),
        ]
        try:
            self.ddb.transact_write_items(TransactItems=items)
            return True
        except Exception as err:
            if _conditional_failed(err):
                return False
            raise

    def relaunch(self, token: str) -> int:
        """A new launch of an existing run: its token, generation + 1 (returned)."""
        got = self.ddb.update_item(
            TableName=self.table,
            Key=self.meta_key,
            UpdateExpression="SET task_token = :t ADD generation :one",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":t": {"S": token}, ":one": _n(1)},
            ReturnValues="ALL_NEW",
        )
        return int(_item(got["Attributes"])["generation"])

    def add_meta(self, name: str, delta: int) -> dict[str, Any]:
        got = self.ddb.update_item(
            TableName=self.table,
            Key=self.meta_key,
            UpdateExpression="ADD #a :d",
            ExpressionAttributeNames={"#a": name},
            ExpressionAttributeValues={":d": _n(delta)},
            ReturnValues="ALL_NEW",
        )
        return _item(got["Attributes"])

    def claim_notify(self) -> str | None:
        """The task token to report completion with, to exactly one caller per launch (None: not yours, or
        the run is not complete, or the counters could not be read: see the module docstring, *completion*).

        The counter items are read in one TransactGetItems; when they sum to 0 the meta item gets
        ``notified = task_token`` and ``complete = true``, conditioned on the token not notified yet."""
        try:
            if self.outstanding() != 0:
                return None
        except CountersBusy:
            return None
        try:
            got = self.ddb.update_item(
                TableName=self.table,
                Key=self.meta_key,
                UpdateExpression="SET notified = task_token, complete = :yes",
                ConditionExpression="attribute_not_exists(notified) OR notified <> task_token",
                ExpressionAttributeValues={":yes": {"BOOL": True}},
                ReturnValues="ALL_NEW",
            )
        except Exception as err:
            if _conditional_failed(err):
                return None
            raise
        return str(_item(got["Attributes"])["task_token"])

    # the outstanding-range counter
    def _count(self, created: Iterable[str] = (), finished: Iterable[str] = ()) -> list[dict[str, Any]]:
        """The counter updates of one transaction that creates the ranges ``created`` and finishes the ranges
        ``finished``: one update per counter item (a transaction may not name an item twice). ``n`` is the
        item's outstanding ranges, ``c`` the ranges ever created in it (so that the reduce knows how many done
        leases there are without reading them); no update where nothing changes."""
        deltas: dict[int, list[int]] = {}
        for rid in created:
            d = deltas.setdefault(counter_shard(rid), [0, 0])
            d[0] += 1
            d[1] += 1
        for rid in finished:
            deltas.setdefault(counter_shard(rid), [0, 0])[0] -= 1
        updates = []
        for s, (dn, dc) in sorted(deltas.items()):
            adds = [f"{name} :{name}" for name, d in (("n", dn), ("c", dc)) if d]
            if not adds:
                continue
            values = {f":{name}": _n(d) for name, d in (("n", dn), ("c", dc)) if d}
            updates.append(
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": self.counter_key(s),
                        "UpdateExpression": f"ADD {', '.join(adds)} SET expires = :x",
                        "ExpressionAttributeValues": {**values, ":x": self._expires()},
                    }
                }
            )
        return updates

    def counter(self, range_id: str) -> int:
        """The count of the one counter item ``range_id`` hashes to (a strongly consistent GetItem)."""
        got = self.ddb.get_item(
            TableName=self.table, Key=self.counter_key(counter_shard(range_id)), ConsistentRead=True
        ).get("Item")
        return int(_item(got).get("n", 0)) if got else 0

    def counts(self) -> list[int]:
        """Every counter item's count of outstanding ranges, read atomically (``tallies``)."""
        return [n for n, _ in self.tallies()]

    def tallies(self) -> list[tuple[int, int]]:
        """Every counter item's (outstanding, created) ranges, read atomically: one TransactGetItems,
        serializable with the transactions that write them. Retried (bounded, jittered) while DynamoDB refuses
        it because a write on one of the items is in flight; ``CountersBusy`` after ``COUNT_READ_TRIES``
        refusals."""
        items = [
            {"Get": {"TableName": self.table, "Key": self.counter_key(s)}} for s in range(COUNTER_SHARDS)
        ]
        delay = COUNT_READ_BACKOFF_S
        for attempt in range(COUNT_READ_TRIES):
            try:
                got = self.ddb.transact_get_items(TransactItems=items)
            except Exception as err:
                if not _transaction_conflict(err):
                    raise
                if attempt == COUNT_READ_TRIES - 1:
                    raise CountersBusy(
                        f"run {self.run}: the counter items were being written during {COUNT_READ_TRIES} reads"
                    ) from err
                time.sleep(random.uniform(0, delay))
                delay *= 2
                continue
            read = [_item(r.get("Item") or {}) for r in got["Responses"]]
            return [(int(it.get("n", 0)), int(it.get("c", 0))) for it in read]
        raise AssertionError("unreachable")  # pragma: no cover

    def outstanding(self) -> int:
        """Ranges not done (open or leased): the sum of the counter items, read atomically."""
        return sum(self.counts())

    def record_error(self, message: str) -> str | None:
        """Record a run-wide error once; the token to fail the launch with (None: already recorded)."""
        try:
            got = self.ddb.update_item(
                TableName=self.table,
                Key=self.meta_key,
                UpdateExpression="SET #e = :m",
                ConditionExpression="attribute_not_exists(#e)",
                ExpressionAttributeNames={"#e": "error"},
                ExpressionAttributeValues={":m": {"S": message[:2000]}},
                ReturnValues="ALL_NEW",
            )
        except Exception as err:
            if _conditional_failed(err):
                return None
            raise
        return str(_item(got["Attributes"])["task_token"])

    # open ranges
    def open_ranges(self, shard: int, limit: int, start: str | None = None) -> list[KeyRange]:
        """Up to ``limit`` open ranges of a shard: from the first, or, with ``start``, from the first id after
        it, wrapping to the shard's first ids (a second Query) when fewer follow. Hungry listers scanning one
        shard each start at a random id (``Lister._scan``), so that they do not all try to claim the same
        first items: a claim that loses costs its transaction's write units and another try."""
        pk = self.open_pk(shard)
        query = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": pk}},
            "ConsistentRead": True,
        }
        if start is None:
            raws = self.ddb.query(**query, Limit=limit).get("Items", [])
        else:
            raws = self.ddb.query(
                **query, Limit=limit, ExclusiveStartKey={"pk": {"S": pk}, "sk": {"S": start}}
            ).get("Items", [])
            if len(raws) < limit:
                seen = {raw["sk"]["S"] for raw in raws}
                first = self.ddb.query(**query, Limit=limit - len(raws)).get("Items", [])
                raws += [raw for raw in first if raw["sk"]["S"] not in seen]
        out = []
        for raw in raws:
            it = _item(raw)
            start_after = it.get("start_after")
            known = it.get("known")
            out.append(
                KeyRange(
                    id=str(it["sk"]),
                    start_after=start_after,
                    end=it.get("end"),
                    estimate=int(it.get("estimate", 0)),
                    known=DirKnowledge.decode(known, start_after)
                    if known and start_after is not None
                    else None,
                )
            )
        return out

    def claim(self, r: KeyRange, owner: str, lease_s: float) -> Lease | None:
        """Take the open range ``r``: Put its lease item (condition: no lease item of that id), then Delete its
        open item. None: another lister holds it (or held it and finished).

        The lease item decides who owns a range; the open item only says where to look. The first Put wins
        and the others fail on the lease's partition: losers write nothing to the open shard. (One transaction
        of both writes, as before 2026-11-26's seventh session, cost each loser two write units a KB on the
        open shard: at the end of a 1B run a thousand hungry listers raced for the last few pieces, their lost
        claims filled the open shards' write capacity: in the simulator the claims in flight at t = 28.4 s of
        1B uniform had 0.6 s left to wait at the median, 1.6 s at most; bench/RESULTS.md.) A lister that dies between
        the two writes leaves a stale open item: claims of it fail on the lease (which expires and is taken
        over), and a release of that range puts the same item again. The open item is deleted before this
        returns, so that a later release of the range by its new owner (which puts the item again) cannot be
        undone by this delete."""
        lease = Lease(
            r.id,
            r.start_after,
            r.end,
            owner,
            self.now_ms() + int(lease_s * 1000),
            estimate=r.estimate,
            known=r.known,
        )
        try:
            self.ddb.put_item(
                TableName=self.table,
                Item={
                    **self._lease_key(r.id),
                    "start_after": _s(r.start_after),
                    "end": _s(r.end),
                    "owner": {"S": owner},
                    "lease_until": _n(lease.lease_until),
                    "checkpoint": _s(None),
                    "parts": {"L": []},
                    "stats": {"L": []},
                    "objects": _n(0),
                    "bytes": _n(0),
                    "requests": _n(0),
                    "retries": _n(0),
                    "given": _n(0),
                    "estimate": _n(r.estimate),
                    "state": {"S": "leased"},
                    "expires": self._expires(),
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except Exception as err:
            if _conditional_failed(err) or _error_code(err) == "TransactionConflictException":
                # a lease of that id exists, or a transaction on it (its owner's donation or finish) was in
                # flight: DynamoDB refuses the Put either way, and botocore does not retry the latter
                return None
            raise
        try:
            self.ddb.delete_item(TableName=self.table, Key=self._open_key(r.id))
        except Exception:  # noqa: BLE001 - the lease is ours; a stale open item only costs failed claims
            logger.warning("run %s: the open item of %s was not deleted", self.run, r.id, exc_info=True)
        return lease

    # roll-ups
    def put_rollup(
        self,
        owner: str,
        covers: int,
        *,
        body: bytes | None = None,
        key: str | None = None,
        shards: int = ROLLUP_SHARDS,
    ) -> None:
        """Record a lister's latest roll-up: ``body`` (its compressed JSON) in the item, or ``key`` naming the
        object in the run's output that holds it (larger than ROLLUP_INLINE_MAX); it covers ``covers``
        sidecars. One item per lister, in the roll-up shard of its owner (of the run's ``shards``:
        ``rollup_shards``)."""
        if (body is None) == (key is None):
            raise ValueError("a roll-up is either in its item (body) or in an object (key)")
        item: dict[str, Any] = {
            "pk": {"S": self.rollup_pk(_shard(owner, shards))},
            "sk": {"S": owner},
            "covers": _n(covers),
            "expires": self._expires(),
        }
        if body is not None:
            item["body"] = {"B": body}
        else:
            item["key"] = {"S": key}
        self.ddb.put_item(TableName=self.table, Item=item)

    def rollups(self, shards: int = ROLLUP_SHARDS) -> list[Rollup]:
        """The latest roll-up of every lister that wrote one, in owner order: one Query per shard of the run's
        ``shards`` (more read nothing more)."""
        items = [
            it
            for shard in _parallel(lambda s: list(self._query_all(self.rollup_pk(s))), range(shards))
            for it in shard
        ]
        return sorted(
            (
                Rollup(
                    owner=it["sk"]["S"],
                    key=it["key"]["S"] if "key" in it else None,
                    body=bytes(it["body"]["B"]) if "body" in it else None,
                )
                for it in items
            ),
            key=lambda r: r.owner,
        )

    def _query_all(self, pk: str, **kw: Any) -> Iterator[dict[str, Any]]:
        """Every item of partition key ``pk`` (strongly consistent), page after page (botocore's paginator);
        ``kw`` adds to the Query (a filter, a projection, their names and values)."""
        values = {":p": {"S": pk}, **kw.pop("ExpressionAttributeValues", {})}
        pages = self.ddb.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues=values,
            ConsistentRead=True,
            **kw,
        )
        for page in pages:
            yield from page.get("Items", ())

    # leases
    def leases(self, *, expired_only: bool = False, shards: Iterable[int] | None = None) -> list[Lease]:
        """The leases of the given lease partitions (all 64 unless told; one Query each, LEASE_READERS at
        once), in range id order; ``expired_only``: those still leased whose ``lease_until`` has passed."""
        kw: dict[str, Any] = {}
        if expired_only:
            kw["FilterExpression"] = "#s = :leased AND lease_until < :now"
            kw["ExpressionAttributeNames"] = {"#s": "state", "#e": "end", "#o": "owner"}
            kw["ExpressionAttributeValues"] = {":leased": {"S": "leased"}, ":now": _n(self.now_ms())}
            kw["ProjectionExpression"] = "pk, sk, start_after, #e, #o, lease_until, checkpoint, #s"
        parts = _parallel(
            lambda shard: [
                Lease.from_item(_item(raw)) for raw in self._query_all(self.lease_pk(shard), **kw)
            ],
            list(range(LEASE_SHARDS) if shards is None else shards),
            workers=LEASE_READERS,
        )
        return sorted((lease for part in parts for lease in part), key=lambda lease: lease.id)

    def takeover(self, seen: Lease, owner: str, lease_s: float) -> Lease | None:
        # counted before the attempt, so that a run whose count is 0 had no takeover: the reduce then knows no
        # part can be an orphan (only a lease taken over leaves parts no done lease names) and lists no data/
        self.add_meta("takeovers", 1)
        try:
            got = self.ddb.update_item(
                TableName=self.table,
                Key=self._lease_key(seen.id),
                UpdateExpression="SET #o = :me, lease_until = :until",
                ConditionExpression="lease_until = :seen AND #s = :leased",
                ExpressionAttributeNames={"#o": "owner", "#s": "state"},
                ExpressionAttributeValues={
                    ":me": {"S": owner},
                    ":until": _n(self.now_ms() + int(lease_s * 1000)),
                    ":seen": _n(seen.lease_until),
                    ":leased": {"S": "leased"},
                },
                ReturnValues="ALL_NEW",
            )
        except Exception as err:
            if _conditional_failed(err):
                return None
            raise
        return Lease.from_item(_item(got["Attributes"]))

    def _owned(self, lease: Lease) -> tuple[str, dict[str, Any], dict[str, Any]]:
        return (
            "#o = :me AND #s = :leased",
            {"#o": "owner", "#s": "state"},
            {":me": {"S": lease.owner}, ":leased": {"S": "leased"}},
        )

    def renew(self, lease: Lease, lease_s: float) -> None:
        cond, names, values = self._owned(lease)
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key=self._lease_key(lease.id),
                UpdateExpression="SET lease_until = :until",
                ConditionExpression=cond,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={**values, ":until": _n(self.now_ms() + int(lease_s * 1000))},
            )
        except Exception as err:
            if _conditional_failed(err):
                raise LeaseLost(lease.id) from err
            raise

    def checkpoint(self, lease: Lease, seg: Segment, lease_s: float) -> None:
        cond, names, values = self._owned(lease)
        expr, seg_values = seg.update_values()
        expr = expr.replace("SET ", "SET lease_until = :until, ", 1)
        names["#b"] = "bytes"
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key=self._lease_key(lease.id),
                UpdateExpression=expr,
                ConditionExpression=cond,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    **values,
                    **seg_values,
                    ":until": _n(self.now_ms() + int(lease_s * 1000)),
                },
            )
        except Exception as err:
            if _conditional_failed(err):
                raise LeaseLost(lease.id) from err
            raise
        lease.committed(seg)

    def _transact(self, lease: Lease, items: list[dict[str, Any]]) -> None:
        try:
            self.ddb.transact_write_items(TransactItems=items)
        except Exception as err:
            if _conditional_failed(err):
                raise LeaseLost(lease.id) from err
            raise

    def _lease_update(
        self, lease: Lease, expr: str, names: dict[str, str], values: dict[str, Any]
    ) -> dict[str, Any]:
        cond, n0, v0 = self._owned(lease)
        return {
            "Update": {
                "TableName": self.table,
                "Key": self._lease_key(lease.id),
                "UpdateExpression": expr,
                "ConditionExpression": cond,
                "ExpressionAttributeNames": {**n0, **names},
                "ExpressionAttributeValues": {**v0, **values},
            }
        }

    def _meta_add(self, name: str, delta: int) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": self.meta_key,
                "UpdateExpression": "ADD #a :d",
                "ExpressionAttributeNames": {"#a": name},
                "ExpressionAttributeValues": {":d": _n(delta)},
            }
        }

    def donate(self, lease: Lease, pieces: Sequence[KeyRange]) -> None:
        """Lower the lease's end to the first piece's start and open the pieces, atomically."""
        self._transact(
            lease,
            [
                self._lease_update(
                    lease,
                    # the range's estimate was of the whole range: unknown now (a takeover estimates anew)
                    "SET #e = :cut, estimate = :zero ADD given :g",
                    {"#e": "end"},
                    {":cut": _s(pieces[0].start_after), ":zero": _n(0), ":g": _n(len(pieces))},
                ),
                *(self._open_put(p) for p in pieces),
                *self._count(created=[p.id for p in pieces]),
            ],
        )
        lease.end = pieces[0].start_after
        lease.estimate = 0
        lease.given += len(pieces)

    def finish(self, lease: Lease, seg: Segment) -> None:
        expr, values = seg.update_values()
        expr = expr.replace("SET ", "SET #s = :done, ", 1)
        self._transact(
            lease,
            [
                self._lease_update(lease, expr, {"#b": "bytes"}, {**values, ":done": {"S": "done"}}),
                *self._count(finished=[lease.id]),
            ],
        )
        lease.committed(seg)
        lease.state = "done"

    def stop_at(self, lease: Lease, seg: Segment, checkpoint: str, remainder: KeyRange) -> None:
        """Deadline: the listed piece is done with end = checkpoint; (checkpoint, end] is open again."""
        expr, values = seg.update_values()
        expr = expr.replace("SET ", "SET #s = :done, #e = :ck2, ", 1)
        self._transact(
            lease,
            [
                self._lease_update(
                    lease,
                    expr,
                    {"#b": "bytes", "#e": "end"},
                    {**values, ":done": {"S": "done"}, ":ck2": {"S": checkpoint}},
                ),
                self._open_put(remainder),
                # the done piece leaves its counter item, the remainder enters its own
                *self._count(created=[remainder.id], finished=[lease.id]),
            ],
        )
        lease.committed(seg)
        lease.end = checkpoint
        lease.state = "done"

    def release(self, lease: Lease, extra_requests: int) -> None:
        """Nothing listed: give the range back as it was (outstanding unchanged)."""
        cond, names, values = self._owned(lease)
        self._transact(
            lease,
            [
                {
                    "Delete": {
                        "TableName": self.table,
                        "Key": self._lease_key(lease.id),
                        "ConditionExpression": cond,
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": values,
                    }
                },
                # the donor's knowledge still holds: the range is the same or shorter (a donation lowers end)
                self._open_put(
                    KeyRange(id=lease.id, start_after=lease.start_after, end=lease.end, known=lease.known),
                    fresh=False,
                ),
                self._meta_add("orphan_requests", extra_requests),
            ],
        )

    # hunger
    def hunger(self) -> HungerRead:
        """The hunger items summed (``HungerRead``): one BatchGetItem."""
        keys = [self.hunger_key(s) for s in range(HUNGER_SHARDS)]
        got = self.ddb.batch_get_item(RequestItems={self.table: {"Keys": keys}})
        items = [_item(raw) for raw in got.get("Responses", {}).get(self.table, [])]
        hungry = sum(int(it.get("n", 0)) for it in items)
        live = sum(int(it.get("live", 0)) for it in items)
        t503 = max((int(it.get("t503", 0)) for it in items), default=0)
        left = sum(int(it.get("left", 0)) for it in items)
        pages = sum(int(it.get("pages", 0)) for it in items)
        held = sum(int(it.get("held", 0)) for it in items)
        ranges = sum(int(it.get("ranges", 0)) for it in items)
        return HungerRead(
            max(0, hungry), max(0, live), t503, max(0, left), max(0, pages), max(0, held), max(0, ranges)
        )

    def add_progress(self, shard: int, left: int, pages: int, held: int = 0, ranges: int = 0) -> None:
        """Add to a hunger shard's pages left by estimate, clipped (``left``) and not (``held``, in ``ranges``
        ranges), and pages listed (``pages``): a lister's change since it last told (``Lister.tell_progress``)."""
        self.ddb.update_item(
            TableName=self.table,
            Key=self.hunger_key(shard),
            UpdateExpression="ADD #l :l, #p :p, #h :h, #r :r SET expires = :x",
            ExpressionAttributeNames={"#l": "left", "#p": "pages", "#h": "held", "#r": "ranges"},
            ExpressionAttributeValues={
                ":l": _n(left),
                ":p": _n(pages),
                ":h": _n(held),
                ":r": _n(ranges),
                ":x": self._expires(),
            },
        )

    def note_slowdown(self, shard: int) -> None:
        """A lister of this hunger shard saw a 503 SlowDown now (the endgame's signal: ENDGAME_QUIET_S)."""
        self.ddb.update_item(
            TableName=self.table,
            Key=self.hunger_key(shard),
            UpdateExpression="SET t503 = :t, expires = :x",
            ExpressionAttributeValues={":t": _n(self.now_ms()), ":x": self._expires()},
        )

    def add_hunger(self, shard: int, delta: int, attr: str = "n") -> None:
        """Add to a hunger shard's count of hungry listers (``n``) or of live ones (``live``)."""
        self.ddb.update_item(
            TableName=self.table,
            Key=self.hunger_key(shard),
            UpdateExpression="ADD #a :d SET expires = :x",
            ExpressionAttributeNames={"#a": attr},
            ExpressionAttributeValues={":d": _n(delta), ":x": self._expires()},
        )


def hunger_share(hungry: int, live: int, left_keys: float, page_keys: int, floor_pages: float) -> int:
    """A busy lister's share of the fleet's hunger at one read of the hunger items (``Lister.wanted``; the
    simulator's busy listers use it too): ``hungry`` listers besides itself among ``live``. Busy listers split
    the hunger between them, twice over (shares are uneven), or a lister serves more when its largest stream
    holds ``left_keys`` by estimate: up to one piece of twice the split floor (``floor_pages``) per hungry
    lister. Near the end of a run the few large remainders are with a few listers while most are hungry
    (simulator, 1B uniform 36.5 -> 34.5 s; bench/RESULTS.md, 2026-11-26). An unknown or spent estimate (inf,
    <= 0) gets the fair share.

    The fair share is rounded up, so while anyone is hungry every busy lister serves at least one piece: one
    hungry lister among a thousand draws a piece of the largest remainder of each of them into the open
    ranges. That is more than the hungry need, and it is what moves work between S3 partitions in the middle
    of a large run: the pieces come from the largest remainders, and whoever finishes next claims one at
    random. (Simulator, 1B uniform: from t = 18 s, when the open ranges first run dry, 120-830 pieces a half
    second while zero or one lister is hungry. Rounded at random to an expected 2 x hungry pieces a poll
    instead, 1B uniform took 35.7 s against 33.6 and multi-tenant 45.0 against 38.8: one partition's backlog
    was left to its own streams. bench/RESULTS.md, 2026-11-26, third session.)"""
    fair = -(-2 * hungry // max(1, live - hungry))
    held = 0
    if math.isfinite(left_keys) and left_keys > 0 and floor_pages > 0:
        held = int(left_keys / page_keys / (2 * floor_pages))
    return min(hungry, max(fair, held))


def endgame_floor(
    left_pages: float, pace: float | None, page_s: float | None, lo: float, hi: float, stale_s: float = 0.0
) -> float:
    """The endgame's split floor (pages), between ``lo`` (ENDGAME_MIN_SPLIT_PAGES) and ``hi`` (the policy's
    floor): the pages one stream lists (a page every ``page_s`` seconds) while the fleet, at ``pace`` pages a
    second, lists the ``left_pages`` it holds. A smaller piece would end before the fleet does and only adds
    a request; a larger one is the fleet's tail and is cut. ``left_pages`` was told ``stale_s`` ago on average
    (the listers tell at their reads of the hunger items, every ``hunger_poll_s``: half that), so the fleet has
    listed ``pace x stale_s`` of it since. Unknown pace or page time: ``lo``."""
    if not pace or pace <= 0 or not page_s or page_s <= 0 or not math.isfinite(left_pages):
        return lo
    left = max(0.0, left_pages - pace * stale_s)
    return min(hi, max(lo, left / pace / page_s))


def page_time(average: float | None, seconds: float) -> float:
    """A lister's page time once an attempt was answered in ``seconds`` (``Lister._latency``): a moving
    average, 1/20 of each new answer (the first as it is)."""
    return seconds if average is None else average + (seconds - average) / 20


def progress_pages(
    keys_left: Iterable[float], page_keys: int, floor_pages: float, clip_floors: float = PROGRESS_CLIP_FLOORS
) -> int:
    """The pages a lister tells it holds (``Lister.tell_progress``) from its ranges' keys left by estimate: each
    at most ``clip_floors`` split floors of ``floor_pages`` (inf: not clipped), an unknown (inf) or spent one not
    counted."""
    clip = clip_floors * floor_pages * page_keys
    return round(sum(min(clip, k) for k in _known_left(keys_left)) / page_keys)


def progress_ranges(keys_left: Iterable[float]) -> int:
    """The ranges a lister tells it holds pages in (``progress_pages``): those with a known estimate left."""
    return sum(1 for _ in _known_left(keys_left))


def _known_left(keys_left: Iterable[float]) -> Iterator[float]:
    """The keys left of the ranges whose estimate is known and not spent: what ``progress_pages`` sums and
    ``progress_ranges`` counts, so that the fleet's mean remainder a range (``straggler_share``) divides like by
    like."""
    return (k for k in keys_left if math.isfinite(k) and k > 0)


def progress_told(keys_left: Sequence[float], page_keys: int, floor_pages: float) -> tuple[int, int, int]:
    """What a lister tells its hunger item it holds (``Lister.tell_progress``; the simulator's listers too): the
    pages left clipped (``HungerRead.left``) and not (``held``), and the ranges they are in (``ranges``)."""
    return (
        progress_pages(keys_left, page_keys, floor_pages),
        progress_pages(keys_left, page_keys, floor_pages, clip_floors=math.inf),
        progress_ranges(keys_left),
    )


def straggler_share(
    left_keys: float,
    mean_pages: float,
    page_keys: int,
    floor_pages: float,
    max_pieces: int,
    ratio: float = STRAGGLER_RATIO,
) -> int:
    """Pieces a busy lister gives of its largest stream's remainder (``left_keys`` by estimate) whether or not
    anyone is hungry (STRAGGLER_RATIO): none while it holds at most ``ratio`` times the fleet's mean remainder a
    range (``mean_pages``) or at most PROGRESS_CLIP_FLOORS split floors; else enough that the pieces are about
    that size, at most ``max_pieces`` (one split's: a larger share would be served by a split at each of the
    donor's next pages, each cutting what the last one left, down to the floor). Unknown or spent estimates
    give none."""
    if not (math.isfinite(left_keys) and left_keys > 0 and mean_pages > 0 and ratio > 0):
        return 0
    pages = left_keys / page_keys
    bar = ratio * mean_pages
    if pages <= max(bar, PROGRESS_CLIP_FLOORS * floor_pages):
        return 0
    return min(max_pieces, math.ceil(pages / bar) - 1)


class FleetPace:
    """The fleet's pace (pages a second) from the pages its listers told the hunger items (``pages``, summed by
    ``FleetStore.hunger``): the difference between two reads at least PACE_MIN_S apart (monotonic seconds)."""

    def __init__(self, min_s: float = PACE_MIN_S) -> None:
        self.min_s = min_s
        self.pace: float | None = None
        self._at: tuple[float, int] | None = None

    def read(self, now: float, pages: int) -> float | None:
        if self._at is None or pages < self._at[1]:
            self._at = (now, pages)
        elif now - self._at[0] >= self.min_s:
            self.pace = (pages - self._at[1]) / (now - self._at[0])
            self._at = (now, pages)
        return self.pace


def send_result(sfn: Any, token: str, output: dict[str, Any]) -> bool:
    """SendTaskSuccess, ignoring a token that is no longer waiting (someone already answered, or timed out)."""
    from botocore.exceptions import ClientError

    try:
        sfn.send_task_success(taskToken=token, output=json.dumps(output))
        return True
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist"):
            return False
        raise


def send_failure(sfn: Any, token: str, error: str, cause: str) -> None:
    from botocore.exceptions import ClientError

    try:
        sfn.send_task_failure(taskToken=token, error=error, cause=cause[:32_000])
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in (
            "TaskTimedOut",
            "InvalidToken",
            "TaskDoesNotExist",
        ):
            raise


def notify_if_done(
    store: FleetStore,
    sfn: Any,
    finished: str | None = None,
    reduce: Callable[[], dict[str, Any] | None] | None = None,
) -> bool:
    """Report {done: true} if the run is complete and nobody reported it for this launch yet.

    ``finished``: the id of the range the caller has just finished. Its counter item is read first (one
    consistent GetItem): a count above 0 there, read after the finish, proves a range still outstanding, whose
    finisher will check in its turn, so every finish but the last few is spared the TransactGetItems.

    ``reduce`` (a lister's ``reduce_here``): called by the winner before it answers; its output, unless None,
    goes in the answer as ``reduced`` ({done: true, reduced: ...}) and the state machine skips its Reduce
    state."""
    if finished is not None and store.counter(finished) > 0:
        return False
    token = store.claim_notify()
    if token is None:
        return False
    reduced = reduce() if reduce is not None else None
    send_result(sfn, token, {"done": True} if reduced is None else {"done": True, "reduced": reduced})
    return True


# --------------------------------------------------------------------------------------------------
# Launch
# --------------------------------------------------------------------------------------------------


def previous_run(s3: Any, cfg: FleetConfig) -> S3Store | None:
    """The output of the last successful run of the same target (bucket and prefix), if one was recorded."""
    return latest_run(s3, cfg.results_bucket, cfg.latest_key)


def launch(
    *,
    s3: Any,
    ddb: Any,
    sfn: Any,
    lam: Any,
    cfg: FleetConfig,
    token: str,
    lister_function: str,
    clock: Clock = time.time,
) -> dict[str, Any]:
    """Start (or restart) the fleet of a run: meta + seed ranges once, then ``max_listers`` async listers."""
    store = FleetStore(ddb, cfg.table, cfg.run_id, clock)
    seeds = [KeyRange(id="r0")]
    previous = previous_run(s3, cfg) if cfg.audit else None
    if previous is not None:  # the previous run's per-range counts (ranges.json) seed the ranges
        hints = json.loads(previous.get_bytes("ranges.json"))
        seeds = seeds_from_hints(hints, min(MAX_PIECES, cfg.max_listers * cfg.streams))
    if store.create(token, seeds, cfg.started):
        generation = 1
    else:
        generation = store.relaunch(token)
        meta = store.meta() or {}
        if meta.get("error"):
            raise BucketError(str(meta["error"]))
        if generation > cfg.max_launches:
            raise IncompleteInventoryError(
                f"the fleet was launched {cfg.max_launches} times and {store.outstanding()} ranges are "
                "still not listed"
            )
    if notify_if_done(store, sfn):
        return {"generation": generation, "listers": 0, "seeds": len(seeds)}
    event = {"config": cfg.to_dict(), "generation": generation}

    def invoke(i: int) -> None:
        # one lister a seed range looks for it first in its shard, so the seeds are claimed at once; the others
        # scan from their own hunger shard's, as idle listers do (a relaunch's open ranges are anywhere). Every
        # lister of a thousand starting at the one seed's shard read that partition key at each scan for the
        # whole run: 4,000 Queries a second against its 3,000 read units (simulator, 1B objects: 180 s
        # instead of 35; bench/RESULTS.md)
        payload = {**event, "lister": i}
        if i < len(seeds):
            payload["home"] = _shard(seeds[i].id, OPEN_SHARDS)
        lam.invoke(FunctionName=lister_function, InvocationType="Event", Payload=json.dumps(payload).encode())

    # LAUNCH_THREADS invocations at once: one after the other, a thousand asynchronous Invokes at the simulator's
    # 20 ms each (an assumption, bench.sim.des.Config.invoke_s) start the last lister 20 s after the first; the
    # simulator has always modelled these threads (Config.launcher_threads). The first exception (after
    # botocore's retries) fails the Launch.
    _parallel(invoke, range(cfg.max_listers), LAUNCH_THREADS, name="launch")
    return {"generation": generation, "listers": cfg.max_listers, "seeds": len(seeds)}


# --------------------------------------------------------------------------------------------------
# The lister
# --------------------------------------------------------------------------------------------------


@dataclass
class ListerOptions:
    """Knobs of one lister; tests shorten the intervals and inject faults."""

    scan_interval_s: float = 0.25  # at most one scan of open ranges / expired leases per lister per interval
    idle_wait_s: float = 0.1
    hunger_poll_s: float = 0.5
    heartbeat_s: float | None = None  # default: lease / 3
    listing: ListOptions = field(
        default_factory=lambda: ListOptions(
            page_size=PAGE_SIZE,
            policy=SplitPolicy(min_split_pages=MIN_SPLIT_PAGES, page_keys=PAGE_SIZE),
            endgame_min_split_pages=ENDGAME_MIN_SPLIT_PAGES,
            prefetch=True,  # S3 prepares a stream's next page while it writes the last one
            # a stream whose next page is late (a paced slot, a slow answer) gives meanwhile: the hunger a lister
            # reads is served by its largest stream (Lister.wanted), which need not wait for that page
            give_while_waiting_s=GIVE_WHILE_WAITING_S,
        )
    )
    after_page: Callable[[str, int], None] | None = None  # (lister id, pages so far): fault injection


class _Throttle:
    """A stream's ``Pacer`` (hpcstage.inventory.pacing; ``Lister.throttle_for``): a lock and the monotonic
    clock. Every LIST attempt, botocore's retries included, waits for its slot (``RequestCounter``'s
    ``before_attempt``) and gives its answer back (``after_attempt``).

    One per stream, not one per lister: a lister's streams list in different parts of the key space, so in
    different S3 partitions, and one pacer cut by the 503s of a throttled partition held its streams in the
    others to a page every few seconds (simulator, 1B multi-tenant 49.1 -> 38.9 s; bench/RESULTS.md)."""

    def __init__(
        self,
        deadline: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
        on_slowdown: Callable[[], None] = lambda: None,
        quiet: Callable[[], bool] = lambda: False,
        on_latency: Callable[[float], None] = lambda _s: None,
    ) -> None:
        self.clock = clock
        self.deadline = deadline
        self.lock = threading.Lock()
        self.pacer = Pacer(clock())
        # each 503 SlowDown (the lister tells the fleet, at most once a window), and whether the fleet is quiet
        # (the endgame: the attempt runs unpaced)
        self.on_slowdown = on_slowdown
        self.quiet = quiet
        # the seconds from an attempt's slot to its answer, for every attempt S3 answered other than 503
        # (the lister's page time: endgame_floor). A stream's attempts go one at a time but for the directory
        # requests of a split, sent together: an answer then pairs with the latest slot (a shorter sample)
        self.on_latency = on_latency
        self._sent: float | None = None

    @property
    def throttles(self) -> int:
        return self.pacer.throttles

    def answered(self, slowdown: bool) -> None:
        with self.lock:
            now = self.clock()
            self.pacer.record(now, 1, int(slowdown))
            sent, self._sent = self._sent, None
        if slowdown:
            self.on_slowdown()
        elif sent is not None:
            self.on_latency(now - sent)

    def wait(self) -> None:
        """Sleep until this attempt's slot (or until the lister nears its deadline); when the next window's
        slots are all taken, sleep a window and ask again (``Pacer.slot``)."""
        while True:
            with self.lock:
                now = self.clock()
                if self.pacer.rate is not None and self.quiet():
                    self.pacer.release(now)
                at = self.pacer.slot(now)
            granted = at is not None
            if at is None:
                at = now + self.pacer.window_s
            while at > now and not self.deadline():
                time.sleep(min(0.05, at - now))
                now = self.clock()
            if granted or self.deadline():
                with self.lock:
                    self._sent = self.clock()
                return

    def retry_delay(self, attempts: int) -> float:
        """The wait before retrying a 503 SlowDown after ``attempts`` attempts: botocore's full jitter
        (rand x 2^(attempts-1) s) capped at the pacer's window instead of 20 s. The pacer already holds the
        lister's rate to what the partition takes; a longer backoff only leaves the stream's range idle
        after the partition has recovered (the simulator's 100M run: a stream in a multi-second backoff
        held one of the last ranges)."""
        return random.random() * min(2.0 ** (attempts - 1), self.pacer.window_s)

    def counter(self) -> RequestCounter:
        return RequestCounter(
            before_attempt=self.wait, after_attempt=self.answered, throttle_delay=self.retry_delay
        )


class _Sink:
    """A stream's Writer and Stats for ``list_range``: one segment (part writer + stats) per checkpoint."""

    def __init__(self, stream: _Stream) -> None:
        self.stream = stream

    @property
    def objects(self) -> int:
        return self.stream.objects

    @objects.setter
    def objects(self, value: int) -> None:
        self.stream.objects = value

    @property
    def bytes(self) -> int:
        return self.stream.bytes

    @bytes.setter
    def bytes(self, value: int) -> None:
        self.stream.bytes = value

    # Writer
    def add_page(self, objects: Any) -> None:
        self.stream.add_page(objects)

    def close(self) -> list[PartFile]:
        return []

    def abort(self) -> None:
        self.stream.abort_segment()


class _StatsSink(_Sink):
    def add_page(self, objects: Any) -> None:
        self.stream.stats_page(objects)


class _Stream:
    """One stream's work on one lease: segments, checkpoints, the final commit."""

    def __init__(self, lister: Lister, index: int, lease: Lease) -> None:
        self.lister = lister
        self.index = index
        self.lease = lease
        self.tag = uuid.uuid4().hex[:8]
        self.seq = 0
        self.objects = 0
        self.bytes = 0
        self.pages = 0
        self.counter = lister.throttle_for(index).counter()
        self.committed_requests = 0
        self.committed_retries = 0
        self.last_key: str | None = lease.checkpoint
        self.cursor: Cursor | None = None  # list_range's, once it starts (read by Lister.wanted)
        self._new_segment()

    def _new_segment(self) -> None:
        cfg = self.lister.cfg
        opts = self.lister.options.listing
        self.seg_name = f"{self.lease.id}-{self.tag}-{self.seq:04d}"
        self.seq += 1
        self.writer = writer_class(opts.source)(
            self.lister.out,
            cfg.bucket,
            self.seg_name,
            row_group_rows=opts.row_group_rows,
            part_rows=opts.part_rows,
            tmpdir=opts.tmpdir,
        )
        self.seg_stats = stats_class(opts.source)(
            prefix=cfg.prefix, depth=cfg.stats_depth, now=self.lister.started
        )
        self.seg_pages = 0

    def add_page(self, objects: Any) -> None:
        page = as_page(objects)
        if len(page):
            self.last_key = page.keys[-1]
        self.writer.add_page(objects)

    def stats_page(self, objects: Any) -> None:
        before_o, before_b = self.seg_stats.objects, self.seg_stats.bytes
        self.seg_stats.add_page(objects)
        self.objects += self.seg_stats.objects - before_o
        self.bytes += self.seg_stats.bytes - before_b

    def abort_segment(self) -> None:
        self.writer.abort()

    def close_segment(self) -> Segment:
        """Close the segment's parts and write its sidecar; the next segment starts empty."""
        parts = self.writer.close()
        seg = Segment(checkpoint=self.last_key, parts=parts)
        if self.seg_stats.objects:
            seg.stats_key = f"stats/{self.seg_name}.json"
            self.lister.out.put_bytes(seg.stats_key, json.dumps(self.seg_stats.to_dict()).encode())
        seg.objects, seg.bytes = self.seg_stats.objects, self.seg_stats.bytes
        seg.stats = self.seg_stats
        seg.requests = self.counter.requests - self.committed_requests
        seg.retries = self.counter.retries - self.committed_retries
        self.committed_requests, self.committed_retries = self.counter.requests, self.counter.retries
        self._new_segment()
        return seg

    def uncommitted_requests(self) -> int:
        return self.counter.requests - self.committed_requests

    # callbacks of list_range
    def on_page(self, _objects: int, _bytes: int) -> None:
        self.pages += 1
        self.seg_pages += 1
        if self.lister.options.after_page is not None:
            self.lister.options.after_page(self.lister.owner, self.lister.pages_inc())
        else:
            self.lister.pages_inc()
        if self.seg_pages >= self.lister.cfg.checkpoint_pages:
            seg = self.close_segment()
            self.lister.store.checkpoint(self.lease, seg, self.lister.cfg.lease_seconds)
            self.lister.committed(seg)

    def should_stop(self) -> bool:
        lister = self.lister
        if lister.failed.is_set():
            raise _Abandon()
        if self.lease.id in lister.lost:
            raise LeaseLost(self.lease.id)
        return lister.near_deadline()

    def give(self, pieces: Sequence[KeyRange]) -> None:
        self.lister.give(self, pieces)

    def wanted(self) -> int:
        return self.lister.wanted(self)

    def refused(self) -> None:
        self.lister.refused(self)

    def on_cursor(self, cursor: Cursor) -> None:
        self.cursor = cursor

    def left(self) -> float:
        """Keys left by the range's estimate (``Cursor.left_by_estimate``); -inf before the stream's first page
        (it cannot split before: there are no keys to cut at). Read from other streams' threads: a read racing
        a page or a split only misorders one choice."""
        cur = self.cursor
        return cur.left_by_estimate() if cur is not None and cur.pages else -math.inf


class _Rotation:
    """A walk over ``n`` shards from a random start: ``next(listers)`` gives the next ⌈n / listers⌉ (at least
    one, at most n), so that ``listers`` walking at the same pace read every shard between them at each step,
    and one alone reads all of them."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.at = random.randrange(n)

    def next(self, listers: int) -> list[int]:
        k = min(self.n, max(1, -(-self.n // max(1, listers))))
        got = [(self.at + j) % self.n for j in range(k)]
        self.at = (self.at + k) % self.n
        return got


class Lister:
    """One lister invocation: ``cfg.streams`` streams, a heartbeat, and the store."""

    def __init__(
        self,
        *,
        s3: Any,
        ddb: Any,
        sfn: Any,
        cfg: FleetConfig,
        generation: int,
        remaining_ms: Callable[[], int],
        clock: Clock = time.time,
        options: ListerOptions | None = None,
        owner: str | None = None,
        source_s3: Any = None,
        home: int | None = None,
    ) -> None:
        self.s3 = s3
        self.source_s3 = source_s3 if source_s3 is not None else s3  # the target's client (cfg.access)
        self.sfn = sfn
        self.cfg = cfg
        self.generation = generation
        self.remaining_ms = remaining_ms
        self.options = options or ListerOptions()
        if cfg.versions:
            self.options = replace(self.options, listing=replace(self.options.listing, source=VERSIONS))
        self.store = FleetStore(ddb, cfg.table, cfg.run_id, clock)
        self.out = cfg.store(s3)
        self.owner = owner or uuid.uuid4().hex
        self.started = (
            datetime.fromisoformat(cfg.started.replace("Z", "+00:00")) if cfg.started else datetime.now(UTC)
        )
        # the endgame (ENDGAME_QUIET_S): set at each read of the hunger items, cleared by this lister's own 503
        self.endgame = False
        # each stream's pacer (``throttle_for``), and when this lister last told the fleet of a 503
        self._throttles: dict[int, _Throttle] = {}
        self._told = -math.inf
        self._told_lock = threading.Lock()
        self.failed = threading.Event()
        self.finished = threading.Event()
        self.lost: set[str] = set()
        self._cv = threading.Condition()
        self._queue: deque[KeyRange] = deque()
        self._idle = 0
        self._active: dict[int, Lease] = {}
        self._scan_lock = threading.Lock()
        self._last_scan = 0.0
        self._hungry = False
        # the hunger shard this lister counts itself in (live, and hungry when it is): spread over the shards
        # so that the fleet's hunger updates do not all hit one item
        self.home = random.randrange(HUNGER_SHARDS)
        # the shard of open ranges it looks in first: the one the launcher names (a seed range's), else its
        # hunger shard. (Looking in two random shards of 16, a lister found the one seed of a run only after
        # seconds of backed-off scans: 24 s in a local run.)
        self.scan_home = (home if home is not None else self.home) % OPEN_SHARDS
        self._hunger_lock = threading.Lock()
        self._scan_every = self.options.scan_interval_s
        # scan_shards' rotation over the other shards, and the listers it counts alive (the meta item's
        # ``live``, read when a scan finds nothing; a lister that died uncounts nothing, so this only errs high)
        self._open_turn = _Rotation(OPEN_SHARDS - 1)
        self._lease_turn = _Rotation(LEASE_SHARDS)
        self._fleet_size = max(1, cfg.max_listers)
        self._last_lease_scan = 0.0
        self._hunger_seen = 0
        self._hunger_served = 0
        self._hunger_at = 0.0
        self._born = time.monotonic()
        # the endgame's split floor (``endgame_floor``), set at each read of the hunger items: the fleet's pace
        # from them, this lister's page time (a moving average of its attempts' latency), and what it last told
        # the fleet of its pages left and listed (``tell_progress``)
        self._endgame_floor = ENDGAME_MIN_SPLIT_PAGES
        self._pace = FleetPace()
        self._page_s: float | None = None
        self._progress_lock = threading.Lock()
        self._told_left = 0
        self._told_pages = 0
        self._told_held = 0
        self._told_ranges = 0
        # the streams listing now, and those whose split gave nothing since the last read of the hunger items
        # (``wanted``: the remote share goes to the largest of the others)
        self._listing: dict[int, _Stream] = {}
        self._refused: set[int] = set()
        self._ids = 0
        self._pages = 0
        self.errors: list[BaseException] = []
        self.ranges_done = 0
        self.given = 0
        # the roll-up: the statistics of every segment this lister committed, and their sidecars
        self._roll_lock = threading.Lock()
        self._rollup = stats_class(self.options.listing.source)(
            prefix=cfg.prefix, depth=cfg.stats_depth, now=self.started
        )
        self._covers: list[str] = []
        # the leases this lister finished (Lease.record), in its roll-up too: the reduce reads them there instead
        # of every lease item
        self._done: list[list[Any]] = []
        self._rolled = (0, 0)  # (len(_covers), len(_done)) at the last roll-up written
        self.rollups_written = 0
        self.reduced: dict[str, Any] | None = None  # reduce_run's output, when this lister reduced the run

    # small shared counters
    def pages_inc(self) -> int:
        with self._cv:
            self._pages += 1
            return self._pages

    def new_id(self) -> str:
        with self._cv:
            self._ids += 1
            return f"{self.owner[:12]}-{self._ids}"

    def _holder(self) -> str:
        """The owner written into a lease: unique per acquisition, so that two streams (of this lister or
        another) can never both pass an ``owner = me`` condition on the same range."""
        return f"{self.owner}:{uuid.uuid4().hex[:12]}"

    def throttle_for(self, index: int) -> _Throttle:
        """Stream ``index``'s pacer, the same for every range it lists."""
        with self._cv:
            if index not in self._throttles:
                self._throttles[index] = _Throttle(
                    self.near_deadline,
                    on_slowdown=self._slowdown,
                    quiet=lambda: self.endgame,
                    on_latency=self._latency,
                )
            return self._throttles[index]

    def _latency(self, seconds: float) -> None:
        """An attempt answered in ``seconds``: the lister's page time, a moving average (1/20 of each new one;
        two streams racing here only lose a sample)."""
        self._page_s = page_time(self._page_s, seconds)

    def tell_progress(self) -> None:
        """Tell the fleet, in this lister's hunger item, how its pages left by estimate (its streams' ranges,
        ``_Stream.left``, and the pieces queued for them, each at most PROGRESS_CLIP_FLOORS split floors) and
        its pages listed changed since it last told: at
        each read of the hunger items, when none of its streams is listing, and when it exits. A write that
        fails is told again at the next call."""
        listing = self.options.listing
        with self._cv:
            streams = list(self._listing.values())
            keys_left = [float(r.estimate) for r in self._queue]
            pages = self._pages
        keys_left += [st.left() for st in streams]
        left, held, ranges = progress_told(keys_left, listing.page_size, listing.policy.min_split_pages)
        with self._progress_lock:
            d_left, d_pages = left - self._told_left, pages - self._told_pages
            d_held, d_ranges = held - self._told_held, ranges - self._told_ranges
            if not d_left and not d_pages and not d_held and not d_ranges:
                return
            self._told_left, self._told_pages = left, pages
            self._told_held, self._told_ranges = held, ranges
        try:
            self.store.add_progress(self.home, d_left, d_pages, d_held, d_ranges)
        except Exception:  # noqa: BLE001 - a signal, not state: the listing goes on without it
            logger.warning("run %s: could not tell progress to hunger shard %d", self.cfg.run_id, self.home)
            with self._progress_lock:
                self._told_left -= d_left
                self._told_pages -= d_pages
                self._told_held -= d_held
                self._told_ranges -= d_ranges

    @property
    def throttles(self) -> int:
        """503 SlowDown answers this lister's streams saw."""
        with self._cv:
            return sum(t.throttles for t in self._throttles.values())

    def _slowdown(self) -> None:
        """A 503 SlowDown: no endgame here (the partition is at its cap after all), and, at most once a pacer
        window, the fleet learns the time. (Simulator, 100M dated seeds 2-3: leaving the endgame only on the
        503s told, a lister kept splitting small and unpaced into a throttled partition: 25.7 and 26.3 s
        against 24.8 and 24.7; bench/RESULTS.md.)"""
        self.endgame = False
        with self._told_lock:
            now = time.monotonic()
            if now - self._told < WINDOW_S:
                return
            self._told = now
        try:
            self.store.note_slowdown(self.home)
        except Exception:  # noqa: BLE001 - a signal, not state: the listing goes on without it
            logger.warning("run %s: could not note a 503 in hunger shard %d", self.cfg.run_id, self.home)

    def near_deadline(self) -> bool:
        return self.remaining_ms() < self.cfg.stop_margin_seconds * 1000

    # roll-up
    def committed(self, seg: Segment) -> None:
        """A segment's checkpoint is in its lease: its statistics join the lister's roll-up."""
        if seg.stats_key is None or seg.stats is None:
            return
        with self._roll_lock:
            self._rollup.merge(seg.stats)
            self._covers.append(seg.stats_key)

    def finished_lease(self, lease: Lease) -> None:
        """``lease`` is done by this lister's hand (its finish or deadline transaction went through): its record
        joins the roll-up."""
        with self._roll_lock:
            self._done.append(lease.record())

    def write_rollup(self) -> None:
        """Write the roll-up if it covers sidecars or leases the last one did not: the merged statistics of
        every segment this lister committed and the sidecars they came from, and the record of every lease it
        finished (``Lease.record``), in the lister's roll-up item (in an object the item names when larger than
        ROLLUP_INLINE_MAX). The reduce reads the roll-ups instead of those sidecars (46,047 sidecars at 1B
        objects in the simulator, 32 s of reduce at 64 GETs at a time) and, when the records account for every
        range the run created, instead of the lease items, with a Query per roll-up shard. Called when no
        stream of the lister is listing and when it exits."""
        if not self._roll_lock.acquire(blocking=False):
            return  # another stream writes it
        try:
            if (len(self._covers), len(self._done)) == self._rolled:
                return
            covers = list(self._covers)
            done = list(self._done)
            raw = rollup_json(covers, self._rollup.to_dict(), done)
            self.rollups_written += 1
            blob = zlib.compress(raw)
            shards = rollup_shards(self.cfg)
            if len(blob) <= ROLLUP_INLINE_MAX:
                self.store.put_rollup(self.owner, len(covers), body=blob, shards=shards)
            else:
                key = f"rollups/{self.owner}-{self.rollups_written:04d}.json"
                self.out.put_bytes(key, raw)
                self.store.put_rollup(self.owner, len(covers), key=key, shards=shards)
            self._rolled = (len(covers), len(done))
        finally:
            self._roll_lock.release()

    def reduce_here(self) -> dict[str, Any] | None:
        """The run's reduce (``reduce_run``), here, by the winner of the completion notification; None leaves it
        to the state machine's Reduce state, which runs the same function in its own Lambda:

        - when this Lambda has less than ``REDUCE_MARGIN_S`` left (see there);
        - for an audit: its object-level diff streams every Parquet part of this run and the previous one, which
          takes minutes at 1B objects, more than any fixed margin can promise (the Reduce function has 900 s
          and 2 GB);
        - when reduce_run raises (logged): the Reduce state runs it again and fails, or succeeds, as it always
          did, so a real IncompleteInventoryError still ends the execution in NotifyFailed.
        """
        if self.cfg.audit or self.remaining_ms() < REDUCE_MARGIN_S * 1000:
            return None
        try:
            self.write_rollup()  # this lister's last segments, in its roll-up: the reduce reads no sidecar of them
            out = reduce_run(s3=self.s3, ddb=self.store.ddb, cfg=self.cfg, clock=self.store.clock)
        except Exception:  # noqa: BLE001 - logged; the Reduce state runs it again and reports the error
            logger.exception(
                "run %s: the lister's reduce failed; the Reduce state runs it again", self.cfg.run_id
            )
            return None
        self.reduced = out
        return out

    # wanted / give (the LocalPool protocol, plus remote hunger)
    def wanted(self, stream: _Stream | None = None) -> int:
        """Pieces ``stream`` should give now: the lister's idle streams not yet fed, and this lister's share of
        the fleet's hunger (read from the hunger items at most every ``hunger_poll_s``) when ``stream`` is its
        donor: the stream with the most keys left by estimate (``_Stream.left``; unknown counts as most) among
        those listing whose split has not come back empty since that read. (Simulator, largest first against
        whichever stream's page came first: bench/RESULTS.md, 2026-11-26.)

        The lister's own idle streams come first: while any is not yet fed, this counts only them, and the
        donor's remote share follows at its next ``serve`` (its next page, or GIVE_WHILE_WAITING_S while that
        page is awaited), cut from what it kept. One split for both handed the idle streams the pieces
        nearest the donor and the rest of its remainder to the fleet, and at the ramp the fan-out then rooted
        around the open-ended last piece (simulator, 1B uniform seeds 1-3: 35.4, 38.1, 34.4 s against 33.6,
        33.5, 33.2; bench/RESULTS.md, 2026-11-26, fourth session)."""
        with self._cv:
            local = self._idle - len(self._queue)
        donor: _Stream | None = None  # computed at a read of the hunger items, else when needed
        with self._hunger_lock:
            now = time.monotonic()
            if now - self._hunger_at >= self.options.hunger_poll_s:
                self._hunger_at = now
                self.tell_progress()
                read = self.store.hunger()
                self.endgame = read.t503 > 0 and self.store.now_ms() - read.t503 >= ENDGAME_QUIET_S * 1000
                pace = self._pace.read(now, read.pages)
                if read.t503 == 0 and pace is not None and now - self._born >= ENDGAME_QUIET_S:
                    self.endgame = True  # never throttled: the pace decides the floor (ENDGAME_QUIET_S)
                hungry = max(0, read.hungry - (1 if self._hungry else 0))
                # this lister's share of the fleet's hunger (``hunger_share``); the remainder is served by
                # the next poll
                self._refused.clear()
                donor = self._donor()
                opts = self.options.listing
                floor = opts.policy.min_split_pages
                if self.endgame and opts.endgame_min_split_pages is not None:
                    lo = min(floor, opts.endgame_min_split_pages)
                    stale_s = self.options.hunger_poll_s / 2
                    floor = endgame_floor(read.left, pace, self._page_s, lo, floor, stale_s=stale_s)
                self._endgame_floor = floor
                left = donor.left() if donor is not None else 0.0
                share = hunger_share(hungry, read.live, left, opts.page_size, floor)
                # and a straggler's pieces, hungry listers or not (STRAGGLER_RATIO)
                mean = read.held / read.ranges if read.ranges > 0 else 0.0
                most = opts.policy.max_ways - 1
                share += straggler_share(left, mean, opts.page_size, floor, most)
                self._hunger_seen = share
                self._hunger_served = 0
            if local > 0:
                return local
            remote = max(0, self._hunger_seen - self._hunger_served)
            if remote and stream is not None and stream is not (donor or self._donor()):
                remote = 0
        return remote

    def _donor(self) -> _Stream | None:
        """The stream the remote share goes to (see ``wanted``); None when every listing stream refused."""
        with self._cv:
            listing = [st for i, st in self._listing.items() if i not in self._refused]
        return max(listing, key=lambda st: st.left(), default=None)

    def refused(self, stream: _Stream) -> None:
        """``stream``'s split gave nothing: the remote share goes to the next largest until the next read."""
        with self._hunger_lock:
            self._refused.add(stream.index)

    def give(self, stream: _Stream, pieces: Sequence[KeyRange]) -> None:
        self.store.donate(stream.lease, pieces)
        self.given += len(pieces)
        with self._cv:
            local = max(0, self._idle - len(self._queue))
            self._queue.extend(pieces)
            self._cv.notify(len(pieces))
        with self._hunger_lock:
            self._hunger_served += max(0, len(pieces) - local)

    # acquiring work
    def _set_hungry(self, hungry: bool) -> None:
        with self._hunger_lock:
            if hungry and not self._hungry:
                self._hungry = True
                self.store.add_hunger(self.home, 1)
            elif not hungry and self._hungry:
                self._hungry = False
                self.store.add_hunger(self.home, -1)

    def _claim_queued(self) -> Lease | None:
        while True:
            with self._cv:
                if not self._queue:
                    return None
                r = self._queue.popleft()
            lease = self.store.claim(r, self._holder(), self.cfg.lease_seconds)
            if lease is not None:
                return lease

    def _scan(self) -> Lease | None:
        """Open ranges first (``scan_shards``: one Query each), then expired leases; sets ``finished`` when
        none remain."""
        for s in self.scan_shards():
            # range ids begin with their lister's hex id (Lister.new_id): a random hex start spreads the scans
            found = self.store.open_ranges(s, limit=self.cfg.streams, start=f"{random.getrandbits(48):012x}")
            # one range per scan, tried in random order: the lister's other idle streams are fed by its own
            # splits (``wanted`` counts them) or its next scan. Queueing every range found for the idle streams
            # made hungry listers race for the same few items at the end of a run (simulator, 100M dated:
            # 26,589 lost claims and the listing 0.7 s longer than with one claim a scan)
            random.shuffle(found)
            for r in found:
                lease = self.store.claim(r, self._holder(), self.cfg.lease_seconds)
                if lease is not None:
                    return lease
        now = time.monotonic()
        if now - self._last_lease_scan >= self.cfg.lease_seconds / 4:
            self._last_lease_scan = now
            for seen in self.store.leases(expired_only=True, shards=self.lease_scan_shards()):
                if seen.owner.startswith(self.owner + ":"):
                    continue  # one of this lister's own streams holds it (and renews it)
                taken = self.store.takeover(seen, self._holder(), self.cfg.lease_seconds)
                if taken is not None:
                    return taken
        # one GetItem: the notifier of the run's completion set ``complete`` (no read of the counter items)
        meta = self.store.meta()
        if meta is not None:
            self._fleet_size = max(1, int(meta.get("live", 1)))
        if meta is None or meta.get("complete") or meta.get("error"):
            self.finished.set()
        return None

    def scan_shards(self) -> list[int]:
        """The shards of open ranges one scan reads: the home shard, then the next ``k`` others of this lister's
        rotation (from a random start), ``k`` = ⌈15 / listers alive⌉ (at least 1). A thousand idle listers
        read two shards each, not all sixteen; a few read enough that between them they read every shard at
        each scan, and one alone reads them all in its rotation. (Reading one other shard at random, the two
        listers left of three after one died took up to 40 s to find the last open range: 15 scans, backed
        off to 2 s, between them.)"""
        picked = self._open_turn.next(self._fleet_size)
        return [self.scan_home, *(o + (o >= self.scan_home) for o in picked)]

    def lease_scan_shards(self) -> list[int]:
        """The lease partitions one look for expired leases reads: the next ⌈64 / listers alive⌉ of this
        lister's rotation (as ``scan_shards``)."""
        return self._lease_turn.next(self._fleet_size)

    def acquire(self) -> Lease | None:
        with self._cv:
            self._idle += 1
        try:
            lease = self._claim_queued()
            if lease is None and self._scan_lock.acquire(blocking=False):
                try:
                    if time.monotonic() - self._last_scan >= self._scan_every:
                        self._last_scan = time.monotonic()
                        lease = self._scan()
                        # back off while there is nothing to find (up to 8x), at once back when there is
                        found = lease is not None
                        self._scan_every = (
                            self.options.scan_interval_s
                            if found
                            else min(8 * self.options.scan_interval_s, 2 * self._scan_every)
                        )
                finally:
                    self._scan_lock.release()
            if lease is not None:
                with self._cv:
                    last_idle = self._idle <= 1
                if last_idle:
                    self._set_hungry(False)
                return lease
            if not self._active:
                self.write_rollup()  # nothing listing here: the reduce may start before this lister is busy again
                self.tell_progress()
            if not self.finished.is_set():
                self._set_hungry(True)
                with self._cv:
                    if not self._queue:
                        self._cv.wait(self.options.idle_wait_s)
            return None
        finally:
            with self._cv:
                self._idle -= 1

    # one stream
    def _stream(self, index: int) -> None:
        while not (self.finished.is_set() or self.near_deadline()):
            if self.failed.is_set():
                raise _Abandon()
            lease = self.acquire()
            if lease is None:
                continue
            with self._cv:
                self._active[index] = lease
            try:
                self._list(index, lease)
            finally:
                with self._cv:
                    self._active.pop(index, None)
                    self._listing.pop(index, None)

    def _list(self, index: int, lease: Lease) -> None:
        st = _Stream(self, index, lease)
        with self._cv:
            self._listing[index] = st
        resume = lease.checkpoint if lease.checkpoint is not None else lease.start_after
        # the donor's estimate of the range, less what earlier owners listed of it (the split decisions
        # use it until the stream has listed enough to estimate for itself: steal.Cursor.inherited_pages)
        left = max(0, lease.estimate - lease.objects) if lease.estimate else 0
        # the donor's knowledge of the directories, for a range claimed as it was published (its facts hold
        # in a range shortened by this stream's own donations too)
        known = lease.known if resume == lease.start_after else None
        rng = KeyRange(id=lease.id, start_after=resume, end=lease.end, estimate=left, known=known)
        try:
            res = list_range(
                self.source_s3,
                self.cfg.bucket,
                self.cfg.prefix,
                rng,
                writer=_Sink(st),
                stats=_StatsSink(st),
                counter=st.counter,
                wanted=st.wanted,
                give=st.give,
                new_id=self.new_id,
                should_stop=st.should_stop,
                options=self.options.listing,
                on_page=st.on_page,
                endgame=lambda: self._endgame_floor if self.endgame else None,
                on_cursor=st.on_cursor,
                refused=st.refused,
            )
        except LeaseLost:
            st.abort_segment()
            self.store.add_meta("orphan_requests", st.uncommitted_requests())
            return
        seg = st.close_segment()
        try:
            if res.done:
                self.store.finish(lease, seg)
                self.committed(seg)
                self.finished_lease(lease)
                self.ranges_done += 1
                notify_if_done(self.store, self.sfn, finished=lease.id, reduce=self.reduce_here)
            elif st.last_key is None or st.last_key == lease.start_after:
                self.store.release(lease, seg.requests)
            else:
                remainder = KeyRange(id=self.new_id(), start_after=st.last_key, end=lease.end)
                self.store.stop_at(lease, seg, st.last_key, remainder)
                self.committed(seg)
                self.finished_lease(lease)
        except LeaseLost:
            self.store.add_meta("orphan_requests", seg.requests)

    def _heartbeat(self, stop: threading.Event) -> None:
        every = self.options.heartbeat_s or self.cfg.lease_seconds / 3
        while not stop.wait(every):
            with self._cv:
                held = list(self._active.values())
            for lease in held:
                try:
                    self.store.renew(lease, self.cfg.lease_seconds)
                except LeaseLost:
                    self.lost.add(lease.id)

    def run(self) -> dict[str, Any]:
        self.store.add_meta("live", 1)
        self.store.add_hunger(self.home, 1, "live")
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(stop,), name="heartbeat", daemon=True)
        beat.start()
        try:
            with ThreadPoolExecutor(max_workers=self.cfg.streams, thread_name_prefix="stream") as ex:
                futures = [ex.submit(self._guarded, i) for i in range(self.cfg.streams)]
                for f in futures:
                    f.result()
        finally:
            stop.set()
        if self.errors:
            err = self.errors[0]
            # best effort: a lister that dies outright (timeout, out of memory) cannot do this
            with contextlib.suppress(Exception):
                self._set_hungry(False)
                self.store.add_hunger(self.home, -1, "live")
            if isinstance(err, BucketError):
                token = self.store.record_error(str(err))
                if token is not None:
                    send_failure(self.sfn, token, type(err).__name__, str(err))
            raise err  # a crash: no cleanup, the leases expire and are taken over
        self.write_rollup()
        self.tell_progress()
        self._set_hungry(False)
        self.store.add_hunger(self.home, -1, "live")
        meta = self.store.add_meta("live", -1)
        if (
            int(meta.get("live", 0)) <= 0
            and not meta.get("complete")
            and int(meta.get("generation", 0)) == self.generation
            and not meta.get("error")
        ):
            self._last_out(str(meta["task_token"]))
        return {
            "owner": self.owner,
            "pages": self._pages,
            "ranges_done": self.ranges_done,
            "given": self.given,
            "throttles": self.throttles,
            **({"reduced": self.reduced} if self.reduced is not None else {}),
        }

    def _last_out(self, token: str) -> None:
        """The last lister of its launch exits with the run not known complete: {done: false} when ranges are
        outstanding (the state machine launches again at once), else the notification, in case the finisher
        of the last range died before it (read: one TransactGetItems per launch)."""
        try:
            left = self.store.outstanding()
        except CountersBusy:
            left = -1  # writes in flight on the counters: work is being done, launch again
        if left != 0:
            send_result(self.sfn, token, {"done": False})
        else:
            notify_if_done(self.store, self.sfn, reduce=self.reduce_here)

    def _guarded(self, index: int) -> None:
        try:
            self._stream(index)
        except _Abandon:
            pass
        except BaseException as err:  # noqa: BLE001 - the first error ends the lister (re-raised in run)
            with self._cv:
                self.errors.append(err)
            self.failed.set()


def run_lister(
    *,
    s3: Any,
    ddb: Any,
    sfn: Any,
    event: dict[str, Any],
    remaining_ms: Callable[[], int],
    clock: Clock = time.time,
    options: ListerOptions | None = None,
    source_s3: Any = None,
) -> dict[str, Any]:
    """The lister Lambda's one call: ``event`` is what ``launch`` sent ({config, generation, lister}).

    ``source_s3`` lists the target (made from the config's ``access``); ``s3`` writes the results."""
    cfg = FleetConfig.from_dict(event["config"])
    lister = Lister(
        s3=s3,
        ddb=ddb,
        sfn=sfn,
        cfg=cfg,
        generation=int(event.get("generation", 1)),
        home=event.get("home"),
        remaining_ms=remaining_ms,
        clock=clock,
        options=options,
        source_s3=source_s3,
    )
    return lister.run()


# --------------------------------------------------------------------------------------------------
# Reduce
# --------------------------------------------------------------------------------------------------


def _parallel(
    fn: Callable[[Any], Any], items: Sequence[Any], workers: int = 64, name: str = "reduce"
) -> list[Any]:
    """``fn`` over ``items`` on ``workers`` threads (64: the S3 client's pool, clients.s3; the simulator's
    reduce model, bench.sim.des.Config.reduce_parallel, assumes the same); the first exception is raised."""
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix=name) as pool:
        return list(pool.map(fn, items))


def _read_rollups(store: FleetStore, out: Any, shards: int) -> list[dict[str, Any]]:
    """Every lister's latest roll-up (``rollup_json``'s dictionary), in owner order: those kept in their items
    (in the run's ``shards``) are read here, those kept in objects fetched on threads."""
    rollups = store.rollups(shards)
    fetched = iter(_parallel(lambda r: r.read(out), [r for r in rollups if r.body is None]))
    return [r.read(out) if r.body is not None else next(fetched) for r in rollups]


def _merge_rollups(bodies: Sequence[dict[str, Any]], sidecars: set[str], merged: Any) -> set[str]:
    """Merge the listers' roll-ups into ``merged``; the sidecars they cover (the reduce reads the others).

    A roll-up only holds segments whose checkpoint its lister saw committed, so each of its sidecars is in a
    done lease; one that names a sidecar no lease holds, or one another roll-up already covered, is not used
    (its sidecars are then read one by one), so no segment is ever counted twice.
    """
    covered: set[str] = set()
    for body in bodies:
        covers = set(body["covers"])
        if covers <= sidecars and covers.isdisjoint(covered):
            merged.merge(stats_from_dict(body["stats"]))
            covered |= covers
    return covered


def _merged_statistics(
    out: Any, bodies: Sequence[dict[str, Any]], leases: Sequence[Lease], new_stats: Callable[[], Any]
) -> Any:
    """The statistics of every segment of ``leases``, merged into ``new_stats()``: the roll-ups that cover
    them, and the sidecars no roll-up covers read from S3 (64 at a time)."""
    merged = new_stats()
    keys = [k for lease in leases for k in lease.stats]
    covered = _merge_rollups(bodies, set(keys), merged)
    for st in _parallel(
        lambda k: stats_from_dict(json.loads(out.get_bytes(k))), [k for k in keys if k not in covered]
    ):
        merged.merge(st)
    return merged


def _done_from_rollups(
    store: FleetStore, out: Any, created: int, new_stats: Callable[[], Any], shards: int = ROLLUP_SHARDS
) -> tuple[list[Lease], Any, list[dict[str, Any]] | None]:
    """The run's done leases and statistics from the roll-ups alone, without reading a lease item: when the
    roll-ups' lease records are ``created`` distinct ranges (every range the run created, each done exactly
    once by the lister whose finish went through) and their statistics count the records' objects. A lister
    whose last records are not in its roll-up yet (it writes it when none of its streams is listing) is
    waited for, ROLLUP_READS reads ROLLUP_WAIT_S apart; one that died with records unwritten leaves the
    leases ([]) to the caller, which then reads the lease items. Returns (leases, statistics, the roll-ups last
    read: None when none was)."""
    bodies: list[dict[str, Any]] | None = None
    for attempt in range(ROLLUP_READS):
        if attempt:
            time.sleep(ROLLUP_WAIT_S)
        bodies = _read_rollups(store, out, shards)
        records = [rec for body in bodies for rec in body.get("done", ())]
        if len(records) < created:
            continue
        leases = sorted((Lease.from_record(rec) for rec in records), key=lambda lease: lease.id)
        if len(records) > created or len({lease.id for lease in leases}) != created:
            break  # a record twice, or a range the counters never created: the lease items decide
        merged = _merged_statistics(out, bodies, leases, new_stats)
        if merged.objects != sum(lease.objects for lease in leases):
            break
        return leases, merged, bodies
    return [], None, bodies


def reduce_run(*, s3: Any, ddb: Any, cfg: FleetConfig, clock: Clock = time.time) -> dict[str, Any]:
    """Every range done and the done pieces tile the key space; then the run's output (runner.finalize:
    manifest.json + Parquet in the S3 Inventory schema, summary.json, report.txt, report.html, ranges.json),
    a dt= partition of the target's Hive table with its athena.sql, and the target's ``_latest`` pointer.

    The done leases come from the listers' roll-ups when their records account for every range the counters
    say the run created (``_done_from_rollups``); else from the lease items themselves (every lease item
    read: ~35,000 at 1B objects, ~8.5 s of a lister's CPU in the simulator's model).

    An audit also compares with the previous run of the target (counts, and object by object). A versions
    run records no ``_latest`` pointer: audits and their diff compare the current objects of two runs.

    Idempotent: it writes only fixed keys of the run (their content a function of the done leases, the
    statistics and ``started``; ``finished`` aside), reads the fleet's items without changing them, and runs
    again after a partial attempt (the winning lister's, then the Reduce state's; a retried Lambda) to the
    same output: the orphan count includes what an earlier attempt removed (``remove_orphan_parts``), and an
    audit whose ``_latest`` pointer already names this run returns the summary written then.

    Python's cyclic garbage collector is paused while it runs (``gc_paused``).
    """
    with gc_paused():
        return _reduce_run(s3=s3, ddb=ddb, cfg=cfg, clock=clock)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector, and restore it as it was. The reduce builds a few objects per
    lease (its record, ``Lease``, ``ShardResult``, ``PartFile``): ~300,000 at 1B objects, none of them in a
    reference cycle, so reference counting frees them all, and the collector's passes over the growing heap
    only cost time: `python -m bench.reduce_records` on this machine, 50,000 records of one segment,
    1.46-1.54 CPU-s with it running and 0.84-0.85 paused (bench/RESULTS.md)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _reduce_run(*, s3: Any, ddb: Any, cfg: FleetConfig, clock: Clock) -> dict[str, Any]:
    """``reduce_run``'s work (see there)."""
    store = FleetStore(ddb, cfg.table, cfg.run_id, clock)
    meta = store.meta()
    if meta is None:
        raise IncompleteInventoryError(f"run {cfg.run_id} has no fleet state")
    tallies = store.tallies()
    outstanding = sum(n for n, _ in tallies)
    out = cfg.store(s3)
    started = datetime.fromisoformat(cfg.started.replace("Z", "+00:00")) if cfg.started else datetime.now(UTC)

    def new_stats() -> Any:
        return stats_class(VERSIONS if cfg.versions else None)(
            prefix=cfg.prefix, depth=cfg.stats_depth, now=started
        )

    leases: list[Lease] = []
    bodies: list[dict[str, Any]] | None = None
    merged: Any = None
    if outstanding == 0:
        leases, merged, bodies = _done_from_rollups(
            store, out, sum(c for _, c in tallies), new_stats, rollup_shards(cfg)
        )
    if not leases:
        leases = store.leases()
        pending = [lease.id for lease in leases if lease.state != "done"]
        if pending or outstanding != 0:
            raise IncompleteInventoryError(
                f"{outstanding} range(s) not listed ({len(pending)} leased: {', '.join(pending[:10])})"
            )
        rollups = bodies if bodies is not None else _read_rollups(store, out, rollup_shards(cfg))
        merged = _merged_statistics(out, rollups, leases, new_stats)
        listed = sum(lease.objects for lease in leases)
        if merged.objects != listed:
            raise IncompleteInventoryError(f"statistics count {merged.objects} objects, the leases {listed}")
    results = [lease.result() for lease in leases]
    previous = previous_run(s3, cfg) if cfg.audit else None
    if previous is not None and previous.prefix == cfg.root:
        # this run's own output: an earlier attempt of this reduce finished (the _latest pointer is its last
        # write) and the previous run is no longer known, so its diff stands as written
        summary = json.loads(out.get_bytes("summary.json"))
        small = execution_summary(summary, f"s3://{cfg.results_bucket}/{cfg.root}/summary.json")
        small.update(ranges_planned=summary["ranges_planned"], launches=int(meta.get("generation", 1)))
        return small
    orphans = remove_orphan_parts(s3, cfg, results) if int(meta.get("takeovers", 0)) else 0
    hive = S3Store(s3, cfg.results_bucket, hive_root(cfg.results_prefix, cfg.bucket, cfg.prefix))
    summary = finalize(
        out,
        bucket=cfg.bucket,
        prefix=cfg.prefix,
        seeds=[KeyRange(id=f"seed{i}") for i in range(int(meta.get("seeds", 1)))],
        results=results,
        stats=merged,
        started=started,
        destination_arn=f"arn:aws:s3:::{cfg.results_bucket}",
        manifest_key_prefix=f"{cfg.root}/",
        previous_summary=json.loads(previous.get_bytes("summary.json")) if previous else None,
        previous_store=previous,
        extra_requests=int(meta.get("orphan_requests", 0)),
        extra={**access_summary(AccessOptions.from_dict(cfg.access)), "orphan_parts_removed": orphans},
        hive=hive,
    )
    hive.put_bytes("athena.sql", hive_ddl(hive.uri()).encode())
    if not cfg.versions:
        record_latest_run(s3, cfg.results_bucket, cfg.latest_key, cfg.root, summary["finished"])
    small = execution_summary(summary, f"s3://{cfg.results_bucket}/{cfg.root}/summary.json")
    small.update(ranges_planned=summary["ranges_planned"], launches=int(meta.get("generation", 1)))
    return small


def remove_orphan_parts(s3: Any, cfg: FleetConfig, results: Sequence[ShardResult]) -> int:
    """Delete the Parquet parts under the run's ``data/`` that no done lease names.

    Called only for a run in which a lease was taken over (``meta.takeovers``, counted before each attempt):
    a part is left unnamed only by a stream that lost its lease (its checkpoint's condition failed: someone
    took the lease over) or died before its checkpoint (its lease then had to be taken over for the run to
    end); a lease released without a listed key has no part. So a run without takeovers skips this LIST of
    every part (one request per 1,000 parts, one after another: 46 at 1B objects in the simulator).

    A lister that lost its lease after writing a segment's part (or died between the part and the lease
    update) leaves that part behind; it never enters the manifest, but a query over ``data/*.parquet`` (the
    README's DuckDB example) would count its keys twice. Returns how many were removed, by this call and by
    any earlier attempt of the run's reduce: their keys are recorded in ``orphans.json`` (in the run's root,
    beside the manifest) before they are deleted, so a reduce run again after a partial attempt reports the
    same count."""
    from botocore.exceptions import ClientError

    out = cfg.store(s3)
    try:
        earlier = set(json.loads(out.get_bytes(ORPHANS_KEY))["removed"])
    except ClientError as absent:
        if absent.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
            raise
        earlier = set()
    named = {f"{cfg.root}/{p.key}" for r in results for p in r.parts}
    listed: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=cfg.results_bucket, Prefix=f"{cfg.root}/data/"
    ):
        listed += [o["Key"] for o in page.get("Contents", ())]
    orphans = [k for k in listed if k not in named]
    if orphans:
        out.put_bytes(ORPHANS_KEY, json.dumps({"removed": sorted(earlier | set(orphans))}).encode())
    for i in range(0, len(orphans), 1000):
        batch = orphans[i : i + 1000]
        resp = s3.delete_objects(
            Bucket=cfg.results_bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
        )
        if resp.get("Errors"):
            err = resp["Errors"][0]
            raise BucketError(
                f"cannot remove an orphan part s3://{cfg.results_bucket}/{err.get('Key')}: {err.get('Message')}"
            )
    return len(earlier | set(orphans))


def done_pieces(leases: Iterable[Lease]) -> list[tuple[str | None, str | None]]:
    """The (start_after, end] of every done lease, in key order (tests and debugging)."""
    return sorted(
        ((lease.start_after, lease.end) for lease in leases if lease.state == "done"),
        key=lambda p: (p[0] is not None, p[0] or ""),
    )
