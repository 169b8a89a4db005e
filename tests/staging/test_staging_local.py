"""LocalTarget end to end on moto S3: stage, job paths, export, verify, release; resumable slices;
release refused unless verified; hostile keys staged confined under the root or refused, checked on
the file system."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from hpcstage.staging import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    Handle,
    LocalTarget,
    ManifestEntry,
    ReleaseRefusedError,
    StagingError,
    StagingManifest,
    UnsafePathError,
    make_target,
)
from moto import mock_aws

SRC = "source-bucket"
OUT = "results-bucket"


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=SRC)
        client.create_bucket(Bucket=OUT)
        yield client


def put(s3: Any, keys: list[str]) -> StagingManifest:
    entries = []
    for key in keys:
        body = f"contents of {key!r}".encode()
        s3.put_object(Bucket=SRC, Key=key, Body=body)
        entries.append(ManifestEntry(SRC, key, len(body), "STANDARD"))
    return StagingManifest.from_entries(entries)


def run_to_end(target: LocalTarget, handle: Handle, limit: int = 100) -> Any:
    for _ in range(limit):
        progress = target.progress(handle)
        if progress.finished:
            return progress
    raise AssertionError(f"not finished after {limit} progress calls")


def every_file(top: Path) -> set[Path]:
    return {p for p in top.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """The target's root lives in sandbox/root; anything written elsewhere in sandbox escaped."""
    (tmp_path / "sandbox").mkdir()
    return tmp_path / "sandbox"


def test_stage_export_verify_release_end_to_end(s3: Any, sandbox: Path) -> None:
    keys = ["inputs/a.nc", "inputs/deep/b.nc", "inputs/c.txt"]
    manifest = put(s3, keys)
    target = make_target(
        {"type": "local", "root": str(sandbox / "root"), "export_url": f"s3://{OUT}/run-1"}, {"s3": s3}
    )
    assert isinstance(target, LocalTarget)
    assert target.free_bytes() > 0

    handle = target.stage(manifest)
    progress = target.stage_progress(handle)
    assert (progress.state, progress.done, progress.total, progress.failed) == (SUCCEEDED, 3, 3, 0)

    job = target.job_paths(manifest)
    assert job.root == str(sandbox / "root" / "data")
    assert job.files == [os.path.join(job.root, k) for k in keys]
    for key, path in zip(keys, job.files, strict=True):
        assert Path(path).read_bytes() == f"contents of {key!r}".encode()

    # The job writes results under the job root.
    results = Path(job.root) / "results"
    (results / "sub").mkdir(parents=True)
    (results / "out.csv").write_text("x,y\n1,2\n")
    (results / "sub" / "log.txt").write_text("done\n")

    export = target.export(["results"])
    assert target.export_progress(export).state == SUCCEEDED
    got = s3.get_object(Bucket=OUT, Key="run-1/results/out.csv")
    assert got["Body"].read() == b"x,y\n1,2\n"
    assert got["ETag"].strip('"') == hashlib.md5(b"x,y\n1,2\n").hexdigest()

    verified = target.verify_exported(["results", "inputs"])
    assert verified.all_archived and verified.missing == []
    assert sorted(verified.verified) == [
        "inputs/a.nc",
        "inputs/c.txt",
        "inputs/deep/b.nc",
        "results/out.csv",
        "results/sub/log.txt",
    ]

    release = target.release(["results", "inputs"])
    assert target.release_progress(release).state == SUCCEEDED
    assert every_file(sandbox / "root" / "data") == set()
    # Released files stay verified: their S3 copies are still there.
    assert target.verify_exported(["results/out.csv", "inputs/a.nc"]).all_archived


def test_release_is_refused_for_files_not_verified_as_exported(s3: Any, sandbox: Path) -> None:
    target = LocalTarget(sandbox / "root", s3, export_url=f"s3://{OUT}/r")
    data = target.data_root
    (data / "results").mkdir()
    (data / "results" / "exported.txt").write_text("kept safe")
    target.export_progress(target.export(["results"]))
    (data / "results" / "new.txt").write_text("written after the export")

    with pytest.raises(ReleaseRefusedError) as raised:
        target.release(["results/exported.txt"])  # exported, but never verified
    assert raised.value.unverified == ["results/exported.txt"]

    result = target.verify_exported(["results"])
    assert not result.all_archived
    assert result.missing == ["results/new.txt"]
    assert result.reasons["results/new.txt"] == "never exported and not staged from S3"
    with pytest.raises(ReleaseRefusedError, match="1 file\\(s\\) not verified") as raised:
        target.release(["results"])
    assert raised.value.unverified == ["results/new.txt"]
    # Nothing was released: refusing is all or nothing.
    assert (data / "results" / "exported.txt").read_text() == "kept safe"
    assert (data / "results" / "new.txt").exists()

    # A verified file changed afterwards is refused too.
    (data / "results" / "exported.txt").write_text("changed after verification!")
    with pytest.raises(ReleaseRefusedError, match="changed since it was verified"):
        target.release(["results/exported.txt"])
    assert (data / "results" / "exported.txt").exists()

    # Verification itself notices the change (the S3 copy is stale).
    again = target.verify_exported(["results/exported.txt"])
    assert again.missing == ["results/exported.txt"]
    assert "changed since its export copy was made" in again.reasons["results/exported.txt"]


def test_verify_notices_a_deleted_or_altered_s3_copy(s3: Any, sandbox: Path) -> None:
    manifest = put(s3, ["in/one.dat", "in/two.dat"])
    target = LocalTarget(sandbox / "root", s3)
    assert target.stage_progress(target.stage(manifest)).state == SUCCEEDED
    s3.delete_object(Bucket=SRC, Key="in/one.dat")
    s3.put_object(Bucket=SRC, Key="in/two.dat", Body=b"contents of 'in/two.dat'".upper())
    result = target.verify_exported(["in"])
    assert result.missing == ["in/one.dat", "in/two.dat"]
    assert "cannot be checked (404)" in result.reasons["in/one.dat"]
    assert "has ETag" in result.reasons["in/two.dat"]
    with pytest.raises(ReleaseRefusedError):
        target.release(["in"])
    assert (target.data_root / "in" / "one.dat").exists()


def test_progress_is_sliced_and_resumes_from_the_state_file(s3: Any, sandbox: Path) -> None:
    manifest = put(s3, [f"part/{i:02d}.bin" for i in range(7)])
    first = LocalTarget(sandbox / "root", s3, max_objects_per_call=3, max_workers=2)
    handle = first.stage(manifest)
    assert first.stage_progress(handle).done == 3
    # A new process (a new target object, the handle through JSON) continues where that one stopped.
    revived = Handle.from_dict(json.loads(json.dumps(handle.to_dict())))
    second = LocalTarget(sandbox / "root", s3, max_objects_per_call=3, max_workers=2)
    progress = second.stage_progress(revived)
    assert (progress.state, progress.done, progress.total) == (RUNNING, 6, 7)
    progress = second.stage_progress(revived)
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, 7, 7)
    state = json.loads((sandbox / "root" / ".hpcstage" / "state.json").read_text())
    assert sorted(state["staged"]) == [f"part/{i:02d}.bin" for i in range(7)]
    # Staging the same manifest again downloads nothing: every file is already current.
    s3.delete_object(Bucket=SRC, Key="part/00.bin")
    assert run_to_end(second, second.stage(manifest)).state == SUCCEEDED


def test_per_object_failures_are_counted_and_reported(s3: Any, sandbox: Path) -> None:
    manifest = put(s3, ["ok.txt"])
    s3.put_object(Bucket=SRC, Key="grew.txt", Body=b"now longer than the inventory said")
    entries = [*manifest, ManifestEntry(SRC, "grew.txt", 3), ManifestEntry(SRC, "gone.txt", 3)]
    target = LocalTarget(sandbox / "root", s3)
    progress = target.stage_progress(target.stage(StagingManifest.from_entries(entries)))
    assert (progress.state, progress.done, progress.failed, progress.total) == (FAILED, 1, 2, 3)
    assert "changed since the inventory" in progress.message
    assert "'gone.txt'" in progress.message and "NoSuchKey" in progress.message
    assert not (target.data_root / "grew.txt").exists()  # no partial file is left visible
    assert list((sandbox / "root" / ".hpcstage" / "tmp").iterdir()) == []


def test_manifest_with_two_buckets_is_refused(s3: Any, sandbox: Path) -> None:
    manifest = StagingManifest.from_entries([ManifestEntry(SRC, "a", 1), ManifestEntry(OUT, "b", 1)])
    with pytest.raises(StagingError, match="must name one bucket"):
        LocalTarget(sandbox / "root", s3).stage(manifest)


# Keys that are legal file names, however alarming: staged byte for byte under the root.
AWKWARD_KEYS = [
    'q/it\'s "quoted".txt',
    "q/$(touch CANARY)",
    "q/`touch CANARY`",
    "q/a;rm -rf ~;b",
    "q/new\nline",
    "q/-rf",
    "q/--help",
    "-leading/dash",
    "q/back\\slash",
    "q/ spaces  ",
    "q/*",
    "q/..hidden",
    "q/...",
    "q/ünïcödé ✓",
]


def test_awkward_keys_are_staged_confined_under_the_root(
    s3: Any, sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sandbox)
    manifest = put(s3, AWKWARD_KEYS)
    target = LocalTarget(sandbox / "root", s3)
    assert target.stage_progress(target.stage(manifest)).state == SUCCEEDED
    data = (sandbox / "root" / "data").resolve()
    staged = {str(p.relative_to(data)) for p in every_file(data)}
    assert staged == set(AWKWARD_KEYS)
    for key in AWKWARD_KEYS:
        assert (data / key).read_bytes() == f"contents of {key!r}".encode()
    outside = {p for p in every_file(sandbox) if not p.resolve().is_relative_to(sandbox / "root")}
    assert outside == set()
    assert not (sandbox / "CANARY").exists()


@pytest.mark.parametrize(
    "key",
    [
        "../../etc/passwd",
        "../escape",
        "/abs/path",
        "a/../../b",
        "a/./b",
        "a//b",
        ".",
        "..",
        "ok/..",
        "nul\0byte",
        "",
        "x" * 256,
    ],
)
def test_unsafe_keys_are_refused_before_anything_is_written(s3: Any, sandbox: Path, key: str) -> None:
    s3.put_object(Bucket=SRC, Key="fine.txt", Body=b"fine")
    manifest = StagingManifest.from_entries([ManifestEntry(SRC, "fine.txt", 4), ManifestEntry(SRC, key, 1)])
    target = LocalTarget(sandbox / "root", s3)
    with pytest.raises(UnsafePathError) as raised:
        target.stage(manifest)
    assert "1 unsafe object key(s) refused" in str(raised.value)
    assert repr(key)[:40].rstrip("'") in str(raised.value)
    assert every_file(sandbox / "root" / "data") == set()
    assert {p for p in every_file(sandbox) if ".hpcstage" not in p.parts} == set()


def test_a_symlink_planted_in_the_root_is_not_followed(s3: Any, sandbox: Path) -> None:
    elsewhere = sandbox / "elsewhere"
    elsewhere.mkdir()
    target = LocalTarget(sandbox / "root", s3, export_url=f"s3://{OUT}/r")
    (target.data_root / "evil").symlink_to(elsewhere)
    manifest = put(s3, ["evil/new/file.txt", "evil/file.txt"])
    progress = target.stage_progress(target.stage(manifest))
    assert (progress.state, progress.failed) == (FAILED, 2)
    assert "is a symlink; refusing to stage through it" in progress.message
    assert list(elsewhere.iterdir()) == []

    # Export does not follow symlinks either: a job cannot export /etc/hostname by linking to it.
    secret = sandbox / "secret.txt"
    secret.write_text("not yours")
    (target.data_root / "results").mkdir()
    (target.data_root / "results" / "link").symlink_to(secret)
    with pytest.raises(StagingError, match="is a symlink"):
        target.export(["results"])
    with pytest.raises(StagingError, match="is a symlink"):
        target.export(["results/link"])


@pytest.mark.parametrize("path", ["../outside", "/etc", "results/../../x"])
def test_export_verify_and_release_paths_are_confined(s3: Any, sandbox: Path, path: str) -> None:
    (sandbox / "outside").write_text("keep me")
    target = LocalTarget(sandbox / "root", s3, export_url=f"s3://{OUT}/r")
    with pytest.raises(StagingError, match="cannot export 1 path"):
        target.export([path])
    assert not target.verify_exported([path]).all_archived
    with pytest.raises(ReleaseRefusedError):
        target.release([path])
    assert (sandbox / "outside").read_text() == "keep me"
