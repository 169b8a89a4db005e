"""What the fleet's reduce costs at scale: requests by operation and the reducing process's CPU.

A moto server in a process of its own holds a finished run built with the fleet's own store calls
(``FleetStore.create/donate/claim/checkpoint/finish/put_rollup``): ``--leases`` done leases holding
``--segments`` segments in all (a Parquet part and a statistics sidecar each), and ``--listers`` roll-ups
covering every sidecar and recording every done lease (``--no-records``: none, so the reduce reads every
lease item). Then ``fleet.reduce_run`` runs in this process; its CPU is this process's (user +
system), so the server's work is not counted, and every request it sends is counted by operation. The
server's latency is not S3's or DynamoDB's: the simulator (bench/sim/des.py, ``Sim.reduce_time``) takes the
request counts and this CPU from here and the latencies from bench/sim/params.py.

    python -m bench.reduce_cost --leases 400 --segments 1200 --listers 1000
    python -m bench.reduce_cost --leases 400 --segments 1200 --listers 1000 --no-records

Builds of thousands of leases are out of reach here: at 3,000 leases the moto server grew past 12 GB of memory
within 4 minutes of building (2026-11-25).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import socket
import subprocess
import sys
import time
import zlib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from hpcstage.inventory import fleet
from hpcstage.inventory.model import KeyRange, PartFile
from hpcstage.inventory.stats import InventoryStats

TABLE = "reduce-bench"
RESULTS = "reduce-bench-results"
ROWS = 17_000  # rows of a segment's part: a checkpoint every 50 pages at ~340 keys a page on average


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _rollup_stats(rng: random.Random, prefixes: int) -> dict[str, Any]:
    """A lister's merged statistics: ~100,000 objects over ``prefixes`` top-level prefixes."""
    st = InventoryStats(prefix="", depth=1, now=datetime(2026, 1, 1, tzinfo=UTC))
    rows = [
        {
            "Key": f"p{rng.randrange(prefixes):04d}/x/{i:08d}",
            "Size": rng.randrange(1, 10**9),
            "LastModified": datetime(2025, 1 + i % 12, 1, tzinfo=UTC),
            "ETag": '"0"',
            "StorageClass": "STANDARD",
        }
        for i in range(20_000)
    ]
    for i in range(0, len(rows), 1000):
        st.add_page(rows[i : i + 1000])
    d = st.to_dict()
    d["objects"] *= 5
    d["bytes"] *= 5
    return d


def build(
    s3: Any,
    ddb: Any,
    cfg: fleet.FleetConfig,
    leases: int,
    segments: int,
    listers: int,
    prefixes: int,
    records: bool = True,
) -> None:
    """A finished run of ``leases`` done leases tiling the key space, ``segments`` checkpoints in all."""
    store = fleet.FleetStore(ddb, cfg.table, cfg.run_id)
    assert store.create("tok", [KeyRange(id="r0")], "2026-01-01T00:00:00Z")
    root = store.claim(KeyRange(id="r0"), "builder:0", 3600)
    assert root is not None
    cuts = [f"k{i * 1_000_000 // leases:08d}" for i in range(1, leases)]
    ids = [f"p{i}" for i in range(1, leases)]
    pieces = [
        KeyRange(id=ids[i], start_after=cuts[i], end=cuts[i + 1] if i + 1 < len(cuts) else None)
        for i in range(len(cuts))
    ]
    # donate from the end, at most 63 pieces a transaction (MAX_PIECES and the counter items)
    for hi in range(len(pieces), 0, -60):
        store.donate(root, pieces[max(0, hi - 60) : hi])
    per = [max(1, segments // leases + (1 if i < segments % leases else 0)) for i in range(leases)]

    def commit(job: tuple[KeyRange | None, int]) -> list[str]:
        r, n = job
        lease = root if r is None else store.claim(r, f"builder:{r.id}", 3600)
        assert lease is not None
        keys = []
        for j in range(n):
            key = f"{lease.id}-t-{j:04d}"
            seg = fleet.Segment(
                checkpoint=f"{lease.start_after or ''}~{j}" if j + 1 < n else None,
                parts=[PartFile(key=f"data/{key}.parquet", size=1_200_000, md5="0" * 32, rows=ROWS)],
                stats_key=f"stats/{key}.json",
                objects=ROWS,
                bytes=ROWS * 1000,
                requests=50,
            )
            keys.append(f"stats/{key}.json")
            (store.checkpoint if j + 1 < n else lambda lease, seg, _: store.finish(lease, seg))(
                lease, seg, 3600
            )
        return keys

    # one lease after another: moto's transactions are not thread-safe
    sidecars = [k for job in zip([None, *pieces], per, strict=True) for k in commit(job)]
    rng = random.Random(7)
    stats = _rollup_stats(rng, prefixes)
    # each roll-up covers every listers-th sidecar and records every listers-th done lease (fleet.Lister's
    # roll-up: the sidecars it committed and the leases it finished); with records=False, no record (the
    # reduce then reads every lease item, as before roll-ups carried them)
    done = [lease.record() for lease in store.leases()] if records else []
    for i in range(listers):
        covers = sidecars[i::listers]
        st = dict(stats, objects=len(covers) * ROWS, bytes=len(covers) * ROWS * 1000)
        body = zlib.compress(fleet.rollup_json(covers, st, done[i::listers]))
        store.put_rollup(f"lister-{i:04d}", len(covers), body=body, shards=fleet.rollup_shards(cfg))


def measure(s3: Any, ddb: Any, cfg: fleet.FleetConfig) -> dict[str, Any]:
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[f"{model.service_model.service_name}.{model.name}"] += 1

    for c in (s3, ddb):
        c.meta.events.register("before-call", count)
    t0, c0 = time.monotonic(), _cpu()
    out = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    wall, cpu = time.monotonic() - t0, _cpu() - c0
    for c in (s3, ddb):
        c.meta.events.unregister("before-call", count)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "calls": dict(calls), "objects": out["objects"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leases", type=int, default=3000)
    ap.add_argument("--segments", type=int, default=6000)
    ap.add_argument("--listers", type=int, default=1000)
    ap.add_argument(
        "--prefixes", type=int, default=50, help="top-level prefixes in each roll-up's statistics"
    )
    ap.add_argument("--rounds", type=int, default=2, help="reduce_run again on the same run (idempotent)")
    ap.add_argument("--profile", action="store_true", help="cProfile the last round (top 25 by own time)")
    ap.add_argument(
        "--no-records",
        action="store_true",
        help="roll-ups without lease records: the reduce reads every lease item (the path before records)",
    )
    a = ap.parse_args(argv)
    if a.segments < a.leases:
        ap.error("--segments must be at least --leases (a done lease has at least one segment)")
    port = _free_port()
    env = {**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "1"}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        kw: dict[str, Any] = {
            "endpoint_url": f"http://127.0.0.1:{port}",
            "region_name": "us-east-1",
            "aws_access_key_id": "bench",
            "aws_secret_access_key": "bench",
            "config": Config(max_pool_connections=64, retries={"mode": "standard"}),
        }
        s3, ddb = boto3.client("s3", **kw), boto3.client("dynamodb", **kw)
        for _ in range(100):
            try:
                s3.list_buckets()
                break
            except Exception:  # noqa: BLE001 - the server is starting
                time.sleep(0.1)
        s3.create_bucket(Bucket=RESULTS)
        ddb.create_table(
            TableName=TABLE,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        cfg = fleet.FleetConfig(
            bucket="src",
            prefix="",
            run_id="bench",
            results_bucket=RESULTS,
            results_prefix="inv",
            table=TABLE,
            started="2026-01-01T00:00:00+00:00",
        )
        t0 = time.monotonic()
        build(s3, ddb, cfg, a.leases, a.segments, a.listers, a.prefixes, records=not a.no_records)
        print(
            f"built {a.leases} leases, {a.segments} segments, {a.listers} roll-ups in {time.monotonic() - t0:.0f} s"
        )
        store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
        items = [
            it
            for shard in range(fleet.LEASE_SHARDS)
            for it in store._query_all(store.lease_pk(shard))  # noqa: SLF001
        ]
        size = sum(len(json.dumps(it)) for it in items)
        print(
            json.dumps(
                {
                    "lease_items": len(items),
                    "lease_item_bytes": size,
                    "bytes_per_item": round(size / max(1, len(items))),
                }
            )
        )
        for i in range(a.rounds):
            prof = None
            if a.profile and i + 1 == a.rounds:
                import cProfile

                prof = cProfile.Profile()
                prof.enable()
            r = measure(s3, ddb, cfg)
            if prof is not None:
                import pstats

                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            print(
                json.dumps(
                    {
                        "round": i + 1,
                        "leases": a.leases,
                        "segments": a.segments,
                        "records": not a.no_records,
                        **r,
                    }
                )
            )
    finally:
        server.kill()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
