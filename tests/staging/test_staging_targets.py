"""make_target's config checks, the handle/progress round trip, path confinement shared by all
targets, and MountpointTarget (SSM under Stubber, S3 on moto)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from hpcstage.staging import (
    SUCCEEDED,
    FileCacheTarget,
    FsxLustreTarget,
    Handle,
    LocalTarget,
    ManifestEntry,
    MountpointTarget,
    Progress,
    ReleaseRefusedError,
    StagingManifest,
    TargetConfigError,
    TargetNotReadyError,
    UnsafePathError,
    make_target,
)
from hpcstage.staging.paths import relative_path
from moto import mock_aws
from test_staging_support import FS_ID, INSTANCE_ID, WORK_BUCKET, WORK_URL, expect_command

BUCKET = "mounted-bucket"
HEAD = {"head_node_instance_id": INSTANCE_ID, "work_url": WORK_URL}
CONFIGS: dict[str, dict[str, Any]] = {
    "local": {"type": "local", "root": "ROOT"},
    "fsx": {
        "type": "fsx",
        "file_system_id": FS_ID,
        "mount_point": "/fsx",
        "file_system_path": "/ns1",
        "data_repository_path": "s3://src-bucket/p/",
        "run_id": "r",
        **HEAD,
    },
    "filecache": {
        "type": "filecache",
        "mount_point": "/cache",
        "cache_path": "/ns1",
        "data_repository_path": "s3://src-bucket/p/",
        "run_id": "r",
        **HEAD,
    },
    "mountpoint": {"type": "mountpoint", "mount_path": "/mnt/s3", "bucket": BUCKET, **HEAD},
}
CLASSES = {
    "local": LocalTarget,
    "fsx": FsxLustreTarget,
    "filecache": FileCacheTarget,
    "mountpoint": MountpointTarget,
}


@pytest.fixture
def clients() -> Iterator[dict[str, Any]]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=WORK_BUCKET)
        s3.create_bucket(Bucket=BUCKET)
        ssm = boto3.client("ssm", region_name="us-east-1")
        with Stubber(ssm) as stub:
            yield {"s3": s3, "ssm": ssm, "fsx": boto3.client("fsx", region_name="us-east-1"), "stub": stub}
            stub.assert_no_pending_responses()


def config(kind: str, tmp_path: Path, **changes: Any) -> dict[str, Any]:
    c = {k: (str(tmp_path / "root") if v == "ROOT" else v) for k, v in CONFIGS[kind].items()}
    c.update(changes)
    return {k: v for k, v in c.items() if v is not None}


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_make_target_builds_each_type(kind: str, clients: dict[str, Any], tmp_path: Path) -> None:
    target = make_target(config(kind, tmp_path), clients)
    assert type(target) is CLASSES[kind] and target.kind == kind


@pytest.mark.parametrize(
    ("kind", "changes", "message"),
    [
        ("local", {"root": None}, "local target config is missing root"),
        (
            "fsx",
            {"file_system_id": None, "mount_point": ""},
            "fsx target config is missing file_system_id, mount_point",
        ),
        ("fsx", {"filesystem_id": "fs-1"}, "unknown field(s) for a fsx target: filesystem_id"),
        ("fsx", {"file_system_id": "fs-XYZ"}, "file_system_id must look like fs-"),
        ("fsx", {"mount_point": "fsx"}, "mount_point must be an absolute path"),
        ("fsx", {"file_system_path": "/a/../b"}, "'..' path component"),
        ("fsx", {"import_granularity": "file"}, "import_granularity must be one of directory, object"),
        ("filecache", {"work_url": None}, "filecache target config is missing work_url"),
        ("filecache", {"restore_parallelism": 0}, "parallel must be 1..256"),
        ("mountpoint", {"head_node_instance_id": None}, "missing head_node_instance_id"),
        (
            "filecache",
            {"data_repository_path": "s3://B/p"},
            "filecache target config: invalid bucket name 'B'",
        ),
        ("local", {"export_url": "results/"}, "local target config: not an S3 URL"),
        (
            "local",
            {"type": "lustre"},
            "target type must be one of local, fsx, filecache, mountpoint, not 'lustre'",
        ),
    ],
)
def test_bad_configs_name_the_problem(
    kind: str, changes: dict[str, Any], message: str, clients: dict[str, Any], tmp_path: Path
) -> None:
    with pytest.raises(ValueError) as raised:
        make_target(config(kind, tmp_path, **changes), clients)
    assert message in str(raised.value)


def test_missing_clients_are_named(tmp_path: Path, clients: dict[str, Any]) -> None:
    with pytest.raises(TargetConfigError, match="a fsx target needs an 'fsx' client"):
        make_target(config("fsx", tmp_path), {"s3": clients["s3"], "ssm": clients["ssm"]})

    class Holder:
        s3 = clients["s3"]

    assert isinstance(make_target(config("local", tmp_path), Holder()), LocalTarget)


def test_handles_and_progress_round_trip_through_json() -> None:
    handle = Handle("fsx", "stage", "run-1", {"phase": "import", "tasks": {"active": ["task-1"]}})
    assert Handle.from_dict(json.loads(json.dumps(handle.to_dict()))) == handle
    progress = Progress(3, 5, 0, "RUNNING", handle, phase="import")
    assert json.loads(json.dumps(progress.to_dict()))["handle"] == handle.to_dict()
    with pytest.raises(ValueError, match="missing operation"):
        Handle.from_dict({"target": "fsx", "run_id": "r"})
    with pytest.raises(ValueError, match="state must be one of"):
        Progress(0, 0, 0, "DONE", handle)


def test_progress_refuses_another_targets_handle(tmp_path: Path, clients: dict[str, Any]) -> None:
    target = make_target(config("local", tmp_path), clients)
    with pytest.raises(ValueError, match="this is a local target; the handle belongs to a fsx target"):
        target.progress(Handle("fsx", "stage", "r"))


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("../../etc/passwd", "'..' path component"),
        ("/abs", "is absolute"),
        ("a/../../b", "'..' path component"),
        ("nul\0", "NUL byte"),
        ("a//b", "empty path component"),
        ("./a", "'.' path component"),
    ],
)
def test_relative_path_rules(key: str, rule: str) -> None:
    with pytest.raises(UnsafePathError, match=rule.replace(".", r"\.")):
        relative_path(key)


def test_relative_path_keeps_legal_names() -> None:
    assert relative_path("a/b/") == "a/b"
    assert relative_path("-rf/$(x)/new\nline") == "-rf/$(x)/new\nline"
    assert relative_path("..x/x..") == "..x/x.."


def mountpoint(clients: dict[str, Any]) -> MountpointTarget:
    target = make_target(
        {"type": "mountpoint", "mount_path": "/mnt/s3/", "bucket": BUCKET, "prefix": "proj", **HEAD}, clients
    )
    assert isinstance(target, MountpointTarget)
    return target


def test_mountpoint_stages_by_checking_the_mount(clients: dict[str, Any]) -> None:
    target = mountpoint(clients)
    assert target.free_bytes() is None
    manifest = StagingManifest.from_entries(
        [ManifestEntry(BUCKET, "proj/a/x.nc", 5), ManifestEntry(BUCKET, "proj/b/", 0)]
    )
    expect_command(clients["stub"], stdout="MOUNT fuse mountpoint-s3\nSAMPLE_PRESENT\n")
    handle = target.stage(manifest)
    progress = target.stage_progress(handle)
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, 1, 1)
    assert target.job_paths(manifest).files == ["/mnt/s3/a/x.nc"]
    expect_command(clients["stub"], stdout="MOUNT \nSAMPLE_ABSENT\n")
    with pytest.raises(
        TargetNotReadyError,
        match="/mnt/s3 on .* is not a Mountpoint for Amazon S3 mount \\(it is not a mount point\\)",
    ):
        target.stage(manifest)
    expect_command(clients["stub"], stdout="MOUNT fuse.s3fs s3fs\nSAMPLE_PRESENT\n")
    with pytest.raises(TargetNotReadyError, match="the mount table shows 'fuse.s3fs s3fs'"):
        target.stage(manifest)
    # Mountpoint's, but the selected object does not show: another bucket or --prefix is mounted
    expect_command(clients["stub"], stdout="MOUNT fuse mountpoint-s3\nSAMPLE_ABSENT\n")
    with pytest.raises(TargetNotReadyError, match="/mnt/s3/a/x.nc does not show through the mount"):
        target.stage(manifest)
    with pytest.raises(UnsafePathError, match="outside the repository prefix"):
        target.job_paths(StagingManifest.from_entries([ManifestEntry(BUCKET, "other/x", 1)]))


def test_mountpoint_verifies_in_s3_and_refuses_to_release_what_is_not_there(clients: dict[str, Any]) -> None:
    target = mountpoint(clients)
    s3 = clients["s3"]
    s3.put_object(Bucket=BUCKET, Key="proj/results/run/out.csv", Body=b"1")
    s3.put_object(Bucket=BUCKET, Key="proj/results/summary.txt", Body=b"2")
    assert target.export_progress(target.export(["results"])).state == SUCCEEDED
    result = target.verify_exported(["results/summary.txt", "results/run", "results/none"])
    assert (result.all_archived, result.missing, result.verified) == (
        False,
        ["results/none"],
        ["results/summary.txt", "results/run"],
    )
    with pytest.raises(ReleaseRefusedError, match="results/none"):
        target.release(["results/run", "results/none"])
    assert target.release_progress(target.release(["results"])).state == SUCCEEDED


class DeniedHead:
    """S3 as seen without s3:ListBucket: HeadObject of a missing key answers 403, not 404."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3

    def head_object(self, **params: Any) -> Any:
        try:
            return self.s3.head_object(**params)
        except ClientError as err:
            if err.response["Error"]["Code"] == "404":
                raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"}}, "HeadObject") from None
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.s3, name)


def test_mountpoint_verification_treats_a_403_head_like_a_404(clients: dict[str, Any]) -> None:
    target = mountpoint(clients)
    clients["s3"].put_object(Bucket=BUCKET, Key="proj/results/run/out.csv", Body=b"1")
    target.s3 = DeniedHead(clients["s3"])
    result = target.verify_exported(["results/run", "results/none"])
    assert (result.verified, result.missing) == (["results/run"], ["results/none"])
    assert result.reasons["results/none"] == f"no object s3://{BUCKET}/proj/results/none and nothing under it"


def test_mountpoint_verifies_every_file_the_job_declared_with_its_size(clients: dict[str, Any]) -> None:
    target = mountpoint(clients)
    s3 = clients["s3"]
    s3.put_object(Bucket=BUCKET, Key="proj/out/r1/a.csv", Body=b"12345")
    s3.put_object(Bucket=BUCKET, Key="proj/out/r1/sub/b new\nline.txt", Body=b"xy")
    s3.put_object(Bucket=BUCKET, Key="proj/out/r1/short.bin", Body=b"1")
    target.s3 = DeniedHead(s3)
    declared = [("a.csv", 5), ("sub/b new\nline.txt", 2), ("short.bin", 4), ("never-uploaded.dat", 0)]
    result = target.verify_declared("out/r1", declared)
    assert result.verified == ["out/r1/a.csv", "out/r1/sub/b new\nline.txt"]
    assert result.reasons == {
        "out/r1/short.bin": f"s3://{BUCKET}/proj/out/r1/short.bin holds 1 bytes, the job wrote 4",
        "out/r1/never-uploaded.dat": f"no object s3://{BUCKET}/proj/out/r1/never-uploaded.dat",
    }
    assert (result.all_archived, result.checked) == (False, 4)
