"""Work stealing over key ranges: the one listing algorithm of the laptop, the Lambda fleet and the simulator.

A *stream* lists one range ``(start_after, end]`` with ListObjectsV2. Its state is a ``Cursor``: what to ask
S3 next, how many keys of a page belong to the range, and -- when another stream is idle -- how to give away
the upper part of what it has not listed yet. Splitting only ever lowers the donor's own ``end`` and hands out
``(cut, old_end]``, so the ranges in play always tile the key space exactly once, whatever the cut points are
(tests/unit/test_steal_props.py checks this on arbitrary keys). The cut points decide only the balance.

Cut points come from what the donor has read, never from an assumed alphabet:
- a bounded remainder ``(pos, end]`` is cut by interpolation in a mixed radix over the characters seen at
  each position of the donor's recent keys (``keys.Alphabet``): constant segments (a long common prefix,
  "/part-") take no room, a hex position counts 16 values, not 256;
- a bounded remainder whose donor sits inside a directory its end is not in is cut at the sibling
  directories the donor's own path suggests (interpolation would treat the directories between as filled);
- an open remainder ``(pos, +inf)`` (nothing known above ``pos``) is cut level by level at the values that
  can follow each prefix of ``pos`` (see ``_open_points``). A cut that lands in empty space costs the thief
  one request; the next split of a bounded piece then interpolates;
- a remainder that reaches past the directory ``pos`` is in is first asked about: ListObjectsV2 with
  Delimiter="/" names its directories (``Cursor.explore``), which become the cut points, sized by a tree
  estimate (``Cursor._tree_estimate``). These are the only requests the engine adds to the listing's own;
- names made of fields that roll over under the cursor ("logs/2025-01-15-09-<hex>"), in a directory nothing
  else sizes, leave a remainder of unknown extent, cut as an open one (see MIN_GROUP_KEYS);
- where a remainder is cut by interpolation (a flat range, or the files of the directory pos is in), each
  piece but the last is sized at whole pages less a tenth by the density listed (``Cursor._aligned_cuts``,
  PAGE_MARGIN), so that its last page, a billed request like any other, is nearly full.

Nothing here does I/O: the caller sends the request ``Cursor.request()`` describes and feeds the answer to
``Cursor.take``. ``LocalPool`` is the in-memory meeting point of the streams of one process; the fleet's
pool (hpcstage.inventory.fleet) keeps the same protocol in DynamoDB.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .keys import (
    ALPHABET_POSITIONS,
    DECIMAL_DIGITS,
    Alphabet,
    CodeRun,
    Interval,
    calendar_limits,
    char_after,
    code_run,
    common_prefix,
)
from .model import DirKnowledge, KeyRange

# A remainder estimated as a tree (``Cursor._tree_estimate``): (keys left, of them in pos's directory,
# [(directory, its keys)]).
Tree = tuple[float, float, list[tuple[str, float]]]

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


# Character classes in the order an open remainder's cut points are spread over, after the classes seen.
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
    (0x80, 0x10FFFF),  # every non-ASCII character: cut at _NON_ASCII_CUTS
)
# Where an open remainder is cut among the non-ASCII characters: the first character of each UTF-8 lead byte
# (U+0080, U+00C0, ... U+0800, U+1000, ... U+10000, U+40000, ...), so the cuts spread over the byte space the
# characters take, as S3 orders them, not over a million mostly unassigned code points.
_NON_ASCII_CUTS: tuple[int, ...] = (
    *((lead - 0xC0) << 6 for lead in range(0xC2, 0xE0)),
    0x800,
    *((lead - 0xE0) << 12 for lead in range(0xE1, 0xF0)),
    *((lead - 0xF0) << 18 for lead in range(0xF1, 0xF5)),
    0x10000,
)


def _class_values(c: tuple[int, int]) -> list[int]:
    """The values of a character class an open remainder may be cut at, in order."""
    if c[0] >= 0x80:
        return sorted(v for v in _NON_ASCII_CUTS if c[0] <= v <= c[1])
    return list(range(c[0], c[1] + 1))


# Directory discovery: when a stream is asked to split a remainder that crosses directories, it first asks S3
# for the directories themselves (ListObjectsV2 with Delimiter="/" at the shallowest level the remainder
# spans) and cuts at them: a common prefix holds at least one key, so no such piece is empty, and the
# cuts follow the real tree instead of guessed siblings ("month=13"). At most this many such requests per
# split, one level each (see ``Cursor.explore``); levels still unasked are asked at the next split.
MAX_EXPLORE = 3
DIR_DELIMITER = "/"
# A piece carries what its donor knew of the directories inside it (``Cursor.knowledge``), so its thief does
# not ask S3 again: at most MAX_KNOWN_DIRS directory names (S3 names at most 1,000 a request) of at most
# MAX_KNOWN_BYTES in all (UTF-8: a fleet's open item holds them front-coded, a write unit per KB, and a
# DynamoDB item at most 400 KB; names may be 1,024 bytes each). A piece with more carries none and its thief
# asks itself (a sample would leave gaps, and a level whose directories are not all known must not be taken
# as asked). Until 2026-11-28 the bound was 64 names: a donor cuts an answer's 1,000 into at most
# ``SplitPolicy.max_ways`` (16) pieces, 63 each on the mean, so about half the pieces cut from a wide level
# carried nothing (simulator, 25M users: 1,022 -> 735 directory requests, 11.12 -> 8.83 % LIST overhead;
# hashed-prefix 565 -> 263, 5.34 -> 4.37 %; 100M users 6.67 -> 6.11 %; bench/RESULTS.md).
MAX_KNOWN_DIRS = 1000
MAX_KNOWN_BYTES = 16 * 1024

# A directory level asked from its start tells its fan-out, and where it holds exactly one subdirectory
# ("<tenant>/files/", "<user>/data/") its answer names nothing past pos: the request only confirms the
# pattern. Once this many subdirectories of one parent were asked and each held exactly one, the others of
# that parent are taken to hold one too and are not asked (``Cursor.single``). A guess that is wrong for some
# directory misplaces cut points inside it (balance), never coverage: cuts are still real keys' bounds.
# Simulator, 25M multi-tenant (5,000 tenants, "<id>/files/<hex>"): 1,535 of its 1,576 directory requests
# were such confirmations, one per tenant a remainder crossed.
SINGLE_CHILD_PROOF = 2

# Directories of one depth often hold subdirectories of the same names: Hive-style partitions (every "day=DD/"
# holds "hour=00/" ... "hour=23/"), a project's "processed/" and "raw/". Once TEMPLATE_PROOF directories of a
# depth (below the run's prefix) were asked from their start and named exactly the same two or more
# subdirectories (one name alone is the one-child rule above), the others of that depth are taken to hold those
# and are not asked (``Cursor.children``): their names are the cut points and their count the fan-out, as if S3
# had answered. The keys listed check the guess: a key of a page's sample in a subdirectory the template does
# not name refutes it for that depth, whose directories are asked again; and a directory that has shown twice
# the keys of its siblings is asked anyway (``Cursor._outgrew``). A name the template gives that a directory
# lacks can only misplace a cut (balance: a piece that finds it empty costs a request), never coverage: cuts are
# bounds, not claims that keys exist. A template holds at most MAX_TEMPLATE_NAMES names (a wider level is a list
# of its own, not a pattern). Simulator, 25M logs-hourly (every day's hours asked from their start to size the
# day): 1,747 of the run's 1,853 directory requests were such answers, each naming the same 24 hours.
TEMPLATE_PROOF = 2
MAX_TEMPLATE_NAMES = 64

# A directory on pos's path whose siblings were small is not asked about either (its fan-out, from its
# start): it is asked only to size the directories after it, and to cut inside it. The siblings are sized by
# what was listed of them instead: the keys listed per sibling entered (``Cursor._sibling_mean``, from at
# least SIBLINGS_SEEN of them, or the donor's figure carried with the piece: ``DirKnowledge.sizes``). It is
# taken as small while what it has shown of itself (the keys listed in it, the size of pos's own directory in
# it) is less than SMALL_DIR_KEYS; past that it is asked as before. A large directory among small ones (a
# user of Zipf sizes) thus stays uncut for at most SMALL_DIR_KEYS keys of its listing, a few pages, and the
# rule applies where a request per directory costs most: where directories hold a few pages or less. (Until
# 2026-11-28 the bound was also twice the siblings' mean: of 50,000 users of Zipf sizes, 500 keys on the
# mean, every user past 1,000 keys was asked about, most of them too small for a piece of the split floor
# anyway; simulator, 25M users 1,690 -> 1,022 directory requests, 13.74 -> 11.12 % LIST overhead.)
# Simulator, 100M hashed-prefix (65,536 "<4 hex>/" tops of about 1,500 keys, 1-5 days each): 29,980 of the
# run's 30,685 directory requests asked a top a stream had just entered, to size the tops after it. (Tried
# and not kept: a bound of 16,000 keys, twice the default split floor, without the look at pos's own
# directory: a deep-tree run of about 148,000 keys after runs of 8,000 on average was taken as small and
# listed alone, 25M deep-tree 12.3 -> 19.7 s.)
SMALL_DIR_KEYS = 4000
SIBLINGS_SEEN = 2

# A remainder that holds at least this many directories S3 named is cut in two at the middle one even when
# its estimate is below the split threshold. The estimate sizes a directory nobody listed like the one being
# listed; where directory sizes are skewed (tenants, projects: a few hold most keys) most are small, the
# estimate is far too low, and a refused split leaves the large ones behind the small ones in one stream
# (measured: a remainder of 23 tenants estimated at 15 pages held 720). The cut is at a real directory, so
# it costs at most one request (the donor's last partial page); fewer directories than this are too few to
# hide a large one often. Only a remainder whose range has used up the estimate it came with (or came without
# one) is halved so: within its estimate, its directories are as small as they look, and halving them again
# and again made pieces of a page or two (simulator, 25M hashed-prefix, 65,536 top-level directories of about
# 380 keys: 9,965 splits, 26.2 % more LIST requests than keys / 1,000, 11.8 s; halved only past the estimate:
# 593 splits, 7.4 %, 11.4 s).
BISECT_DIRS = 4

# A piece's pages start at its start, so its last page holds what is left of its keys after whole pages: a
# piece of K keys costs ceil(K / 1,000) requests, K / 1,000 and up to one more. Where the donor interpolates
# over a flat remainder, it knows the keys a piece will hold from the density it listed, so it sizes each piece
# but the last at whole pages less PAGE_MARGIN of a page (``Cursor._aligned_cuts``): its last page is then
# nearly full. The cost of a piece is the margin plus the chance that the piece holds more than its estimate
# by over the margin (its last page then holds a few keys): where keys are regular (counters, sequence
# numbers, the simulator's codes) a tenth of a request; where their count in a span is random (hashes), the
# chance that a piece's keys fall anywhere in a page, half a request as without. Pieces cut at equal
# fractions of a regular key space all hold the same keys modulo a page, so the run's overhead was whatever
# that remainder happened to be: simulator, 25M uniform, 490 of 1,036 ranges held K = 900 modulo 1,000
# (0.41 a range), a 12-digit counter 877 of 1,143 held 300 modulo 1,000 (0.72 a range; bench/RESULTS.md).
PAGE_MARGIN = 0.1

# Counters. Names that count (frame_000000.tif, frame_000001.tif, ...: frames, time steps, run numbers) take
# one value each of their code from its low end, and nothing listed says how far they go: the whole space of
# their padded width ("frame_999999"), right for hashes and ids spread over it, was up to a thousand times what
# a directory held, every split spread its pieces over that space and nearly all of them found it empty
# (simulator, 25M objects in 3,000 directories of frames numbered from 0, Zipf sizes: 33,290 empty pages,
# 140 % LIST overhead). A run of keys whose code values are dense -- at least one key every alphabet-size
# values and at most one a value (more is a code that names directories) -- is a counter, and what is left of
# it is taken to be COUNTER_AHEAD times the values it has reached (``counter_left``): a counter at 4,937 goes
# on to about 9,874, a guess that grows as the listing does; never more than its space. Only where the range
# reaches to the end of the counter's directory, the extent nothing listed tells: not in an open range (the
# bucket's or the prefix's first range, then its last piece: the frontier nobody else explores, whose split
# costs at most a request a piece found empty, once), nor in a piece that ends at a cut inside the directory
# (its donor sized it; a piece near the start of a large counter sized by what it had reached was refused
# its splits: simulator, one counter of 100M keys, 24.5 -> 31.2 s).
# A counter is read in all ten decimal digits where its sample shows digits only (``CodeRun.decimal``): a page's
# sample of a directory's first hundred frames seldom shows all ten at each position.
COUNTER_AHEAD = 1.0
# A counter so sized at between one and two split floors is refused no split: its donor keeps what the estimate
# holds and gives the rest (empty, by the guess above, half the time: a request). Refused, the runs of a fleet
# short of pieces were listed by one stream each while a thousand listers waited (simulator, 25M frames seed 6:
# 100-250 streams listing from t = 7 to 16 s, 21.0 s; given, 15.9 s at most over seeds 1-6, for 1-1.6 points of
# LIST requests more). ``Cursor.capped`` marks the estimates so sized.
COUNTER_MAX_AHEAD = 2**53

# Names made of fields. A directory's names are often fields: "logs/2025-01-01-10-<hex>" (S3 server access logs:
# a year of hours in one flat directory), "<sample>_S1_L001_R1_001.fastq.gz" (lanes, reads, chunks). A page shows
# only its last fields varying, so the code read from it is the hour, or the hex tail under one hour, and what
# lies past the last name that code can spell -- the next hours, days, months -- is no part of any estimate: an
# open remainder so sized at the rest of a day was refused its splits or cut inside that day, and its last piece,
# the rest of the year, went on hop by hop, a day a hop (simulator, 25M access-logs: 522.9 s). Where the names'
# fields have rolled over while the cursor listed them (``Cursor._fields_rolled``) and nothing else sizes the
# directory (no size of its siblings that it has not outgrown twice, no estimate from the donor left; for its
# own size, no directory known after it in the remainder), what is left of it is of unknown extent
# (``Cursor._leaf_open``): unsized, and cut at the next values each field may take, as an open remainder is
# (``_open_points``: the next hours, days, months and years; not a field that repeats one of the directory's
# path), the pieces then cut by interpolation by their thieves (25M access-logs 11.9 s, 8.96 % LIST overhead;
# bench/RESULTS.md). Its size by the one field's code is not carried to thieves as its siblings' size
# (``Cursor.units``) whether or not a field has rolled over yet (``Cursor._fielded``), and a size the cursor set
# itself at a split is no estimate from a donor: six buckets' logs, each under a prefix of its own, were sized by
# the hour the first page was in and listed a day a hop (access-logs-multi: 157.1 s at 25M before any of this,
# 778.6 s at 100M while a sibling size held however far the directory outgrew it), and at 1B, where an hour is
# 124 pages, the one "logs/" was listed an hour a hop (1B access-logs 4,762.6 s while only a directory whose
# fields had rolled kept its size to itself). Names whose sample spans a change of a field before the last read as the code of
# pos's own group of names (``Cursor._field_group``), of at least MIN_GROUP_KEYS sampled names (25M fastq-runs
# 31.9 s / 82.31 % LIST overhead before). The rollover cuts still land in empty space where a field ends below
# its class's last digit (days past 28, lanes past 4): an open problem.
MIN_GROUP_KEYS = 3

# GROUPS. Where such names end in a counter ("<sample>_S1_L001_R1_0001.fastq.gz": lanes and reads, each a series of
# numbered chunks), the names sharing pos's fields up to the counter are pos's *group* ("..._L001_R1_",
# ``Cursor._pos_group``), and a remainder that reaches past it holds the group's rest, which the counter sizes (as
# far again as it reached: COUNTER_AHEAD), and other groups, which nothing listed sizes. Sized as one series, a
# directory of eight was listed a counter's doubling a hop, and a remainder crossing directories was sized at its
# first series' rest and never asked about (simulator, 25M fastq-runs: 19 hops through one sample from t = 12.2 to
# 21 s). So where a group holds at least a split floor of keys, the remainder is cut in two parts
# (``Cursor._group_cuts``, cut path "group"): the group's rest in whole pages by its counter, then at the next value
# of each field before the counter (``_field_cuts``: "L001_R2", "L002", not "L01"), each piece estimated as one
# group. A piece cut so inside the directory carries that estimate, and its thief takes it for its own group's size
# where it says more than the counter's reach. A smaller group leaves the directory to the other paths; wherever the
# remainder reaches past pos's group its estimate is bounded by the group's counter (``_counter_left``,
# ``Cursor._counter_group``), not by an interpolation that closed the read letter over G-Z and the lane digits over
# 0-9 (a thief's piece "..._L002" to "..._L01" sized at 1.86M keys a piece and cut 7 ways, 5 of them empty); and a
# remainder so bounded is still asked about its directories (``explore_all``) while the bound is under two split
# floors: the bound sizes the group, not what follows it (25M frames 16.0 -> 13.8 s). Simulator, 25M fastq-runs
# 22.1 -> 12.6 s, 28.28 -> 11.79 % LIST overhead (seeds 1-2); at 100M and 1B, bench/RESULTS.md.

# An estimate of more keys than S3 holds in all (over 400 trillion objects in 2025, about 4e14) is no size: it
# comes from an interpolation over an alphabet no name fills (a remainder across directories, a directory's names
# read as one code over their fields), and a directory of fields that roll over in a piece that carried one was
# taken as sized by its donor (``_leaf_open``): six buckets' access logs, a bucket's rest carried at 3.4e20 keys was
# sized by its stream as the rest of one day (with the calendar's limits, ``keys.calendar_limits``) and listed alone
# a day a hop (simulator, 25M access-logs-multi 41.3 s; 14.3 s with the rule). (Taken as no estimate anywhere, as
# ``inherited_pages``: 25M users 12.6 -> 13.6 s.)
MAX_ESTIMATE_KEYS = 10**15

# Cuts placed at the prefix's own level when nothing there was sampled: the space above is unknown, and
# every cut that lands in empty space costs a request, so only a few.
UNKNOWN_LEVEL_CUTS = 4


def _open_cut_values(seen: Iterable[int], above: int, ways: int) -> list[int]:
    """Up to ``ways - 1`` characters (code points) greater than ``above`` at which to cut an open remainder.

    Values of classes seen at this position come first (spread evenly over them), then the other classes
    (ASCII punctuation, non-ASCII characters).
    """
    seen = set(seen)
    seen_classes = [c for c in _CLASSES if any(c[0] <= v <= c[1] for v in seen)]
    other = [c for c in _CLASSES if c not in seen_classes]
    candidates: list[int] = []
    for c in seen_classes + other:
        candidates += [v for v in _class_values(c) if v > above]
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
    lo_k = lo if lo is not None else prefix
    ordered = sorted(set(sample))
    points: list[str] = []
    code = code_run(ordered, len(prefix))
    top = code_top(code, ordered, prefix)
    if hi is None and top is not None and lo_k < top and ways > 2:
        # the keys are a code: the space above lo ends past the alphabet's last character; cut it as a
        # bounded range and leave what lies above (most likely nothing: one request) as the last, open piece
        return [*cut_points(lo, top, prefix, sample, ways - 1), top]
    if hi is None:
        points = _open_points(lo_k, prefix, ordered, ways, code)
    else:
        if lo_k >= hi:
            return []
        split_at = len(common_prefix(lo_k, hi))
        leaf = lo_k.rfind("/")
        named_by_code = code is not None and code.start <= split_at and lo_k.find("/", split_at) == code.end
        if leaf >= split_at and hi > _past(lo_k[: leaf + 1]) and not named_by_code:
            # lo sits inside a directory that end is not in (and end is not just past it: "0" is the
            # character after "/"): between them lie sibling directories, which interpolation would treat
            # as a filled space ("month=15"). Cut at the siblings lo's own path suggests, below end, as for
            # an open remainder. Unless the siblings' names are the code (tenant ids, hashes: the positions
            # from where lo and end part to the end of that name are the code's): its alphabet fills the
            # space between them, and interpolation spreads the cuts over it. (Cut as an open remainder,
            # 5,000 hex-named tenants of which S3 had named the first 1,000: eleven of fifteen cuts fell
            # next to lo, the last three pieces held 93 % of the tenants, and in the simulator the listing
            # of 1B such keys swept the ten S3 partitions one after the other.)
            points = [c for c in _open_points(lo_k, prefix, ordered, ways, code) if c < hi]
            if points:
                return points
        frame = _frame(lo_k, hi, ordered, code)
        if frame is None:
            return []
        for i in range(1, ways):
            p = frame.at(i / ways)
            if p is not None:
                # between directories named by the code, cut at a name (its directory's keys follow it)
                points.append(p[: code.end] if named_by_code and code is not None else p)
    # strictly increasing, strictly inside (lo, hi)
    out: list[str] = []
    last = lo_k
    for p in points:
        if p > last and (hi is None or p < hi) and p.startswith(prefix):
            out.append(p)
            last = p
    return out


def _frame(
    lo: str, hi: str, keys: Iterable[str], code: CodeRun | None, close_singletons: bool = False
) -> Interval | None:
    """The interval (lo, hi) in the alphabet learned from ``keys`` and both bounds; None when empty."""
    keys = (*keys, lo, hi)
    alphabet = Alphabet(close_singletons=close_singletons, code=code, limits=calendar_limits(keys))
    start = len(common_prefix(lo, hi))  # the interval's coordinates read these positions only
    alphabet.add_keys(keys, start, start + ALPHABET_POSITIONS)
    try:
        return Interval(lo, hi, alphabet)
    except ValueError:
        return None


def _listed_frame(
    first: str, hi: str, names: Iterable[str], code: CodeRun | None, pos: str
) -> tuple[Interval, int, int] | None:
    """The interval (first, hi) in the alphabet of ``names`` (``_frame``) and the coordinates of ``first`` and
    ``pos`` in it: the span a cursor listed, whose density sizes what lies ahead; None when the interval is empty
    or pos is not past first in it."""
    frame = _frame(first, hi, names, code)
    if frame is None:
        return None
    c_first, c_pos = frame.coord(first), frame.coord(pos)
    return (frame, c_first, c_pos) if c_pos > c_first else None


def code_top(code: CodeRun | None, ordered: Sequence[str], prefix: str) -> str | None:
    """When the keys under ``prefix`` are one code (hex names, ids; no directories): the first key past
    every key the code's alphabet can spell (``prefix + "g"`` for hex names); else None."""
    if code is None or not ordered or code.start != len(prefix):
        return None
    return code.top(ordered[0])


def _class_of(v: int) -> tuple[int, int] | None:
    return next((c for c in _CLASSES if c[0] <= v <= c[1]), None)


def _open_points(
    lo: str, prefix: str, sample: Sequence[str], ways: int, code: CodeRun | None = None
) -> list[str]:
    """Cut points above ``lo`` when nothing above it is known.

    A key above lo shares lo's first d characters and has a larger one at position d, for some d. For each d
    up to the deepest position where neighbouring sampled keys differ, the characters expected above lo[d]:
    - where the sampled keys differ at d: the values seen there above lo[d] (from other branches), or, if
      none, the rest of the smallest classes that hold the values seen (hex digits after "6": "7".."9";
      a position showing only a-f letters is not extended to g-z);
    - where every sampled key has the same character: only a digit is expected to change (the next directory
      "2024/1", the next year "2025"); a constant word ("files") is not cut;
    - at the prefix itself, when constant, the space above is unknown: a few cuts over every class, seen
      classes first.
    The cuts are shared out round-robin between the levels, shallowest first. A cut in empty space costs its
    thief one request; pieces near lo (likely dense) and far (unknown) are both covered.
    """
    base = len(prefix)
    ordered = sorted({*sample, lo})
    limits = calendar_limits(ordered)
    diffs = [len(common_prefix(a, b)) for a, b in itertools.pairwise(ordered)]
    deepest = min(max([base, *diffs]), max(base, len(lo) - 1))
    levels: list[tuple[int, list[int]]] = []
    for d in range(deepest, base - 1, -1):
        above = ord(lo[d]) if d < len(lo) else -1
        everywhere = {ord(k[d]) for k in ordered if len(k) > d}
        if code is not None and code.covers(d) and above in code.alphabet:
            # inside the code the keys end in: every position takes the code's whole alphabet, whatever
            # one page showed of it
            values = sorted(v for v in code.alphabet if v > above)
        elif len(everywhere) > 1:
            values = sorted(v for v in everywhere if v > above)
            if not values:
                classes = {c for v in everywhere if (c := _class_of(v)) is not None}
                values = sorted(v for c in classes for v in _class_values(c) if v > above)
        elif d == base:
            values = _open_cut_values(everywhere, above, UNKNOWN_LEVEL_CUTS + 1)
        else:
            values = list(range(max(above + 1, 0x31), 0x3A)) if 0x30 <= above <= 0x39 else []
        if d in limits:
            # a calendar field's tens digit: no cut past its last value (a day's 3)
            values = [v for v in values if v in limits[d] or v not in DECIMAL_DIGITS]
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
    points: set[str] = set()
    for (d, values), take in zip(levels, share, strict=True):
        step = len(values) / take if take else 0
        for i in range(take):
            v = values[int(i * step)]
            # a value of a class need not be a character (a surrogate): the next one is
            ch = chr(v) if not 0xD800 <= v <= 0xDFFF else char_after(v)
            if ch is not None:
                points.add(lo[:d] + ch)
    return sorted(points)


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
    # Directories found by ``explore`` requests (each a real common prefix: a non-empty directory), sorted;
    # the levels already asked (a level is asked once: its answer stays true above pos), and how many
    # directories each level asked from its start holds (its fan-out, for the estimate of a remainder).
    dir_cuts: list[str] = field(default_factory=list)
    explored: set[str] = field(default_factory=set)
    fanout: dict[str, int] = field(default_factory=dict)
    # parent -> how many of its subdirectories asked from their start held exactly one directory, or -1 once
    # one held another number (see SINGLE_CHILD_PROOF)
    single: dict[str, int] = field(default_factory=dict)
    # depth below the prefix -> (the subdirectory names, relative, that directories of that depth asked from
    # their start held, how many held exactly those), or ((), -1) once one held others (see TEMPLATE_PROOF)
    children: dict[int, tuple[tuple[str, ...], int]] = field(default_factory=dict)
    # levels on pos's path whose subdirectories were taken from ``children`` instead of asked
    templated: set[str] = field(default_factory=set)
    # The last directory of an answer S3 truncated: above it, directories are not known.
    dirs_known_upto: str | None = None
    # The same, level by level (level -> the last directory S3 named of it), for ``knowledge``.
    level_upto: dict[str, str] = field(default_factory=dict)
    # Levels asked from a position in the remainder (not from their start): their answer, truncated or not,
    # is what S3 says of the remainder there, and is not asked again (``_answer_behind``).
    asked_from_pos: set[str] = field(default_factory=set)
    # Keys taken before the first key of each directory on pos's path (below the prefix): how many keys its
    # directories hold so far (``_listed_in``; a directory the range starts inside counts from the start).
    entered: dict[str, int] = field(default_factory=dict)
    # The first key taken in pos's own directory and the keys taken in it up to pos, when the listing entered it
    # (``_leaf_listed``): a directory entered in the middle of a page is sized and cut by its own keys.
    leaf_first: str | None = None
    # level -> (pos, objects) when every subdirectory of the level after pos became known (asked from pos, or
    # carried by the donor): the subdirectories entered since, and the keys listed since, size them
    # (``_sibling_mean``); and (pos, subdirectories entered up to it) counted last.
    dir_ref: dict[str, tuple[str, int]] = field(default_factory=dict)
    _sib_count: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False, compare=False)
    # level -> keys per subdirectory by the donor's count (DirKnowledge.sizes), until this cursor has its own
    carried_mean: dict[str, float] = field(default_factory=dict)
    # level -> keys per subdirectory in the last tree estimate, where measured or known by fan-outs
    units: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    est_from: int = 0  # ``objects`` when range.estimate was set (the estimate is of what lay ahead then)
    # How the last split chose its cut points, a diagnostic (bench.estimate_quality --by-path): "bisect", "tree",
    # "named", "known", "leaf" or "flat", the paths of ``split`` in its order; "" before any split cut.
    cut_path: str = field(default="", repr=False, compare=False)
    # ``_estimate``'s last answer, for the cursor's state then: ``rev`` counts the changes to that state
    # (a page taken, directories learned, a split), so ``explore`` and ``split`` of one attempt share it
    rev: int = field(default=0, repr=False, compare=False)
    _memo: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    # ``rev`` when the estimate last sized a counter by its reach (``counter_left``), for ``split``
    capped: int = field(default=-1, repr=False, compare=False)
    # whether this cursor has split: its range's estimate is then its own (``_give``), not its donor's
    has_split: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.pos is None:
            self.pos = self.range.start_after
        known = self.range.known
        if known is not None and self.range.start_after is not None:
            # the donor's answers, true inside this range: as if this cursor had asked them itself
            self.explored.update(known.levels)
            self.fanout.update(known.fanout)
            self.single.update(known.single)
            self.children.update((depth, (names, n)) for depth, names, n in known.children)
            self.dir_cuts = sorted({*self.dir_cuts, *known.dirs})
            self.dir_ref.update((level, (self.range.start_after, 0)) for level in known.levels)
            self.carried_mean.update(known.sizes)

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
        self.rev += 1
        self.pages += 1
        n = len(keys)
        end = self.range.end
        if end is not None and n and keys[-1] > end:
            n = bisect.bisect_right(keys, end)
            self.done = True
        if n:
            if self.first is None:
                self.first = keys[0]
            before = self.pos
            self.objects += n
            self.page_n = n
            self.pos = keys[n - 1]
            self._enter(keys, n, self.objects - n)
            step = max(1, n // SAMPLE_KEYS)
            self.sample = [keys[i] for i in range(0, n, step)]
            if self.sample[-1] != self.pos:
                self.sample.append(self.pos)
            if any(v > 0 for v in self.single.values()):
                self._refute_single([before, *self.sample] if before is not None else self.sample)
            if self.templated:
                self._refute_template(self.sample)
        if not self.done:
            if not truncated:
                self.done = True
            elif not next_token:
                raise RuntimeError("S3 answered IsTruncated without a continuation token")
            else:
                self.token = next_token
        return n

    def _enter(self, keys: Sequence[str], n: int, before: int) -> None:
        """Note where each directory on the new pos's path began (``entered``): ``before`` keys were taken
        before the page's ``n`` keys."""
        assert self.pos is not None
        pos, entered = self.pos, self.entered
        if entered:
            deepest = next(reversed(entered))  # the path's directories are kept in order, deepest last
            if pos.startswith(deepest) and pos.find(DIR_DELIMITER, len(deepest)) < 0:
                return  # the same path as the last key's
        elif pos.find(DIR_DELIMITER, len(self.prefix)) < 0:
            return  # a file at the prefix's own level: no directory below it
        path = self._levels()[1:]
        self.entered = {
            d: entered[d] if d in entered else before + bisect.bisect_left(keys, d, 0, n) for d in path
        }
        if path and path[-1] not in entered:
            self.leaf_first = keys[bisect.bisect_left(keys, path[-1], 0, n)]
        # what was learnt of levels pos has left says nothing of the levels it is in: forget it (bounded state)
        for facts in (self.dir_ref, self._sib_count, self.units):
            for level in [level for level in facts if not pos.startswith(level)]:
                del facts[level]
        self.templated = {level for level in self.templated if pos.startswith(level)}

    def _listed_in(self, directory: str) -> int | None:
        """Keys listed in ``directory`` (one on pos's path) so far; None if not known."""
        at = self.entered.get(directory)
        return None if at is None else self.objects - at

    def _sibling_mean(self, level: str) -> float | None:
        """Keys per subdirectory of ``level`` listed since every one after pos became known (``dir_ref``):
        the keys listed since, over the subdirectories entered since (at least SIBLINGS_SEEN; the two partly
        listed at either end make about one); until then the donor's (``carried_mean``), else None. None too
        when S3 named them only up to before pos."""
        ref = self.dir_ref.get(level)
        pos = self.pos
        if ref is None or pos is None:
            return self.carried_mean.get(level)
        upto = self.level_upto.get(level)
        if upto is not None and upto < pos:
            return None
        scanned, count = self._sib_count.get(level, (ref[0], 0))
        i = bisect.bisect_right(self.dir_cuts, scanned)
        j = bisect.bisect_right(self.dir_cuts, pos)
        count += sum(1 for d in self.dir_cuts[i:j] if _parent(d) == level)
        self._sib_count[level] = (pos, count)
        if count < SIBLINGS_SEEN:
            return self.carried_mean.get(level)
        return (self.objects - ref[1]) / count

    def _small_child(self, level: str) -> bool:
        """Whether ``level``, a directory on pos's path, is taken to be too small to be cut inside (see
        SMALL_DIR_KEYS): its siblings listed were, and what it has shown of itself -- the keys listed in it, the
        size of pos's own directory in it -- is less than SMALL_DIR_KEYS."""
        mean = self._sibling_mean(_parent(level))
        if mean is None or mean >= SMALL_DIR_KEYS:
            return False
        listed = self._listed_in(level)
        leaf = self._leaf_size(self._levels()[-1])
        return (
            listed is not None and leaf is not None and listed < SMALL_DIR_KEYS and leaf[1] < SMALL_DIR_KEYS
        )

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
        return self._estimate(page_keys)[0]

    def _estimate(self, page_keys: int) -> tuple[float | None, Tree | None]:
        """``remaining_pages`` and the tree it came from (``_tree_estimate``; None: not from a tree)."""
        state = (self.rev, self.pos, self.done, self.range, page_keys)
        if self._memo is not None and self._memo[0] == state:
            return self._memo[1]
        out = self._estimate_now(page_keys)
        self._memo = (state, out)
        return out

    def _estimate_now(self, page_keys: int) -> tuple[float | None, Tree | None]:
        if self.done:
            return 0.0, None
        if self.first is None or self.pos is None:
            return None, None
        if self._leaf_crossed() is not None:
            tree = self._tree_estimate()
            if tree is not None:
                return tree[0] / page_keys, tree
        return self._flat_pages(self.range.end, page_keys), None

    def _flat_pages(self, end: str | None, page_keys: int) -> float | None:
        """The estimate of (pos, end] by interpolation over the keys listed (see ``remaining_pages``)."""
        assert self.first is not None and self.pos is not None
        if end is None:
            # an open range of keys ending in a code ends (for the estimate) where the code's alphabet does
            end = self._code_top()
            if end is None:
                return None
        if self.pos >= end:
            return 0.0
        model = self._flat_model(end)
        if model is None:
            return None
        frame, at, per_unit, cap = model
        if frame is None:
            return 0.0
        if cap < per_unit * (frame.hi_c - at):
            self.capped = self.rev  # a counter sized by its reach (``split``: its rest is given away)
        return min(per_unit * (frame.hi_c - at), cap) / page_keys

    def _code_top(self) -> str | None:
        """Where an open range of keys that are one code ends, for its estimate and its cuts: just past the
        code's alphabet (``code_top``); None when the keys listed are no code."""
        assert self.first is not None
        seen = sorted({self.first, *self.sample})
        return code_top(code_run(seen, len(self.prefix)), seen, self.prefix)

    def _flat_model(self, end: str) -> tuple[Interval | None, int, float, float] | None:
        """The interpolation ``_flat_pages`` sizes (pos, end] by: the interval (first, end) in the alphabet of
        the keys listed, pos's coordinate in it, the keys a coordinate unit holds (the density listed) and
        at most how many keys are left (``counter_left``; inf: no bound); None when unknown, a None interval
        when (pos, end] has no room for a key."""
        assert self.first is not None and self.pos is not None
        first, pos = self.first, self.pos
        objects = self.objects - 1  # the keys taken after first, up to pos
        page = sorted(set(self.sample))
        code = code_run(page, len(self.prefix))
        if code is not None and first[: code.start] != pos[: code.start]:
            # the listed span crosses directories (a sparse one, then this code): the density ahead, in the
            # same code, is the last page's
            first, objects = page[0], self.page_n - 1
        if first >= pos or objects <= 0:
            return None
        frame = _frame(first, end, sorted({first, *page}), code, close_singletons=True)
        if frame is None:
            return None, 0, 0.0, 0.0
        at = frame.coord(pos)
        read = at - frame.lo_c
        if read <= 0:
            return None
        cap = self._counter_left(code, first, pos, objects)
        if cap is None and (group := self._counter_group(end)) is not None:
            # a page that spans a change of a field before the counter reads as no code: pos's group's
            # counter bounds what is known of the remainder
            cap = group[2][3]
        return frame, at, objects / read, math.inf if cap is None else cap

    def _counter_group(
        self, end: str | None
    ) -> tuple[int, str, tuple[Interval, int, float, float, float]] | None:
        """Where the names of pos's directory are fields ending in a counter and (pos, ``end``] reaches past
        pos's group (``end`` None: an open remainder does): (where the counter starts, the first key past the
        group, ``_group_model``); else None."""
        if self.pos is None:
            return None
        leaf = _parent_of(self.pos)
        group = self._pos_group(leaf)
        if group is None or (end is not None and end < group[2]):
            return None
        ordered, at, group_past = group
        model = self._group_model(leaf, ordered, at, group_past)
        return None if model is None else (at, group_past, model)

    def _began_inside(self, leaf: str) -> bool:
        """Whether the range began inside directory ``leaf``: its first key taken is not its first name."""
        start_after = self.range.start_after
        return start_after is not None and start_after > leaf and start_after.startswith(leaf)

    def _aligned_cuts(
        self,
        ways: int,
        page_keys: int,
        hi: str | None,
        model: tuple[Interval | None, int, float, float] | None,
        rest: bool = False,
    ) -> tuple[list[str], list[float]] | None:
        """Cut points for a remainder (pos, hi] into ``ways`` pieces of about equal keys, each but the last
        sized at whole pages less PAGE_MARGIN by the interpolation ``model`` (an interval over the keys,
        pos's coordinate in it and the keys a unit holds: ``_flat_model`` for a flat range,
        ``_leaf_cut_model`` for the files of pos's directory), and the keys of each piece; None where there
        is no such model, no ``hi``, a piece of under a page or a cut with no room.

        A counter's pieces lie within what is left of it by ``counter_left``; the last reaches to ``hi``.
        ``rest``: a counter whose rest is given away (COUNTER_AHEAD): the first piece holds its whole estimate.

        (The files of a directory interpolated up to the directory's end, in the alphabet closed over each
        position's class as ``_flat_pages`` estimates, spread cuts past the last file: in the simulator, 25M
        dated, 5,328 empty pieces. Up to the last name the code of the names can spell, they stay among
        them.)"""
        if ways < 2 or hi is None or model is None or model[0] is None or self.pos is None:
            return None
        frame, at, per_unit, cap = model
        assert frame is not None
        if self.pos >= hi or per_unit <= 0:
            return None
        if rest:
            cap *= 2  # two pieces of the estimate each: the first cut where the estimate ends
        total = min(per_unit * (frame.coord(hi) - at), cap)
        share = total / ways / page_keys  # pages a piece
        if share < 1:
            return None
        margin = PAGE_MARGIN * page_keys
        cuts: list[str] = []
        sizes: list[float] = []
        last_pages = 0
        for i in range(1, ways):
            pages = max(last_pages + 1, round(i * share))
            keys = pages * page_keys - i * margin  # whole pages less a margin, each piece before this cut
            if keys >= total:
                break
            cut = frame.key_at(at + math.ceil(keys / per_unit))
            if cut is None or not (self.pos < cut < hi) or (cuts and cut <= cuts[-1]):
                return None
            if not cut.startswith(self.prefix):
                return None
            sizes.append((pages - last_pages) * page_keys - margin)
            cuts.append(cut)
            last_pages = pages
        if not cuts:
            return None
        sizes.append(total - sum(sizes))
        return cuts, sizes

    def _crossing_pages(self, page_keys: int) -> tuple[float | None, Tree | None]:
        """Pages left in a remainder that crosses directories: the estimate from the explored tree, else
        the donor's, never less than what is left in the directory being listed plus one directory like it
        (the remainder reaches past that directory, and a directory nobody listed is sized like the one being
        listed, as in ``_tree_estimate``), else None; and the tree when the estimate came from one.

        Without the directory like it, a piece whose donor sized its directories like a small one it was
        listing (projects of Zipf sizes) kept that estimate while its stream entered a project a thousand
        times larger: the estimate stayed under twice the split floor, so the project's levels were never
        asked and it was listed alone until the donor's estimate ran out (simulator, 25M uuid-projects: 20.6 s
        -> 18.4 s, seeds 2-3 18.1 -> 17.1 s; the other shapes as before; bench/RESULTS.md)."""
        est, tree = self._estimate(page_keys)
        levels = self._leaf_crossed()
        if est is not None or levels is None:
            return est, tree
        inherited = self.inherited_pages(page_keys)
        if inherited is None:
            return None, None
        leaf = self._leaf_size(levels[-1])
        return (max(inherited, (leaf[0] + leaf[1]) / page_keys) if leaf is not None else inherited), None

    def left_by_estimate(self, objects: int | None = None) -> float:
        """Keys left in the range by the estimate it last got (its donor's, or this cursor's at its last
        split), less what was listed since; ``inf`` for a range that came without one (the bucket's first
        range, a piece of an open remainder). The order in which a fleet lister's streams give to other
        listers, largest first (``fleet.Lister.wanted``): O(1). ``objects``: the keys listed so far, when the
        caller counts them instead of this cursor (the simulator hands it only its last page)."""
        if self.range.estimate <= 0:
            return math.inf
        listed = self.objects if objects is None else objects
        return float(self.range.estimate - (listed - self.est_from))

    def inherited_pages(self, page_keys: int = 1000) -> float | None:
        """Pages left by the estimate the range came with (its donor's), while the listing has not passed
        it (an estimate found short says nothing more)."""
        if self.range.estimate <= 0:
            return None
        left = self.range.estimate - (self.objects - self.est_from)
        return left / page_keys if left > 0 else None

    def _levels(self) -> list[str]:
        """The directories holding ``pos`` from the run's prefix down: [prefix, prefix + "a/", ...]."""
        assert self.pos is not None
        return dir_levels(self.pos, self.prefix)

    def _leaf_crossed(self) -> list[str] | None:
        """``_levels()`` when the remainder reaches past the directory ``pos`` is in (its keys are then in
        other directories too), else None."""
        if self.pos is None:
            return None
        levels = self._levels()
        end = self.range.end
        if len(levels) < 2 or (end is not None and end.startswith(levels[-1])):
            return None
        return levels

    def _needed_levels(self, levels: list[str]) -> list[str]:
        """The levels whose directories the remainder spans: from the shallowest one whose child on the
        path of ``pos`` the remainder reaches past, down to the parent of ``pos``'s directory."""
        end = self.range.end
        out: list[str] = []
        for level, child in itertools.pairwise(levels):
            if out or end is None or not end.startswith(child):
                out.append(level)
        return out

    def _refute_single(self, ordered: Sequence[str]) -> None:
        """Keys listed in two subdirectories of one directory D show that D holds more than one: the guess
        that D's siblings hold one each (``single`` of D's parent) is refuted (-1), so their levels are asked
        again. (Simulator, 100M deep-tree: two runs of a project asked held one shard each, the third, taken
        to hold one, held more; its remainder, estimated at 6 pages instead of 45, was refused every split and
        listed alone for 5 s at the end of the run.)"""
        for a, b in itertools.pairwise(ordered):
            leaf = a.rfind(DIR_DELIMITER) + 1
            if leaf == b.rfind(DIR_DELIMITER) + 1 and a[:leaf] == b[:leaf]:
                continue  # two files of one directory (most pairs of a page): nothing to refute
            cut = common_prefix(a, b).rfind(DIR_DELIMITER) + 1
            d = a[:cut]
            if (
                len(d) > len(self.prefix)
                and d.startswith(self.prefix)
                and a.find(DIR_DELIMITER, cut) >= 0
                and b.find(DIR_DELIMITER, cut) >= 0
            ):
                self.single[_parent(d)] = -1

    def _single_child(self, level: str) -> bool:
        """Whether ``level``'s siblings asked showed a parent whose subdirectories hold one directory each
        (SINGLE_CHILD_PROOF): ``level`` is then taken to hold only the one ``pos`` is in."""
        return level != self.prefix and self.single.get(_parent(level), 0) >= SINGLE_CHILD_PROOF

    def _level_known(self, level: str, i: int) -> bool:
        """Whether the ``i``-th level a remainder spans (``_needed_levels``) needs no Delimiter request: it
        was asked, or, below the shallowest (which alone names the cut points past pos's path), it is taken
        to hold one subdirectory (``_single_child``) or to be too small to cut inside (``_small_child``), or
        its subdirectories are those of the template of its depth (``_from_template``, which learns them)."""
        if level in self.templated and self._outgrew(level):
            self._unlearn(level)  # larger than its siblings now: asked, as the template may not fit it
        return (
            (level in self.explored and not self._answer_behind(level))
            or (i > 0 and (self._single_child(level) or self._small_child(level)))
            or self._from_template(level)
        )

    def _depth(self, level: str) -> int:
        """How many directories below the run's prefix ``level`` is (the prefix itself: 0)."""
        return level[len(self.prefix) :].count(DIR_DELIMITER)

    def _from_template(self, level: str) -> bool:
        """Whether ``level``'s subdirectories are known from the template of its depth (TEMPLATE_PROOF): if
        so they are learnt now, as an answer from its start would be, and the level counts as asked."""
        if level == self.prefix or not level.startswith(self.prefix) or level in self.explored:
            return False
        names, n = self.children.get(self._depth(level), ((), 0))
        if n < TEMPLATE_PROOF:
            return False
        if self._outgrew(level):
            return False
        self.take_dirs(
            {"Prefix": level, "StartAfter": level, "Delimiter": DIR_DELIMITER},
            [level + name for name in names],
            template=True,
        )
        return True

    def _refute_template(self, keys: Sequence[str]) -> None:
        """A key listed (of a page's sample) in a subdirectory of a templated level that its template does
        not name refutes the template for that depth: its levels are forgotten (asked again when needed),
        the names it gave stay as cut points (a cut need not be a directory)."""
        for level in sorted(self.templated):
            if level not in self.templated:
                continue  # unlearnt with its depth, refuted by a key of a level before it
            depth = self._depth(level)
            names = self.children.get(depth, ((), -1))[0]
            for k in keys:
                if not k.startswith(level):
                    continue
                j = k.find(DIR_DELIMITER, len(level))
                if j >= 0 and k[len(level) : j + 1] not in names:
                    self._forget_template(depth)
                    break

    def _outgrew(self, level: str) -> bool:
        """Whether ``level`` has shown more keys than twice its siblings' (``_sibling_mean``): a directory that
        large is worth its own answer, and the one a wrong template would hurt most (its remainder sized by
        names it may not hold, and listed alone until its keys refute them)."""
        mean = self._sibling_mean(_parent(level))
        listed = self._listed_in(level)
        return mean is not None and listed is not None and listed >= 2 * mean

    def _unlearn(self, level: str) -> None:
        """Forget what the template said of ``level`` (the names it gave stay as cut points)."""
        self.templated.discard(level)
        self.explored.discard(level)
        self.fanout.pop(level, None)
        self.dir_ref.pop(level, None)
        self._sib_count.pop(level, None)
        self.rev += 1

    def _forget_template(self, depth: int) -> None:
        self.children[depth] = ((), -1)
        for level in [level for level in self.templated if self._depth(level) == depth]:
            self._unlearn(level)

    def _answer_behind(self, level: str) -> bool:
        """Whether ``level`` was asked from its start (for its fan-out) and S3 cut the answer short at or
        before ``pos``: it names none of the remainder's directories there, so the level is asked again, once,
        from ``pos``. (Simulator, 50,000 users under "home/": a stream's remainder past its user was taken to
        hold only that user's last files and never split; the stream listed 24,000 pages alone for an hour.)
        A level once asked from a position is not asked again: its answer may end in files, which
        ``take_dirs`` does not see, so a last directory at or before ``pos`` does not show that it is behind."""
        if level in self.asked_from_pos:
            return False
        upto = self.level_upto.get(level)
        return upto is not None and self.pos is not None and upto <= self.pos

    def _levels_known(self, needed: list[str]) -> bool:
        """Whether no level of ``needed`` (``_needed_levels``, shallowest first) needs a Delimiter request."""
        return all(self._level_known(level, i) for i, level in enumerate(needed))

    def _known_dirs(self) -> list[str]:
        """Discovered directories strictly inside the remainder (pos, end)."""
        pos, end = self.pos, self.range.end
        if pos is None:
            return []
        i = bisect.bisect_right(self.dir_cuts, pos)
        j = len(self.dir_cuts) if end is None else bisect.bisect_left(self.dir_cuts, end)
        return self.dir_cuts[i:j]

    def explore(self, ways: int, policy: SplitPolicy | None = None) -> dict[str, Any] | None:
        """The first of ``explore_all``'s requests, or None."""
        queries = self.explore_all(ways, policy, limit=1)
        return queries[0] if queries else None

    def explore_all(
        self, ways: int, policy: SplitPolicy | None = None, limit: int = MAX_EXPLORE
    ) -> list[dict[str, Any]]:
        """The Delimiter requests worth sending before a ``ways``-way split (at most ``limit``), shallowest
        level first; the caller may send them at once, since each asks about a level of its own.

        Only a remainder that reaches past the directory ``pos`` is in, and is not known to be too small to
        split, is asked about: each level it spans once, shallowest first. An estimate bounded by a counter's
        reach (``capped``) sizes that counter's directory or group, not what follows it, and does not show the
        remainder small (without, 25M frames 13.8 -> 16.0 s, fastq-runs 12.6 -> 35.4 s; bench/RESULTS.md). The
        shallowest is asked from ``pos`` on (its directories after ``pos`` are the cut points); the deeper ones,
        which hold ``pos``, from their start (their fan-out sizes the directories above them). The caller sends
        the request (adding Bucket) and hands the CommonPrefixes to ``take_dirs``.
        """
        if self.done or ways < 2 or not self.pages or self.pos is None:
            return []
        levels = self._leaf_crossed()
        if levels is None:
            return []
        if policy is not None:
            est, _ = self._crossing_pages(policy.page_keys)
            if est is not None and est < 2 * policy.min_split_pages and self.capped != self.rev:
                return []  # split would refuse it anyway
        out: list[dict[str, Any]] = []
        for i, level in enumerate(self._needed_levels(levels)):
            if self._level_known(level, i):
                continue
            if len(out) >= limit:
                break
            params: dict[str, Any] = {"Delimiter": DIR_DELIMITER, "MaxKeys": 1000}
            params["StartAfter"] = self.pos if i == 0 or self._answer_behind(level) else level
            if level:
                params["Prefix"] = level
            out.append(params)
        return out

    def take_dirs(
        self,
        request: dict[str, Any],
        common_prefixes: Sequence[str],
        truncated: bool = False,
        *,
        template: bool = False,
    ) -> None:
        """Learn the answer to an ``explore`` request: its common prefixes are directories with keys
        (``truncated``: S3 had more to say, so nothing above the last one is known). ``template``: the
        answer is the template of the level's depth (``_from_template``), not S3's."""
        level = request.get("Prefix", "")
        self.rev += 1
        self.explored.add(level)
        if template:
            self.templated.add(level)
        from_start = request.get("StartAfter") == level
        if not from_start:
            self.asked_from_pos.add(level)
            upto = self.level_upto.get(level)
            if self.pos is not None and (level not in self.dir_ref or (upto is not None and upto < self.pos)):
                # the subdirectories after pos are known from here on (``_sibling_mean``)
                self.dir_ref[level] = (self.pos, self.objects)
                self._sib_count.pop(level, None)
        elif not truncated and self.pos is not None and level not in self.dir_ref:
            # asked from its start and answered in full: its subdirectories after pos are known too
            self.dir_ref[level] = (self.pos, self.objects)
            self._sib_count.pop(level, None)
        if from_start and not truncated:
            self.fanout[level] = len(common_prefixes)
            if level != self.prefix and level.startswith(self.prefix) and not template:
                parent = _parent(level)
                seen = self.single.get(parent, 0)
                if seen >= 0:
                    self.single[parent] = seen + 1 if len(common_prefixes) == 1 else -1
                names = tuple(p[len(level) :] for p in common_prefixes if p.startswith(level))
                depth = self._depth(level)
                known, n = self.children.get(depth, (names, 0))
                if n >= 0:
                    fits = names == known and 2 <= len(names) <= MAX_TEMPLATE_NAMES
                    self.children[depth] = (names, n + 1) if fits else ((), -1)
        found = [p for p in common_prefixes if p.startswith(self.prefix) and p > (self.pos or "")]
        if truncated:
            # nothing of this level past the last name is known (if it named none after pos: nothing after pos)
            self.level_upto[level] = common_prefixes[-1] if common_prefixes else (self.pos or "")
        elif request.get("StartAfter") == self.pos:
            # every directory of this level after pos is known now
            self.level_upto.pop(level, None)
        if found:
            self.dir_cuts = sorted({*self.dir_cuts, *found})
            if truncated and (self.dirs_known_upto is None or found[-1] > self.dirs_known_upto):
                self.dirs_known_upto = found[-1]

    def knowledge(self, start_after: str | None, end: str | None) -> DirKnowledge | None:
        """What this cursor knows of the directories inside ``(start_after, end]``, a piece of its remainder
        it gives away (None: nothing worth carrying).

        A level counts when its directories inside the piece are all known: it holds the piece's start (a
        level that does not lies wholly below the piece, as every level asked holds some earlier ``pos``), and
        its answer was not truncated before the piece's end. Its fan-out holds wherever it is used. The
        directories are those named strictly inside the piece; more than ``MAX_KNOWN_DIRS`` (or
        ``MAX_KNOWN_BYTES``) carry nothing.
        The one-child counts and the keys per subdirectory (``_sibling_mean``, else the tree estimate's size
        where it was measured or multiplied by known fan-outs only) of the directories holding the piece's
        start travel in any case.
        """
        if start_after is None:
            return None  # the whole key space from its start: nothing was asked below it
        levels = []
        for level in sorted(self.explored):
            if not start_after.startswith(level):
                continue
            upto = self.level_upto.get(level)
            if upto is not None and (end is None or upto < end):
                continue
            levels.append(level)
        single = tuple(
            (parent, n) for parent, n in sorted(self.single.items()) if start_after.startswith(parent)
        )
        children = tuple((depth, names, n) for depth, (names, n) in sorted(self.children.items()))
        sizes = tuple(
            (parent, round(mean))
            for parent in sorted({*self.dir_ref, *self.carried_mean, *self.units})
            if start_after.startswith(parent)
            and (mean := self._sibling_mean(parent) or self.units.get(parent)) is not None
        )
        i = bisect.bisect_right(self.dir_cuts, start_after)
        j = len(self.dir_cuts) if end is None else bisect.bisect_left(self.dir_cuts, end)
        if not levels or j - i > MAX_KNOWN_DIRS or _utf8_len(self.dir_cuts[i:j]) > MAX_KNOWN_BYTES:
            # no level whose directories inside the piece are all known: only the patterns travel
            if not (single or sizes or children):
                return None
            return DirKnowledge(single=single, sizes=sizes, children=children)
        fanout = tuple(
            (level, n) for level, n in sorted(self.fanout.items()) if start_after.startswith(level)
        )
        return DirKnowledge(
            levels=tuple(levels),
            fanout=fanout,
            dirs=tuple(self.dir_cuts[i:j]),
            single=single,
            sizes=sizes,
            children=children,
        )

    def _counter_left(self, code: CodeRun | None, first: str, pos: str, after: int) -> float | None:
        """``counter_left`` where the range reaches to the end of pos's directory (or past it); None where
        it is open, or ends at a cut inside that directory (see COUNTER_AHEAD)."""
        end = self.range.end
        if end is None:
            return None
        leaf = _parent_of(pos)
        if len(leaf) <= len(self.prefix):
            return None
        if end < _past(leaf) and not self._past_group(leaf, end):
            return None
        return counter_left(code, first, pos, after)

    def _past_group(self, leaf: str, end: str) -> bool:
        """Whether ``end`` lies past pos's group of names in ``leaf``, pos's directory (``_pos_group``)."""
        group = self._pos_group(leaf)
        return group is not None and end >= group[2]

    def _pos_group(self, leaf: str) -> tuple[list[str], int, str] | None:
        """Where the names of ``leaf`` (pos's directory) are fields (``_fielded``): pos's *group*, the names
        sharing pos's fields up to the last one the sampled names vary in ("..._L004_R2_" of
        "..._L004_R2_0417.fastq.gz"), as (the sampled names with pos, sorted; where that last field starts;
        the first key past the group); else None (see GROUPS)."""
        names = self._leaf_names(leaf)
        pos = self.pos
        if names is None or pos is None or len(leaf) <= len(self.prefix):
            return None
        ordered, at = names
        if not len(leaf) < at <= len(pos) or not _digit_field_before(pos, leaf, at):
            return None
        after = char_after(ord(pos[at - 1]))  # (the separator before the last field: "_" -> "`")
        return None if after is None else (ordered, at, pos[: at - 1] + after)

    def _leaf_listed(self, leaf: str) -> tuple[str, int] | None:
        """(the first key taken in ``leaf``, pos's directory, and the keys taken in it up to pos), when every
        key of it from that one on was taken by this cursor: the range starts in it, or the listing entered
        it; else None."""
        if self.first is None or self.pos is None or not self.pos.startswith(leaf):
            return None
        if self.first.startswith(leaf):
            return self.first, self.objects
        at = self.entered.get(leaf)
        if at is None or self.leaf_first is None or not self.leaf_first.startswith(leaf):
            return None
        return self.leaf_first, self.objects - at

    def _leaf_code(self, ordered: Sequence[str], leaf: str) -> CodeRun | None:
        """The code the names of ``leaf`` (pos's directory) end in (``keys.code_run`` of ``ordered``: its first
        key taken, the keys sampled in it and pos), for the sizes and cuts of what is left of it.

        ``code_run`` extends a code left over constant positions whose characters are in its alphabet: a
        digest's leading characters, which the keys listed so far did not vary. When the cursor took the
        directory's keys from its first name on (the range began before it), those positions of a digest
        show the alphabet's lowest character in that first name ("0003a9..."); a constant that is not the
        lowest ("..._20250115T" before a random tail, the date every name of a day's directory repeats) is
        part of the names' fixed text, and the code starts after it. (Read as code, the date's nine positions
        of 62 values sized a directory of about 3,000 keys at 3.6e19, and its pieces were empty: simulator,
        25M cloudtrail 38.3 s / 281 % LIST overhead -> 18.5 s / 16.07 %; bench/RESULTS.md.) Where the range began
        inside the directory, ``code_run`` itself does not extend a code over a calendar date."""
        code = code_run(ordered, len(leaf))
        if code is None or self._began_inside(leaf):
            return code  # the range began inside the directory: its first key taken is not its first name
        first = ordered[0]
        low = min(code.alphabet)
        begin = len(common_prefix(first, ordered[-1]))
        while begin > code.start and ord(first[begin - 1]) == low:
            begin -= 1
        return code if begin == code.start else CodeRun(begin, code.end, code.alphabet)

    def _field_group(self, leaf: str, ordered: list[str]) -> tuple[str, int, list[str], CodeRun] | None:
        """For names of ``leaf`` (pos's directory) that read as no code because the sampled names ``ordered``
        span a change of a field before the one they end in ("..._L001_R1_998" to "..._L001_R2_424": the
        read number, two values, then the chunk number): the names sharing pos's fields up to that last one
        (its *group*, "..._L001_R2_"), read as the code they end in. Returns (the group's first sampled name,
        the keys of the last page in it, its sampled names, their code), or None.

        (Without, the leaf was cut by interpolation over every position's class, the read and lane digits as
        0-9 and the sample numbers of other sample directories: simulator, 25M fastq-runs 31.9 s / 82.31 %
        LIST overhead, 17,321 pieces of the leaf path of which 15,596 held under a page; bench/RESULTS.md.)"""
        pos = self.pos
        if pos is None:
            return None
        at = _last_field(ordered, len(leaf))
        group = [k for k in ordered if k[:at] == pos[:at]]
        if len(group) < MIN_GROUP_KEYS or len(group) == len(ordered):
            return None
        code = code_run(group, len(leaf))
        if code is None:
            return None
        sampled = sum(1 for k in self.sample if k[:at] == pos[:at])
        keys = max(2, round(self.page_n * sampled / max(1, len(self.sample))))
        return group[0], keys, group, code

    def _leaf_names(self, leaf: str) -> tuple[list[str], int] | None:
        """The sampled names of ``leaf`` (pos's directory) with pos, sorted, and where the last field they vary
        in starts (``_last_field``); None before any key is taken. What ``_fielded``, ``_fields_rolled`` and
        ``_rollover_cuts`` read."""
        pos = self.pos
        if pos is None:
            return None
        ordered = sorted({*(k for k in self.sample if k.startswith(leaf)), pos})
        return ordered, _last_field(ordered, len(leaf))

    def _fielded(self, leaf: str) -> bool:
        """Whether the names of ``leaf`` (pos's directory) are fields: a field with a digit that is none of the
        directory path's precedes the last field the last page's names vary in ("logs/2025-01-01-10-<hex>":
        the date and hour; not "<account>_CloudTrail_<region>_20250115T<random>" under
        "AWSLogs/<account>/CloudTrail/<region>/2025/01/15/", whose digits before its last field repeat the
        path's)."""
        names = self._leaf_names(leaf)
        return names is not None and self.pos is not None and _digit_field_before(self.pos, leaf, names[1])

    def _fields_rolled(self, leaf: str) -> bool:
        """Whether the names of ``leaf`` (pos's directory) are fields (``_fielded``), of which one before the
        last has changed while this cursor listed it: the first key taken in the directory differs from pos
        before the last field the last page's names vary in (the hour, or the day, moved on under the hex
        tail). Names that repeat a constant in their last field ("..._20250115T<random>": the date of their
        directory) differ only in it, however far the listing goes."""
        pos = self.pos
        listed = self._leaf_listed(leaf)
        names = self._leaf_names(leaf)
        if pos is None or listed is None or names is None:
            return False
        last = names[1]
        if not _digit_field_before(pos, leaf, last):
            return False
        return _token_start(pos, len(common_prefix(listed[0], pos)), len(leaf)) < last

    def _leaf_open(self, leaf: str, sizing: bool = False) -> bool:
        """Whether what is left of ``leaf`` (pos's directory) is of unknown extent (see MIN_GROUP_KEYS): the
        remainder reaches past it, its siblings' size is unknown or it has shown twice that (``_outgrew``), no
        estimate from its donor is left (``inherited_pages``), and its names are fields that roll over
        (``_fields_rolled``).

        ``sizing``: for the directory's size, which the tree estimate also sizes the directories after it by,
        only where none is known after it in the remainder (a size by one field's code served the tree better
        than none: without, 25M fastq-runs 20.2 -> 31.1 s). Its cuts are those of an open remainder wherever it
        is: the donor keeps it whole while it gives the directories after it, and cuts it at its next split.
        A sibling size held the directory as sized however far it outgrew it (the donor's, by one field's code
        at its first split before any field rolled over: 100M access-logs-multi 778.6 s; 28.9 s now)."""
        end = self.range.end
        if self.pos is None or (end is not None and end < _past(leaf)):
            return False
        if sizing and self._known_dirs():
            return False
        if self._sibling_mean(_parent(leaf)) is not None and not self._outgrew(leaf):
            return False  # sized as its siblings, and not twice their size yet
        if (
            not self.has_split
            and self.inherited_pages() is not None
            and self.range.estimate <= MAX_ESTIMATE_KEYS
        ):
            return False  # its donor sized it (a size of its own, set by its own splits, is no news)
        return self._fields_rolled(leaf)

    def _leaf_size(self, leaf: str) -> tuple[float, float] | None:
        """(keys left in ``pos``'s directory ``leaf`` after pos, keys it holds), from the keys listed there;
        None before any key is (a versioned page whose rows are all of one key carried to the next page)."""
        if self.first is None or self.pos is None or self._leaf_open(leaf, sizing=True):
            return None
        in_leaf = [k for k in self.sample if k.startswith(leaf)]
        listed = self._leaf_listed(leaf)
        if listed is not None:
            first, objects = listed
        elif in_leaf:
            first, objects = in_leaf[0], max(1, round(self.page_n * len(in_leaf) / max(1, len(self.sample))))
        else:
            return None
        leaves = {_parent_of(k) for k in self.sample}
        if len(leaves) >= 3:
            # the last page spans several directories: about page_n / (spanned - 1) keys each
            size = self.page_n / (len(leaves) - 1)
            return size / 2, size
        ordered = sorted({first, *in_leaf, self.pos})
        # the directory's names must be a code (see keys.code_run): its alphabet bounds the space ahead;
        # names of no known alphabet say nothing of how many lie ahead
        code = self._leaf_code(ordered, leaf) if listed is not None else code_run(ordered, len(leaf))
        if code is None and (group := self._field_group(leaf, ordered)) is not None:
            first, objects, ordered, code = group
        top = code.top(ordered[0]) if code is not None else None
        if code is None or top is None:
            return None
        frame = _frame(ordered[0][: code.start], top, ordered, code)
        if frame is None:
            return None
        c_first, c_pos = frame.coord(first), frame.coord(self.pos)
        if c_pos <= c_first:
            return None
        density = objects / (c_pos - c_first)
        total = max(float(objects), density * frame.width)
        left = max(0.0, total - density * (c_pos - frame.lo_c))
        cap = self._counter_left(code, first, self.pos, objects - 1)
        if cap is not None and cap < left:
            # a counter: as far again as it has reached (COUNTER_AHEAD), not its whole space
            total, left = total - left + cap, cap
            self.capped = self.rev
        return left, total

    def _leaf_cut_model(self, leaf: str) -> tuple[Interval, int, float, float] | None:
        """The interpolation ``_aligned_cuts`` cuts the files of ``leaf`` (pos's directory) by, when the cursor
        listed them from the first key it took there (``_leaf_listed``): the interval from that key to the
        last name the code of their names can spell (``keys.code_run``: every position of the code its
        alphabet's last character, then pos's suffix), pos's coordinate in it and the keys a unit holds. None
        when the names are no code or the cursor did not take every key of ``leaf`` from its first one on.

        (``_leaf_size``'s interval, from the directory's own name to just past the code's alphabet, holds
        values no name takes at its top positions, an end and a character past the alphabet: a density
        measured near the first names and extrapolated across them was 10 % high over 6-digit names, so
        pieces missed their whole pages.)"""
        listed, pos = self._leaf_listed(leaf), self.pos
        if listed is None or pos is None or listed[0] >= pos or self._leaf_open(leaf):
            return None
        first, objects = listed
        ordered = sorted({first, *(k for k in self.sample if k.startswith(leaf)), pos})
        code = self._leaf_code(ordered, leaf)
        if code is None and (group := self._field_group(leaf, ordered)) is not None:
            first, objects, ordered, code = group
        if code is None or code.end > len(pos):
            return None
        last = pos[: code.start] + chr(max(code.alphabet)) * (code.end - code.start) + pos[code.end :]
        if last <= pos:
            return None
        span = _listed_frame(first, last, ordered, code, pos)
        if span is None:
            return None
        frame, c_first, c_pos = span
        after = objects - 1  # the keys taken after first
        cap = self._counter_left(code, first, pos, after)
        return frame, c_pos, after / (c_pos - c_first), math.inf if cap is None else cap

    def _tree_estimate(self) -> Tree | None:
        """(keys left, of them in pos's directory, [(directory, its keys)]) for a remainder that crosses
        directories, or None until every level it spans has been explored.

        Directories are sized from the one being listed: a sibling of pos's directory holds as many keys;
        one level up, a directory holds (fan-out of the level below) times that; and so on. Where the keys
        listed per directory of a level (``_sibling_mean``: directories counted as the listing entered them,
        or the donor's count) are fewer, they size that level's directories instead: the directory being
        listed is a size-biased sample (a stream stays long in a large one, and donors are the busy streams),
        so where sizes are skewed it sized its siblings tens of times too large and the pieces cut among them
        were mostly under a page (simulator, 25M users: 2,971 of 5,403 such pieces, the median estimated 41
        times its keys; bench/RESULTS.md, 2026-11-28, seventh session).
        """
        levels = self._leaf_crossed()
        if levels is None:
            return None
        if not self._levels_known(self._needed_levels(levels)):
            return None
        end = self.range.end
        if self.dirs_known_upto is not None and (end is None or self.dirs_known_upto < end):
            return None  # S3 named only the first directories of the remainder
        leaf = self._leaf_size(levels[-1])
        if leaf is None:
            return None
        rest, size = leaf
        # keys in a directory whose parent is levels[i], from the deepest level up; ``sure`` while measured
        # or multiplied only by fan-outs known (those are the sizes a piece carries: ``knowledge``)
        unit: dict[str, float] = {}
        w = size
        # a directory whose names are fields is sized by one field's code, not measured, whether or not a field
        # has rolled over yet: its siblings are sized by it here, but the size is not carried to thieves as
        # theirs (see MIN_GROUP_KEYS; at 1B an hour of access logs is 124 pages, the first donor's page lay
        # within one, and its size for "logs/" held every piece as sized: 1B access-logs 4,762.6 -> 37.9 s)
        sure = not self._fielded(levels[-1])
        for i in range(len(levels) - 2, -1, -1):
            child = levels[i + 1]
            if i + 2 < len(levels) and child not in self.fanout and child not in self.explored:
                mean = self._sibling_mean(levels[i])
                if mean is not None and self._small_child(child):
                    # the child was not asked: its siblings are sized as those listed, and what is left of it
                    # past pos's own directory as what they held less what it has shown
                    w, sure = mean, True
                    rest = max(rest, mean - (self._listed_in(child) or 0))
            unit[levels[i]] = w
            if sure:
                self.units[levels[i]] = w
            fan = self.fanout.get(levels[i])
            if fan is None and self._single_child(levels[i]):
                fan = 1
            sure = sure and fan is not None
            w *= max(1, fan) if fan is not None else 1
        for level, keys in unit.items():
            # pos's directory is a size-biased sample of its level: a stream stays in a directory as long
            # as it is large, and donors are the busy streams. Where the level's directories were counted
            # as they came (``_sibling_mean``), that mean sizes them when it is the smaller.
            mean = self._sibling_mean(level)
            if mean is not None and mean < keys:
                unit[level] = mean
        unit = self._level_units(unit)
        dirs = []
        total = rest
        for d in self._known_dirs():
            parent = d[: d.rstrip(DIR_DELIMITER).rfind(DIR_DELIMITER) + 1] if DIR_DELIMITER in d[:-1] else ""
            if not parent.startswith(self.prefix):
                parent = self.prefix
            keys = unit.get(parent, size)
            dirs.append((d, keys))
            total += keys
        return total, rest, dirs

    def _level_units(self, unit: dict[str, float]) -> dict[str, float]:
        """The keys per subdirectory of each level that ``_tree_estimate`` sizes the remainder's directories
        by, as it derived them; the simulator's bound of count-based sizes replaces them
        (bench.sim.des.DepthMeanCursor)."""
        return unit

    def split(self, ways: int, policy: SplitPolicy, new_id: Any) -> list[KeyRange]:
        """Give away the upper part of the remainder in up to ``ways - 1`` ranges; this cursor keeps the first.

        ``new_id()`` names each new range. Returns [] when the remainder is too small to be worth cutting or
        no cut point exists (a remainder with no room for a key between its bounds).
        """
        if self.done or ways < 2 or not self.pages:
            return []  # nothing read yet: no keys to learn cut points from
        rest = False
        est, tree = self._crossing_pages(policy.page_keys)
        known = self._known_dirs()
        if not known and (grouped := self._group_cuts(min(ways, policy.max_ways), policy)) is not None:
            self.cut_path = "group"
            return self._give(*grouped, new_id)
        if est is not None:
            if (
                est < 2 * policy.min_split_pages
                and len(known) >= BISECT_DIRS
                and self.inherited_pages(policy.page_keys) is None
            ):
                # many directories estimated too small to split: halve them by count (see BISECT_DIRS)
                mid = known[len(known) // 2]
                half = est * policy.page_keys / 2
                self.cut_path = "bisect"
                return self._give([mid], [half, half], new_id)
            ways = min(ways, int(est // policy.min_split_pages))
            if ways < 2:
                if not (self.capped == self.rev and est >= policy.min_split_pages):
                    return []
                # a counter sized by its reach (COUNTER_AHEAD) at under two floors: the donor keeps what the
                # estimate holds and gives the rest, whose size nothing listed tells (see COUNTER_MAX_AHEAD)
                ways, rest = 2, True
        ways = min(ways, policy.max_ways)
        if tree is not None and known:
            inner = self._tree_leaf_cuts(tree, ways, policy.page_keys)
            if inner is not None:
                # pos's own directory holds more than a piece's share: its files are cut too, and its last
                # piece goes on into the directories after it (see _tree_leaf_cuts)
                cuts, sizes = inner
                more, more_sizes = _weighted_cuts(sizes[-1], tree[2], ways - len(cuts))
                self.cut_path = "tree+leaf"
                return self._give([*cuts, *more], [*sizes[:-1], *more_sizes], new_id)
            cuts, sizes = _weighted_cuts(tree[1], tree[2], ways)
            self.cut_path = "tree"
            return self._give(cuts, sizes, new_id)
        if (
            known
            and self.dirs_known_upto is not None
            and (self.end is None or self.dirs_known_upto < self.end)
        ):
            # S3 named only the first directories of the remainder: cut it all by interpolation, learning
            # the alphabet of the directory names from those it named
            self.cut_path = "named"
            hi = self._named_hi()
            one_each = len(self.sample) > 1 and len({_parent_of(k) for k in self.sample}) == len(self.sample)
            if one_each and hi is not None and self.first is not None:
                # every key sampled in a directory of its own ("results/<id>/out.json"): the directories are
                # the keys, and the keys listed size the pieces in whole pages as in a flat range; the last
                # reaches to the range's end. (Where directories hold many keys of their own sizes, the
                # density across them misplaced the cuts: simulator, 25M users 13.4 -> 15.4 s, frames 16.3
                # -> 20.3 s; one key each, dir-per-object 4.02 -> 1.43 % LIST overhead.)
                aligned = self._aligned_cuts(ways, policy.page_keys, hi, self._flat_model(hi))
                if aligned is not None:
                    return self._give(*aligned, new_id)
            step = max(1, len(known) // SAMPLE_KEYS)
            sample = sorted({*self.sample, *known[::step], known[-1]})
            cuts = self._named_cuts(sample, ways)
        elif known:
            # cut at real directories (a directory's keys all sort after its name, so each piece starts
            # with whole directories), evenly over those known; the donor keeps the rest of its own
            k = min(ways - 1, len(known))
            cuts = sorted({known[(i * len(known)) // k] for i in range(k)})
            self.cut_path = "known"
        elif (levels := self._leaf_crossed()) is not None and self._levels_known(
            needed := self._needed_levels(levels)
        ):
            # S3 named no directory between pos and the end: what lies past pos's own directory holds no
            # directory at any level, so cut that directory. The space past it holds only the files of the
            # levels asked; when every level was asked and answered in full (each answer then named fewer
            # than a page of them), it goes with the last piece, whose last page reaches past it anyway, so
            # that no piece costs a request to find it empty (simulator, 25M dated: 517 of 524 empty pages
            # were such pieces). An answer cut short may hide more: that space is then a piece of its own. A
            # level taken to hold one directory (``_single_child``) counts as answered: its siblings asked
            # named one subdirectory each, and a piece of the space past it found it empty nearly always
            # (simulator, 25M multi-tenant: 95 of its 96 empty pieces); a guess that is wrong leaves the last
            # piece larger than its estimate, and its thief's own pages then size it.
            leaf_end = _past(levels[-1])
            self.cut_path = "leaf"
            small_past = all(
                (level in self.explored and level not in self.level_upto)
                or (i > 0 and self._single_child(level))
                for i, level in enumerate(needed)
            )
            past_leaf = self.end is None or leaf_end < self.end
            inside = ways - 1 if past_leaf and not small_past and not rest else ways
            hi = leaf_end if past_leaf else self.end
            aligned = self._aligned_cuts(
                inside, policy.page_keys, hi, self._leaf_cut_model(levels[-1]), rest=rest
            )
            if rest and aligned is not None:
                return self._give(*aligned, new_id)  # the rest, to the range's end, in the last piece
            if aligned is not None:
                cuts, sizes = aligned
                if inside < ways:
                    # the space past the leaf, a piece of its own, sized by what the estimate leaves
                    total = (est or 0) * policy.page_keys
                    return self._give([*cuts, leaf_end], [*sizes, max(0.0, total - sum(sizes))], new_id)
                return self._give(cuts, sizes, new_id)
            if self._leaf_open(levels[-1]):
                # the directory's names are fields that roll over (see MIN_GROUP_KEYS): cut where each may
                # take its next values, as an open remainder is cut
                cuts = self._rollover_cuts(levels[-1], leaf_end, inside)
                self.cut_path = "leaf-open"
            else:
                cuts = cut_points(self.pos, hi, self.prefix, self.sample, inside)
            if inside < ways:
                cuts.append(leaf_end)
        else:
            self.cut_path = "flat"
            end = self.range.end
            hi = end
            if hi is None and self.first is not None:
                # an open range of keys ending in a code: up to just past its alphabet, as cut_points cuts it,
                # and what lies above (most likely nothing) a last piece of its own
                hi = self._code_top()
            model = self._flat_model(hi) if hi is not None and self.first is not None else None
            aligned = self._aligned_cuts(
                ways if end is not None else max(2, ways - 1), policy.page_keys, hi, model, rest=rest
            )
            if aligned is not None:
                cuts, sizes = aligned
                if end is None and hi is not None:
                    return self._give([*cuts, hi], [*sizes, 0.0], new_id)
                return self._give(cuts, sizes, new_id)
            cuts = cut_points(self.pos, self.range.end, self.prefix, self.sample, ways)
        each = int((est or 0) * policy.page_keys / (len(cuts) + 1))
        return self._give(cuts, [each] * (len(cuts) + 1), new_id)

    def _group_model(
        self, leaf: str, ordered: list[str], at: int, group_past: str
    ) -> tuple[Interval, int, float, float, float] | None:
        """The interpolation over pos's group in ``leaf`` (the names sharing pos's fields up to ``at``, where
        the last field the sampled names ``ordered`` vary in starts) when that field is a counter
        (``counter_left``): the interval from the group's first key taken to ``group_past``, pos's coordinate,
        the keys a unit holds, the keys left in the group by the counter's reach and the keys before pos in it
        (the counter's value times its density); else None."""
        pos = self.pos
        assert pos is not None
        group = [k for k in ordered if k[:at] == pos[:at]]
        listed = self._leaf_listed(leaf)
        listed_first = listed[0] if listed is not None else None
        if listed is not None and listed[0][:at] == pos[:at]:
            first, objects = listed  # every key of the group from its first taken was taken here
            group = sorted({first, *group})
        else:
            if not group:
                return None
            first = group[0]
            sampled = sum(1 for k in self.sample if k[:at] == pos[:at])
            objects = max(2, round(self.page_n * sampled / max(1, len(self.sample))))
        if len(group) < MIN_GROUP_KEYS:
            return None
        code = code_run(group, len(leaf))
        if code is None:
            return None
        digits = code.decimal()
        a, b = digits.value(first), digits.value(pos)
        if a is None or b is None or b <= a:
            return None
        # the keys after the group's first sampled name, by the page's share, are at most one a value
        after = min(objects - 1, b - a) if first != listed_first else objects - 1
        cap = counter_left(code, first, pos, after)
        if cap is None:
            return None  # not a counter: nothing bounds the group
        span = _listed_frame(first, group_past, group, code, pos)
        if span is None:
            return None
        frame, c_first, c_pos = span
        return frame, c_pos, after / (c_pos - c_first), cap, after / (b - a) * (b + 1)

    def _group_cuts(self, ways: int, policy: SplitPolicy) -> tuple[list[str], list[float]] | None:
        """Cuts for a remainder in a directory whose names are fields ending in a counter (see GROUPS),
        reaching past pos's group: the group's rest in whole pages by its counter (as far again as it reached,
        or the donor's estimate of a piece cut inside the directory if more), then the next value of each field
        before the counter (``_field_cuts``), each piece sized as one group; cuts and sizes as ``_give`` takes
        them. None where this does not apply: no such group, or one of under a split floor of keys."""
        pos, end = self.pos, self.range.end
        if pos is None or ways < 2:
            return None
        grouped = self._counter_group(end)
        if grouped is None:
            return None
        at, group_past, (frame, c_pos, per_unit, cap, before) = grouped
        leaf = _parent_of(pos)
        inherited = self.inherited_pages(policy.page_keys)
        if inherited is not None and self._began_inside(leaf):
            # a piece cut inside the directory: its donor sized it as a group (or the rest of one)
            cap = max(cap, inherited * policy.page_keys)
        left = min(per_unit * (frame.coord(group_past) - c_pos), cap)
        group_total = before + left
        if group_total < policy.min_split_pages * policy.page_keys:
            return None  # groups too small to be pieces of their own: the directory is cut as any other
        ways_a = max(1, min(ways - 1, int(left / policy.page_keys // policy.min_split_pages)))
        cuts: list[str] = []
        sizes: list[float] = [left]
        if ways_a >= 2:
            aligned = self._aligned_cuts(ways_a, policy.page_keys, group_past, (frame, c_pos, per_unit, cap))
            if aligned is not None:
                cuts, sizes = aligned
        if end is not None and end <= group_past:
            return (cuts, sizes) if cuts else None
        hi = _past(leaf) if end is None or end > _past(leaf) else end
        more = _field_cuts(pos, at, leaf, ways - 1 - len(cuts), hi)
        if not more:
            if end is not None and end <= _past(leaf):
                # the range ends at a field's next value in the directory (its donor's cut): between the
                # group's end and there lies nothing likely, and the group's last piece reaches over it
                return (cuts, sizes) if cuts else None
            # what lies past the group, to the range's end, is a piece of its own
            return [*cuts, group_past], [*sizes, group_total]
        # the space between the group's end and the first cut (the field's next value) holds nothing
        # likely: the group's last piece reaches over it
        return [*cuts, *more], [*sizes, *([group_total] * len(more))]

    def _rollover_cuts(self, leaf: str, leaf_end: str, ways: int) -> list[str]:
        """Cut points in what is left of ``leaf``, pos's directory, whose names are fields of unknown extent
        (``_leaf_open``): those of an open remainder (``_open_points``) from pos, below the directory's end."""
        names = self._leaf_names(leaf)
        assert self.pos is not None and names is not None
        ordered = names[0]
        code = code_run(ordered, len(leaf))
        # a field that repeats one of the directory's path ("SMP000001-01/SMP000001_S1_...": the sample's
        # number) is the same in every name of it: no cut where it would take another value (25M fastq-runs
        # 26.87 -> 16.54 % LIST overhead, 20.3 -> 20.2 s)
        path_fields = _fields(leaf)
        pos = self.pos
        cuts = [c for c in _open_points(pos, leaf, ordered, ways, code) if c < leaf_end]
        return [c for c in cuts if _field_at(pos, len(common_prefix(c, pos)), len(leaf)) not in path_fields]

    def _tree_leaf_cuts(self, tree: Tree, ways: int, page_keys: int) -> tuple[list[str], list[float]] | None:
        """Cuts among the files of pos's own directory, as the leaf path cuts them (``_aligned_cuts``, the
        last piece to the directory's end), when what is left of it is worth two of the pieces (rounded) of
        the tree's remainder split ``ways`` ways; else None.

        Cut only at the directories after it (``_weighted_cuts`` cannot cut inside one), a remainder mostly in
        pos's directory was given away as its small siblings, the donor keeping the rest; and where the
        siblings were each under a piece's minimum, not at all: the stream listed it alone (simulator, 25M
        multi-tenant with such a minimum, 150,000 keys of one tenant listed by one stream for 22 s). Without a
        minimum, 25M multi-tenant 3.23 -> 2.80 % LIST overhead on seeds 2-4 (bench/RESULTS.md)."""
        total, own, _ = tree  # own: the keys left in pos's directory
        if ways < 2 or total <= 0:
            return None
        k = min(ways, round(own / (total / ways)))
        if k < 2:
            return None
        levels = self._leaf_crossed()
        if not levels:
            return None
        return self._aligned_cuts(k, page_keys, _past(levels[-1]), self._leaf_cut_model(levels[-1]))

    def _named_cuts(self, sample: list[str], ways: int) -> list[str]:
        """Cut points for a remainder of which S3 named only the first directories of a level (its answer
        was truncated at ``dirs_known_upto``): spread by interpolation over the level's names, in the alphabet
        learned from those named, from pos's own directory there to the end of the level (or the range's end,
        if sooner). What lies past the level stays with the last piece: most likely nothing, and a piece of
        its own would cost a request to find so.

        (Cut as an open remainder from pos, the cuts fell near pos: 50,000 users under "home/", S3 named the
        first 1,000 after "home/ba"; three ways cut at "home/c", and the piece ("home/c", end] went on being
        peeled one letter at a time, each hop a thief's start, a page and a split: simulator, 25M "users",
        the second largest user's keys were reached after 23 s.)"""
        assert self.pos is not None and self.dirs_known_upto is not None
        level = _parent(self.dirs_known_upto)
        hi = self._named_hi()
        j = self.pos.find(DIR_DELIMITER, len(level))
        lo = self.pos[:j] if j >= 0 else self.pos
        return [c for c in cut_points(lo, hi, self.prefix, sample, ways) if c > self.pos]

    def _named_hi(self) -> str | None:
        """How far the cuts of a remainder whose level S3 named in part reach: the level's end, or the range's
        if sooner (what lies past the level goes with the last piece)."""
        assert self.dirs_known_upto is not None
        level = _parent(self.dirs_known_upto)
        end = self.range.end
        level_end = _past(level) if level else None
        return level_end if level_end is not None and (end is None or end > level_end) else end

    def _give(self, cuts: list[str], sizes: Sequence[float], new_id: Any) -> list[KeyRange]:
        """Keep (pos, cuts[0]]; hand out the pieces between the cuts and the end, sized ``sizes[1:]``."""
        if not cuts:
            return []
        bounds = [*cuts, self.range.end]
        given = [
            KeyRange(id=str(new_id()), start_after=a, end=b, estimate=int(n), known=self.knowledge(a, b))
            for (a, b), n in zip(itertools.pairwise(bounds), sizes[1:], strict=True)
        ]
        self.range = KeyRange(
            id=self.range.id, start_after=self.range.start_after, end=cuts[0], estimate=int(sizes[0])
        )
        self.est_from = self.objects
        self.has_split = True
        self.rev += 1
        # The donor may already hold a continuation token past the new end: its next page is cut there.
        if self.pos is not None and self.pos >= cuts[0]:
            self.done = True
        return given


def counter_left(code: CodeRun | None, first: str, pos: str, after: int) -> float | None:
    """The keys left past ``pos`` of a counter (see COUNTER_AHEAD), ``after`` keys having been listed after
    ``first`` up to ``pos``; None when the keys are no counter: the code is not in their names (a directory
    level), its values are sparse or hold several keys each, or a character is not in its alphabet."""
    if code is None or after < 1 or pos.find(DIR_DELIMITER, code.end) >= 0:
        return None  # (a code naming directories holds many keys a value, however they count)
    code = code.decimal()
    a, b = code.value(first), code.value(pos)
    if a is None or b is None or b <= a:
        return None
    span = b - a
    if span > len(code.alphabet) * after or after > span:
        return None
    ahead = min(b + 1, code.space - 1 - b)  # values (ints: a long code's can pass any float)
    if ahead > COUNTER_MAX_AHEAD:
        return None  # no bound worth the name
    return after / span * COUNTER_AHEAD * max(0, ahead)


def dir_levels(key: str, prefix: str) -> list[str]:
    """The directories holding ``key`` from ``prefix`` down: [prefix, prefix + "a/", ...]."""
    out = [prefix]
    i = len(prefix)
    while (j := key.find(DIR_DELIMITER, i)) >= 0:
        out.append(key[: j + 1])
        i = j + 1
    return out


def _parent_of(key: str) -> str:
    """The directory holding ``key`` ("a/b/c" -> "a/b/", "c" -> "")."""
    return key[: key.rfind(DIR_DELIMITER) + 1]


def _utf8_len(names: Sequence[str]) -> int:
    """The UTF-8 bytes of ``names`` in all (``Cursor.knowledge``'s MAX_KNOWN_BYTES)."""
    return sum(len(n.encode("utf-8", "surrogatepass")) for n in names)


def _parent(level: str) -> str:
    """The directory holding directory ``level`` ("a/b/" -> "a/", "a/" -> "")."""
    return level[: level.rfind(DIR_DELIMITER, 0, len(level) - 1) + 1]


def _past(directory: str) -> str:
    """The first key past every key under ``directory`` ("a/b/" -> "a/b0": "0" is the byte after "/")."""
    return directory[:-1] + "0"


def _token_start(key: str, p: int, floor: int) -> int:
    """Where the field (a run of letters and digits: "2025", "L001", "R2") that position ``p`` of ``key`` is in
    starts: ``p`` moved left over the letters and digits before it, not below ``floor``."""
    while p > floor and key[p - 1].isalnum():
        p -= 1
    return p


def _fields(text: str) -> set[str]:
    """The fields of ``text``: its runs of letters and digits ("runs/FC1/SMP000001-01/" -> runs, FC1,
    SMP000001, 01)."""
    return {"".join(run) for alnum, run in itertools.groupby(text, str.isalnum) if alnum}


def _digit_field_before(name: str, leaf: str, last: int) -> bool:
    """Whether a field of ``name`` (in directory ``leaf``) before position ``last`` has a digit and is none of
    the directory path's fields (``Cursor._fielded``)."""
    path = _fields(leaf)
    return any(f not in path and any("0" <= c <= "9" for c in f) for f in _fields(name[len(leaf) : last]))


def _field_cuts(pos: str, at: int, leaf: str, budget: int, hi: str) -> list[str]:
    """Up to ``budget`` cut points past pos's group of names in ``leaf`` (``Cursor._group_cuts``), below ``hi``:
    for each field of pos before position ``at`` (where the group's counter starts), deepest first, that has a
    digit last and is none of the directory path's, the next value of that digit ("R1" -> "R2", "L001" ->
    "L002"; not "L01", whose piece would hold lanes 10 to 19). One value a field: a value past a field's last
    is a piece found empty (a request), and the thief of the piece from "R2" cuts at "R3" in its turn (25M
    fastq-runs, two values a field spread as ``_open_points`` spreads them: 12.1 s / 13.08 % LIST overhead,
    one: 12.6 s / 11.79 %; seeds 1-2)."""
    path_fields = _fields(leaf)
    cuts: list[str] = []
    for d in range(at - 2, len(leaf) - 1, -1):
        if len(cuts) >= budget:
            break
        if not "0" <= pos[d] < "9" or pos[d + 1].isdigit() or _field_at(pos, d, len(leaf)) in path_fields:
            continue
        cut = pos[:d] + chr(ord(pos[d]) + 1)
        if cut < hi:
            cuts.append(cut)
    return sorted(cuts)


def _field_at(key: str, p: int, floor: int) -> str:
    """The field of ``key`` that position ``p`` is in ("" at a separator)."""
    if p >= len(key) or not key[p].isalnum():
        return ""
    end = p
    while end < len(key) and key[end].isalnum():
        end += 1
    return key[_token_start(key, p, floor) : end]


def _last_field(ordered: Sequence[str], floor: int) -> int:
    """Where the last field the sorted keys ``ordered`` vary in starts (``_token_start`` of the deepest
    position where two neighbours differ): the hex tail of "2025-01-01-10-3049B0CE", the chunk number of
    "L001_R2_424.fastq.gz"."""
    deepest, key = floor, ordered[-1] if ordered else ""
    for a, b in itertools.pairwise(ordered):
        n = len(common_prefix(a, b))
        if n > deepest:
            deepest, key = n, b
    if ordered and len(ordered[-1]) >= deepest:
        key = ordered[-1]  # (a shorter last key, "a/b" after "a/aaaa", does not reach that position)
    return _token_start(key, deepest, floor)


def _weighted_cuts(
    rest: float, dirs: Sequence[tuple[str, float]], ways: int
) -> tuple[list[str], list[float]]:
    """Cut points among ``dirs`` (directory, keys) that share ``rest + sum(keys)`` out in about ``ways``
    pieces of equal keys (the first piece begins with the donor's ``rest``); and each piece's keys."""
    total = rest + sum(k for _, k in dirs)
    cuts: list[str] = []
    sizes: list[float] = []
    acc = rest  # keys before the directory at hand
    start = 0.0
    target = total / ways
    for d, k in dirs:
        # cut before d when that brings the piece closer to its share than taking d would
        if (
            len(cuts) < ways - 1
            and acc - start > 0
            and abs(acc - start - target) <= abs(acc + k - start - target)
        ):
            cuts.append(d)
            sizes.append(acc - start)
            start = acc
            left = ways - len(cuts)
            target = (total - start) / left if left else total
        acc += k
    sizes.append(acc - start)
    return cuts, sizes


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
