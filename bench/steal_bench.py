"""Benchmark the work-stealing listing engine in the discrete-event simulator (bench/sim/des.py).

    python -m bench.steal_bench --sizes 25e6,100e6 --shapes all --mode fleet --seeds 1
    python -m bench.steal_bench --sizes 25e6 --shapes checks --mode fleet --seeds 1   # the shapes of 2026-11-29
    python -m bench.steal_bench --sizes 1e6 --shapes uniform --mode host --streams 64,256 --faults 0.01 --pace both
    python -m bench.steal_bench --sizes 25e6 --shapes dated --mode fleet --kill 0.05 --seeds 3

Prints a Markdown table (one row per shape x size x configuration, medians over seeds where several) and
writes every run's full result as JSON to bench/out/steal_<stamp>.json (the stamp is built from the
arguments, not the clock, so reruns overwrite).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcstage.inventory.fleet import (
    COUNTER_SHARDS,
    ENDGAME_MIN_SPLIT_PAGES,
    ENDGAME_QUIET_S,
    MIN_SPLIT_PAGES,
    OPEN_SHARDS,
    STRAGGLER_RATIO,
)
from hpcstage.inventory.steal import DEFAULT_MIN_SPLIT_PAGES

from bench.sim.des import ORACLE_SCOPES, Config, Result, sequential_time, simulate
from bench.sim.des_shapes import ALL_SHAPES, make_any, shape_names
from bench.sim.params import DEFAULT

OUT = Path(__file__).resolve().parent / "out"


def _floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",") if x]


def _ints(s: str) -> list[int]:
    return [int(float(x)) for x in s.split(",") if x]


def configs(args: argparse.Namespace) -> list[Config]:
    base = Config(
        faults=args.faults,
        kill=args.kill,
        lease_s=args.lease,
        publish_ways=args.publish_ways,
        memo=args.memo,
        counter_shards=args.counter_shards,
        open_shards=args.open_shards,
        split_cpu_s=args.split_cpu,
        reduce_in_lister=args.reduce_in_lister == "on",
        largest_first=args.donors == "largest",
        pace_per=args.pace_per,
        share_by_size=args.share == "size",
        endgame_quiet_s=args.endgame_quiet,
        endgame_min_split_pages=args.endgame_min_split_pages,
        endgame_pace=args.endgame_floor == "pace",
        claim_put_first=args.claim == "put",
        straggler_ratio=args.straggler_ratio,
        claim_largest=args.claim_largest == "on",
        claim_weighted=args.claim_weighted == "on",
        yield_util=args.yield_util,
        yield_min_pages=args.yield_min_pages,
        yield_push_ratio=args.yield_push_ratio,
        oracle_estimates=args.oracle_estimates or args.oracle_scope is not None,
        oracle_scope=args.oracle_scope or "all",
        depth_means=args.depth_means,
        shared_dir_answers=args.shared_dir_answers,
        hungry_poll=args.hungry_poll,
        yield_after_s=args.yield_after_s,
        endgame_unthrottled=args.endgame_unthrottled == "on",
    )
    paces = [False, True] if args.pace == "both" else [args.pace == "on"]
    out: list[Config] = []
    for mode in args.mode.split(","):
        for pace in paces:
            msp = args.min_split_pages
            if mode == "host":
                host = replace(base, min_split_pages=msp or DEFAULT_MIN_SPLIT_PAGES)
                out += [replace(host, mode="host", streams=s, pace=pace) for s in _ints(args.streams)]
            elif mode == "fleet":
                fl = replace(base, min_split_pages=msp or MIN_SPLIT_PAGES)
                out += [
                    replace(fl, mode="fleet", listers=args.listers, per_lister=k, pace=pace)
                    for k in _ints(args.per_lister)
                ]
            elif mode == "static":
                out.append(replace(base, mode="static", static_ranges=args.listers, pace=pace))
            elif mode != "sequential":
                raise SystemExit(f"unknown mode {mode!r}")
    return out


def _fmt_n(n: int) -> str:
    for unit, div in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= div:
            v = n / div
            return f"{v:g}{unit}"
    return str(n)


def row(rs: list[Result], cfg: Config) -> dict[str, Any]:
    med = statistics.median
    return {
        "shape": rs[0].shape,
        "n": _fmt_n(rs[0].n),
        "config": rs[0].label
        + (" paced" if cfg.pace else "")
        + (f" faults={cfg.faults:g}" if cfg.faults else "")
        + (f" kill={cfg.kill:g}" if cfg.kill else ""),
        "seeds": len(rs),
        "makespan": med(r.makespan for r in rs),
        "makespan_max": max(r.makespan for r in rs),
        "floor": rs[0].floor,
        "eff": med(r.efficiency for r in rs),
        "overhead": med(r.overhead for r in rs),
        "empty": med(r.empty_pages for r in rs),
        "dirs": med(r.dir_requests for r in rs),
        "splits": med(r.splits for r in rs),
        "attempts": med(r.split_attempts for r in rs),
        "published": med(r.published for r in rs),
        "throttled": med(r.throttled for r in rs),
        "faults": med(sum(r.faults.values()) for r in rs),
        "killed": med(r.killed for r in rs),
        "adopted": med(r.adoptions for r in rs),
        "list_end": med(r.phases.get("list_end", r.makespan) for r in rs),
        "cost": med(r.cost.get("total", 0.0) for r in rs),
        "exact": f"{sum(r.exact for r in rs)}/{len(rs)}",
    }


HEADER = (
    "| shape | N | config | seeds | makespan s (max) | floor s | eff | LIST overhead | empty pages | dir requests | splits "
    "(attempts) | published | throttled | faults | killed/adopted | cost $ | exact |"
)


def md(r: dict[str, Any]) -> str:
    return (
        f"| {r['shape']} | {r['n']} | {r['config']} | {r['seeds']} | {r['makespan']:.1f} ({r['makespan_max']:.1f}) "
        f"| {r['floor']:.1f} | {r['eff']:.2f} | {100 * r['overhead']:.2f}% | {r['empty']:g} | {r['dirs']:g} | {r['splits']:g} "
        f"({r['attempts']:g}) | {r['published']:g} | {r['throttled']:g} | {r['faults']:g} "
        f"| {r['killed']:g}/{r['adopted']:g} | {r['cost']:.2f} | {r['exact']} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="25e6")
    ap.add_argument(
        "--shapes",
        default="all",
        help="comma-separated, 'all' (the twelve of DEFAULT_SHAPES) or 'checks' (CHECK_SHAPES): %s"
        % ", ".join(ALL_SHAPES),
    )
    ap.add_argument("--mode", default="fleet", help="fleet, host, static, sequential (comma-separated)")
    ap.add_argument("--seeds", type=int, default=1, help="how many seeds: --first-seed and those after it")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--streams", default="64,256", help="host streams")
    ap.add_argument("--listers", type=int, default=1000)
    ap.add_argument("--per-lister", default="8", help="streams per lister, e.g. 4,8,16")
    ap.add_argument("--faults", type=float, default=0.0, help="fraction of LIST attempts failing")
    ap.add_argument("--kill", type=float, default=0.0, help="fraction of listers killed")
    ap.add_argument("--lease", type=float, default=10.0)
    ap.add_argument(
        "--pace",
        "--aimd",
        dest="pace",
        choices=("on", "off", "both"),
        default="on",
        help="the listers pace their pages from the 503s they see, as the fleet's do (default; --aimd: the old name)",
    )
    ap.add_argument("--publish-ways", type=int, default=15)
    ap.add_argument(
        "--min-split-pages",
        type=float,
        default=None,
        help="default: what the engine uses (fleet.MIN_SPLIT_PAGES for the fleet, SplitPolicy's for a host)",
    )
    ap.add_argument(
        "--partition-rate",
        type=float,
        default=DEFAULT.s3.partition_rate_limit,
        help="requests/s a partition serves before 503 SlowDown (default: bench/sim/params.py's); a smaller "
        "cap with fewer listers shows the rate control at a fraction of the cost",
    )
    ap.add_argument("--split-cpu", type=float, default=0.0)
    ap.add_argument(
        "--counter-shards",
        type=int,
        default=COUNTER_SHARDS,
        help="items the fleet's outstanding-range count is spread over (default: fleet.COUNTER_SHARDS, as "
        "fleet.py; 1: the one meta item of the fleet before issue 9)",
    )
    ap.add_argument(
        "--open-shards",
        type=int,
        default=OPEN_SHARDS,
        help="partition keys the open ranges are spread over (default: fleet.OPEN_SHARDS, as fleet.py)",
    )
    ap.add_argument(
        "--reduce-in-lister",
        choices=("on", "off"),
        default="on",
        help="the lister that ends the listing reduces the run (default, as fleet.Lister.reduce_here); off: a "
        "Reduce Lambda after SendTaskSuccess (Config.reduce_fixed_s), the path before",
    )
    ap.add_argument(
        "--donors",
        choices=("largest", "random"),
        default="largest",
        help="which of a busy lister's streams serve the fleet's hunger: the one with the most keys left by "
        "estimate first (default, as fleet.Lister.wanted), or whichever's page comes first (the fleet before)",
    )
    ap.add_argument(
        "--share",
        choices=("size", "fair"),
        default="size",
        help="how much of the fleet's hunger a busy lister serves: up to a piece of twice the split floor per "
        "hungry lister when its largest stream holds that much (default, as fleet.Lister.wanted), or its "
        "fair share only, ceil(2 x hungry / busy) (the fleet before)",
    )
    ap.add_argument(
        "--pace-per",
        choices=("stream", "lister"),
        default="stream",
        help="one pacer per stream (default, as fleet.Lister.throttle_for) or one for all of a lister's streams "
        "(the fleet before)",
    )
    ap.add_argument(
        "--endgame-quiet",
        type=float,
        default=ENDGAME_QUIET_S,
        help="seconds without a 503 SlowDown in the fleet before a lister's endgame (default: "
        "fleet.ENDGAME_QUIET_S, as fleet.py; 0: no endgame)",
    )
    ap.add_argument(
        "--endgame-min-split-pages",
        type=float,
        default=ENDGAME_MIN_SPLIT_PAGES,
        help="the split floor in the endgame (default: fleet.ENDGAME_MIN_SPLIT_PAGES, as fleet.py)",
    )
    ap.add_argument(
        "--endgame-floor",
        choices=("pace", "fixed"),
        default="pace",
        help="the endgame splits down to what a stream lists while the fleet, at its pace, lists what its "
        "listers hold (fleet.endgame_floor, as fleet.py: default), or always to --endgame-min-split-pages "
        "(the fleet before 2026-11-26's sixth session)",
    )
    ap.add_argument(
        "--claim",
        choices=("put", "transaction"),
        default="put",
        help="a claim is a Put of the lease item, then the winner's Delete of the open item (fleet.FleetStore.claim, "
        "as fleet.py: default), or one transaction of both (the fleet before 2026-11-26's seventh session)",
    )
    ap.add_argument(
        "--straggler-ratio",
        type=float,
        default=STRAGGLER_RATIO,
        help="a busy lister's largest stream above this many times the fleet's mean remainder a range gives pieces "
        "with nobody hungry (fleet.straggler_share; default fleet.STRAGGLER_RATIO); 0: never (the fleet before "
        "2026-11-27's second session)",
    )
    ap.add_argument(
        "--claim-largest",
        choices=("on", "off"),
        default="off",
        help="on: a scan claims the largest open range it found (a variant measured and not kept); off: one at "
        "random, as fleet.Lister._scan",
    )
    ap.add_argument(
        "--claim-weighted",
        choices=("on", "off"),
        default="off",
        help="on: a scan tries the open ranges it found in random order weighted by their estimates "
        "(bench.sim.des.claim_order: a variant measured and not kept); off: uniformly, as fleet.Lister._scan",
    )
    ap.add_argument(
        "--yield-util",
        type=float,
        default=0.0,
        help="a stream paced below this share of its unpaced rate gives the rest of its range back while open "
        "ranges it did not give back wait, and claims again (bench.sim.des.Config.yield_util); 0: never (the fleet)",
    )
    ap.add_argument(
        "--yield-min-pages",
        type=float,
        default=16.0,
        help="--yield-util: only a remainder of this many pages or more by estimate is given back",
    )
    ap.add_argument(
        "--yield-after-s",
        type=float,
        default=0.0,
        help="--yield-util: only a stream paced for this many seconds gives its remainder back",
    )
    ap.add_argument(
        "--yield-push-ratio",
        type=float,
        default=0.0,
        help="while the fleet saw a 503 lately, a busy lister's largest unpaced stream gives pieces as a straggler's "
        "at this ratio (bench.sim.des.Config.yield_push_ratio; with or without --yield-util); 0: no such pieces",
    )
    ap.add_argument(
        "--endgame-unthrottled",
        choices=("on", "off"),
        default="on",
        help="a run never throttled enters the endgame once the fleet's pace is known (fleet.Lister.wanted, "
        "default); off: only after a throttled phase (the fleet before 2026-11-27's second session)",
    )
    ap.add_argument("--memo", action="store_true", help="skip re-asking a cursor that refused to split")
    ap.add_argument(
        "--oracle-estimates",
        action="store_true",
        help="the engine's estimates replaced by the model's true counts (bench.sim.des.Config.oracle_estimates): "
        "what perfect estimates would buy, not the fleet",
    )
    ap.add_argument(
        "--oracle-scope",
        choices=ORACLE_SCOPES,
        help="which estimates --oracle-estimates replaces (bench.sim.des.Config.oracle_scope; implies it): all "
        "(default); flat, those not from a tree; crossing, those of a remainder reaching past its stream's "
        "directory before its tree is known; within, those of a remainder inside it",
    )
    ap.add_argument(
        "--depth-means",
        action="store_true",
        help="tree estimates size directories by the true mean keys per directory at their depth "
        "(bench.sim.des.Config.depth_means): a bound for count-based sizes, not the fleet; walks the key space "
        "first (minutes at 25M)",
    )
    ap.add_argument(
        "--hungry-poll",
        type=float,
        default=1.0,
        help="busy listers read the hunger items this fraction of their interval apart during the ramp while more "
        "listers are hungry than busy (bench.sim.des.Config.hungry_poll, a variant not kept); 1: as the fleet",
    )
    ap.add_argument(
        "--shared-dir-answers",
        action="store_true",
        help="a Delimiter answer about a level any stream asked before costs nothing "
        "(bench.sim.des.Config.shared_dir_answers): a bound for sharing them fleet-wide, not the fleet",
    )
    ap.add_argument("--tag", default="")
    ap.add_argument(
        "--versions-per-key",
        type=float,
        default=0.0,
        help="also run each size as a versioned bucket (ListObjectVersions) with this many versions per key "
        "on average: N*v rows in the same key order, printed beside the unversioned run",
    )
    args = ap.parse_args(argv)
    shapes = shape_names(args.shapes)
    sizes = [int(x) for x in _floats(args.sizes)]
    cfgs = configs(args)
    params = DEFAULT.with_s3(partition_rate_limit=args.partition_rate)
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for n, shape in itertools.product(sizes, shapes):
        if "sequential" in args.mode.split(","):
            t = sequential_time(n)
            print(
                f"| {shape} | {_fmt_n(n)} | sequential (analytic) | - | {t:.0f} | {t:.0f} | 1.00 | 0.00% | 0 | 0 | "
                "0 | 0 | 0 | - | - | - |"
            )
        if not cfgs:
            continue
        runs_of_size = [(shape, make_any(shape, n))]
        if args.versions_per_key:
            # ListObjectVersions pages hold up to 1,000 rows (versions and delete markers) in key order and
            # are sharded by key like ListObjectsV2, so a versioned bucket lists like a key space of N*v rows
            # of the same shape. Not modelled: a cut cannot fall between two versions of one key (at most a
            # few rows per cut), and a versions page's XML is larger (same page latency assumed).
            rows_n = int(n * args.versions_per_key)
            runs_of_size.append((f"{shape} versioned x{args.versions_per_key:g}", make_any(shape, rows_n)))
        for (label, ks), cfg in itertools.product(runs_of_size, cfgs):
            rs = []
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                t0 = time.perf_counter()
                r = simulate(ks, cfg, seed=seed, params=params)
                wall = time.perf_counter() - t0
                d = r.to_dict()
                d["wall_s"] = wall
                d["config"] = {k: v for k, v in vars(cfg).items()}
                runs.append(d)
                rs.append(r)
                if not r.exact:
                    print(
                        f"INEXACT: {shape} {n} {cfg.label()} seed {seed}: {r.exact_detail}", file=sys.stderr
                    )
            rw = row(rs, cfg)
            rw["shape"] = label
            if label != shape:
                rw["n"] = f"{_fmt_n(n)} keys, {_fmt_n(ks.n)} versions"
            rows.append(rw)
            print(md(rw), flush=True)
    OUT.mkdir(exist_ok=True)
    stamp = re.sub(r"[^A-Za-z0-9=.,_-]+", "_", f"{args.mode}_{args.sizes}_{args.shapes}_{args.tag}")[:120]
    path = OUT / f"steal_{stamp}.json"
    path.write_text(json.dumps({"args": vars(args), "rows": rows, "runs": runs}, indent=1, default=str))
    print(f"\nwrote {path}", file=sys.stderr)
    return 0 if all(r["exact"].split("/")[0] == r["exact"].split("/")[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
