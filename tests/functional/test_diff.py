"""Object-level change between two inventories: added, removed, changed, by prefix (exact)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from helpers import seed
from hpcstage.inventory.lister import ListOptions
from hpcstage.inventory.output import LocalStore, S3Store
from hpcstage.inventory.runner import InventoryOptions, run_inventory
from moto import mock_aws


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        client.create_bucket(Bucket="out")
        yield client


def opts(**kw: Any) -> InventoryOptions:
    return InventoryOptions(
        workers=3,
        listing=ListOptions(page_size=100),  # several ranges, so several parts to merge in key order
        **kw,
    )


def change_bucket(s3: Any) -> None:
    seed("bkt", {"a/new1": (7, "STANDARD"), "c/new2": (3, "STANDARD"), "a/f00003": (999, "STANDARD")})
    for k in ("b/f00001", "b/f00004", "c/f00005"):
        s3.delete_object(Bucket="bkt", Key=k)


def expected_exact() -> dict[str, Any]:
    return {
        "added": {"objects": 2, "bytes": 10},
        "removed": {"objects": 3, "bytes": 1 + 4 + 5},
        "changed": {"objects": 1, "bytes": 999 - 3},
    }


def test_exact_diff_between_local_outputs(s3: Any, tmp_path: Path) -> None:
    seed("bkt", {f"{'abc'[i % 3]}/f{i:05d}": (i, "STANDARD") for i in range(2400)})
    first = run_inventory(s3, "bkt", "", LocalStore(tmp_path / "1"), opts())
    change_bucket(s3)
    second = run_inventory(
        s3,
        "bkt",
        "",
        LocalStore(tmp_path / "2"),
        opts(previous_summary=first, previous_store=LocalStore(tmp_path / "1")),
    )
    exact = second["diff"]["exact"]
    assert {k: exact[k] for k in ("added", "removed", "changed")} == expected_exact()
    rows = {
        r["prefix"]: (r["added"]["objects"], r["removed"]["objects"], r["changed"]["objects"])
        for r in exact["by_prefix"]
    }
    assert rows == {"a/": (1, 0, 1), "b/": (0, 2, 0), "c/": (1, 1, 0)}
    assert "added 2" in (tmp_path / "2" / "report.txt").read_text()


def test_exact_diff_between_s3_outputs_reads_parts_by_range(s3: Any) -> None:
    seed("bkt", {f"{'abc'[i % 3]}/f{i:05d}": (i, "STANDARD") for i in range(2400)})
    first_store = S3Store(s3, "out", "inv/one")
    first = run_inventory(s3, "bkt", "", first_store, opts(manifest_key_prefix="inv/one/"))
    change_bucket(s3)
    second = run_inventory(
        s3,
        "bkt",
        "",
        S3Store(s3, "out", "inv/two"),
        opts(previous_summary=first, previous_store=first_store, manifest_key_prefix="inv/two/"),
    )
    assert {k: second["diff"]["exact"][k] for k in ("added", "removed", "changed")} == expected_exact()
