"""plan_shards: cut a bucket's key space into ranges of about equal size, with no prior knowledge.

How it works
------------
1. Probe: ListObjectsV2(StartAfter=p, MaxKeys=k) at points p spread over the key space (UTF-8
   binary order), in parallel. Each answer enumerates *exactly* the keys in (p, last_key] -- or in
   (p, end] when it is not truncated. Those intervals are "known": their counts are exact.
2. Estimate: between known intervals lie gaps. A gap's size is estimated from the key density of
   its neighbours (keys per unit of coordinate, see keys.Interval), times its width.
3. Refine: the gaps with the largest estimates are probed at their midpoint, a few rounds, in
   parallel. Empty regions collapse (a probe jumps straight to the next key), dense ones are resolved.
4. Cut: walk the key space accumulating counts; cut every ``target`` keys, on a sampled key where
   the cut falls in a known interval, by interpolation where it falls in a gap.
5. Interleave: ranges are returned in bit-reversal order, so ranges running at the same time sit
   far apart in the key space (different S3 partitions).

Coverage is exact by construction -- boundaries strictly increase from the first key to the last
-- whatever the estimates say. Estimates only decide how evenly the work is spread; shards that turn
out large are split again by the lister (list_shard's budget and sub-ranges).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..s3util import RequestCounter, list_page, page_objects
from .keys import Alphabet, Interval, bit_reversal_order, encode, upper_bound
from .model import KeyRange, Plan

# Internal bounds: "" is below every key (keys are non-empty), TOP above every valid key (<= 1,024 bytes).
BOTTOM = ""
TOP = "\U0010ffff" * 260


@dataclass
class PlannerConfig:
    target_shards: int = 64
    min_shard_objects: int = 2_000
    probe_keys: int = 1000  # a probe costs one request whatever it returns: take a full page of knowledge
    first_round_probes: int = 0  # 0 = derived from target_shards
    rounds: int = 6
    max_probes: int = 0  # 0 = derived from target_shards
    workers: int = 32
    discover_directories: bool = True  # walk "/" levels first (cheap structure for hierarchical keys)

    def derived(self) -> tuple[int, int]:
        first = self.first_round_probes or min(64, max(8, self.target_shards))
        budget = self.max_probes or max(64, 2 * self.target_shards)
        return first, budget


@dataclass
class _Gap:
    lo: str  # exclusive
    hi: str  # inclusive
    estimate: float


class _Knowledge:
    """What the probes have seen in the interval (lo, hi] of one prefix."""

    def __init__(self, prefix: str, lo: str, hi: str) -> None:
        self.prefix = prefix
        self.lo = lo
        self.hi = hi
        self.keys: list[str] = []  # sorted, distinct, all inside (lo, hi]
        self.known: list[tuple[str, str]] = []  # merged (a, b] intervals that are fully enumerated
        self.alphabet = Alphabet()

    def add_probe(self, point: str, keys: Sequence[str], truncated: bool) -> None:
        inside = [k for k in keys if self.lo < k <= self.hi]
        passed_hi = bool(keys) and keys[-1] > self.hi
        end = self.hi if (not truncated or passed_hi) else (keys[-1] if keys else point)
        if end <= point:
            return
        for k in inside:
            i = bisect.bisect_left(self.keys, k)
            if i == len(self.keys) or self.keys[i] != k:
                self.keys.insert(i, k)
                self.alphabet.add(encode(k))
        self._add_known(max(point, self.lo), min(end, self.hi))

    def _add_known(self, a: str, b: str) -> None:
        merged: list[tuple[str, str]] = []
        for x, y in sorted([*self.known, (a, b)]):
            if merged and x <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], y))
            else:
                merged.append((x, y))
        self.known = merged

    def count_known(self, a: str, b: str) -> int:
        """Exact number of keys in (a, b] for an interval inside a known one."""
        return bisect.bisect_right(self.keys, b) - bisect.bisect_right(self.keys, a)

    def _frame_bytes(self, lo: str, hi: str) -> tuple[bytes, bytes]:
        p = encode(self.prefix)
        lo_b = p if lo == BOTTOM or encode(lo) < p else encode(lo)
        ub = upper_bound(self.prefix)
        hi_b = ub if hi == TOP or encode(hi) > ub else encode(hi)
        return lo_b, hi_b

    def interval(self, lo: str, hi: str) -> Interval | None:
        lo_b, hi_b = self._frame_bytes(lo, hi)
        if lo_b >= hi_b:
            return None
        # Before any key is seen there is no alphabet to learn from: plain byte coordinates.
        return Interval(lo_b, hi_b, self.alphabet if self.alphabet.values else None)

    def segments(self) -> list[tuple[str, str, bool]]:
        """(a, b, is_known) pieces covering (lo, hi] in order."""
        out: list[tuple[str, str, bool]] = []
        cur = self.lo
        for a, b in self.known:
            if a > cur:
                out.append((cur, a, False))
            out.append((max(a, cur), b, True))
            cur = b
        if cur < self.hi:
            out.append((cur, self.hi, False))
        return [s for s in out if s[0] < s[1]]

    def gaps(self) -> list[_Gap]:
        segs = self.segments()
        gaps: list[_Gap] = []
        for i, (a, b, known) in enumerate(segs):
            if known:
                continue
            left = segs[i - 1] if i > 0 else None
            right = segs[i + 1] if i + 1 < len(segs) else None
            gaps.append(_Gap(a, b, self._estimate_gap(a, b, left, right)))
        return gaps

    def _density(self, frame: Interval, seg: tuple[str, str, bool] | None) -> float | None:
        """log(keys per coordinate unit) of a known segment, measured in ``frame``."""
        if seg is None:
            return None
        a, b, _ = seg
        lo_i = bisect.bisect_right(self.keys, a)
        hi_i = bisect.bisect_right(self.keys, b)
        n = hi_i - lo_i
        if n < 2:
            return None
        span = frame.coord(encode(self.keys[hi_i - 1])) - frame.coord(encode(self.keys[lo_i]))
        return math.log(n - 1) - math.log(max(span, 1))

    def _estimate_gap(
        self, a: str, b: str, left: tuple[str, str, bool] | None, right: tuple[str, str, bool] | None
    ) -> float:
        if not self.keys:
            return math.inf  # nothing seen yet: unbounded
        frame_lo = left[0] if left else a
        frame_hi = right[1] if right else b
        frame = self.interval(frame_lo, frame_hi)
        gap = self.interval(a, b)
        if frame is None or gap is None:
            return 0.0
        width = frame.coord(gap.hi) - frame.coord(gap.lo)
        dens = [d for d in (self._density(frame, left), self._density(frame, right)) if d is not None]
        if width <= 0:
            return 0.0
        if not dens:
            return math.inf
        return math.exp(min(700.0, math.log(width) + sum(dens) / len(dens)))


class _Prober:
    def __init__(
        self, s3: Any, bucket: str, prefix: str, cfg: PlannerConfig, counter: RequestCounter
    ) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.prefix = prefix
        self.cfg = cfg
        self.counter = counter

    def run(self, kb: _Knowledge, points: list[str]) -> None:
        if not points:
            return

        def probe(point: str) -> tuple[str, list[str], bool]:
            resp = list_page(
                self.s3,
                self.bucket,
                self.prefix,
                start_after=point or None,
                max_keys=self.cfg.probe_keys,
                counter=self.counter,
            )
            keys, _ = page_objects(resp)
            return point, list(keys), bool(resp.get("IsTruncated"))

        workers = max(1, min(self.cfg.workers, len(points)))
        if workers == 1:
            results = [probe(p) for p in points]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe") as pool:
                results = list(pool.map(probe, points))
        for point, keys, truncated in results:
            kb.add_probe(point, keys, truncated)


def _directory_points(
    s3: Any,
    bucket: str,
    prefix: str,
    cfg: PlannerConfig,
    counter: RequestCounter,
    max_dirs: int,
    max_requests: int,
) -> tuple[list[str], int]:
    """Directory boundaries from a breadth-first walk with Delimiter="/" (one request per directory).

    Keys are usually hierarchical ("project/run=12/lane3/..."): a directory is a contiguous key range,
    so its name is a natural probe point, and the run a probe returns there teaches the alphabet the
    values of every level. Stops descending when the next level would exceed ``max_dirs``.
    """
    level, points, sent = [prefix], [], 0
    while level and sent + len(level) <= max_requests:

        def children(p: str) -> list[str] | None:
            params: dict[str, Any] = {"Bucket": bucket, "Prefix": p, "Delimiter": "/", "MaxKeys": 1000}
            if not p:
                params.pop("Prefix")
            try:
                resp = s3.list_objects_v2(**params)
            except Exception as err:  # noqa: BLE001 - structure is optional: errors surface in probing
                from botocore.exceptions import ClientError

                if isinstance(err, ClientError):
                    return []
                raise
            counter.add(1, int(resp.get("ResponseMetadata", {}).get("RetryAttempts", 0)))
            if resp.get("IsTruncated"):
                return None  # more than a page of entries: not a directory tree worth walking
            return [c["Prefix"] for c in resp.get("CommonPrefixes", ())]

        workers = max(1, min(cfg.workers, len(level)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dirs") as pool:
            listed = list(pool.map(children, level))
        sent += len(level)
        if any(cs is None for cs in listed):
            break  # keep the levels known completely; a partial level would bias the probes
        found = [c for cs in listed if cs for c in cs]
        points += found
        if not found or len(found) > max_dirs:
            break
        level = found
    if len(points) > max_dirs:  # keep an even sample of the deepest level seen
        step = len(points) / max_dirs
        points = [points[int(i * step)] for i in range(max_dirs)]
    return sorted(set(points)), sent


def _initial_points(kb: _Knowledge, n: int, seeded: bool = False) -> list[str]:
    """The lower bound itself, plus n-1 points evenly spaced over the interval's coordinates."""
    points = [kb.lo]
    lo_b, hi_b = kb._frame_bytes(kb.lo, kb.hi)
    # Plain byte coordinates: this round explores the unknown, and an alphabet learned from the
    # first probe alone would crowd every point into that probe's corner -- unless the caller
    # seeded the alphabet with keys spread over the region (a lister's page ends).
    frame = (kb.interval(kb.lo, kb.hi) if seeded else Interval(lo_b, hi_b)) if lo_b < hi_b else None
    if frame is not None:
        for i in range(1, n):
            p = frame.at(i / n)
            if p is not None and kb.lo < p < kb.hi:
                points.append(p)
    return sorted(set(points))


def _refine_points(kb: _Knowledge, limit: int, target: float) -> list[str]:
    """Probe points inside the gaps whose estimate exceeds half a shard, largest first.

    A gap gets up to 16 evenly spaced points, in proportion to its estimate, so the number of
    resolved regions grows geometrically per round instead of doubling.
    """
    gaps = sorted((g for g in kb.gaps() if g.estimate > target / 2), key=lambda g: -g.estimate)
    points: list[str] = []
    for g in gaps:
        if len(points) >= limit:
            break
        frame = kb.interval(g.lo, g.hi)
        if frame is None:
            continue
        est = g.estimate if math.isfinite(g.estimate) else 16 * target
        m = int(min(16, max(2, math.ceil(est / max(1.0, target)))))
        for i in range(1, m):
            p = frame.at(i / m)
            if p is not None and g.lo < p < g.hi:
                points.append(p)
    # Exploration: estimates come from an alphabet learned from what was seen, so a region never
    # sampled can look empty. Spend the rest of the round on the other gaps, widest first in plain
    # byte coordinates (which never under-state a region).
    rest = [g for g in kb.gaps() if g.estimate <= target / 2]
    rest.sort(key=lambda g: -_byte_width_log(kb, g))
    for g in rest:
        if len(points) >= limit:
            break
        lo_b, hi_b = kb._frame_bytes(g.lo, g.hi)
        if lo_b >= hi_b:
            continue
        p = Interval(lo_b, hi_b).at(0.5)
        if p is not None and g.lo < p < g.hi:
            points.append(p)
    return sorted(set(points))[:limit]


def _byte_width_log(kb: _Knowledge, g: _Gap) -> float:
    lo_b, hi_b = kb._frame_bytes(g.lo, g.hi)
    if lo_b >= hi_b:
        return -math.inf
    iv = Interval(lo_b, hi_b)
    # Width relative to the position where the bounds differ: shallower differences are wider.
    return math.log(max(iv.width, 1)) - math.log(256) * len(iv.base)


def _explore(
    kb: _Knowledge, prober: _Prober, cfg: PlannerConfig, first: int, budget: int, seeded: bool = False
) -> int:
    """Probe rounds; returns the number of probes sent."""
    # The lower bound alone first: a missing bucket fails on one request, and a range that fits in
    # one probe is fully known at once.
    prober.run(kb, [kb.lo])
    sent = 1
    if not kb.gaps():
        return sent
    if cfg.discover_directories and kb.lo == BOTTOM:
        dirs, walked = _directory_points(
            prober.s3,
            prober.bucket,
            prober.prefix,
            cfg,
            prober.counter,
            max_dirs=max(8, (budget - sent) // 2),
            max_requests=max(8, budget // 4),
        )
        sent += walked
        pts = [d for d in dirs if kb.lo < d < kb.hi][: max(0, budget - sent)]
        prober.run(kb, pts)
        sent += len(pts)
    pts = [p for p in _initial_points(kb, min(first, budget), seeded) if p != kb.lo]
    prober.run(kb, pts)
    sent += len(pts)
    for _ in range(cfg.rounds):
        if sent >= budget:
            break
        total = _total_estimate(kb)
        target = max(cfg.min_shard_objects, total / max(1, cfg.target_shards))
        pts = _refine_points(kb, min(budget - sent, max(16, 2 * cfg.target_shards)), target)
        if not pts:
            break
        prober.run(kb, pts)
        sent += len(pts)
    return sent


def _total_estimate(kb: _Knowledge) -> float:
    total = 0.0
    for a, b, known in kb.segments():
        if known:
            total += kb.count_known(a, b)
    finite = [g.estimate for g in kb.gaps() if math.isfinite(g.estimate)]
    return total + sum(finite)


def _cut(kb: _Knowledge, parts: int, min_size: int) -> list[tuple[str, str, int]]:
    """Boundaries (a, b, estimate) covering (kb.lo, kb.hi], at most ``parts`` of them."""
    segs = kb.segments()
    gaps = {(g.lo, g.hi): g.estimate for g in kb.gaps()}
    # An unbounded estimate (no density seen) counts as one target's worth: split it once, let
    # the lister's budget split it further if it is large.
    finite_total = 0.0
    for a, b, known in segs:
        finite_total += (
            kb.count_known(a, b) if known else (gaps[(a, b)] if math.isfinite(gaps[(a, b)]) else 0)
        )
    n_parts = max(1, min(parts, int(finite_total // max(1, min_size)) or 1))
    target = max(1.0, finite_total / n_parts)
    out: list[tuple[str, str, int]] = []
    start = kb.lo
    acc = 0.0

    def emit(end: str) -> None:
        nonlocal start, acc
        if end > start:
            out.append((start, end, int(round(acc))))
            start = end
            acc = 0.0

    for a, b, known in segs:
        if acc >= target and len(out) < n_parts - 1:
            emit(a)
        if known:
            i = bisect.bisect_right(kb.keys, a)
            j = bisect.bisect_right(kb.keys, b)
            while i < j:
                need = max(1, int(math.ceil(target - acc)))
                if j - i >= need and len(out) < n_parts - 1:
                    i += need
                    acc += need
                    emit(kb.keys[i - 1])
                else:
                    acc += j - i
                    i = j
        else:
            est = gaps[(a, b)]
            if not math.isfinite(est):
                est = target
            frame = kb.interval(a, b)
            done_frac = 0.0
            while frame is not None and est * (1 - done_frac) + acc >= target and len(out) < n_parts - 1:
                frac = done_frac + (target - acc) / est
                if frac >= 1.0:
                    break
                p = frame.at(frac)
                if p is None or not (max(a, start) < p < b):
                    break
                acc += (frac - done_frac) * est
                done_frac = frac
                emit(p)
            acc += est * (1 - done_frac)
    if start < kb.hi or not out:
        out.append((start, kb.hi, int(round(acc))))
    return out


def _to_range(rid: str, a: str, b: str, est: int) -> KeyRange:
    return KeyRange(id=rid, start_after=None if a == BOTTOM else a, end=None if b == TOP else b, estimate=est)


def plan_shards(
    s3: Any,
    bucket: str,
    prefix: str = "",
    *,
    config: PlannerConfig | None = None,
    counter: RequestCounter | None = None,
) -> Plan:
    """Plan key ranges covering every key under ``prefix`` exactly once, in interleaved order."""
    cfg = config or PlannerConfig()
    if cfg.target_shards < 1:
        raise InputError("target_shards must be at least 1")
    counter = counter or RequestCounter()
    before = counter.requests
    kb = _Knowledge(prefix, BOTTOM, TOP)
    first, budget = cfg.derived()
    _explore(kb, _Prober(s3, bucket, prefix, cfg, counter), cfg, first, budget)
    cuts = _cut(kb, cfg.target_shards, cfg.min_shard_objects)
    ranges = [_to_range(f"r{i:05d}", a, b, est) for i, (a, b, est) in enumerate(cuts)]
    ordered = [ranges[i] for i in bit_reversal_order(len(ranges))]
    return Plan(
        bucket=bucket,
        prefix=prefix,
        ranges=ordered,
        probe_requests=counter.requests - before,
        estimated_objects=sum(r.estimate for r in ranges),
        method="probe",
    )


def split_range(
    s3: Any,
    bucket: str,
    prefix: str,
    rng: KeyRange,
    parts: int,
    *,
    probe_keys: int = 100,
    counter: RequestCounter | None = None,
    probes: int = 0,
    seed_keys: Sequence[str] = (),
) -> list[KeyRange]:
    """Split (rng.start_after, rng.end] into up to ``parts`` sub-ranges, probing it lightly.

    ``seed_keys`` are keys the caller has seen just before the range (a lister's page ends): they
    teach the alphabet where keys live, so the probes land among keys rather than in empty byte space.
    Sub-range ids extend the parent's (``r00012.3``), so output part names never collide.
    """
    counter = counter or RequestCounter()
    lo = rng.start_after if rng.start_after is not None else BOTTOM
    hi = rng.end if rng.end is not None else TOP
    if parts <= 1 or lo >= hi:
        return [KeyRange(id=f"{rng.id}.0", start_after=rng.start_after, end=rng.end, estimate=rng.estimate)]
    cfg = PlannerConfig(
        target_shards=parts,
        min_shard_objects=1,
        probe_keys=probe_keys,
        first_round_probes=probes or 2 * parts,
        rounds=1,
        max_probes=(probes or 2 * parts) + parts,
    )
    kb = _Knowledge(prefix, lo, hi)
    for k in seed_keys:
        kb.alphabet.add(encode(k))
    first, budget = cfg.derived()
    _explore(kb, _Prober(s3, bucket, prefix, cfg, counter), cfg, first, budget, seeded=bool(seed_keys))
    cuts = _cut(kb, parts, 1)
    subs = [_to_range(f"{rng.id}.{i}", a, b, est) for i, (a, b, est) in enumerate(cuts)]
    return [subs[i] for i in bit_reversal_order(len(subs))]


def plan_from_hints(
    bucket: str,
    prefix: str,
    hints: Sequence[dict[str, Any]],
    target_shards: int,
    min_shard_objects: int = 2_000,
) -> Plan:
    """Plan a repeat audit from a previous run's per-range counts, with no probing.

    ``hints`` are the previous run's ranges in key order: {"start_after", "end", "objects"}; they must
    cover the prefix contiguously (a previous hpcstage run's ``ranges.json`` does). Adjacent ranges are
    merged up to the target size; a range larger than the target is split by interpolation.
    """
    if not hints:
        raise InputError("hints are empty")
    ordered = sorted(hints, key=lambda h: h.get("start_after") or BOTTOM)
    prev_end: str = BOTTOM
    for h in ordered:
        sa = h.get("start_after") or BOTTOM
        if sa != prev_end:
            raise InputError("hints do not cover the prefix contiguously; plan with probes instead")
        prev_end = str(h["end"]) if h.get("end") is not None else TOP
    if prev_end != TOP:
        raise InputError("hints do not reach the end of the prefix; plan with probes instead")
    total = sum(int(h["objects"]) for h in ordered)
    n = max(1, min(target_shards, total // max(1, min_shard_objects) or 1))
    target = max(1.0, total / n)
    kb = _Knowledge(prefix, BOTTOM, TOP)
    for h in ordered:  # hint boundaries are real keys: learn the key alphabet from them
        for bound in (h.get("start_after"), h.get("end")):
            if bound:
                kb.alphabet.add(encode(bound))
    cuts: list[tuple[str, str, int]] = []
    start, acc = BOTTOM, 0.0
    for h in ordered:
        a: str = h.get("start_after") or BOTTOM
        b: str = str(h["end"]) if h.get("end") is not None else TOP
        cnt = float(h["objects"])
        done = 0.0
        frame = kb.interval(a, b)
        while cnt > 0 and acc + cnt * (1 - done) >= target and len(cuts) < n - 1:
            frac = done + (target - acc) / cnt
            if frac >= 1.0 - 1e-9:
                acc += cnt * (1 - done)
                done = 1.0
                if b != TOP:
                    cuts.append((start, b, int(round(acc))))
                    start, acc = b, 0.0
                break
            p = frame.at(frac) if frame is not None else None
            if p is None or not (max(a, start) < p < b):
                break
            acc += (frac - done) * cnt
            done = frac
            cuts.append((start, p, int(round(acc))))
            start, acc = p, 0.0
        acc += cnt * (1 - done)
    cuts.append((start, TOP, int(round(acc))))
    ranges = [_to_range(f"r{i:05d}", a, b, est) for i, (a, b, est) in enumerate(cuts) if a < b]
    ordered_ranges = [ranges[i] for i in bit_reversal_order(len(ranges))]
    return Plan(
        bucket=bucket,
        prefix=prefix,
        ranges=ordered_ranges,
        probe_requests=0,
        estimated_objects=total,
        method="hints",
    )
