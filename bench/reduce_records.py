"""CPU of the fleet reduce's records path in one process, with Python's cyclic garbage collector running or
paused (``fleet.gc_paused``), measured alternately.

``--records`` lease records (each with ``--segments`` Parquet parts and statistics sidecars), ``--per-rollup``
to a roll-up, compressed as the listers write them (``fleet.rollup_json``), go through what ``fleet.reduce_run``
does with them before ``runner.finalize`` writes the output: ``fleet._done_from_rollups`` (decompression, JSON,
``Lease.from_record``, the id and sidecar sets, the statistics merged), ``Lease.result`` and
``runner.check_tiling``. No request is sent: the roll-ups come from a store in memory. At 1B objects the
simulator's fleet finishes ~50,000 leases of one or two segments each in 1,000 roll-ups
(bench/RESULTS.md).

    python -m bench.reduce_records --records 50000 --per-rollup 50 --rounds 4
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import zlib
from typing import Any

from hpcstage.inventory import fleet
from hpcstage.inventory.runner import check_tiling
from hpcstage.inventory.stats import InventoryStats

from bench.reduce_cost import _cpu, _rollup_stats

ROWS = 20_000


class _Store:
    """The roll-ups of a finished run, as ``FleetStore.rollups`` returns them."""

    def __init__(self, rollups: list[fleet.Rollup]) -> None:
        self._rollups = rollups

    def rollups(self, shards: int) -> list[fleet.Rollup]:
        return self._rollups


def build(records: int, per_rollup: int, segments: int, seed: int = 1) -> _Store:
    """``records`` done leases tiling a key space of 32-hex-digit keys, their records in roll-ups."""
    rng = random.Random(seed)
    cuts = sorted({f"{rng.getrandbits(128):032x}" for _ in range(records - 1)})
    while len(cuts) < records - 1:  # pragma: no cover - a collision of 128-bit draws
        cuts = sorted({*cuts, f"{rng.getrandbits(128):032x}"})
    bounds: list[str | None] = [None, *cuts, None]
    stats = _rollup_stats(rng, 50)
    recs = []
    for i in range(records):
        rid = f"{rng.getrandbits(48):012x}{i:x}"
        parts = [
            [f"inv/run/data/{rid}-{j}.parquet", 1_200_000, f"{rng.getrandbits(128):032x}", ROWS]
            for j in range(segments)
        ]
        sidecars = [f"inv/run/stats/{rid}-{j}.json" for j in range(segments)]
        recs.append(
            [
                rid,
                bounds[i],
                bounds[i + 1],
                ROWS * segments,
                ROWS * segments * 1000,
                50,
                0,
                0,
                parts,
                sidecars,
            ]
        )
    rollups = []
    for n, lo in enumerate(range(0, records, per_rollup)):
        done = recs[lo : lo + per_rollup]
        covers = [k for rec in done for k in rec[9]]
        st = dict(stats, objects=sum(rec[3] for rec in done), bytes=sum(rec[4] for rec in done))
        body = zlib.compress(fleet.rollup_json(covers, st, done))
        rollups.append(fleet.Rollup(owner=f"lister-{n:04d}", key=None, body=body))
    return _Store(rollups)


def records_path(store: _Store, created: int) -> int:
    """What reduce_run does with the roll-ups before finalize writes; returns the objects counted."""

    def new_stats() -> Any:
        return InventoryStats(prefix="", depth=1)

    leases, merged, _ = fleet._done_from_rollups(store, None, created, new_stats, 16)  # type: ignore[arg-type]  # noqa: SLF001
    if len(leases) != created:
        raise SystemExit(f"the records path fell back: {len(leases)} leases of {created}")
    results = [lease.result() for lease in leases]
    check_tiling(results)
    parts = [p for r in results for p in r.parts]
    assert len(parts) == sum(len(lease.parts) for lease in leases)
    return int(merged.objects)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--per-rollup", type=int, default=50)
    ap.add_argument("--segments", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4, help="pairs of runs, collector running then paused")
    a = ap.parse_args(argv)
    store = build(a.records, a.per_rollup, a.segments)
    gc.collect()
    times: dict[str, list[float]] = {"running": [], "paused": []}
    for _ in range(a.rounds):
        for mode in ("running", "paused"):
            c0 = _cpu()
            if mode == "paused":
                with fleet.gc_paused():
                    objects = records_path(store, a.records)
            else:
                objects = records_path(store, a.records)
            times[mode].append(_cpu() - c0)
            gc.collect()
    if objects != a.records * a.segments * ROWS:
        raise SystemExit(f"counted {objects} objects")
    print(f"{a.records} records of {a.segments} segment(s), {a.per_rollup} a roll-up; CPU-s by round:")
    for mode, ts in times.items():
        us = statistics.median(ts) / a.records * 1e6
        print(f"  collector {mode}: {', '.join(f'{t:.3f}' for t in ts)} (median {us:.1f} us a record)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
