"""How well the engine's estimates size what it splits, measured in the simulator (bench.sim.des).

For every split the simulated fleet makes (``Sim.engine_split``, the engine's own ``Cursor``), this records the
keys truly left in the donor's remainder, the directory requests the split sent, and for each piece given its
estimate against the keys truly in it. Per shape it prints the run's makespan and LIST overhead, how many pieces
held less than 8 pages, the spread of log2(estimate / truth) over the pieces (0: exact; 3: eight times too
high), and how many directory requests were sent for remainders truly under twice the split floor (a split
the floor would refuse if the estimate were right).

    python -m bench.estimate_quality --size 25e6 --shapes users,uniform
    python -m bench.estimate_quality --size 25e6 --shapes users --oracle-estimates   # the truth as estimate
    python -m bench.estimate_quality --size 25e6 --shapes users --by-path
    python -m bench.estimate_quality --size 25e6 --shapes users --crossing

``--by-path``: the pieces again, by how the split chose its cut points (``Cursor.cut_path``: "tree" by the sizes
of the directories in the remainder, "known" evenly over directories S3 named, "named" by interpolation over the
names of a truncated answer, "bisect" halving many small directories by count, "leaf" cutting the directory being
listed, "flat" by interpolation over the keys listed), with the LIST requests each path's pieces cost beyond their
keys / 1,000 (a piece of k keys is listed in ceil(k / 1,000) pages, an empty one in one).

``--crossing``: at each split attempt on a remainder that reaches past the donor's directory before the
levels it spans are known (no tree estimate: ``Cursor._flat_pages`` sizes it by interpolation over the keys
listed), the engine's estimate and the donor's against the keys truly left, and how often the split floor's
test (twice the floor: below it no directory is asked about and no split made) comes out as the truth's would.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

from hpcstage.inventory.fleet import MIN_SPLIT_PAGES

from bench.sim.des import PAGE, Config, Sim, keys_in
from bench.sim.des_shapes import make_any, shape_names


@dataclass
class Quality:
    pieces: list[tuple[float, int]] = field(default_factory=list)  # (estimate, true keys) per piece
    dir_requests: int = 0
    dir_requests_small: int = 0  # sent for remainders truly under twice the split floor
    paths: list[str] = field(default_factory=list)  # per piece, the split's Cursor.cut_path
    # per split attempt on a remainder reaching past the donor's directory before its tree is known (the flat
    # estimate decides whether to ask S3 about its directories and how many ways to cut): (the engine's
    # estimate in pages, the keys truly left, the donor's estimate of the piece in pages or None)
    crossing: list[tuple[float, int, float | None]] = field(default_factory=list)


class RecordingSim(Sim):
    """The simulator, recording each split's remainder, directory requests and pieces against the truth."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.quality = Quality()

    def engine_split(self, st: Any, ways: int) -> Any:
        asked_before = self.res.dir_requests
        left = st.end_rank - st.rank
        cur = st.cursor
        if cur is not None:
            cur.cut_path = ""
            if not cur.done and cur.pos is not None and cur._leaf_crossed() is not None:
                est, tree = cur._crossing_pages(PAGE)
                if est is not None and tree is None:
                    self.quality.crossing.append((est, left, cur.inherited_pages(PAGE)))
        pieces, delay = super().engine_split(st, ways)
        asked = self.res.dir_requests - asked_before
        q = self.quality
        q.dir_requests += asked
        if left < 2 * MIN_SPLIT_PAGES * PAGE:
            q.dir_requests_small += asked
        for p in pieces:
            q.pieces.append((float(p.estimate or 0), keys_in(self.ks, p.start_after, p.end)))
            q.paths.append(st.cursor.cut_path)
        return pieces, delay


def excess_requests(keys: int) -> float:
    """LIST requests a piece of ``keys`` keys costs beyond keys / 1,000: its last page's unused part (an empty
    piece: the whole request that finds it so)."""
    return (math.ceil(keys / PAGE) if keys > 0 else 1) - keys / PAGE


def by_path(q: Quality) -> dict[str, dict[str, Any]]:
    """The pieces by the way their split chose its cut points, largest share first."""
    groups: dict[str, list[tuple[float, int]]] = {}
    for path, piece in zip(q.paths, q.pieces, strict=True):
        groups.setdefault(path, []).append(piece)
    out = {}
    for path, ps in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ratios = _log2_ratios(ps)
        out[path] = {
            "pieces": len(ps),
            "empty": sum(t == 0 for _, t in ps),
            "under_1_page": sum(t < PAGE for _, t in ps),
            "under_8_pages": sum(t < 8 * PAGE for _, t in ps),
            "excess_requests": round(sum(excess_requests(t) for _, t in ps)),
            "log2_est_over_true_p50": round(_quantile(ratios, 0.5), 2),
        }
    return out


def crossing(q: Quality, floor_pages: float) -> dict[str, Any]:
    """The flat estimates of remainders reaching past the donor's directory (``Quality.crossing``) against the
    truth: log2(estimate / truth) and the donor's, and how often each side of the split floor's test (twice
    ``floor_pages``, below which the engine neither asks about directories nor splits) agrees with the truth."""
    bar = 2 * floor_pages * PAGE
    rows = q.crossing
    own = sorted(_log2_ratio(e * PAGE, t) for e, t, _ in rows)
    donor = sorted(_log2_ratio(d * PAGE, t) for _, t, d in rows if d is not None)
    # the floor's test per attempt: (by the engine's estimate, by the truth, by the donor's or None)
    tests = [(e * PAGE >= bar, t >= bar, None if d is None else d * PAGE >= bar) for e, t, d in rows]
    with_donor = [(o, t, d) for o, t, d in tests if d is not None]
    return {
        "attempts": len(rows),
        "log2_est_over_true": {f"p{int(100 * f)}": round(_quantile(own, f), 2) for f in (0.1, 0.5, 0.9)},
        "log2_donor_over_true_p50": round(_quantile(donor, 0.5), 2),
        "with_donor_estimate": len(donor),
        "both_over": sum(o and t for o, t, _ in tests),
        "only_estimate_over": sum(o and not t for o, t, _ in tests),
        "only_truth_over": sum(t and not o for o, t, _ in tests),
        "both_under": sum(not o and not t for o, t, _ in tests),
        # the same test on the donor's estimate, where the piece came with one
        "donor_agrees": sum(d == t for _, t, d in with_donor),
        "own_agrees_with_donor_estimate": sum(o == t for o, t, _ in with_donor),
        # where the two estimates come out alike, and of those how often the truth does too
        "both_estimates_alike": sum(o == d for o, _, d in with_donor),
        "both_estimates_alike_and_right": sum(o == d == t for o, t, d in with_donor),
    }


def _log2_ratio(estimate: float, true_keys: int) -> float:
    """log2(estimate / truth) in keys, +1 on each side so that empty remainders and zero estimates count."""
    return math.log2((estimate + 1) / (true_keys + 1))


def _log2_ratios(pieces: list[tuple[float, int]]) -> list[float]:
    """log2(estimate / truth) of the pieces that came with an estimate, sorted (+1 each: empty pieces count)."""
    return sorted(_log2_ratio(e, t) for e, t in pieces if e > 0)


def _quantile(xs: list[float], f: float) -> float:
    return xs[min(len(xs) - 1, int(f * len(xs)))] if xs else math.nan


def measure(shape: str, n: int, seed: int = 1, oracle: bool = False) -> dict[str, Any]:
    sim = RecordingSim(
        make_any(shape, n), Config(min_split_pages=MIN_SPLIT_PAGES, pace=True, oracle_estimates=oracle), seed
    )
    res = sim.run()
    q = sim.quality
    ratios = _log2_ratios(q.pieces)
    return {
        "shape": shape,
        "n": n,
        "makespan_s": round(res.makespan, 2),
        "overhead_pct": round(100 * res.overhead, 2),
        "exact": res.exact,
        "pieces": len(q.pieces),
        "pieces_under_8_pages": sum(t < 8 * PAGE for _, t in q.pieces),
        "log2_est_over_true": {f"p{int(100 * f)}": round(_quantile(ratios, f), 2) for f in (0.1, 0.5, 0.9)},
        "dir_requests": res.dir_requests,
        "dir_requests_of_splits": q.dir_requests,
        "dir_requests_for_small_remainders": q.dir_requests_small,
        "by_path": by_path(q),
        "crossing": crossing(q, MIN_SPLIT_PAGES),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=float, default=25e6)
    ap.add_argument("--shapes", default="users,uniform", help="comma-separated, or 'all'")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--oracle-estimates", action="store_true", help="bench.sim.des.Config.oracle_estimates")
    ap.add_argument(
        "--by-path", action="store_true", help="the pieces by how their split chose its cut points"
    )
    ap.add_argument(
        "--crossing",
        action="store_true",
        help="the flat estimates of remainders reaching past the donor's directory before their tree is known",
    )
    args = ap.parse_args()
    shapes = shape_names(args.shapes)
    print(
        "| shape | makespan s | LIST overhead | pieces | under 8 pages | log2(est/true) p10 / p50 / p90 | "
        "directory requests | of them for remainders under 2 floors | exact |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    paths, crossings = [], []
    for shape in shapes:
        m = measure(shape, int(args.size), args.seed, args.oracle_estimates)
        r = m["log2_est_over_true"]
        print(
            f"| {shape} | {m['makespan_s']} | {m['overhead_pct']} % | {m['pieces']} | {m['pieces_under_8_pages']} | "
            f"{r['p10']} / {r['p50']} / {r['p90']} | {m['dir_requests']} | "
            f"{m['dir_requests_for_small_remainders']} | {m['exact']} |",
            flush=True,
        )
        paths += [(shape, path, g) for path, g in m["by_path"].items()]
        crossings.append((shape, m["crossing"]))
    if args.by_path:
        print()
        print(
            "| shape | cut by | pieces | empty | under 1 page | under 8 pages | requests beyond keys / 1,000 | "
            "log2(est/true) p50 |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for shape, path, g in paths:
            print(
                f"| {shape} | {path or '(none)'} | {g['pieces']} | {g['empty']} | {g['under_1_page']} | "
                f"{g['under_8_pages']} | {g['excess_requests']} | {g['log2_est_over_true_p50']} |"
            )

    if args.crossing:
        print()
        print(
            "| shape | split attempts on crossing remainders | log2(est/true) p10 / p50 / p90 | donor's p50 | "
            "over 2 floors: both / the estimate only / the truth only / neither | the test right, where the donor "
            "gave an estimate: by the engine's / by the donor's | the two alike / and right |"
        )
        print("|---|---|---|---|---|---|---|")
        for shape, c in crossings:
            r = c["log2_est_over_true"]
            print(
                f"| {shape} | {c['attempts']} | {r['p10']} / {r['p50']} / {r['p90']} | "
                f"{c['log2_donor_over_true_p50']} | {c['both_over']} / {c['only_estimate_over']} / "
                f"{c['only_truth_over']} / {c['both_under']} | {c['own_agrees_with_donor_estimate']} / "
                f"{c['donor_agrees']} of {c['with_donor_estimate']} | {c['both_estimates_alike']} / "
                f"{c['both_estimates_alike_and_right']} |"
            )


if __name__ == "__main__":
    main()
