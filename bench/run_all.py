"""Run the scale benchmark and write bench/RESULTS.md (+ PNG plots and JSON under bench/out/).

python -m bench.run_all                       # everything: 25M, 100M, 1B x 6 shapes x 7 strategies
python -m bench.run_all --sizes 25M --shapes uniform,unicode --realtime-objects 0   # a quick look
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import asdict, fields, is_dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import keyspace as K
from bench.sim.params import DEFAULT, SimParams
from bench.sim.strategies import STRATEGIES, RunResult, simulate

HERE = Path(__file__).resolve().parent
SIZES = {"200k": 200_000, "25M": 25_000_000, "100M": 100_000_000, "1B": 1_000_000_000}
TIME_GOALS = {"25M": 20.0, "100M": 45.0, "1B": 300.0}
REAL_TIME_BOUNDS = {"25M": 600.0, "100M": 600.0, "1B": 1200.0}
SKEWED = ("dated", "hot-prefix", "long-prefix", "multi-tenant")
LABELS = {
    "sequential": "sequential (aws s3 ls / s5cmd)",
    "dmap-reader": "Distributed Map S3 reader",
    "seed-natural": "seed 2014, natural order",
    "seed-interleaved": "seed 2014, interleaved",
    "static-nohints": "static equal-width, no hints",
    "static-hints": "static from perfect hints",
    "hpcstage": "hpcstage adaptive",
}


def fmt_mk(r: RunResult) -> str:
    """Makespan, or how long a run went before it failed."""
    if r.failures or (r.missed and not r.strategy.startswith("seed")):
        return f"**FAILED** at {fmt_s(r.makespan_s)}"
    return fmt_s(r.makespan_s)


def fmt_s(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 120:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s"


def run_sizes(
    sizes: list[str], shapes: list[str], strategies: list[str], params: SimParams, out: Path
) -> tuple[dict[str, list[RunResult]], dict[str, float]]:
    results: dict[str, list[RunResult]] = {}
    real: dict[str, float] = {}
    for size in sizes:
        n = SIZES[size]
        t0 = time.perf_counter()
        rows: list[RunResult] = []
        for shape in shapes:
            ks = K.make(shape, n)
            seq = None
            for st in strategies:
                t = time.perf_counter()
                if st == "dmap-reader" and seq is None:
                    seq = simulate(ks, "sequential", params)
                r = simulate(ks, st, params, seq=seq)
                if st == "sequential":
                    seq = r
                rows.append(r)
                print(
                    f"[{size} {shape:12s} {st:16s}] makespan {fmt_s(r.makespan_s):>9s} eff {r.efficiency:.2f} "
                    f"LIST {r.list_requests:,} ({r.list_overhead:+.1%}) missed {r.missed:,} "
                    f"cov {r.coverage_ok} real {time.perf_counter() - t:.1f}s",
                    flush=True,
                )
        real[size] = time.perf_counter() - t0
        results[size] = rows
        (out / f"results-{size}.json").write_text(
            json.dumps([r.to_dict() for r in rows], indent=1, default=str)
        )
        (out / f"timelines-{size}.json").write_text(
            json.dumps(
                {
                    f"{r.shape}/{r.strategy}": r.timeline
                    for r in rows
                    if r.strategy in ("hpcstage", "static-nohints")
                }
            )
        )
        print(f"== {size}: {real[size]:.0f} s of real time", flush=True)
    return results, real


def sensitivity(size: str, shape: str, params: SimParams) -> list[tuple[str, RunResult]]:
    ks = K.make(shape, SIZES[size])
    variants = [
        ("defaults", params),
        ("LIST limit 3,500 req/s per partition", params.with_s3(partition_rate_limit=3_500.0)),
        ("one partition for the whole bucket", params.with_s3(objects_per_partition=10**12)),
        ("shard_seconds = 30 (shorter budget)", params.with_hpc(shard_seconds=30)),
        ("shard_seconds = 600 (the previous default)", params.with_hpc(shard_seconds=600)),
        ("target_shards = 4,000", params.with_hpc(target_shards=4_000)),
    ]
    out = []
    for name, p in variants:
        r = simulate(ks, "hpcstage", p)
        print(f"[sensitivity {size} {shape}] {name}: {fmt_s(r.makespan_s)}", flush=True)
        out.append((name, r))
    return out


def hints_sensitivity(shape: str, params: SimParams) -> list[tuple[str, RunResult]]:
    """Audit mode (perfect hints) at 100M and 1B: what the defaults cost where the plan is right."""
    variants = [
        ("defaults", params),
        ("max_concurrency = 900", params.with_hpc(max_concurrency=900)),
        ("shard_seconds = 600 (the previous default)", params.with_hpc(shard_seconds=600)),
    ]
    out = []
    for size in ("100M", "1B"):
        ks = K.make(shape, SIZES[size])
        for name, p in variants:
            r = simulate(ks, "static-hints", p)
            print(f"[hints sensitivity {size} {shape}] {name}: {fmt_s(r.makespan_s)}", flush=True)
            out.append((f"{size}: {name}", r))
    return out


# ---------------------------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------------------------


def plots(results: dict[str, list[RunResult]], out: Path, timeline_key: tuple[str, str]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    sizes = [s for s in ("25M", "100M", "1B") if s in results]
    shapes = sorted({r.shape for rows in results.values() for r in rows})
    if sizes and shapes:
        cols = 3
        rows_n = math.ceil(len(shapes) / cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(15, 4.2 * rows_n), squeeze=False)
        for ax, shape in zip(axes.flat, shapes, strict=False):
            for st in STRATEGIES:
                xs, ys = [], []
                for s in sizes:
                    for r in results[s]:
                        if r.shape == shape and r.strategy == st:
                            xs.append(SIZES[s])
                            ys.append(r.makespan_s)
                if xs:
                    ax.plot(xs, ys, marker="o", label=LABELS[st], lw=2.5 if st == "hpcstage" else 1.2)
            goal_x = [SIZES[s] for s in sizes]
            ax.plot(goal_x, [TIME_GOALS[s] for s in sizes], "k--", lw=1, label="goal")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(shape)
            ax.set_xlabel("objects")
            ax.set_ylabel("makespan (s, simulated)")
            ax.grid(True, which="both", alpha=0.3)
        for ax in list(axes.flat)[len(shapes) :]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.suptitle("Makespan vs number of objects, per key shape (seed strategies miss keys on unicode)")
        fig.tight_layout()
        fig.savefig(HERE / "makespan.png", dpi=90)
        plt.close(fig)
        made.append("makespan.png")
    size, shape = timeline_key
    pick = [
        r for r in results.get(size, []) if r.shape == shape and r.strategy in ("hpcstage", "static-nohints")
    ]
    if pick:
        fig, axes = plt.subplots(len(pick), 1, figsize=(12, 3.6 * len(pick)), squeeze=False)
        for ax, r in zip(axes.flat, pick, strict=False):
            colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
            for slot, rnd, start, end, done in r.timeline:
                ax.plot(
                    [start, end],
                    [slot, slot],
                    color=colors[rnd % len(colors)],
                    lw=0.8,
                    alpha=1.0 if done else 0.6,
                )
            ax.set_title(
                f"{LABELS[r.strategy]}: {shape}, {size} objects — makespan {fmt_s(r.makespan_s)}, "
                f"{r.rounds} round(s) (colour = round)"
            )
            ax.set_xlabel("virtual time (s)")
            ax.set_ylabel("Lambda slot")
            ax.axvline(r.makespan_s, color="k", lw=0.8, ls="--")
        fig.tight_layout()
        fig.savefig(HERE / "timeline.png", dpi=90)
        plt.close(fig)
        made.append("timeline.png")
    return made


# ---------------------------------------------------------------------------------------------
# RESULTS.md
# ---------------------------------------------------------------------------------------------


def _get(rows: list[RunResult], shape: str, st: str) -> RunResult | None:
    return next((r for r in rows if r.shape == shape and r.strategy == st), None)


def _incomplete(r: RunResult) -> bool:
    """A run that failed or did not list every key (the seed's misses are reported separately)."""
    return bool(r.failures or (r.missed and not r.strategy.startswith("seed")))


def goals(results: dict[str, list[RunResult]]) -> list[tuple[str, bool | None, str]]:
    out: list[tuple[str, bool | None, str]] = []
    for size, limit in TIME_GOALS.items():
        rows = [r for r in results.get(size, []) if r.strategy == "hpcstage"]
        if rows:
            worst = max(rows, key=lambda r: r.makespan_s)
            over = [f"{r.shape} {fmt_mk(r)}" for r in rows if r.makespan_s > limit or r.failures]
            out.append(
                (
                    f"{size} in ≤ {fmt_s(limit)}, no hints",
                    not over,
                    f"worst {worst.shape} {fmt_s(worst.makespan_s)}"
                    + (f"; over: {', '.join(over)}" if over else ""),
                )
            )
    rows = results.get("25M", [])
    if rows:
        ratios = []
        for shape in sorted({r.shape for r in rows}):
            h, s = _get(rows, shape, "hpcstage"), _get(rows, shape, "seed-interleaved")
            if h and s:
                ratios.append((s.makespan_s / h.makespan_s, shape, s.missed, _incomplete(h)))
        if ratios:
            bad = [sh for x, sh, _, failed in ratios if x < 8 or failed]
            out.append(
                (
                    "≥ 8× faster than the seed at 25M",
                    not bad,
                    "; ".join(
                        (f"{sh}: hpcstage FAILED" if failed else f"{sh} {x:.2g}×")
                        + (f" (seed misses {m:,})" if m else "")
                        for x, sh, m, failed in ratios
                    ),
                )
            )
    for size in ("25M", "100M", "1B"):
        rows = results.get(size, [])
        ratios = []
        for shape in SKEWED:
            h, s = _get(rows, shape, "hpcstage"), _get(rows, shape, "static-nohints")
            if h and s:
                ratios.append((s.makespan_s / h.makespan_s, shape, _incomplete(h)))
        if ratios:
            bad = [sh for x, sh, failed in ratios if x < 3 or failed]
            out.append(
                (
                    f"≥ 3× faster than static ranges without hints on skewed keys ({size})",
                    not bad,
                    "; ".join(
                        f"{sh}: hpcstage FAILED" if failed else f"{sh} {x:.2g}×" for x, sh, failed in ratios
                    ),
                )
            )
    for size in ("25M", "100M", "1B"):
        rows = [r for r in results.get(size, []) if r.strategy == "hpcstage"]
        if rows:
            bad = [f"{r.shape} {r.efficiency:.2f}" for r in rows if r.efficiency < 0.85]
            out.append(
                (
                    f"efficiency ≥ 0.85 on every shape ({size})",
                    not bad,
                    "; ".join(f"{r.shape} {r.efficiency:.2f}" for r in rows),
                )
            )
            bad = [r for r in rows if r.list_overhead > 0.02 or r.failures]
            out.append(
                (
                    f"LIST requests ≤ 2% over ⌈N/1000⌉ ({size})",
                    not bad,
                    "; ".join(f"{r.shape} {r.list_overhead:+.1%}" for r in rows),
                )
            )
    return out


def _params_md(p: Any, prefix: str = "") -> list[str]:
    lines = []
    for f in fields(p):
        v = getattr(p, f.name)
        if is_dataclass(v):
            lines += _params_md(v, f"{prefix}{f.name}.")
        else:
            lines.append(f"`{prefix}{f.name}` = {v!r}")
    return lines


def write_results(
    path: Path,
    results: dict[str, list[RunResult]],
    real: dict[str, float],
    sens: list[tuple[str, RunResult]],
    sens_key: tuple[str, str],
    rt: list[Any],
    rt_info: str,
    pngs: list[str],
    cmd: str,
    params: SimParams,
    total_real: float,
    commands: list[str] | None = None,
    code: str = "",
    sens_hints: list[tuple[str, RunResult]] | None = None,
    sens_hints_shape: str = "",
) -> None:
    L: list[str] = []
    w = L.append
    w("# Scale benchmark: listing 25M–1B objects (simulated) and 2M objects (real time, local endpoint)")
    w("")
    if commands:
        w("Commands (from the repository root):")
        w("")
        w("```sh")
        L.extend(commands)
        w("```")
        w("")
    if code:
        w(f"Code measured: {code}")
        w("")
    w(
        f"Generated by `{cmd}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC ({platform.processor() or platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}), {total_real / 60:.1f} min of real time in all."
    )
    w(
        "Simulated times are *virtual* seconds of the modelled AWS world (bench/sim/params.py); the simulation "
        "runs the real hpcstage code (`hpcstage.inventory.tasks` → `plan_shards`, `list_shard`, `split_range`, "
        "`continue_task`, `reduce_task`) against a simulated S3 client."
    )
    w("")
    w(
        "Real time of the simulation per size (bound: 10 min for 25M and 100M, 20 min for 1B): "
        + ", ".join(
            f"{s}: {v / 60:.1f} min {'✅' if v <= REAL_TIME_BOUNDS.get(s, 1e9) else '❌'}"
            for s, v in real.items()
        )
        + "."
    )
    w("")
    w("## Goals")
    w("")
    w("| goal | met | figures |")
    w("|---|---|---|")
    for name, ok, fig in goals(results):
        w(f"| {name} | {'✅ yes' if ok else '❌ no'} | {fig} |")
    w("")
    w("## hpcstage by shape and size (no hints; and its audit mode with perfect hints)")
    w("")
    w(
        "| N | shape | mode | makespan | efficiency | LIST requests (⌈N/1000⌉, over) | cost | plan (s) | planned ranges "
        "(estimate vs N) | rounds | invocations | last round done (s) | reduce (s) |"
    )
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size, rows in results.items():
        for r in sorted(rows, key=lambda r: (r.strategy != "hpcstage", r.shape)):
            if r.strategy not in ("hpcstage", "static-hints"):
                continue
            ph = r.phases
            est = ph.get("estimated_objects", 0)
            ratio = f"{est / r.n:.2g}×" if r.n and est else "?"
            last_map = float(ph.get("lists", 0.0))
            mode = "no hints" if r.strategy == "hpcstage" else "perfect hints"
            w(
                f"| {size} | {r.shape} | {mode} | {fmt_mk(r)} | {r.efficiency:.2f} | {r.list_requests:,} "
                f"({r.pages_min:,}, {r.list_overhead:+.1%}) | ${r.cost['total']:.2f} | {ph.get('plan', 0):.1f} | "
                f"{ph.get('planned_shards', 0)} ({ratio}) | {r.rounds} | {r.invocations:,} | {last_map:.1f} | "
                f"{r.makespan_s - last_map:.1f} |"
            )
    w("")
    failed = [
        (size, r)
        for size, rows in results.items()
        for r in rows
        if r.failures or any("FAILED" in n for n in r.notes)
    ]
    if failed:
        w("Failed runs:")
        w("")
        for size, r in failed:
            w(f"- {size} {r.shape} {LABELS[r.strategy]}: " + "; ".join(n for n in r.notes if "FAILED" in n))
        w("")
    w(
        "Efficiency = ideal / actual makespan, ideal = one cold start + ⌈N/1000⌉ × mean page time "
        "(S3 latency + lister CPU) / workers used (1,000 Lambdas for hpcstage), or the partitions' request-rate "
        "cap if that is slower. `last round done` is when the last round's Map run "
        "(with its ~6 s completion lag) and continue_task finished; `reduce` is the reduce_task after it."
    )
    w("")
    for size, rows in results.items():
        w(f"## All strategies at {size} objects")
        w("")
        w(
            "| shape | strategy | makespan | efficiency | LIST requests (over ⌈N/1000⌉) | cost | missed keys | "
            "peer ÷ hpcstage |"
        )
        w("|---|---|---|---|---|---|---|---|")
        for r in rows:
            h = _get(rows, r.shape, "hpcstage")
            ratio = f"{r.makespan_s / h.makespan_s:.2f}" if h and r.strategy != "hpcstage" else "—"
            missed = f"**{r.missed:,}**" if r.missed else "0"
            w(
                f"| {r.shape} | {LABELS[r.strategy]} | {fmt_mk(r)} | {r.efficiency:.2f} | "
                f"{r.list_requests:,} ({r.list_overhead:+.1%}) | ${r.cost['total']:.2f} | {missed} | {ratio} |"
            )
        w("")
    if pngs:
        w("## Plots")
        w("")
        for p in pngs:
            w(f"![{p}]({p})")
        w("")
    else:
        w("(No plots: matplotlib is not installed.)")
        w("")
    if sens:
        w(f"## Sensitivity: hpcstage at {sens_key[0]}, {sens_key[1]} shape")
        w("")
        w("| variant | makespan | efficiency | LIST requests | throttled (503) | rounds | cost |")
        w("|---|---|---|---|---|---|---|")
        for name, r in sens:
            w(
                f"| {name} | {fmt_mk(r)} | {r.efficiency:.2f} | {r.list_requests:,} | {r.throttled:,} | "
                f"{r.rounds} | ${r.cost['total']:.2f} |"
            )
        w("")
    if sens_hints:
        w(f"## Sensitivity: audit mode (perfect hints), {sens_hints_shape} shape")
        w("")
        w(
            "| variant | makespan | efficiency | LIST requests (over ⌈N/1000⌉) | throttled (503) | rounds | invocations | cost |"
        )
        w("|---|---|---|---|---|---|---|---|")
        for name, r in sens_hints:
            w(
                f"| {name} | {fmt_mk(r)} | {r.efficiency:.2f} | {r.list_requests:,} ({r.list_overhead:+.1%}) | "
                f"{r.throttled:,} | {r.rounds} | {r.invocations:,} | ${r.cost['total']:.2f} |"
            )
        w("")
    if rt:
        w("## Real time on the local endpoint")
        w("")
        w(rt_info)
        w("")
        truth = rt[0]
        w("| tool | objects | bytes | agrees with the model | seconds | LIST pages served | note |")
        w("|---|---|---|---|---|---|---|")
        for t in rt:
            agree = (
                "—"
                if t is truth
                else ("✅" if (t.objects, t.bytes) == (truth.objects, truth.bytes) else "❌")
            )
            objs = f"{t.objects:,}" if t.objects is not None else "?"
            nb = f"{t.bytes:,}" if t.bytes is not None else "?"
            w(f"| {t.tool} | {objs} | {nb} | {agree} | {t.seconds:.1f} | {t.pages:,} | {t.note} |")
        w("")
        w("Commands:")
        w("")
        for t in rt[1:]:
            w(f"- `{t.command}`")
        w("")
    w(Path(HERE / "NOTES.md").read_text() if (HERE / "NOTES.md").exists() else "")
    w("## Parameters used (bench/sim/params.py, each with its source there)")
    w("")
    for line in _params_md(params):
        w(f"- {line}")
    w("")
    path.write_text("\n".join(L))


def _load(d: dict[str, Any], timeline: list[Any] | None = None) -> RunResult:
    keep = {f.name for f in fields(RunResult)}
    r = RunResult(**{k: v for k, v in d.items() if k in keep})
    r.timeline = [tuple(x) for x in (timeline or [])]  # type: ignore[misc]
    return r


def rewrite(out: Path, results_path: Path, timeline: str) -> int:
    meta = json.loads((out / "meta.json").read_text())
    results: dict[str, list[RunResult]] = {}
    for size in meta["sizes"]:
        tls = json.loads((out / f"timelines-{size}.json").read_text())
        results[size] = [
            _load(d, tls.get(f"{d['shape']}/{d['strategy']}"))
            for d in json.loads((out / f"results-{size}.json").read_text())
        ]
    sens: list[tuple[str, RunResult]] = []
    sens_key = ("", "")
    if (out / "sensitivity.json").exists():
        sj = json.loads((out / "sensitivity.json").read_text())
        sens_key = (sj["key"][0], sj["key"][1])
        sens = [(name, _load(d)) for name, d in sj["rows"]]
    sens_hints: list[tuple[str, RunResult]] = []
    sens_hints_shape = ""
    if (out / "sensitivity-hints.json").exists():
        sj = json.loads((out / "sensitivity-hints.json").read_text())
        sens_hints_shape = sj["shape"]
        sens_hints = [(name, _load(d)) for name, d in sj["rows"]]
    rt: list[Any] = []
    if (out / "realtime.json").exists():
        from bench.realtime import ToolRun

        rt = [ToolRun(**x) for x in json.loads((out / "realtime.json").read_text())]
    tl = timeline.split(":")
    pngs = plots(results, HERE, (tl[0], tl[1]))
    write_results(
        results_path,
        results,
        meta["real"],
        sens,
        sens_key,
        rt,
        meta.get("rt_info", ""),
        pngs,
        meta["cmd"],
        DEFAULT,
        meta["total_real"],
        meta.get("commands"),
        meta.get("code", ""),
        sens_hints,
        sens_hints_shape,
    )
    print(f"rewrote {results_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="hpcstage scale benchmark")
    ap.add_argument("--sizes", default="25M,100M,1B")
    ap.add_argument("--shapes", default=",".join(K.SHAPES))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--sensitivity", default="100M:dated", help="SIZE:SHAPE, or '' to skip")
    ap.add_argument(
        "--hints-sensitivity",
        default="uniform",
        help="SHAPE of the audit-mode variants at 100M and 1B, or ''",
    )
    ap.add_argument("--timeline", default="100M:dated", help="SIZE:SHAPE of the timeline plot")
    ap.add_argument("--realtime-objects", type=int, default=2_000_000, help="0 to skip the real-time check")
    ap.add_argument("--realtime-shape", default="unicode")
    ap.add_argument("--realtime-latency", type=float, default=0.05)
    ap.add_argument("--results", default=str(HERE / "RESULTS.md"))
    ap.add_argument(
        "--code-label",
        default="",
        help="what hpcstage code was measured (e.g. a commit), printed at the top of RESULTS.md",
    )
    ap.add_argument(
        "--rewrite",
        action="store_true",
        help="only rewrite RESULTS.md (and plots) from the JSON a previous run left in bench/out/",
    )
    args = ap.parse_args(argv)
    out = HERE / "out"
    out.mkdir(parents=True, exist_ok=True)
    if args.rewrite:
        return rewrite(out, Path(args.results), args.timeline)
    t0 = time.perf_counter()
    sizes = [s for s in args.sizes.split(",") if s]
    results, real = run_sizes(sizes, args.shapes.split(","), args.strategies.split(","), DEFAULT, out)
    sens: list[tuple[str, RunResult]] = []
    sens_key = ("", "")
    if args.sensitivity:
        size, shape = args.sensitivity.split(":")
        sens_key = (size, shape)
        sens = sensitivity(size, shape, DEFAULT)
        (out / "sensitivity.json").write_text(
            json.dumps({"key": [size, shape], "rows": [[name, r.to_dict()] for name, r in sens]}, default=str)
        )
    sens_hints: list[tuple[str, RunResult]] = []
    if args.hints_sensitivity:
        sens_hints = hints_sensitivity(args.hints_sensitivity, DEFAULT)
        (out / "sensitivity-hints.json").write_text(
            json.dumps(
                {"shape": args.hints_sensitivity, "rows": [[name, r.to_dict()] for name, r in sens_hints]},
                default=str,
            )
        )
    rt: list[Any] = []
    rt_info = ""
    if args.realtime_objects:
        from bench.realtime import run_realtime

        t = time.perf_counter()
        rt = run_realtime(args.realtime_objects, args.realtime_shape, args.realtime_latency, out / "realtime")
        rt_info = (
            f"{args.realtime_objects:,} objects of the `{args.realtime_shape}` shape served by "
            f"`bench.localserver` (stdlib ThreadingHTTPServer on 127.0.0.1) with {args.realtime_latency * 1000:.0f} ms "
            f"added to every LIST page; tools run one after another on this 2-core machine "
            f"({(time.perf_counter() - t) / 60:.1f} min). hpcstage is its local runner "
            f"(`hpcstage inventory`, listing threads in one process, writing Parquet)."
        )
        (out / "realtime.json").write_text(json.dumps([asdict(x) for x in rt], indent=1))
        for x in rt:
            print(x, flush=True)
    tl = args.timeline.split(":")
    pngs = plots(results, HERE, (tl[0], tl[1]))
    cmd = "python -m bench.run_all" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    total = time.perf_counter() - t0
    import hpcstage

    code = args.code_label or f"hpcstage from `{Path(hpcstage.__file__).parent}`"
    (out / "meta.json").write_text(
        json.dumps(
            {
                "sizes": sizes,
                "real": real,
                "rt_info": rt_info,
                "cmd": cmd.strip(),
                "total_real": total,
                "commands": [cmd.strip()],
                "code": code,
            }
        )
    )
    write_results(
        Path(args.results),
        results,
        real,
        sens,
        sens_key,
        rt,
        rt_info,
        pngs,
        cmd.strip(),
        DEFAULT,
        total,
        [cmd.strip()],
        code,
        sens_hints,
        args.hints_sensitivity,
    )
    print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
