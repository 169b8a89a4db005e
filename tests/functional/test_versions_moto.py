"""Versioned buckets against moto: every version and delete marker, sharded and stolen like ListObjectsV2.

Given a versioned bucket with overwrites, deletes, keys with more versions than a page holds and hostile key
names, when hpcstage inventories it with --versions (small pages, several streams, eager splitting), then
the totals of current versions, non-current versions and delete markers, and the Parquet rows themselves,
equal a brute-force ListObjectVersions walk with botocore's paginator.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from hpcstage.inventory.lister import ListOptions
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.output import LocalStore
from hpcstage.inventory.runner import InventoryOptions, run_inventory
from hpcstage.inventory.steal import SplitPolicy
from hpcstage.inventory.versions import VERSIONS, VersionCursor, VersionPage, VersionSource
from hpcstage.local import motopatch
from hpcstage.s3util import make_s3_client
from moto import mock_aws

BUCKET = "versioned-bkt"


@pytest.fixture
def s3() -> Iterator[Any]:
    # moto 5.2.5 answers ListObjectVersions' KeyMarker without a VersionIdMarker from the first version at
    # or after the marker and drops it; the local runtime's s3_listing patch answers as S3 does (the keys
    # after the marker): tests/localrt/test_localrt_listing.py
    before = motopatch.use_patches(("s3_listing",))
    try:
        with mock_aws():
            client = boto3.client("s3", region_name="us-east-1")
            client.create_bucket(Bucket=BUCKET)
            client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
            yield client
    finally:
        motopatch.use_patches(before)


def populate(s3: Any, seed: int = 7, bucket: str = BUCKET) -> None:
    rng = random.Random(seed)
    keys = [f"data/run{i % 5}/f{i:03d}.bin" for i in range(60)]
    keys += ["we ird+%20ü/中.txt", "a&b<c>.dat", "z" * 300]
    for key in keys:
        for _ in range(rng.choice([1, 1, 2, 3])):  # overwrites: non-current versions
            s3.put_object(Bucket=bucket, Key=key, Body=b"x" * rng.randint(0, 500))
    for key in rng.sample(keys, 12):  # deletes: a delete marker becomes the latest
        s3.delete_object(Bucket=bucket, Key=key)
    for key in rng.sample(keys, 3):  # a delete marker that is no longer latest
        s3.delete_object(Bucket=bucket, Key=key)
        s3.put_object(Bucket=bucket, Key=key, Body=b"back")
    for _ in range(23):  # one key with many more versions than a page
        s3.put_object(Bucket=bucket, Key="data/hot.log", Body=b"h" * 10)
    s3.put_object(Bucket=bucket, Key="other/outside-prefix", Body=b"o")


def brute(s3: Any, prefix: str = "", bucket: str = BUCKET) -> dict[str, Any]:
    rows = set()
    cur = [0, 0]
    non = [0, 0]
    markers = deleted = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for v in page.get("Versions", ()):
            rows.add((v["Key"], v["VersionId"], v["IsLatest"], False))
            target = cur if v["IsLatest"] else non
            target[0] += 1
            target[1] += v["Size"]
        for d in page.get("DeleteMarkers", ()):
            rows.add((d["Key"], d["VersionId"], d["IsLatest"], True))
            markers += 1
            deleted += d["IsLatest"]
    return {
        "rows": rows,
        "versions": {
            "current": {"objects": cur[0], "bytes": cur[1]},
            "noncurrent": {"objects": non[0], "bytes": non[1]},
            "delete_markers": markers,
            "deleted_keys": deleted,
        },
    }


@pytest.mark.parametrize(("prefix", "workers", "page_size"), [("", 4, 7), ("data/", 3, 5), ("", 1, 1000)])
def test_versions_equal_a_brute_force_walk(
    s3: Any, tmp_path: Path, prefix: str, workers: int, page_size: int
) -> None:
    populate(s3)
    expected = brute(s3, prefix)
    client = make_s3_client()
    opts = InventoryOptions(
        workers=workers,
        listing=ListOptions(
            page_size=page_size, source=VERSIONS, policy=SplitPolicy(min_split_pages=1.0, page_keys=page_size)
        ),
    )
    summary = run_inventory(client, BUCKET, prefix, LocalStore(tmp_path), opts)
    assert summary["versions"] == expected["versions"]
    assert (
        summary["objects"]
        == expected["versions"]["current"]["objects"] + expected["versions"]["noncurrent"]["objects"]
    )
    table = pq.ParquetDataset(sorted(str(p) for p in (tmp_path / "data").glob("*.parquet"))).read()
    got = list(
        zip(
            table.column("key").to_pylist(),
            table.column("version_id").to_pylist(),
            table.column("is_latest").to_pylist(),
            table.column("is_delete_marker").to_pylist(),
            strict=True,
        )
    )
    assert len(got) == len(set(got)), "a version was written twice"
    assert set(got) == expected["rows"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert (
        "optional binary version_id (UTF8); optional boolean is_latest; optional boolean is_delete_marker"
        in manifest["fileSchema"]
    )
    report = (tmp_path / "report.txt").read_text()
    assert f"{expected['versions']['delete_markers']:,} delete markers" in report
    if workers > 1:
        assert summary["ranges_listed"] > 1, "the versioned listing was not split between streams"


def test_a_page_ending_inside_a_key_carries_that_key(s3: Any) -> None:
    """The cursor's position is always a key whose versions are all written (safe checkpoint/remainder)."""
    for _ in range(5):
        s3.put_object(Bucket=BUCKET, Key="a", Body=b"1")
    for _ in range(4):
        s3.put_object(Bucket=BUCKET, Key="b", Body=b"22")
    client = make_s3_client()
    source = VersionSource()
    cursor = source.cursor(KeyRange(id="r"), "")
    assert isinstance(cursor, VersionCursor)
    keys, page, truncated, token = source.page(client, BUCKET, "", cursor, 7, None)
    # 7 rows: 5 of "a", 2 of "b"; the 2 of "b" are carried, not written
    assert list(keys) == ["a"] * 5 and truncated and token[0] == "b"
    assert isinstance(page, VersionPage) and page.is_latest.to_pylist() == [True, False, False, False, False]
    assert cursor.take(keys, truncated, token) == 5 and cursor.pos == "a"
    assert [r["Key"] for r in cursor.carry] == ["b", "b"]
    keys, page, truncated, token = source.page(client, BUCKET, "", cursor, 7, None)
    assert list(keys) == ["b"] * 4 and not truncated
    assert len(set(page.version_ids.to_pylist())) == 4


def test_request_payer_and_counting_on_list_object_versions(s3: Any) -> None:
    from hpcstage.s3util import AccessOptions, RequestCounter, list_versions_page

    s3.put_object(Bucket=BUCKET, Key="k", Body=b"1")
    client = make_s3_client(access=AccessOptions(request_payer=True))
    sent: list[dict[str, str]] = []
    client.meta.events.register(
        "before-send.s3.ListObjectVersions", lambda request, **_: sent.append(dict(request.headers))
    )
    counter = RequestCounter()
    resp = list_versions_page(client, BUCKET, "", counter=counter)
    assert [v["Key"] for v in resp["Versions"]] == ["k"]
    assert counter.requests == 1
    assert sent[0]["x-amz-request-payer"] in ("requester", b"requester")


def test_the_fleet_lists_every_version_exactly() -> None:
    """The Lambda fleet's leases, checkpoints and steals over ListObjectVersions (execution input versions: true)."""
    import test_fleet_moto as tf
    from hpcstage.inventory import fleet

    gen = tf.aws.__wrapped__()  # the fleet tests' moto fixture (S3 + the fleet table)
    s3, ddb = next(gen)
    motopatch.apply_patches(("s3_listing",))  # see the s3 fixture; the fleet fixture's teardown undoes it
    try:
        s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
        populate(s3, bucket="bkt")
        expected = brute(s3, "data/", bucket="bkt")
        cfg = tf.config("data/", versions=True, checkpoint_pages=2)
        opts = lambda i: fleet.ListerOptions(  # noqa: E731
            scan_interval_s=0.02, idle_wait_s=0.02, hunger_poll_s=0.05, listing=ListOptions(page_size=6)
        )
        small, _, errors = tf.run_fleet(s3, ddb, cfg, listers=3, options=opts)
        assert errors == {}
        summary = json.loads(s3.get_object(Bucket=tf.RESULTS, Key=f"{cfg.root}/summary.json")["Body"].read())
        assert summary["versions"] == expected["versions"]
        rows = set()
        manifest = json.loads(
            s3.get_object(Bucket=tf.RESULTS, Key=f"{cfg.root}/manifest.json")["Body"].read()
        )
        n = 0
        for f in manifest["files"]:
            table = pq.read_table(tf.pa_buffer(s3.get_object(Bucket=tf.RESULTS, Key=f["key"])["Body"].read()))
            n += table.num_rows
            rows |= set(
                zip(
                    table.column("key").to_pylist(),
                    table.column("version_id").to_pylist(),
                    table.column("is_latest").to_pylist(),
                    table.column("is_delete_marker").to_pylist(),
                    strict=True,
                )
            )
        assert n == len(expected["rows"]) and rows == expected["rows"]
        # a versions run is no audit's baseline (an audit compares current objects): no _latest pointer
        assert "Contents" not in s3.list_objects_v2(Bucket=tf.RESULTS, Prefix="inventory/bkt/_latest/")
        hive = s3.list_objects_v2(Bucket=tf.RESULTS, Prefix="inventory/bkt/hive/")["Contents"]
        assert len([o for o in hive if o["Key"].endswith("/symlink.txt")]) == 1
    finally:
        next(gen, None)


def test_staging_selects_only_current_versions_unless_asked(s3: Any, tmp_path: Path) -> None:
    from hpcstage.staging.select import select_objects

    populate(s3)
    expected = brute(s3)
    opts = InventoryOptions(workers=2, listing=ListOptions(page_size=9, source=VERSIONS))
    run_inventory(make_s3_client(), BUCKET, "", LocalStore(tmp_path), opts)
    current = {k for k, _, latest, marker in expected["rows"] if latest and not marker}
    picked: list[str] = []
    result = select_objects(tmp_path, {}, write=lambda e: picked.append(e.key))
    assert sorted(picked) == sorted(current)
    assert result.objects == expected["versions"]["current"]["objects"]
    assert result.bytes == expected["versions"]["current"]["bytes"]
    everything = select_objects(tmp_path, {}, all_versions=True)
    assert everything.objects == len(expected["rows"])
