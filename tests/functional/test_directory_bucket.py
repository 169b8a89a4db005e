"""Directory buckets (S3 Express One Zone) through the project's fake (tests/fakes.py FakeDirectoryBucket,
which emulates what API_ListObjectsV2 documents for them: unordered pages, no StartAfter, "/" only,
prefixes of in-progress multipart uploads listed): the parallel delimiter walk equals brute force."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fakes import FakeDirectoryBucket
from hpcstage.errors import AccessDeniedError, InputError
from hpcstage.inventory.directory import is_directory_bucket, run_directory_inventory
from hpcstage.inventory.lister import ListOptions
from hpcstage.inventory.output import LocalStore
from hpcstage.inventory.runner import InventoryOptions

BUCKET = "scratch--usw2-az1--x-s3"


def tree(n: int = 700, seed: int = 3) -> dict[str, int]:
    rng = random.Random(seed)
    keys = {}
    for i in range(n):
        depth = rng.randint(0, 4)
        parts = [f"d{rng.randint(0, 3)}" for _ in range(depth)]
        keys["/".join([*parts, f"f{i:04d} ü+%.dat"])] = rng.randint(0, 10_000)
    keys["flat-at-root.txt"] = 7
    return keys


@pytest.mark.parametrize(("prefix", "workers"), [("", 6), ("d1/", 3), ("", 1)])
def test_a_parallel_delimiter_walk_equals_brute_force(tmp_path: Path, prefix: str, workers: int) -> None:
    keys = tree()
    uploads = ["d2/uploading-only/part.bin", "scratch-in-progress/big.h5"]
    fake = FakeDirectoryBucket(keys, uploads=uploads, page_size=17)
    opts = InventoryOptions(workers=workers, listing=ListOptions())
    summary = run_directory_inventory(fake, BUCKET, prefix, LocalStore(tmp_path), opts)
    expected = {k: s for k, s in keys.items() if k.startswith(prefix)}
    assert (summary["objects"], summary["bytes"]) == (len(expected), sum(expected.values()))
    table = pq.ParquetDataset(sorted(str(p) for p in (tmp_path / "data").glob("*.parquet"))).read()
    listed = table.column("key").to_pylist()
    assert sorted(listed) == sorted(expected) and len(listed) == len(set(listed))
    assert not any("StartAfter" in c for c in fake.calls)
    mpu = sorted(u.rsplit("/", 1)[0] + "/" for u in uploads if u.startswith(prefix))
    assert summary["in_progress_prefixes"] == {"count": len(mpu), "prefixes": mpu}
    assert summary["bucket_type"] == "directory"
    assert summary["list_requests"] == len(fake.calls)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert len(manifest["files"]) >= 1


def test_detection_by_name_and_by_the_api() -> None:
    assert is_directory_bucket(object(), BUCKET)
    assert is_directory_bucket(FakeDirectoryBucket({}), "renamed-scratch")

    class General:
        def head_bucket(self, **_: object) -> dict[str, object]:
            return {"BucketRegion": "us-east-1"}

    assert not is_directory_bucket(General(), "lab-raw")


def test_denied_directories_fail_the_run_naming_each(tmp_path: Path) -> None:
    keys = {"open/a": 1, "open/b": 2, "secret/x/1": 3, "secret/y": 4, "other/hidden/z": 5}
    fake = FakeDirectoryBucket(keys, denied=("secret/", "other/hidden/"), page_size=2)
    with pytest.raises(AccessDeniedError) as err:
        run_directory_inventory(fake, BUCKET, "", LocalStore(tmp_path), InventoryOptions(workers=3))
    assert str(err.value).startswith(
        f"access denied listing 2 directories of bucket {BUCKET}: 'other/hidden/', 'secret/' ("
    )
    assert not (tmp_path / "summary.json").exists()


def test_a_prefix_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        run_directory_inventory(FakeDirectoryBucket({}), BUCKET, "d1", LocalStore(tmp_path))
    assert (
        str(err.value)
        == "a directory bucket lists only prefixes that end in '/': use 'd1/' (or the parent directory)"
    )
