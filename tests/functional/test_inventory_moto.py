"""The inventory engine against moto S3: exact counts and bytes for buckets of many shapes."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import duckdb
import pyarrow.parquet as pq
import pytest
from helpers import brute_force, seed
from hpcstage.inventory.lister import ListOptions, list_range, part_writer
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.output import LocalStore
from hpcstage.inventory.runner import InventoryOptions, run_inventory, seeds_from_hints
from hpcstage.inventory.stats import InventoryStats
from hpcstage.inventory.steal import SplitPolicy
from moto import mock_aws

CLASSES = [
    "STANDARD",
    "STANDARD",
    "STANDARD",
    "STANDARD_IA",
    "GLACIER",
    "DEEP_ARCHIVE",
    "INTELLIGENT_TIERING",
]


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        yield client


def shape(name: str, n: int, rng: random.Random) -> list[str]:
    if name == "hex":
        return [uuid.UUID(int=rng.getrandbits(128)).hex for _ in range(n)]
    if name == "hierarchy":
        return [
            f"lab/proj{rng.randint(0, 3)}/run={rng.randint(1, 40):03d}/lane{rng.randint(1, 8)}/"
            f"sample_{rng.getrandbits(32):08x}.fastq.gz"
            for _ in range(n)
        ]
    if name == "hot":
        return [f"hot/{i:07d}" if i % 10 else f"cold{rng.getrandbits(20):05x}" for i in range(n)]
    if name == "weird":
        specials = ["ü", "中", "😀", " ", "+", "%", "&", "<", "\n", "=", "#", "?", "'", '"', "\\", "~"]
        out = [f"{rng.choice(specials)}{i}{rng.choice(specials)}x" for i in range(n)]
        out += ["a" * 1024, "é" * 512, "/" * 20 + "deep", "k" * 1023 + "z"]
        return out
    raise ValueError(name)


def objects_for(keys: list[str], rng: random.Random) -> dict[str, tuple[int, str]]:
    return {k: (rng.randint(0, 5000), rng.choice(CLASSES)) for k in keys}


@pytest.mark.parametrize("name", ["hex", "hierarchy", "hot", "weird"])
def test_exact_totals_by_shape(s3: Any, tmp_path: Path, name: str) -> None:
    rng = random.Random(name)
    objs = objects_for(shape(name, 6000, rng), rng)
    seed("bkt", objs)
    expected = (len(objs), sum(size for size, _ in objs.values()))
    assert brute_force(s3, "bkt") == expected
    # small pages and eight streams from one range: the streams split work many times on every shape
    opts = InventoryOptions(
        workers=8, listing=ListOptions(page_size=100, policy=SplitPolicy(min_split_pages=1))
    )
    summary = run_inventory(s3, "bkt", "", LocalStore(tmp_path), opts)
    assert (summary["objects"], summary["bytes"]) == expected
    assert summary["ranges_given"] >= 7 and summary["ranges_listed"] == summary["ranges_given"] + 1
    by_class = {c: v["objects"] for c, v in summary["by_storage_class"].items()}
    expected_classes: dict[str, int] = {}
    for _, cls in objs.values():
        expected_classes[cls] = expected_classes.get(cls, 0) + 1
    assert by_class == expected_classes
    listed = duckdb.sql(f"select key from read_parquet('{tmp_path}/data/*.parquet')").fetchall()
    assert sorted(k for (k,) in listed) == sorted(objs)  # every key exactly once, decoded


def test_empty_bucket(s3: Any, tmp_path: Path) -> None:
    summary = run_inventory(s3, "bkt", "", LocalStore(tmp_path), InventoryOptions(workers=2))
    assert (summary["objects"], summary["bytes"], summary["ranges_listed"]) == (0, 0, 1)
    assert json.loads((tmp_path / "manifest.json").read_text())["files"] == []


@pytest.mark.parametrize(
    ("prefix", "expected_keys"),
    [
        ("data/", ["data/", "data/1", "data/2/x"]),
        ("data", ["data", "data/", "data/1", "data/2/x", "data0", "data~"]),
        ("nothing/", []),
        ("data/2/x", ["data/2/x"]),
    ],
)
def test_prefix_edge_cases(s3: Any, tmp_path: Path, prefix: str, expected_keys: list[str]) -> None:
    keys = ["a", "data", "data/", "data/1", "data/2/x", "data0", "data~", "datb", "z"]
    seed("bkt", {k: (len(k), "STANDARD") for k in keys})
    summary = run_inventory(
        s3,
        "bkt",
        prefix,
        LocalStore(tmp_path),
        InventoryOptions(workers=3, listing=ListOptions(page_size=1, policy=SplitPolicy(min_split_pages=1))),
    )
    assert summary["objects"] == len(expected_keys)
    assert summary["bytes"] == sum(len(k) for k in expected_keys)


def listed(s3: Any, rng: KeyRange, store: LocalStore, stop_after: int | None = None) -> Any:
    pages = {"n": 0}

    def on_page(objects: int, nbytes: int) -> None:
        pages["n"] += 1

    return list_range(
        s3,
        "bkt",
        "",
        rng,
        writer=part_writer(store, "bkt", ListOptions())(rng.id),
        stats=InventoryStats(),
        new_id=lambda: f"{rng.id}.rest",
        should_stop=lambda: stop_after is not None and pages["n"] >= stop_after,
        on_page=on_page,
    )


def test_stopped_range_resumes_to_exactly_the_uninterrupted_rows(s3: Any, tmp_path: Path) -> None:
    rng = random.Random(7)
    objs = objects_for(shape("hierarchy", 5000, rng), rng)
    seed("bkt", objs)
    whole = KeyRange(id="r0")
    full = listed(s3, whole, LocalStore(tmp_path / "full"))
    assert full.done and full.objects == len(objs) and full.list_requests == 5

    store = LocalStore(tmp_path / "resumed")
    first = listed(s3, whole, store, stop_after=2)
    assert not first.done
    assert first.objects == 2000 and first.checkpoint == sorted(objs)[1999]
    assert [(r.id, r.start_after, r.end) for r in first.subranges] == [("r0.rest", sorted(objs)[1999], None)]
    rest = listed(s3, first.subranges[0], store)
    assert rest.done and rest.objects == 3000

    def rows(root: Path) -> list[tuple[Any, ...]]:
        return duckdb.sql(
            f"select key, size, storage_class from read_parquet('{root}/data/*.parquet') order by key"
        ).fetchall()

    assert rows(tmp_path / "resumed") == rows(tmp_path / "full")


def test_parquet_has_the_s3_inventory_schema_and_manifest(s3: Any, tmp_path: Path) -> None:
    seed("bkt", {"a/1": (10, "STANDARD"), "a/2": (20, "GLACIER"), "b": (0, "STANDARD_IA")})
    run_inventory(s3, "bkt", "", LocalStore(tmp_path), InventoryOptions(workers=1))
    cols = duckdb.sql(f"describe select * from read_parquet('{tmp_path}/data/*.parquet')").fetchall()
    types = {c[0]: c[1] for c in cols}
    assert types == {
        "bucket": "VARCHAR",
        "key": "VARCHAR",
        "size": "BIGINT",
        "last_modified_date": "TIMESTAMP WITH TIME ZONE",
        "e_tag": "VARCHAR",
        "storage_class": "VARCHAR",
        "is_multipart_uploaded": "BOOLEAN",
        "checksum_algorithm": "VARCHAR",
    }
    part = next((tmp_path / "data").glob("*.parquet"))
    schema = pq.ParquetFile(part).schema
    # S3 Inventory declares last_modified_date as int64 (TIMESTAMP_MILLIS)
    assert schema.column(3).physical_type == "INT64"
    assert schema.column(3).converted_type == "TIMESTAMP_MILLIS"
    assert json.loads(schema.column(3).logical_type.to_json())["timeUnit"] == "milliseconds"
    assert schema.column(0).max_definition_level == 0  # bucket is required
    assert schema.column(1).max_definition_level == 0  # key is required
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["version"] == "2016-11-30" and manifest["fileFormat"] == "Parquet"
    assert manifest["sourceBucket"] == "bkt"
    import hashlib

    assert (tmp_path / "manifest.checksum").read_text() == hashlib.md5(
        (tmp_path / "manifest.json").read_bytes()
    ).hexdigest()
    for f in manifest["files"]:
        data = (tmp_path / f["key"]).read_bytes()
        assert f["size"] == len(data) and f["MD5checksum"] == hashlib.md5(data).hexdigest()
    rows = duckdb.sql(
        f"select storage_class, count(*), sum(size) from read_parquet('{tmp_path}/data/*.parquet') "
        "group by 1 order by 1"
    ).fetchall()
    assert rows == [("GLACIER", 1, 20), ("STANDARD", 1, 10), ("STANDARD_IA", 1, 0)]


SLOW_DOWN = (503, b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>")
INTERNAL_ERROR = (
    500,
    b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>",
)


def answering(answers: list[tuple[int, bytes]]) -> Callable[..., Any]:
    """A ``before-send`` hook that answers the first attempts with ``answers`` ((status, body); status 0 lets
    that attempt through to the endpoint), then lets every attempt through."""
    from botocore.awsrequest import AWSResponse

    class _Raw:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b""

    it = iter(answers)

    def answer(request: Any, **_: Any) -> AWSResponse | None:
        status, body = next(it, (0, b""))
        if not status:
            return None
        resp = AWSResponse(request.url, status, {}, _Raw())
        resp._content = body  # noqa: SLF001 - botocore reads the body from here
        return resp

    return answer


def test_throttling_is_retried_and_counted(s3: Any, tmp_path: Path) -> None:
    seed("bkt", {f"k{i:04d}": (1, "STANDARD") for i in range(2500)})
    slow_down = answering([(0, b""), SLOW_DOWN, SLOW_DOWN])  # the second page is throttled twice
    s3.meta.events.register_first("before-send.s3.ListObjectsV2", slow_down)
    try:
        res = listed(s3, KeyRange(id="r0"), LocalStore(tmp_path))
    finally:
        s3.meta.events.unregister("before-send.s3.ListObjectsV2", slow_down)
    # three pages answered, two 503s retried: five requests sent, and all five are counted (and billed)
    assert (res.objects, res.list_requests, res.retries) == (2500, 5, 2)


def test_slowdowns_are_told_apart_from_other_failures(s3: Any) -> None:
    """The listers pace on 503 SlowDown only (hpcstage.inventory.pacing): a 500 is retried and counted as a
    request and a retry, never as a throttle; every attempt goes through the counter's hooks."""
    from hpcstage.s3util import RequestCounter, count_requests, list_page, retry_config

    seed("bkt", {f"k{i:04d}": (1, "STANDARD") for i in range(10)})
    s3 = count_requests(
        boto3.client("s3", region_name="us-east-1", config=retry_config())
    )  # the listers' retries
    fail = answering([SLOW_DOWN, INTERNAL_ERROR, SLOW_DOWN])
    s3.meta.events.register_first("before-send.s3.ListObjectsV2", fail)
    events: list[str] = []
    counter = RequestCounter(
        before_attempt=lambda: events.append("send"),
        after_attempt=lambda slow: events.append("503" if slow else "answer"),
    )
    try:
        page = list_page(s3, "bkt", "", counter=counter)
    finally:
        s3.meta.events.unregister("before-send.s3.ListObjectsV2", fail)
    assert len(page["Contents"]) == 10
    assert (counter.requests, counter.retries, counter.throttled) == (4, 3, 2)
    # the fleet's pacer waits before every attempt, retries included, and learns each answer at once
    assert events == ["send", "503", "send", "answer", "send", "503", "send", "answer"]


def test_summary_report_figures(s3: Any, tmp_path: Path) -> None:
    seed(
        "bkt",
        {
            "x/a": (1, "STANDARD"),
            "x/b": (1024, "GLACIER"),
            "y/c": (3000, "DEEP_ARCHIVE"),
            "z": (0, "STANDARD"),
        },
    )
    summary = run_inventory(s3, "bkt", "", LocalStore(tmp_path), InventoryOptions(workers=1))
    assert summary["by_prefix"]["prefixes"] == {
        "y/": {"objects": 1, "bytes": 3000},
        "x/": {"objects": 2, "bytes": 1025},
        "": {"objects": 1, "bytes": 0},
    }
    assert [(r["bits"], r["objects"]) for r in summary["size_histogram"]] == [
        (0, 1),
        (1, 1),
        (11, 1),
        (12, 1),
    ]
    assert summary["glacier_share"]["objects"] == 2 and summary["glacier_share"]["needs_restore_objects"] == 2
    assert summary["largest"][0] == {"key": "y/c", "size": 3000}
    assert summary["list_cost_usd"] == pytest.approx(summary["list_requests"] * 0.005 / 1000)
    assert (tmp_path / "report.txt").read_text().startswith("hpcstage inventory of s3://bkt/")


def test_repeat_audit_from_hints_and_diff(s3: Any, tmp_path: Path) -> None:
    rng = random.Random(3)
    seed("bkt", objects_for(shape("hierarchy", 3000, rng), rng))
    first = run_inventory(s3, "bkt", "", LocalStore(tmp_path / "1"), InventoryOptions(workers=2))
    hints = json.loads((tmp_path / "1" / "ranges.json").read_text())
    seed("bkt", {"lab/new/file": (500, "STANDARD")})
    opts = InventoryOptions(workers=2, hints=hints, previous_summary=first)
    second = run_inventory(s3, "bkt", "", LocalStore(tmp_path / "2"), opts)
    # the previous run's ranges seed the streams (merged to about one seed per stream), no root range
    assert len(hints) >= 2
    assert second["ranges_planned"] == len(seeds_from_hints(hints, 2)) == 2
    assert second["objects"] == first["objects"] + 1
    assert second["diff"]["objects"] == 1 and second["diff"]["bytes"] == 500
    assert {"prefix": "lab/", "objects": 1, "bytes": 500} in second["diff"]["by_prefix"]


def test_a_counter_with_a_throttle_delay_sets_the_wait_before_each_slowdown_retry(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fleet's listers retry a 503 SlowDown after the delay their counter names (fleet._Throttle:
    at most the pacer's window) instead of botocore's backoff; a 500 keeps botocore's, and at the client's
    attempt limit botocore's handler gives up as before."""
    import botocore.endpoint
    from botocore.exceptions import ClientError
    from hpcstage.s3util import RequestCounter, count_requests, list_page, retry_config

    seed("bkt", {f"k{i:04d}": (1, "STANDARD") for i in range(10)})

    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint.time, "sleep", slept.append)
    asked: list[int] = []

    def delay(attempts: int) -> float:
        asked.append(attempts)
        return 0.125 * attempts

    client = count_requests(boto3.client("s3", region_name="us-east-1", config=retry_config()))
    fail = answering([SLOW_DOWN, INTERNAL_ERROR, SLOW_DOWN])
    client.meta.events.register_first("before-send.s3.ListObjectsV2", fail)
    counter = RequestCounter(throttle_delay=delay)
    page = list_page(client, "bkt", "", counter=counter)
    client.meta.events.unregister("before-send.s3.ListObjectsV2", fail)
    assert len(page["Contents"]) == 10
    assert asked == [1, 3]  # asked after the first and the third attempt (the 503s), not after the 500
    assert slept[0] == 0.125 and slept[2] == 0.375  # botocore slept what the counter said
    assert 0 <= slept[1] <= 0.05 * 2  # the 500: botocore's own jitter (50 ms base, second attempt)
    assert (counter.requests, counter.retries, counter.throttled) == (4, 3, 2)

    # at the limit (one retry allowed: two attempts), the second 503 is not retried
    asked.clear()
    client = count_requests(boto3.client("s3", region_name="us-east-1", config=retry_config(max_attempts=1)))
    fail = answering([SLOW_DOWN, SLOW_DOWN])
    client.meta.events.register_first("before-send.s3.ListObjectsV2", fail)
    counter = RequestCounter(throttle_delay=delay)
    with pytest.raises(ClientError) as raised:
        list_page(client, "bkt", "", counter=counter)
    assert raised.value.response["Error"]["Code"] == "SlowDown"
    assert asked == [1]
    assert (counter.requests, counter.throttled) == (2, 2)
