"""The local runner in several real processes, against the bench's local S3 endpoint (bench/localserver.py).

Worker processes are started with "spawn" and make their own clients from the parent's settings, so the
endpoint is a real HTTP server in this process (moto's in-process mock cannot be shared with them).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hpcstage.errors import EndpointError
from hpcstage.inventory.output import LocalStore
from hpcstage.inventory.procs import ListerProcesses, WorkerError, processes_possible
from hpcstage.inventory.runner import InventoryOptions, Progress, run_inventory
from hpcstage.s3util import ClientSpec, Timeouts, client_spec, make_s3_client

from bench import keyspace as K
from bench.localserver import LocalS3Server, serve

# 30,000 keys of a skewed shape (90 % under one prefix); 30 pages of 1,000 at 20 ms: a few seconds
KS = K.make("hot-prefix", 30_000)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[LocalS3Server]:
    with serve({"bkt": KS}, latency_s=0.02, precompute=True) as server:
        yield server


def run(s3: Any, store: LocalStore, processes: int, workers: int = 8, **kw: Any) -> dict[str, Any]:
    opts = InventoryOptions(workers=workers, processes=processes, **kw)
    return run_inventory(s3, "bkt", "", store, opts, progress=Progress())


def test_two_processes_list_every_key_exactly_once(endpoint: LocalS3Server, tmp_path: Path) -> None:
    s3 = make_s3_client(endpoint.url, "us-east-1", pool=16)
    summary = run(s3, LocalStore(tmp_path), processes=2)

    assert (summary["objects"], summary["bytes"]) == (KS.n, KS.total_bytes)
    ((n, distinct, total),) = duckdb.sql(
        f"select count(*), count(distinct key), sum(size) from read_parquet('{tmp_path}/data/*.parquet')"
    ).fetchall()
    assert (n, distinct, total) == (KS.n, KS.n, KS.total_bytes)
    ((first, last),) = duckdb.sql(
        f"select min(key), max(key) from read_parquet('{tmp_path}/data/*.parquet')"
    ).fetchall()
    assert (first, last) == (KS.key(0), KS.key(KS.n - 1))
    # the summary says what each process listed; together, everything
    procs = summary["processes"]
    assert len(procs) == 2
    assert sum(p["objects"] for p in procs) == KS.n
    assert sum(p["bytes"] for p in procs) == KS.total_bytes
    assert sum(p["list_requests"] for p in procs) == summary["list_requests"]


def test_one_process_is_this_process_alone(
    endpoint: LocalS3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """processes=1 is the in-process runner as before: no coordinator, no pipe, no other process."""
    from hpcstage.inventory import procs

    def refuse(*a: Any, **kw: Any) -> None:
        raise AssertionError("processes=1 must not use the multi-process runner")

    monkeypatch.setattr(procs, "run_processes", refuse)
    monkeypatch.setattr(procs, "ListerProcesses", refuse)
    s3 = make_s3_client(endpoint.url, "us-east-1", pool=16)
    summary = run(s3, LocalStore(tmp_path), processes=1)
    assert (summary["objects"], summary["bytes"]) == (KS.n, KS.total_bytes)
    assert "processes" not in summary
    assert multiprocessing.active_children() == []


def test_a_failure_in_a_worker_process_stops_the_run_with_its_error(
    endpoint: LocalS3Server, tmp_path: Path
) -> None:
    """The parent lists through the endpoint; the worker process is told of one that refuses connections,
    so its first request fails: the run stops, and the error is the worker's own."""
    with serve({"bkt": KS}, latency_s=0.5, precompute=True) as slow:  # the parent alone: 30 pages, 15 s
        s3 = make_s3_client(slow.url, "us-east-1", pool=16)
        dead = f"http://127.0.0.1:{_free_port()}"
        quick = Timeouts(connect=1, read=5, attempts=1)
        s3.meta.hpcstage_spec = ClientSpec(dead, "us-east-1", 16, client_spec(s3).access, quick)  # type: ignore[union-attr]
        with pytest.raises(
            EndpointError, match=r"Could not connect to the endpoint URL: \"http://127\.0\.0\.1:"
        ):
            run(s3, LocalStore(tmp_path), processes=2, workers=2)
        # stopped when the worker failed, not after the parent listed everything
        assert slow.pages < KS.n // 1000


def test_a_worker_process_that_dies_is_a_clear_error(endpoint: LocalS3Server, tmp_path: Path) -> None:
    with serve({"bkt": KS}, latency_s=0.2, precompute=True) as slow:
        s3 = make_s3_client(slow.url, "us-east-1", pool=16)
        with ListerProcesses(1) as spare:
            victim = spare.processes[0]

            def kill_once_listing() -> None:
                while slow.pages < 2 and victim.is_alive():
                    time.sleep(0.05)
                if victim.pid is not None:
                    os.kill(victim.pid, signal.SIGKILL)

            killer = threading.Thread(target=kill_once_listing)
            killer.start()
            with pytest.raises(
                WorkerError, match=r"^listing process 1 ended \(exit code -9\) before it finished"
            ):
                run(s3, LocalStore(tmp_path), processes=2, workers=4, spare_processes=spare)
            killer.join()


def test_processes_need_clients_that_can_be_made_again(endpoint: LocalS3Server, tmp_path: Path) -> None:
    import boto3

    plain = boto3.client("s3", endpoint_url=endpoint.url, region_name="us-east-1")
    assert processes_possible(plain, LocalStore(tmp_path)) == (
        "the S3 client was not made by hpcstage (make_s3_client), so it cannot be made again"
    )
    from hpcstage.errors import InputError

    with pytest.raises(
        InputError, match=r"^cannot list in 2 processes: the S3 client was not made by hpcstage"
    ):
        run(plain, LocalStore(tmp_path), processes=2)
    assert processes_possible(make_s3_client(endpoint.url, "us-east-1"), LocalStore(tmp_path)) is None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_versions_in_two_processes_equal_one(tmp_path: Path) -> None:
    """ListObjectVersions through worker processes (moto's server: the bench endpoint lists no versions):
    the same versions, delete markers and statistics as one process."""
    import random

    import boto3
    from hpcstage.inventory.lister import ListOptions
    from hpcstage.inventory.steal import SplitPolicy
    from hpcstage.inventory.versions import VERSIONS
    from hpcstage.local import motopatch
    from moto.server import ThreadedMotoServer

    # moto answers ListObjectVersions' KeyMarker alone from the first version at or after the marker and
    # drops it; the local runtime's s3_listing patch answers as S3 does (tests/localrt/test_localrt_listing.py)
    before = motopatch.use_patches(("s3_listing",))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        s3.create_bucket(Bucket="bkt")
        s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
        rng = random.Random(5)
        keys = [f"d{i % 4}/f{i:04d} é+%" for i in range(150)]
        for key in keys:
            for _ in range(rng.choice([1, 2, 3])):
                s3.put_object(Bucket="bkt", Key=key, Body=b"x" * rng.randint(0, 300))
        for key in rng.sample(keys, 20):
            s3.delete_object(Bucket="bkt", Key=key)

        truth = sum(
            len(pg.get("Versions", []))
            for pg in s3.get_paginator("list_object_versions").paginate(Bucket="bkt")
        )
        # pages of 10: the ranges split, and thieves start at cut points (KeyMarker alone)
        page = 10
        listing = ListOptions(
            page_size=page, source=VERSIONS, policy=SplitPolicy(min_split_pages=1, page_keys=page)
        )
        client = make_s3_client(url, "us-east-1", pool=16)
        one = run(client, LocalStore(tmp_path / "one"), processes=1, workers=4, listing=listing)
        two = run(client, LocalStore(tmp_path / "two"), processes=2, workers=4, listing=listing)
    finally:
        server.stop()
        motopatch.use_patches(before)

    assert two["versions"] == one["versions"]
    assert two["objects"] == truth
    assert two["versions"]["delete_markers"] == 20
    assert (two["objects"], two["bytes"]) == (one["objects"], one["bytes"])
    assert sum(p["objects"] for p in two["processes"]) == two["objects"]

    def rows(folder: Path) -> list[tuple[Any, ...]]:
        return sorted(
            duckdb.sql(
                f"select key, version_id, is_latest, is_delete_marker, size from read_parquet('{folder}/data/*.parquet')"
            ).fetchall()
        )

    assert rows(tmp_path / "two") == rows(tmp_path / "one")
    assert len(rows(tmp_path / "one")) == one["objects"] + 20


class _Stalled:
    """Stands in for ``ListerProcesses(1)``: a process that never reads its job, as one still importing
    when a small listing is already over."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent_end, child_end = ctx.Pipe()
        self.pipes = [(parent_end, child_end)]
        self.processes = [ctx.Process(target=time.sleep, args=(120,), daemon=True)]
        self.processes[0].start()
        self.given: set[int] = set()

    def __len__(self) -> int:
        return 1

    def give(self, i: int, job: Any) -> None:
        self.given.add(i)
        self.pipes[i][0].send(job)


def test_a_process_given_no_range_is_not_waited_for(tmp_path: Path) -> None:
    """A listing over before the other process asked for work (one page here) ends without it: that
    process is stopped, and the summary gives it nothing. (Before, the run waited for its imports.)"""
    small = K.make("uniform", 300)
    with serve({"bkt": small}, latency_s=0.02, precompute=True) as server:
        s3 = make_s3_client(server.url, "us-east-1", pool=16)
        stalled = _Stalled()
        victim = stalled.processes[0]
        try:
            summary = run(s3, LocalStore(tmp_path), processes=2, workers=4, spare_processes=stalled)
            victim.join(timeout=10)
            assert victim.exitcode == -signal.SIGTERM
        finally:
            victim.kill()
    assert (summary["objects"], summary["bytes"]) == (small.n, small.total_bytes)
    assert [p["objects"] for p in summary["processes"]] == [small.n, 0]
    assert summary["processes"][1] == {"objects": 0, "bytes": 0, "list_requests": 0, "ranges": 0, "splits": 0}
