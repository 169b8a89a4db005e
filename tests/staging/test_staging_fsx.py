"""FsxLustreTarget against real boto3 FSx and SSM clients under botocore's Stubber (every request is
checked against the service model; moto implements neither DRAs nor data repository tasks). The work
bucket (batch plans, file lists, SSM output) is moto S3."""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hpcstage.staging import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    FsxLustreTarget,
    ManifestEntry,
    ReleaseRefusedError,
    StagingManifest,
    TargetConfigError,
    TargetNotReadyError,
    UnsafePathError,
    make_target,
)
from hpcstage.staging.hsm import COUNT_SCRIPT, RESTORE_SCRIPT, bash_command, encode_path_list
from hpcstage.staging.targets.fsx import client_token, import_paths
from moto import mock_aws
from test_staging_support import FS_ID, INSTANCE_ID, WORK_BUCKET, WORK_URL, counts_stdout, expect_command

SRC = "source-bucket"
REPO = f"s3://{SRC}/project/"
RUN = "run-2024-06-01T12:00:00Z/abc"
NOW = datetime(2024, 6, 1, tzinfo=UTC)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def clients() -> Iterator[dict[str, Any]]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=WORK_BUCKET)
        fsx = boto3.client("fsx", region_name="us-east-1")
        ssm = boto3.client("ssm", region_name="us-east-1")
        with Stubber(fsx) as fsx_stub, Stubber(ssm) as ssm_stub:
            yield {"s3": s3, "fsx": fsx, "ssm": ssm, "fsx_stub": fsx_stub, "ssm_stub": ssm_stub}
            fsx_stub.assert_no_pending_responses()
            ssm_stub.assert_no_pending_responses()


def make(clients: dict[str, Any], sleeps: Sleeps | None = None, **overrides: Any) -> FsxLustreTarget:
    config = {
        "type": "fsx",
        "file_system_id": FS_ID,
        "mount_point": "/fsx",
        "file_system_path": "/ns1",
        "data_repository_path": REPO,
        "head_node_instance_id": INSTANCE_ID,
        "work_url": WORK_URL,
        "run_id": RUN,
        "prefetch": False,
        **overrides,
    }
    target = make_target(config, clients, sleep=sleeps if sleeps is not None else Sleeps())
    assert isinstance(target, FsxLustreTarget)
    target.rng = random.Random(7)
    return target


def manifest_of(keys: list[str]) -> StagingManifest:
    return StagingManifest.from_entries([ManifestEntry(SRC, k, 1) for k in keys])


def association(lifecycle: str = "AVAILABLE", fs_path: str = "/ns1", repo: str = REPO, n: int = 1) -> dict:
    return {
        "AssociationId": f"dra-{n:017x}",
        "FileSystemId": FS_ID,
        "Lifecycle": lifecycle,
        "FileSystemPath": fs_path,
        "DataRepositoryPath": repo,
    }


def file_system(**overrides: Any) -> dict[str, Any]:
    """A DescribeFileSystems entry for an FSx for Lustre file system that takes associations."""
    return {
        "FileSystemId": FS_ID,
        "FileSystemType": "LUSTRE",
        "Lifecycle": "AVAILABLE",
        "FileSystemTypeVersion": "2.15",
        "StorageType": "SSD",
        "LustreConfiguration": {"DeploymentType": "PERSISTENT_2"},
        **overrides,
    }


def expect_file_system(stub: Stubber, **overrides: Any) -> None:
    stub.add_response(
        "describe_file_systems", {"FileSystems": [file_system(**overrides)]}, {"FileSystemIds": [FS_ID]}
    )


def expect_associations(stub: Stubber, found: list[dict]) -> None:
    stub.add_response(
        "describe_data_repository_associations",
        {"Associations": found},
        {"Filters": [{"Name": "file-system-id", "Values": [FS_ID]}]},
    )


def task(
    task_id: str, lifecycle: str, task_type: str = "IMPORT_METADATA_FROM_REPOSITORY", **extra: Any
) -> dict:
    return {"TaskId": task_id, "Lifecycle": lifecycle, "Type": task_type, "CreationTime": NOW, **extra}


def task_id(n: int) -> str:
    return f"task-{n:017x}"


def expect_create(
    stub: Stubber,
    paths: list[str],
    index: int,
    n: int,
    task_type: str = "IMPORT_METADATA_FROM_REPOSITORY",
    **extra: Any,
) -> str:
    purpose = {"IMPORT_METADATA_FROM_REPOSITORY": "import", "EXPORT_TO_REPOSITORY": "export"}.get(
        task_type, "release"
    )
    token = client_token(RUN, purpose, index, paths)
    stub.add_response(
        "create_data_repository_task",
        {"DataRepositoryTask": task(task_id(n), "PENDING", task_type, Paths=paths)},
        {
            "Type": task_type,
            "FileSystemId": FS_ID,
            "Paths": paths,
            "Report": extra.pop("Report", {"Enabled": False}),
            "ClientRequestToken": token,
            **extra,
        },
    )
    return token


def test_client_tokens_are_short_safe_distinct_and_deterministic() -> None:
    tokens = {client_token(RUN, "import", i, [f"s3://b/{i}"]) for i in range(300)}
    assert len(tokens) == 300
    for token in tokens:
        assert len(token) <= 63 and re.fullmatch(r"[A-Za-z0-9_.-]+", token)
    assert client_token(RUN, "import", 4, ["a"]) == client_token(RUN, "import", 4, ["a"])
    assert client_token(RUN, "import", 4, ["a"]) != client_token(RUN, "import", 4, ["b"])
    assert client_token("x" * 200, "export", 1) != client_token("x" * 199 + "y", "export", 1)
    assert client_token("x" * 200, "export", 1).startswith("xxxx")


def test_import_paths_cover_the_selection_with_fewest_directories() -> None:
    rels = ["a/1", "a/b/2", "a-b/3", "c/d/e/4", "c/d/5"]
    assert import_paths(rels, "directory") == ["a-b/", "a/", "c/d/"]
    assert import_paths(rels + ["top"], "directory") == [""]
    assert import_paths(rels, "object") == sorted(rels)


def test_250_paths_become_three_import_tasks_of_100_100_50(clients: dict[str, Any]) -> None:
    keys = [f"project/d{i:03d}/f.nc" for i in range(250)]
    target = make(clients, import_granularity="object", max_active_tasks=3)
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    urls = [f"{REPO}d{i:03d}/f.nc" for i in range(250)]
    batches = [urls[:100], urls[100:200], urls[200:]]
    tokens = [expect_create(stub, batch, i, i + 1) for i, batch in enumerate(batches)]
    handle = target.stage(manifest_of(keys))
    assert [len(b) for b in batches] == [100, 100, 50]
    assert len(set(tokens)) == 3 and all(len(t) <= 63 for t in tokens)
    assert handle.data["tasks"]["active"] == [task_id(1), task_id(2), task_id(3)]

    stub.add_response(
        "describe_data_repository_tasks",
        {
            "DataRepositoryTasks": [
                task(
                    task_id(1),
                    "SUCCEEDED",
                    Status={"TotalCount": 100, "SucceededCount": 100, "FailedCount": 0},
                ),
                task(task_id(2), "EXECUTING"),
                task(task_id(3), "PENDING"),
            ]
        },
        {"TaskIds": [task_id(1), task_id(2), task_id(3)]},
    )
    progress = target.stage_progress(handle)
    assert (progress.state, progress.phase, progress.done, progress.total) == (RUNNING, "import", 1, 3)
    stub.add_response(
        "describe_data_repository_tasks",
        {
            "DataRepositoryTasks": [
                task(
                    task_id(2),
                    "SUCCEEDED",
                    Status={"TotalCount": 100, "SucceededCount": 100, "FailedCount": 0},
                ),
                task(
                    task_id(3), "SUCCEEDED", Status={"TotalCount": 50, "SucceededCount": 50, "FailedCount": 0}
                ),
            ]
        },
        {"TaskIds": [task_id(2), task_id(3)]},
    )
    progress = target.stage_progress(handle)
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, 250, 250)  # files, once finished
    assert handle.data["tasks"]["succeeded"] == 250

    # The same run submitting the same batches again sends the same tokens (idempotent retries).
    expect_file_system(stub)
    expect_associations(stub, [association()])
    for i, batch in enumerate(batches):
        assert expect_create(stub, batch, i, i + 1) == tokens[i]
    make(clients, import_granularity="object", max_active_tasks=3).stage(manifest_of(keys))


def test_one_task_at_a_time_by_default_with_the_next_batch_submitted_by_progress(
    clients: dict[str, Any],
) -> None:
    keys = [f"project/d{i:03d}/f.nc" for i in range(120)]
    target = make(clients)  # directory granularity: 120 directory paths
    stub = clients["fsx_stub"]
    urls = [f"{REPO}d{i:03d}/" for i in range(120)]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    expect_create(stub, urls[:100], 0, 1)
    handle = target.stage(manifest_of(keys))
    stub.add_response(
        "describe_data_repository_tasks",
        {"DataRepositoryTasks": [task(task_id(1), "SUCCEEDED")]},
        {"TaskIds": [task_id(1)]},
    )
    expect_create(stub, urls[100:], 1, 2)
    progress = target.stage_progress(handle)
    assert (progress.state, progress.done, progress.total) == (RUNNING, 1, 2)
    assert handle.data["tasks"]["active"] == [task_id(2)]


def test_task_executing_is_retried_with_jittered_backoff(clients: dict[str, Any]) -> None:
    sleeps = Sleeps()
    target = make(clients, sleeps)
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    for _ in range(2):
        stub.add_client_error(
            "create_data_repository_task",
            service_error_code="DataRepositoryTaskExecuting",
            service_message="An existing data repository task is currently executing on the file system.",
            http_status_code=400,
        )
    expect_create(stub, [f"{REPO}a/"], 0, 1)
    handle = target.stage(manifest_of(["project/a/x.nc"]))
    assert handle.data["tasks"]["active"] == [task_id(1)]
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 2.0 and 0 <= sleeps[1] <= 4.0  # full jitter under base * 2**attempt


def test_task_executing_past_the_attempt_bound_waits_for_the_next_poll(clients: dict[str, Any]) -> None:
    sleeps = Sleeps()
    target = make(clients, sleeps, submit_attempts=2)
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    for _ in range(2):
        stub.add_client_error("create_data_repository_task", service_error_code="DataRepositoryTaskExecuting")
    handle = target.stage(manifest_of(["project/a/x.nc"]))
    assert handle.data["tasks"]["next"] == 0 and len(sleeps) == 1
    stub.add_client_error("create_data_repository_task", service_error_code="DataRepositoryTaskExecuting")
    stub.add_client_error("create_data_repository_task", service_error_code="DataRepositoryTaskExecuting")
    progress = target.stage_progress(handle)
    assert (progress.state, progress.message) == (
        RUNNING,
        "waiting for another data repository task to finish",
    )
    expect_create(stub, [f"{REPO}a/"], 0, 1)
    assert target.stage_progress(handle).state == RUNNING
    assert handle.data["tasks"]["active"] == [task_id(1)]


def test_other_create_errors_are_not_retried(clients: dict[str, Any]) -> None:
    target = make(clients)
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    stub.add_client_error("create_data_repository_task", service_error_code="ServiceLimitExceeded")
    with pytest.raises(Exception, match="ServiceLimitExceeded"):
        target.stage(manifest_of(["project/a/x.nc"]))


def test_polling_to_failed_surfaces_the_failure_details(clients: dict[str, Any]) -> None:
    target = make(clients, import_granularity="object")
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    expect_create(stub, [f"{REPO}a/x.nc"], 0, 1)
    handle = target.stage(manifest_of(["project/a/x.nc"]))
    for lifecycle in ("PENDING", "EXECUTING"):
        stub.add_response(
            "describe_data_repository_tasks",
            {"DataRepositoryTasks": [task(task_id(1), lifecycle)]},
            {"TaskIds": [task_id(1)]},
        )
        assert target.stage_progress(handle).state == RUNNING
    stub.add_response(
        "describe_data_repository_tasks",
        {
            "DataRepositoryTasks": [
                task(
                    task_id(1),
                    "FAILED",
                    Status={"TotalCount": 1, "SucceededCount": 0, "FailedCount": 1},
                    FailureDetails={
                        "Message": "1 file failed: s3://source-bucket/project/a/x.nc access denied"
                    },
                )
            ]
        },
        {"TaskIds": [task_id(1)]},
    )
    progress = target.stage_progress(handle)
    assert (progress.state, progress.phase, progress.failed) == (FAILED, "import", 1)
    assert (
        progress.message
        == f"{task_id(1)} FAILED: 1 file failed: s3://source-bucket/project/a/x.nc access denied"
    )
    # Asking again reports the same failure without calling FSx.
    again = target.stage_progress(handle)
    assert (again.state, again.message) == (FAILED, progress.message)


def test_association_is_created_when_missing_and_waited_for(clients: dict[str, Any]) -> None:
    target = make(clients, report_path=f"{REPO}hpcstage-reports")
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association(fs_path="/other", repo="s3://source-bucket/other/", n=9)])
    stub.add_response(
        "create_data_repository_association",
        {"Association": association("CREATING")},
        {
            "FileSystemId": FS_ID,
            "FileSystemPath": "/ns1",
            "DataRepositoryPath": REPO,
            "BatchImportMetaDataOnCreate": False,
            "ClientRequestToken": client_token(RUN, "association", 0, ["/ns1", REPO]),
        },
    )
    handle = target.stage(manifest_of(["project/a/x.nc"]))
    assert handle.data["phase"] == "association"
    dra = {"AssociationIds": [association()["AssociationId"]]}
    stub.add_response(
        "describe_data_repository_associations", {"Associations": [association("CREATING")]}, dra
    )
    assert target.stage_progress(handle).phase == "association"
    stub.add_response("describe_data_repository_associations", {"Associations": [association()]}, dra)
    report = {
        "Enabled": True,
        "Path": f"{REPO}hpcstage-reports",
        "Format": "REPORT_CSV_20191124",
        "Scope": "FAILED_FILES_ONLY",
    }
    expect_create(stub, [f"{REPO}a/"], 0, 1, Report=report)
    progress = target.stage_progress(handle)
    assert (progress.state, progress.phase) == (RUNNING, "import")


def test_a_present_association_is_reused(clients: dict[str, Any]) -> None:
    target = make(clients)
    stub = clients["fsx_stub"]
    stub.add_response(
        "describe_data_repository_associations",
        {"Associations": [association(fs_path="/x", repo="s3://b/x/", n=2)], "NextToken": "bmV4dA=="},
        {"Filters": [{"Name": "file-system-id", "Values": [FS_ID]}]},
    )
    stub.add_response(
        "describe_data_repository_associations",
        {"Associations": [association(repo=REPO.rstrip("/"))]},
        {"Filters": [{"Name": "file-system-id", "Values": [FS_ID]}], "NextToken": "bmV4dA=="},
    )
    assert target.ensure_association()["AssociationId"] == association()["AssociationId"]


def test_overlapping_or_failed_associations_are_reported(clients: dict[str, Any]) -> None:
    target = make(clients)
    stub = clients["fsx_stub"]
    expect_associations(stub, [association(fs_path="/ns1/sub", repo="s3://b/elsewhere/")])
    with pytest.raises(TargetConfigError, match="overlaps"):
        target.ensure_association()
    failed = {**association("MISCONFIGURED"), "FailureDetails": {"Message": "bucket policy denies FSx"}}
    expect_associations(stub, [failed])
    with pytest.raises(TargetNotReadyError, match="MISCONFIGURED: bucket policy denies FSx"):
        target.ensure_association()


def test_describe_asks_for_at_most_50_task_ids(clients: dict[str, Any]) -> None:
    keys = [f"project/f{i:04d}" for i in range(6000)]
    target = make(clients, import_granularity="object", max_active_tasks=60)
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    urls = [f"{REPO}f{i:04d}" for i in range(6000)]
    for i in range(60):
        expect_create(stub, urls[i * 100 : (i + 1) * 100], i, i + 1)
    handle = target.stage(manifest_of(keys))
    ids = [task_id(i + 1) for i in range(60)]
    stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": []}, {"TaskIds": ids[:50]})
    stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": []}, {"TaskIds": ids[50:]})
    assert target.stage_progress(handle).state == RUNNING


def test_restore_phase_prefetches_with_hsm_restore_and_counts_noops(clients: dict[str, Any]) -> None:
    target = make(clients, prefetch=True, import_granularity="object")
    fsx, ssm, s3 = clients["fsx_stub"], clients["ssm_stub"], clients["s3"]
    keys = ["project/a/x.nc", "project/b/y z.nc", "project/-c"]
    expect_file_system(fsx)
    expect_associations(fsx, [association()])
    expect_create(fsx, sorted(f"{REPO}{k.removeprefix('project/')}" for k in keys), 0, 1)
    handle = target.stage(manifest_of(keys))
    list_url = handle.data["restore_list"]
    bucket, key = list_url.removeprefix("s3://").split("/", 1)
    listed = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert listed == encode_path_list(["/fsx/ns1/a/x.nc", "/fsx/ns1/b/y z.nc", "/fsx/ns1/-c"])

    fsx.add_response(
        "describe_data_repository_tasks",
        {"DataRepositoryTasks": [task(task_id(1), "SUCCEEDED")]},
        {"TaskIds": [task_id(1)]},
    )
    expect_command(ssm, commands=[bash_command("hsm-restore", RESTORE_SCRIPT, list_url, "16")])
    progress = target.stage_progress(handle)
    assert (progress.state, progress.phase, progress.done, progress.total) == (RUNNING, "restore", 0, 3)
    count = [bash_command("hsm-count", COUNT_SCRIPT, list_url, "16")]
    expect_command(ssm, commands=count, stdout=counts_stdout(3, pending=2))
    progress = target.stage_progress(handle)
    assert (progress.state, progress.phase, progress.done, progress.total) == (RUNNING, "restore", 1, 3)
    expect_command(ssm, commands=count, stdout=counts_stdout(3, pending=0))
    progress = target.stage_progress(handle)
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, 3, 3)


def test_a_failing_restore_command_fails_the_stage_with_its_stderr(clients: dict[str, Any]) -> None:
    target = make(clients, prefetch=True, import_granularity="object")
    fsx, ssm = clients["fsx_stub"], clients["ssm_stub"]
    expect_file_system(fsx)
    expect_associations(fsx, [association()])
    expect_create(fsx, [f"{REPO}a"], 0, 1)
    handle = target.stage(manifest_of(["project/a"]))
    fsx.add_response(
        "describe_data_repository_tasks",
        {"DataRepositoryTasks": [task(task_id(1), "SUCCEEDED")]},
        {"TaskIds": [task_id(1)]},
    )
    expect_command(ssm, status="Failed", exit_code=123, stderr="/fsx/ns1/a: Operation not permitted (1)")
    with pytest.raises(Exception, match="hsm-restore .* exit code 123: /fsx/ns1/a: Operation not permitted"):
        target.stage_progress(handle)


def test_export_tasks_take_paths_relative_to_the_mount_point(clients: dict[str, Any]) -> None:
    target = make(clients)
    stub = clients["fsx_stub"]
    expect_create(stub, ["ns1/results/run-1", "ns1/logs"], 0, 1, task_type="EXPORT_TO_REPOSITORY")
    handle = target.export(["results/run-1", "logs"])
    stub.add_response(
        "describe_data_repository_tasks",
        {
            "DataRepositoryTasks": [
                task(
                    task_id(1),
                    "SUCCEEDED",
                    "EXPORT_TO_REPOSITORY",
                    Status={"TotalCount": 9, "SucceededCount": 9},
                )
            ]
        },
        {"TaskIds": [task_id(1)]},
    )
    progress = target.export_progress(handle)
    assert (progress.state, progress.phase, progress.done, progress.total) == (SUCCEEDED, "export", 1, 1)
    with pytest.raises(UnsafePathError):
        target.export(["../ns2/secret"])


def state_report(states: dict[str, str]) -> str:
    return "".join(f"{base64.b64encode(p.encode()).decode()}\t{s}\n" for p, s in states.items())


def test_release_only_for_verified_paths(clients: dict[str, Any]) -> None:
    target = make(clients)
    fsx, ssm = clients["fsx_stub"], clients["ssm_stub"]
    archived = "\t(0x00000009) exists archived, archive_id:1"
    dirty = "\t(0x0000000b) exists dirty archived, archive_id:1"
    expect_command(
        ssm,
        stdout=state_report(
            {"/fsx/ns1/results/a": archived, "/fsx/ns1/results/b": dirty, "/fsx/ns1/in/c": archived}
        ),
    )
    with pytest.raises(ReleaseRefusedError) as raised:
        target.release(["results", "in/c"])
    assert raised.value.unverified == ["results/b"]
    assert "hsm_state: archived dirty exists" in str(raised.value)
    # No CreateDataRepositoryTask was made: the Stubber would have failed on an unexpected call.

    expect_command(ssm, stdout=state_report({"/fsx/ns1/results/a": archived, "/fsx/ns1/in/c": archived}))
    # by directory: the output directory, and the directory of the verified input file
    expect_create(
        fsx,
        ["ns1/in", "ns1/results"],
        0,
        1,
        task_type="RELEASE_DATA_FROM_FILESYSTEM",
        ReleaseConfiguration={"DurationSinceLastAccess": {"Unit": "DAYS", "Value": 0}},
    )
    handle = target.release(["results", "in/c"])
    assert handle.data["files"] == 2
    fsx.add_response(
        "describe_data_repository_tasks",
        {"DataRepositoryTasks": [task(task_id(1), "SUCCEEDED", "RELEASE_DATA_FROM_FILESYSTEM")]},
        {"TaskIds": [task_id(1)]},
    )
    assert target.release_progress(handle).state == SUCCEEDED


def test_free_bytes_asks_the_head_node(clients: dict[str, Any]) -> None:
    target = make(clients)
    expect_command(clients["ssm_stub"], stdout="FREE_BYTES 123456789\n")
    assert target.free_bytes() == 123456789


def test_keys_outside_the_repository_are_refused(clients: dict[str, Any]) -> None:
    target = make(clients)
    with pytest.raises(UnsafePathError, match="2 object\\(s\\) cannot be staged"):
        target.stage(
            StagingManifest.from_entries(
                [ManifestEntry(SRC, "other/x", 1), ManifestEntry("another-bucket", "project/y", 1)]
            )
        )
    with pytest.raises(UnsafePathError, match="'..' path component"):
        target.stage(manifest_of(["project/../../etc/passwd"]))


def test_plans_live_in_the_work_bucket_so_handles_stay_small(clients: dict[str, Any]) -> None:
    keys = [f"project/{'d' * 200}{i:05d}/file" for i in range(2000)]
    target = make(clients, import_granularity="object")
    stub = clients["fsx_stub"]
    expect_file_system(stub)
    expect_associations(stub, [association()])
    stub.add_response(
        "create_data_repository_task", {"DataRepositoryTask": task(task_id(1), "PENDING")}, None
    )
    handle = target.stage(manifest_of(keys))
    assert len(json.dumps(handle.to_dict())) < 2000
    assert handle.data["tasks"]["batches"] == 20


def test_the_file_system_must_take_associations_before_anything_is_staged(clients: dict[str, Any]) -> None:
    target = make(clients)
    stub = clients["fsx_stub"]
    expect_file_system(
        stub,
        FileSystemTypeVersion="2.10",
        LustreConfiguration={"DeploymentType": "SCRATCH_1"},
        Lifecycle="UPDATING",
    )
    with pytest.raises(TargetNotReadyError) as raised:
        target.stage(manifest_of(["project/a/x.nc"]))
    assert str(raised.value) == (
        f"FSx file system {FS_ID} cannot be an fsx target: its lifecycle is UPDATING, not AVAILABLE; it runs "
        "Lustre 2.10; data repository associations need 2.12 or 2.15; SCRATCH_1 file systems take no data "
        "repository associations"
    )
    stub.add_client_error(
        "describe_file_systems", "FileSystemNotFound", expected_params={"FileSystemIds": [FS_ID]}
    )
    with pytest.raises(TargetConfigError, match=f"FSx file system {FS_ID} does not exist"):
        target.stage(manifest_of(["project/a/x.nc"]))


def test_a_report_path_outside_the_linked_repository_is_refused(clients: dict[str, Any]) -> None:
    with pytest.raises(TargetConfigError, match="report_path must lie inside the linked data repository"):
        make(clients, report_path="s3://source-bucket/reports")


@pytest.mark.parametrize("bad", ["\u2028", "\u2029", "\u0085", "\r", "\n"])
def test_keys_fsx_task_paths_refuse_are_listed_at_select(clients: dict[str, Any], bad: str) -> None:
    target = make(clients)
    keys = ["project/ok.nc", f"project/line{bad}sep.nc", f"project/dir{bad}/x.nc"]
    with pytest.raises(UnsafePathError) as raised:
        target.job_paths(manifest_of(keys))
    message = str(raised.value)
    assert message.startswith("2 object(s) cannot be staged on this target: ")
    assert repr(f"project/line{bad}sep.nc") in message and repr(f"project/dir{bad}/x.nc") in message
