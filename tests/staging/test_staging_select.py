"""Selection from inventory Parquet: exact counts and bytes per criterion, manifests, archive classes,
capacity. The inventory is written by the project's own Parquet writer, in several parts and row
groups; S3 is moto."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from hpcstage.staging import (
    ArchivedObjectsError,
    InsufficientCapacityError,
    ManifestEntry,
    Selection,
    SelectionError,
    StagingManifest,
    check_archived,
    check_capacity,
    restored_count,
    select_objects,
)
from moto import mock_aws
from test_staging_support import BASE_TIME, inventory_objects, write_inventory

BUCKET = "research-data"
OBJECTS = inventory_objects(1000)


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    return write_inventory(tmp_path / "inventory", BUCKET, OBJECTS)


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def oracle(pred: Any) -> tuple[int, int]:
    """(objects, bytes) computed straight from the source rows, independently of pyarrow."""
    chosen = [o for o in OBJECTS if pred(o)]
    return len(chosen), sum(o["Size"] for o in chosen)


def test_the_inventory_spans_several_parts_and_is_read_part_by_part(inventory: Path) -> None:
    result = select_objects(inventory, {}, batch_rows=64)
    assert len(json.loads((inventory / "manifest.json").read_text())["files"]) == 4
    assert (result.parts_read, result.rows_scanned) == (4, 1000)
    assert (result.objects, result.bytes) == (1000, sum(i * 10 for i in range(1000)))


def test_prefix_selection_counts_exactly(inventory: Path) -> None:
    result = select_objects(inventory, {"prefixes": ["raw/"]})
    # i % 3 == 0 for i in 0..999: 334 keys, sizes 0, 30, ..., 9990.
    assert (result.objects, result.bytes) == (334, sum(i * 10 for i in range(0, 1000, 3)))
    both = select_objects(inventory, {"prefixes": ["raw/", "logs/"]})
    assert (both.objects, both.bytes) == oracle(lambda o: o["Key"].startswith(("raw/", "logs/")))


def test_glob_selection_is_fnmatch_on_the_whole_key(inventory: Path) -> None:
    result = select_objects(inventory, {"globs": ["*.nc"]})
    assert result.objects == 500  # i % 4 in (0, 3)
    narrow = select_objects(inventory, {"globs": ["proc/00?1.*"]})
    # proc/ holds i % 3 == 1: proc/0001.csv, proc/0031.nc, proc/0061.csv, proc/0091.nc.
    assert (narrow.objects, narrow.bytes) == (4, 10 + 310 + 610 + 910)
    assert select_objects(inventory, {"globs": ["*/00[0-1]1.csv"]}).objects == 1  # proc/0001.csv


def test_size_bounds_are_inclusive(inventory: Path) -> None:
    result = select_objects(inventory, {"min_size": 100, "max_size": 190})
    assert (result.objects, result.bytes) == (10, sum(range(100, 200, 10)))


def test_age_window_is_half_open(inventory: Path) -> None:
    result = select_objects(
        inventory, {"modified_after": "2024-01-02T00:00:00Z", "modified_before": "2024-01-03T00:00:00+00:00"}
    )
    # hours 24..47 inclusive: modified_after is inclusive, modified_before exclusive.
    assert (result.objects, result.bytes) == (24, sum(i * 10 for i in range(24, 48)))
    naive = select_objects(
        inventory, {"modified_after": "2024-01-02T00:00:00", "modified_before": "2024-01-03"}
    )
    assert naive.objects == 24  # times without a zone are UTC


def test_storage_class_allow_list(inventory: Path) -> None:
    result = select_objects(inventory, {"storage_classes": ["standard", "GLACIER_IR"]})
    assert (result.objects, result.bytes) == oracle(lambda o: o["StorageClass"] in ("STANDARD", "GLACIER_IR"))
    assert result.objects == 400
    assert result.archived == []  # GLACIER_IR is readable directly


def test_all_criteria_together_match_an_independent_count(inventory: Path) -> None:
    after, before = datetime(2024, 1, 5, tzinfo=UTC), datetime(2024, 1, 30, tzinfo=UTC)
    selection = {
        "prefixes": ["raw/", "proc/"],
        "globs": ["*.nc", "*.txt"],
        "min_size": 500,
        "max_size": 6000,
        "modified_after": after.isoformat(),
        "modified_before": before.isoformat(),
        "storage_classes": ["STANDARD", "GLACIER", "DEEP_ARCHIVE"],
    }
    result = select_objects(inventory, selection)
    expected = oracle(
        lambda o: (
            o["Key"].startswith(("raw/", "proc/"))
            and o["Key"].endswith((".nc", ".txt"))
            and 500 <= o["Size"] <= 6000
            and after <= o["LastModified"] < before
            and o["StorageClass"] in ("STANDARD", "GLACIER", "DEEP_ARCHIVE")
        )
    )
    assert (result.objects, result.bytes) == expected
    assert expected[0] > 50  # the criteria overlap enough to make the comparison meaningful
    archived = [o["Key"] for o in OBJECTS if o["StorageClass"] in ("GLACIER", "DEEP_ARCHIVE")]
    assert all(e.key in archived for e in result.archived) and len(result.archived) > 0


def test_explicit_manifest_reports_keys_the_inventory_lacks(inventory: Path) -> None:
    keys = ["raw/0000.nc", "proc/0001.csv", "logs/0002.txt", "raw/nope.nc", "gone/x"]
    result = select_objects(inventory, {"manifest": keys})
    assert (result.objects, result.bytes) == (3, 0 + 10 + 20)
    assert result.missing_keys == ["gone/x", "raw/nope.nc"]
    # Other criteria still apply to the listed keys.
    assert select_objects(inventory, {"manifest": keys, "min_size": 15}).objects == 1


def test_explicit_manifest_from_an_s3_object(inventory: Path, s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="lists/keys.txt", Body=b"raw/0003.nc\r\nlogs/0004.csv\n\nmissing\n")
    result = select_objects(inventory, {"manifest": f"s3://{BUCKET}/lists/keys.txt"}, s3=s3)
    assert (result.objects, result.bytes, result.missing_keys) == (1, 30, ["logs/0004.csv", "missing"])


def test_inventory_read_from_s3_checks_each_part_md5(inventory: Path, s3: Any) -> None:
    for path in inventory.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket=BUCKET, Key=f"inv/{path.relative_to(inventory)}", Body=path.read_bytes())
    result = select_objects(f"s3://{BUCKET}/inv", {"prefixes": ["logs/"]}, s3=s3)
    assert (result.objects, result.parts_read) == (333, 4)
    manifest = json.loads((inventory / "manifest.json").read_text())
    first_part = manifest["files"][0]["key"]
    s3.put_object(Bucket=BUCKET, Key=f"inv/{first_part}", Body=b"PAR1 tampered")
    with pytest.raises(Exception, match="does not match its manifest MD5"):
        select_objects(f"s3://{BUCKET}/inv", {}, s3=s3)


HOSTILE_ROWS = [
    {"Key": 'a,b "c"\nd.nc', "Size": 5, "LastModified": BASE_TIME, "ETag": '"x"', "StorageClass": "STANDARD"},
    {"Key": "$(touch x);'y'", "Size": 7, "LastModified": BASE_TIME, "ETag": '"x"', "StorageClass": "GLACIER"},
]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_manifest_output_round_trips_awkward_keys(tmp_path: Path, fmt: str) -> None:
    inv = write_inventory(tmp_path / "inv", BUCKET, HOSTILE_ROWS)
    out = tmp_path / f"manifest.{fmt}"
    written: list[ManifestEntry] = []
    result = select_objects(inv, {}, write=written.append, output=out)
    assert result.manifest_uri == str(out)
    back = list(StagingManifest.from_path(out))
    assert (
        back
        == written
        == [
            ManifestEntry(BUCKET, 'a,b "c"\nd.nc', 5, "STANDARD"),
            ManifestEntry(BUCKET, "$(touch x);'y'", 7, "GLACIER"),
        ]
    )
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(out.read_text(), newline="")))
        assert rows[0] == ["bucket", "key", "size", "storage_class"]


def test_manifest_output_to_s3(inventory: Path, s3: Any) -> None:
    result = select_objects(
        inventory, {"prefixes": ["proc/"]}, output=f"s3://{BUCKET}/runs/r1/manifest.jsonl", s3=s3
    )
    manifest = StagingManifest.from_s3(s3, f"s3://{BUCKET}/runs/r1/manifest.jsonl")
    assert (
        manifest.totals() == (result.objects, result.bytes) == (333, sum(i * 10 for i in range(1, 1000, 3)))
    )
    assert manifest.bucket() == BUCKET


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"prefix": ["a"]}, "unknown selection field(s) prefix"),
        ({"prefixes": "raw/"}, "prefixes must be a list of strings"),
        ({"globs": [""]}, "empty pattern"),
        ({"min_size": -1}, "min_size must be a whole number"),
        ({"max_size": 1.5}, "max_size must be a whole number"),
        ({"min_size": True}, "min_size must be a whole number"),
        ({"min_size": 10, "max_size": 5}, "min_size (10) is larger than max_size (5)"),
        ({"modified_after": "yesterday"}, "'yesterday' is not an ISO 8601 time"),
        ({"modified_after": 1700000000}, "must be an ISO 8601 string"),
        ({"modified_after": "2024-02-01", "modified_before": "2024-01-01"}, "must be earlier than"),
        ({"storage_classes": ["GLACIAL"]}, "unknown storage class(es) GLACIAL"),
        ({"storage_classes": []}, "would select nothing"),
        ({"manifest": "keys.txt"}, "s3://bucket/key URL"),
        ({"manifest": "s3://bucket/dir/"}, "must name an object, not a prefix"),
        ({"manifest": [1, 2]}, "non-empty key strings"),
    ],
)
def test_bad_selection_documents_say_what_is_wrong(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        Selection.from_dict(doc)
    assert isinstance(raised.value, SelectionError)
    assert message in str(raised.value)


def test_selection_from_json_text() -> None:
    assert Selection.from_json('{"prefixes": ["a/"], "min_size": 1}').prefixes == ("a/",)
    with pytest.raises(SelectionError, match="not valid JSON"):
        Selection.from_json("{prefixes")
    with pytest.raises(SelectionError, match="must be a JSON object"):
        Selection.from_json("[1]")


def test_archived_objects_fail_with_their_keys_and_total(inventory: Path) -> None:
    result = select_objects(inventory, {"prefixes": ["raw/"]})
    archived = [
        o for o in OBJECTS if o["Key"].startswith("raw/") and o["StorageClass"] in ("GLACIER", "DEEP_ARCHIVE")
    ]
    assert len(result.archived) == len(archived) == 133
    with pytest.raises(ArchivedObjectsError) as raised:
        check_archived(result, "fail", max_listed=3)
    err = raised.value
    assert err.total == 133
    assert err.keys == [o["Key"] for o in archived[:3]]
    assert str(err).startswith("133 selected object(s)")
    assert "'raw/0003.nc'" in str(err) and "and 130 more" in str(err)
    assert check_archived(select_objects(inventory, {"storage_classes": ["STANDARD"]}), "fail") == 0
    with pytest.raises(SelectionError, match="policy must be one of fail, restore"):
        check_archived(result, "ignore")


def test_restore_policy_requests_a_restore_per_archived_object(tmp_path: Path, s3: Any) -> None:
    rows = []
    for i, cls in enumerate(["GLACIER", "DEEP_ARCHIVE", "STANDARD", "GLACIER_IR"]):
        key = f"cold/{i}.dat"
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x" * (i + 1), StorageClass=cls)
        rows.append(
            {"Key": key, "Size": i + 1, "LastModified": BASE_TIME, "ETag": '"e"', "StorageClass": cls}
        )
    result = select_objects(write_inventory(tmp_path / "inv", BUCKET, rows), {})
    assert [e.key for e in result.archived] == ["cold/0.dat", "cold/1.dat"]
    assert check_archived(result, "restore", s3=s3, days=3, tier="Bulk") == 2
    assert restored_count(s3, result.archived) == 2  # moto completes restores at once
    with pytest.raises(SelectionError, match="Expedited"):
        check_archived(result, "restore", s3=s3, tier="Expedited")
    with pytest.raises(SelectionError, match="tier must be one of"):
        check_archived(result, "restore", s3=s3, tier="Fast")


def test_capacity_check_names_both_sizes() -> None:
    check_capacity(10 * 2**30, 10 * 2**30)
    check_capacity(10**15, None)  # a target that copies nothing
    with pytest.raises(InsufficientCapacityError) as raised:
        check_capacity(3 * 2**40 + 2**39, 2 * 2**40)
    message = str(raised.value)
    assert "needs 3.50 TiB (3,848,290,697,216 bytes)" in message
    assert "only 2.00 TiB (2,199,023,255,552 bytes) free" in message
    assert (raised.value.needed_bytes, raised.value.free_bytes) == (3848290697216, 2199023255552)
    with pytest.raises(InsufficientCapacityError, match="plus 10% headroom"):
        check_capacity(100, 105, headroom=0.1)
