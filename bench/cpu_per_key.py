"""CPU seconds per million keys for list + parse + Parquet, with server cost excluded.

A separate process serves canned ListObjectsV2 pages (XML rendered from a key index, every page of the
listing before the run: ``serve``); the measuring process lists them (1) with hpcstage's
list_range (parse, decode, statistics, Parquet parts) and (2) with a plain boto3 paginator that
only iterates the keys; (3) the request path alone, on 1-key pages (the floor no parsing change can
lower). CPU time is the client process's (user + system, os.times), so the server's work is not counted.

    python -m bench.cpu_per_key --keys 1000000
    python -m bench.cpu_per_key --keys 200000 --breakdown   # CPU per stage of hpcstage's listing
    python -m bench.cpu_per_key --alternate-direct 4        # hpcstage with the direct page path on / off
    python -m bench.cpu_per_key --keys 300000 --render-live # pages rendered as they are asked (before 2026-11-28)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import tempfile
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

PAGE = 1000


def key_of(i: int) -> str:
    return f"data/run={i // 100000:04d}/sample {i:09d}+x.bin"  # a space and a '+' exercise URL decoding


def index_after(key: str) -> int:
    return int(key.rsplit(" ", 1)[1][:9]) + 1


def render(start: int, n_total: int, max_keys: int) -> bytes:
    end = min(n_total, start + max_keys)
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
        "<Name>bench</Name><Prefix></Prefix><MaxKeys>%d</MaxKeys><EncodingType>url</EncodingType>" % max_keys,
        "<KeyCount>%d</KeyCount><IsTruncated>%s</IsTruncated>"
        % (end - start, "true" if end < n_total else "false"),
    ]
    if end < n_total:
        parts.append("<NextContinuationToken>%d</NextContinuationToken>" % end)
    for i in range(start, end):
        parts.append(
            "<Contents><Key>%s</Key><LastModified>2024-03-01T12:00:00.000Z</LastModified>"
            '<ETag>"9b2cf535f27731c974343645a3985328"</ETag><Size>%d</Size>'
            "<StorageClass>STANDARD</StorageClass></Contents>"
            % (quote(key_of(i), safe="/").replace("%20", "+"), i % 65536)
        )
    parts.append("</ListBucketResult>")
    return "".join(parts).encode()


def serve(port: int, n_total: int, precompute: bool = True) -> None:
    """Answer ListObjectsV2 from the key index. ``precompute``: every page of 1,000 the listing asks for is
    rendered before the server starts, so that while the client is measured this process only writes
    bytes: rendering a page here takes CPU (Python string formatting) on the same two cores, and a busy
    neighbour core slows the client's own work (a 1,000-key page's parse 1.52 -> 1.83-1.89 ms with the
    other core busy, bench/RESULTS.md). S3 does not run on the lister's machine."""
    pages = {start: render(start, n_total, PAGE) for start in range(0, n_total, PAGE)} if precompute else {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as S3 does

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            q = parse_qs(urlparse(self.path).query)
            if "continuation-token" in q:
                start = int(q["continuation-token"][0])
            elif "start-after" in q:
                start = index_after(q["start-after"][0])
            else:
                start = 0
            max_keys = int(q.get("max-keys", ["1000"])[0])
            body = pages.get(start) if max_keys == PAGE else None
            if body is None:
                body = render(start, n_total, max_keys)
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client(endpoint: str, fast: bool) -> object:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "x")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "x")
    if fast:  # the client hpcstage builds (faster timestamp parser)
        from hpcstage.s3util import make_s3_client

        return make_s3_client(endpoint, "us-east-1")
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", config=Config(retries={"mode": "standard"})
    )


def _figures(t0: os.times_result, t1: os.times_result, wall: float, n: int) -> dict[str, float]:
    user, system = t1.user - t0.user, t1.system - t0.system
    return {
        "cpu_s": round(user + system, 3),
        "user_s": round(user, 3),
        "system_s": round(system, 3),
        "wall_s": round(wall, 3),
        "cpu_s_per_million": round((user + system) / n * 1e6, 2),
        "user_s_per_million": round(user / n * 1e6, 2),
    }


def run_hpcstage(endpoint: str, n: int) -> dict[str, float]:
    """Startup (imports, client, first pages) is measured apart from the listing's per-key cost."""
    c0 = time.process_time()
    from hpcstage.inventory.lister import ListOptions, list_range, part_writer
    from hpcstage.inventory.model import KeyRange
    from hpcstage.inventory.output import LocalStore
    from hpcstage.inventory.stats import InventoryStats

    s3 = client(endpoint, fast=True)

    def listing(rng: KeyRange, root: str) -> Any:
        writer = part_writer(LocalStore(root), "bench", ListOptions())(rng.id)
        return list_range(s3, "bench", "", rng, writer=writer, stats=InventoryStats(now=datetime.now(UTC)))

    with tempfile.TemporaryDirectory() as d:
        listing(KeyRange(id="warm", end=key_of(2999)), d)
    startup = time.process_time() - c0
    with tempfile.TemporaryDirectory() as d:
        t0, w0 = os.times(), time.perf_counter()
        res = listing(KeyRange(id="r0"), d)
        t1, wall = os.times(), time.perf_counter() - w0
    assert res.objects == n, (res.objects, n)
    return _figures(t0, t1, wall, n) | {"startup_cpu_s": round(startup, 3)}


def run_breakdown(endpoint: str, n: int) -> dict[str, float]:
    """Where the listing's CPU goes: the CPU time of the thread inside each stage, in CPU-s per million keys
    (the listing fetches its next page in another thread; until 2026-11-28 this counted process time, which
    charged a stage with what that thread did meanwhile).

    The stages are wrapped for this listing only (the wrappers cost a little of their own); "request
    path" is list_page less the parser: botocore's request and response handling. The parser decodes the
    keys itself; "of which URL decoding" is the part of the parser's figure spent decoding them.
    """
    from collections import Counter

    from hpcstage import s3util
    from hpcstage.inventory import lister, output
    from hpcstage.inventory import stats as stats_module

    spent: Counter[str] = Counter()
    restore: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kw: Any) -> Any:
            t = time.thread_time()
            try:
                return original(*args, **kw)
            finally:
                spent[label] += time.thread_time() - t

        restore.append((owner, name, original))
        setattr(owner, name, timed)

    wrap(lister, "list_page", "list_page")
    wrap(s3util, "_fast_list_parse", "parse (fast page parser)")
    wrap(s3util, "_unquote_joined", "of which URL decoding")
    wrap(output.PartWriter, "add_page", "Parquet parts")
    wrap(stats_module.InventoryStats, "add_page", "statistics")
    try:
        figures = run_hpcstage(endpoint, n)
        # run_hpcstage's warm-up listing is counted too: take its 3,000 keys off the per-key figures
        per_m = {k: v / (n + 3000) * 1e6 for k, v in spent.items()}
    finally:
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)
    out = {k: round(v, 2) for k, v in per_m.items() if k != "list_page"}
    out["request path"] = round(per_m["list_page"] - per_m["parse (fast page parser)"], 2)
    out["total (wrapped run)"] = figures["cpu_s_per_million"]
    return out


def run_request_floor(endpoint: str, requests: int = 300) -> dict[str, float]:
    """CPU of the request path alone: hpcstage's client asking for 1-key pages (signing, user agent,
    endpoint rules, urllib3, response handling). At 1,000 keys a page, its milliseconds per request are
    the CPU-seconds per million keys that no parsing change can remove."""
    from hpcstage.s3util import list_page

    s3 = client(endpoint, fast=True)
    list_page(s3, "bench", "", max_keys=1)
    t0 = os.times()
    for i in range(requests):
        list_page(s3, "bench", "", max_keys=1, start_after=key_of(i))
    t1 = os.times()
    ms = ((t1.user - t0.user) + (t1.system - t0.system)) / requests * 1000
    return {
        "requests": requests,
        "cpu_ms_per_request": round(ms, 3),
        "cpu_s_per_million_at_1000_keys": round(ms, 2),
    }


def run_paginator(endpoint: str, n: int) -> dict[str, float]:
    s3: Any = client(endpoint, fast=False)
    s3.list_objects_v2(Bucket="bench", MaxKeys=1000)  # warm up, as above
    t0, w0 = os.times(), time.perf_counter()
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", EncodingType="url"):
        for _ in page.get("Contents", ()):
            count += 1
    t1, wall = os.times(), time.perf_counter() - w0
    assert count == n
    return _figures(t0, t1, wall, n)


def alone(measure: Any, *args: Any) -> Any:
    """``measure(*args)`` in a fresh process of its own: one measurement's heap (the paginator's millions of
    dicts) and imports do not weigh on the next one's CPU."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(measure, args)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--breakdown", action="store_true", help="only hpcstage, with CPU per stage")
    ap.add_argument(
        "--alternate-direct",
        type=int,
        default=0,
        metavar="PAIRS",
        help="only hpcstage: PAIRS runs with the direct page path on, then off (HPCSTAGE_DIRECT_LIST), alternating",
    )
    ap.add_argument(
        "--render-live",
        action="store_true",
        help="the server renders each page when asked (as before 2026-11-28) instead of before the run",
    )
    args = ap.parse_args()
    port = free_port()
    proc = multiprocessing.Process(target=serve, args=(port, args.keys, not args.render_live), daemon=True)
    proc.start()
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(2400):  # up to two minutes: the pages are rendered first
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        if args.alternate_direct:
            runs = []
            for _ in range(args.alternate_direct):
                for flag in ("1", "0"):
                    os.environ["HPCSTAGE_DIRECT_LIST"] = flag  # the fresh process inherits it
                    runs.append({"direct": flag == "1", **alone(run_hpcstage, endpoint, args.keys)})
            print(json.dumps({"keys": args.keys, "alternating": runs}, indent=2))
            return
        if args.breakdown:
            breakdown = alone(run_breakdown, endpoint, args.keys)
            print(json.dumps({"keys": args.keys, "breakdown": breakdown}, indent=2))
            return
        out: dict[str, Any] = {
            "keys": args.keys,
            "paginator": alone(run_paginator, endpoint, args.keys),
            "hpcstage_list_range": alone(run_hpcstage, endpoint, args.keys),
            "request_floor": alone(run_request_floor, endpoint),
            "python": os.sys.version.split()[0],
        }
        out["paginator_over_hpcstage"] = round(
            out["paginator"]["cpu_s_per_million"] / out["hpcstage_list_range"]["cpu_s_per_million"], 1
        )
    finally:
        proc.terminate()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
