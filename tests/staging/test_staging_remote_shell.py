"""Hostile keys never reach a shell unquoted: the commands the targets send through SSM are run here,
for real, with /bin/sh (as the SSM agent does) and stand-in ``lfs``/``aws`` programs that record
their argv. Each key must arrive as one argument, byte for byte, and no ``$(touch CANARY)`` may run."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from hpcstage.staging import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    FileCacheTarget,
    FsxLustreTarget,
    ManifestEntry,
    MountpointTarget,
    ReleaseRefusedError,
    StagingManifest,
    TargetNotReadyError,
    make_target,
)
from hpcstage.staging.hsm import (
    ARCHIVE_SCRIPT,
    COUNT_SCRIPT,
    FREE_SCRIPT,
    RELEASE_SCRIPT,
    RESTORE_SCRIPT,
    STATE_SCRIPT,
)
from moto import mock_aws
from test_staging_support import (
    FS_ID,
    INSTANCE_ID,
    WORK_BUCKET,
    WORK_URL,
    LocalShellSsm,
    install_stubs,
    recorded_lfs_calls,
    stub_env,
)

SRC = "hostile-source"

# Legal S3 keys and legal file names, each a shell hazard if it were ever pasted into a command.
HOSTILE_NAMES = [
    "it's.nc",
    '"double".nc',
    "$(touch CANARY)",
    "`touch CANARY`",
    "x'$(touch CANARY)'y",
    "a;touch CANARY;b",
    "a && touch CANARY",
    "|touch CANARY",
    "> CANARY",
    "new\nline",
    "new\ntouch CANARY",
    "tab\there",
    "-rf",
    "--help",
    "--",
    "-",
    " leading and trailing ",
    "back\\slash",
    "$HOME",
    "${IFS}",
    "*",
    "?",
    "[a-z]",
    "~",
    "#comment",
    "!bang",
    "{a,b}",
    "ünï cødé ✓",
    "\x01\x1b[31mcontrol",
    "looks: (0x00000004) released",  # a name that ends like an hsm_state line
    "x: NOOP",
]


FSX_NAMES = [n for n in HOSTILE_NAMES if not any(c in n for c in "\r\n\u0085\u2028\u2029")]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """moto S3, a 'head node' that is this machine, and a mount directory under tmp_path."""
    bin_dir, fake_s3, log_dir, cwd = (tmp_path / d for d in ("bin", "fake-s3", "lfs-calls", "cwd"))
    for d in (fake_s3, log_dir, cwd):
        d.mkdir()
    install_stubs(bin_dir)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=WORK_BUCKET)
        ssm = LocalShellSsm(s3, fake_s3, stub_env(bin_dir, fake_s3, log_dir), cwd)
        yield {"s3": s3, "ssm": ssm, "log_dir": log_dir, "cwd": cwd, "mnt": tmp_path / "mnt", "tmp": tmp_path}


def canaries(world: dict[str, Any]) -> list[Path]:
    return [p for p in world["tmp"].rglob("*") if "CANARY" in p.name and p.is_file() and "mnt" not in p.parts]


def filecache(world: dict[str, Any], **overrides: Any) -> FileCacheTarget:
    target = make_target(
        {
            "type": "filecache",
            "mount_point": str(world["mnt"]),
            "cache_path": "/ns1",
            "data_repository_path": f"s3://{SRC}/in/",
            "head_node_instance_id": INSTANCE_ID,
            "work_url": WORK_URL,
            "run_id": "hostile $(touch CANARY) run",
            **overrides,
        },
        {"s3": world["s3"], "ssm": world["ssm"]},
        sleep=lambda s: None,
    )
    assert isinstance(target, FileCacheTarget)
    return target


REQUESTS = ("hsm_restore", "hsm_archive", "hsm_release")


def lfs_args(world: dict[str, Any], subcommand: str) -> list[str]:
    """Every file argument the stand-in lfs received for ``subcommand``: after ``--`` for the
    request commands (which parse options), all of them for hsm_state/hsm_action (which do not)."""
    args: list[str] = []
    for call in recorded_lfs_calls(world["log_dir"]):
        if call[0] == subcommand:
            if subcommand in REQUESTS:
                assert call[1] == "--", call
                args.extend(call[2:])
            else:
                assert "--" not in call, call
                args.extend(call[1:])
    return args


def make_files(root: Path, names: list[str]) -> list[str]:
    paths = []
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode())
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash"])
def test_every_script_is_valid_bash_and_survives_both_outer_shells(tmp_path: Path, shell: str) -> None:
    for script in (
        RESTORE_SCRIPT,
        ARCHIVE_SCRIPT,
        RELEASE_SCRIPT,
        COUNT_SCRIPT,
        STATE_SCRIPT,
        FREE_SCRIPT,
    ):
        assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0
    # The outer line is what SSM runs: the script must reach the inner bash unchanged.
    probe = shlex.join(
        ["bash", "-c", 'printf "%s\\0" "$0" "$@"', "name", "$(touch CANARY)", "a'b", "new\nline"]
    )
    out = subprocess.run([shell, "-c", probe], cwd=tmp_path, capture_output=True, check=True).stdout
    assert out.split(b"\0")[:-1] == [b"name", b"$(touch CANARY)", b"a'b", b"new\nline"]
    assert not (tmp_path / "CANARY").exists()


def test_restore_and_count_get_every_hostile_key_as_one_argument(world: dict[str, Any]) -> None:
    world["ssm"].env["LFS_DEFAULT_MASK"] = "0x0d"  # released exists archived: imported, not loaded
    target = filecache(world)
    keys = [f"in/q/{n}" for n in HOSTILE_NAMES]
    expected = make_files(world["mnt"] / "ns1" / "q", HOSTILE_NAMES)
    handle = target.stage(StagingManifest.from_entries([ManifestEntry(SRC, k, 1) for k in keys]))
    progress = target.stage_progress(handle)  # sends hsm_restore
    assert progress.phase == "restore"
    assert sorted(lfs_args(world, "hsm_restore")) == sorted(expected)
    progress = target.stage_progress(handle)  # counts idle, resident files
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, len(expected), len(expected))
    assert sorted(lfs_args(world, "hsm_action")) == sorted(expected)
    assert sorted(lfs_args(world, "hsm_state")) == sorted(expected)
    assert (
        target.job_paths(StagingManifest.from_entries([ManifestEntry(SRC, k, 1) for k in keys])).files
        == expected
    )
    assert canaries(world) == []
    # The run id (with its own payload) only ever travelled inside quotes.
    assert all("hostile $(touch CANARY) run" in shlex.split(c)[4] for c in world["ssm"].commands)


def test_archive_verify_and_release_of_hostile_output_names(world: dict[str, Any]) -> None:
    target = filecache(world)
    out = world["mnt"] / "ns1" / "out dir"
    expected = make_files(out, [f"sub/{n}" for n in HOSTILE_NAMES] + HOSTILE_NAMES)
    os.symlink("/etc/hostname", out / "link-to-elsewhere")  # never archived, never released

    handle = target.export(["out dir"])
    assert sorted(lfs_args(world, "hsm_archive")) == sorted(expected)
    assert target.export_progress(handle).state == SUCCEEDED

    verified = target.verify_exported(["out dir"])
    assert verified.all_archived and verified.checked == len(expected)
    assert sorted(target.abs_path(r) for r in verified.verified) == sorted(expected)
    # once for the export's progress, once for the verification
    assert sorted(lfs_args(world, "hsm_state")) == sorted(expected * 2)

    target.release(["out dir"])
    assert sorted(lfs_args(world, "hsm_release")) == sorted(expected)
    assert canaries(world) == []


def test_dirty_files_found_by_the_real_state_script_block_release(world: dict[str, Any]) -> None:
    target = filecache(world)
    make_files(world["mnt"] / "ns1" / "res", ["a", "new\nline b"])
    world["ssm"].env["LFS_DEFAULT_MASK"] = "0x0b"  # exists dirty archived
    with pytest.raises(ReleaseRefusedError) as raised:
        target.release(["res", "res/missing"])
    assert sorted(raised.value.unverified) == ["res/a", "res/missing", "res/new\nline b"]
    assert lfs_args(world, "hsm_release") == []


def test_fsx_restore_command_runs_with_hostile_keys(world: dict[str, Any]) -> None:
    """The FSx target's prefetch goes through the same scripts; its FSx calls are not needed here.
    Names with a line break are left out: FSx task paths refuse them, so select refuses such keys."""
    fsx = boto3.client("fsx", region_name="us-east-1")
    target = make_target(
        {
            "type": "fsx",
            "file_system_id": FS_ID,
            "mount_point": str(world["mnt"]),
            "file_system_path": "/fsx-ns",
            "data_repository_path": f"s3://{SRC}/in/",
            "head_node_instance_id": INSTANCE_ID,
            "work_url": WORK_URL,
            "run_id": "r1",
        },
        {"s3": world["s3"], "ssm": world["ssm"], "fsx": fsx},
    )
    assert isinstance(target, FsxLustreTarget)
    expected = make_files(world["mnt"] / "fsx-ns", FSX_NAMES)
    url, count = target.prefetch_list(
        StagingManifest.from_entries([ManifestEntry(SRC, f"in/{n}", 1) for n in FSX_NAMES])
    )
    target.head.restore(url)
    assert count == len(expected)
    assert sorted(lfs_args(world, "hsm_restore")) == sorted(expected)
    counts = target.head.counts(url)
    assert (counts.files, counts.restored, counts.pending) == (len(expected), len(expected), 0)
    assert canaries(world) == []


def test_mount_check_and_free_space_run_for_real(world: dict[str, Any]) -> None:
    head = filecache(world).head
    assert head.free_bytes(str(world["tmp"])) > 0
    evil = world["tmp"] / "$(touch CANARY)"
    evil.mkdir()
    target = MountpointTarget(s3=world["s3"], head=head, mount_path=str(evil), bucket=SRC)
    with pytest.raises(TargetNotReadyError, match="is not a mount point"):
        target.stage(StagingManifest.from_entries([ManifestEntry(SRC, "x", 1)]))
    assert canaries(world) == []
    assert head.mount_info("/proc", "/proc/self/status") == ("proc proc", True)
    assert head.mount_info("/proc", "/proc/no such $(touch CANARY)") == ("proc proc", False)
    # a mount, but not Mountpoint's: refused, naming what the mount table says
    proc = MountpointTarget(s3=world["s3"], head=head, mount_path="/proc", bucket=SRC)
    with pytest.raises(
        TargetNotReadyError,
        match="not a Mountpoint for Amazon S3 mount \\(the mount table shows 'proc proc'\\)",
    ):
        proc.stage(StagingManifest.from_entries([ManifestEntry(SRC, "self/status", 1)]))
    assert canaries(world) == []


# -- the stand-in lfs behaves like the real one, and the scripts live within its limits ------------


def run_lfs(world: dict[str, Any], *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["lfs", *argv], env=world["ssm"].env, capture_output=True, check=False)


def test_the_fake_lfs_takes_dashdash_as_a_file_for_hsm_state_and_hsm_action(world: dict[str, Any]) -> None:
    """lfs.c: hsm_state and hsm_action parse no options (2.12, 2.15): `--` is a path, and missing."""
    f = make_files(world["tmp"] / "d", ["a"])[0]
    for cmd in ("hsm_state", "hsm_action"):
        done = run_lfs(world, cmd, "--", f)
        assert done.returncode == 2
        assert done.stderr.decode() == f"can't get hsm {cmd[4:]} for --: No such file or directory\n"
        assert done.stdout == b""
    assert run_lfs(world, "hsm_state", f).stdout.decode() == f"{f}: (0x00000000), archive_id:1\n"
    assert run_lfs(world, "hsm_action", f).stdout.decode() == f"{f}: NOOP\n"


def test_the_fake_lfs_refuses_a_request_of_53_files_like_the_kernel(world: dict[str, Any]) -> None:
    """llite/dir.c: a request of MDS_MAXREQSIZE/3 bytes or more is E2BIG; 24 + 32 bytes a file."""
    files = make_files(world["tmp"] / "d", [f"f{i}" for i in range(53)])
    for cmd in REQUESTS:
        done = run_lfs(world, cmd, "--", *files)
        assert (done.returncode, done.stderr.decode()) == (
            7,
            f"Cannot send HSM request (use of {files[0]}): Argument list too long\n",
        )
    assert run_lfs(world, "hsm_archive", "--", *files[:52]).returncode == 0
    assert run_lfs(world, "hsm_release", "--", *files[:52]).returncode == 0
    assert (
        run_lfs(world, "hsm_state", files[0])
        .stdout.decode()
        .endswith(") released exists archived, archive_id:1\n")
    )


def test_requests_go_in_calls_of_at_most_50_files_and_probes_in_batches(world: dict[str, Any]) -> None:
    world["ssm"].env["LFS_DEFAULT_MASK"] = "0x0d"
    target = filecache(world)
    names = [f"in/many/f{i:04d}" for i in range(1200)]
    expected = make_files(world["mnt"] / "ns1" / "many", [n.removeprefix("in/many/") for n in names])
    handle = target.stage(StagingManifest.from_entries([ManifestEntry(SRC, k, 1) for k in names]))
    target.stage_progress(handle)
    progress = target.stage_progress(handle)
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, 1200, 1200)
    calls = recorded_lfs_calls(world["log_dir"])
    restores = [c for c in calls if c[0] == "hsm_restore"]
    assert max(len(c) - 2 for c in restores) == 50 and len(restores) == 24
    assert sorted(a for c in restores for a in c[2:]) == expected
    # hsm_action and hsm_state in calls of up to 512 files each, not a process per file
    probes = [c for c in calls if c[0] in ("hsm_action", "hsm_state")]
    assert len(probes) == 2 * 3
    assert sorted(a for c in probes if c[0] == "hsm_state" for a in c[1:]) == expected


def test_a_restore_that_ends_with_the_file_still_released_fails_the_stage(world: dict[str, Any]) -> None:
    world["ssm"].env.update(LFS_DEFAULT_MASK="0x0d", LFS_FAIL="restore", LFS_ACTION_POLLS="1")
    target = filecache(world)
    make_files(world["mnt"] / "ns1" / "q", ["a", "b"])
    handle = target.stage(StagingManifest.from_entries([ManifestEntry(SRC, f"in/q/{n}", 1) for n in "ab"]))
    target.stage_progress(handle)  # hsm_restore: both queued
    progress = target.stage_progress(handle)  # RESTORE STARTED for both
    assert (progress.state, progress.done, progress.total) == (RUNNING, 0, 2)
    progress = target.stage_progress(handle)  # NOOP, but still released
    assert (progress.state, progress.failed) == (FAILED, 2)
    assert progress.message == (
        "the restore of 2 of 2 file(s) failed: no HSM action is pending but lfs hsm_state still shows them released"
    )


def test_a_file_lfs_cannot_read_is_reported_alone_and_the_rest_of_its_batch_still_verifies(
    world: dict[str, Any],
) -> None:
    target = filecache(world)
    make_files(world["mnt"] / "ns1" / "res", ["a", "bad one", "c", "new\nline bad"])
    world["ssm"].env["LFS_DEFAULT_MASK"] = "0x09"
    world["ssm"].env["LFS_UNREADABLE"] = "bad"
    result = target.verify_exported(["res"])
    assert sorted(result.verified) == ["res/a", "res/c"]
    assert sorted(result.missing) == ["res/bad one", "res/new\nline bad"]
    root = world["mnt"] / "ns1" / "res"
    assert result.reasons["res/bad one"] == f"ERROR can't get hsm state for {root}/bad one: No data available"
    counts = target.head.counts(target.head.put_paths("count", [str(root)])[0])
    assert (counts.files, counts.errors, counts.idle_exported) == (4, 2, 2)
