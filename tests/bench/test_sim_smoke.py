"""Simulator smoke test: every strategy over 200k objects of two shapes, exact counts, no timing asserts."""

from __future__ import annotations

import bisect
from typing import Any

import pytest
from hpcstage.s3util import list_page

from bench import keyspace as K
from bench.sim.params import DEFAULT
from bench.sim.s3 import S3World
from bench.sim.strategies import STRATEGIES, simulate

N = 200_000


@pytest.fixture(scope="module", params=["unicode", "dated"])
def model(request: pytest.FixtureRequest) -> K.Keyspace:
    return K.make(request.param, N)


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if not s.startswith("seed")])
def test_complete_strategies_count_every_object_once(model: K.Keyspace, strategy: str) -> None:
    res = simulate(model, strategy, DEFAULT)
    assert res.objects == model.n
    assert res.bytes == model.total_bytes
    assert res.missed == 0
    assert res.coverage_ok  # listed pieces tile the key space: no gap, no overlap
    assert res.failures == 0
    assert res.list_requests >= N // 1000


@pytest.mark.parametrize("interleaved", [False, True])
def test_seed_misses_exactly_the_keys_outside_its_alphabet(model: K.Keyspace, interleaved: bool) -> None:
    expected_missed = sum(not K.seed_covered(model.key(r)) for r in range(model.n))
    res = simulate(model, "seed-interleaved" if interleaved else "seed-natural", DEFAULT)
    assert res.missed == expected_missed
    assert res.objects == model.n - expected_missed
    if model.name == "unicode":
        assert expected_missed > 0
    else:
        assert expected_missed == 0


def test_fast_path_takes_the_same_decisions_as_the_full_path(model: K.Keyspace) -> None:
    # The fast path bypasses Parquet, statistics and URL decoding; every decision (end-of-range cuts,
    # budgets, rounds) and every request must be the same, so virtual time is identical too.
    fast = simulate(model, "static-nohints", DEFAULT, fast=True)
    full = simulate(model, "static-nohints", DEFAULT, fast=False)
    assert (fast.objects, fast.bytes, fast.list_requests, fast.invocations, fast.rounds) == (
        full.objects,
        full.bytes,
        full.list_requests,
        full.invocations,
        full.rounds,
    )
    assert fast.makespan_s == pytest.approx(full.makespan_s)


def _reference_pages(keys: list[str], **params: Any) -> list[list[str]]:
    prefix = params.get("Prefix", "")
    sel = [k for k in keys if k.startswith(prefix) and k > params.get("StartAfter", "")]
    mk = params.get("MaxKeys", 1000)
    return [sel[i : i + mk] for i in range(0, len(sel), mk)] or [[]]


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"MaxKeys": 7},
        {"Prefix": "données/", "MaxKeys": 50},
        {"StartAfter": "data/", "MaxKeys": 333},
        {"Prefix": "日本語のファイル/", "StartAfter": "日本語のファイル/M"},
        {"Prefix": "nope"},
    ],
)
def test_client_pages_like_s3(params: dict[str, Any], fast: bool) -> None:
    ks = K.make("unicode", 3_000)
    keys = [ks.key(r) for r in range(ks.n)]
    world = S3World(ks, DEFAULT, fast=fast)
    client = world.client(0.0)
    got: list[list[str]] = []
    token = None
    while True:
        resp = list_page(
            client,
            world.bucket,
            params.get("Prefix", ""),
            start_after=params.get("StartAfter"),
            token=token,
            max_keys=params.get("MaxKeys", 1000),
        )
        page = [o["Key"] for o in resp.get("Contents", [])]
        assert resp["KeyCount"] == len(page)
        got.append(page)
        if not resp["IsTruncated"]:
            assert "NextContinuationToken" not in resp
            break
        token = resp["NextContinuationToken"]
    assert got == _reference_pages(keys, **params)
    assert client.now() > 0  # every call advanced the worker's virtual clock


def test_url_encoding_round_trips_through_list_page() -> None:
    ks = K.make("unicode", 2_000)
    world = S3World(ks, DEFAULT, fast=False)
    raw = world.client(0.0).list_objects_v2(Bucket=world.bucket, EncodingType="url", MaxKeys=1000)
    assert raw["EncodingType"] == "url"
    assert any("%" in o["Key"] or "+" in o["Key"] for o in raw["Contents"])
    decoded = list_page(world.client(0.0), world.bucket, "")
    assert [o["Key"] for o in decoded["Contents"]] == [ks.key(r) for r in range(1000)]
    assert decoded["Contents"][0]["LastModified"].tzinfo is not None
    assert bisect.bisect_right([ks.key(r) for r in range(ks.n)], ks.key(999)) == 1000


def test_a_virtual_thread_pool_runs_reads_in_virtual_parallel() -> None:
    # A pool of 32 virtual lanes (the peers' reducers read results this way): n GETs cost about ceil(n/32) GET
    # latencies on the caller's clock, deterministically.
    from bench.sim.s3 import VirtualThreadPool

    world = S3World(K.make("uniform", 1_000), DEFAULT)
    keys = [f"results/{i}.json" for i in range(320)]
    for k in keys:
        world.objects[("res", k)] = b"{}"

    def elapsed() -> float:
        client = world.client(100.0)
        pool = VirtualThreadPool(max_workers=32)
        got = list(pool.map(lambda k: client.get_object(Bucket="res", Key=k)["Body"].read(), keys))
        assert got == [b"{}"] * len(keys)
        return client.now() - 100.0

    t = elapsed()
    serial = len(keys) * DEFAULT.s3.get_latency_s
    assert serial / 40 < t < serial / 16  # ~10 rounds of 32 GETs, not 320 GETs one after another
    assert elapsed() == t


def _reference_delimited(keys: list[str], prefix: str, delimiter: str, max_keys: int) -> list[list[str]]:
    """ListObjectsV2 with a Delimiter over a sorted key list: pages of keys and common prefixes."""
    entries: list[str] = []
    for k in keys:
        if not k.startswith(prefix):
            continue
        i = k.find(delimiter, len(prefix))
        e = k[: i + len(delimiter)] if i >= 0 else k
        if not entries or entries[-1] != e:
            entries.append(e)
    return [entries[i : i + max_keys] for i in range(0, len(entries), max_keys)] or [[]]


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize(
    ("shape", "prefix", "max_keys"),
    [("dated", "", 1000), ("dated", "events/", 3), ("unicode", "", 7), ("unicode", "données/", 50)],
)
def test_client_rolls_up_common_prefixes(shape: str, prefix: str, max_keys: int, fast: bool) -> None:
    # directory buckets are listed by a Delimiter="/" walk.
    ks = K.make(shape, 3_000)
    keys = [ks.key(r) for r in range(ks.n)]
    world = S3World(ks, DEFAULT, fast=fast)
    client = world.client(0.0)
    got: list[list[str]] = []
    params: dict[str, Any] = {"Bucket": world.bucket, "Delimiter": "/", "MaxKeys": max_keys}
    if prefix:
        params["Prefix"] = prefix
    while True:
        resp = client.list_objects_v2(**params)
        page = sorted(
            [o["Key"] for o in resp.get("Contents", [])]
            + [c["Prefix"] for c in resp.get("CommonPrefixes", [])]
        )
        assert resp["KeyCount"] == len(page) and resp["Delimiter"] == "/"
        got.append(page)
        if not resp["IsTruncated"]:
            break
        params["ContinuationToken"] = resp["NextContinuationToken"]
    assert got == _reference_delimited(keys, prefix, "/", max_keys)
    assert any(len(p) for p in got)
