"""The job script of a Mountpoint target, run for real with bash: its prologue checks the mount on
the node that runs it (fstype and source from findmnt, and the first staged file showing through),
and its epilogue records every output file (size, path) for verification, keeping the job's status."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
from hpcstage.jobs import build_script
from hpcstage.staging.config import EPILOGUE_RECORD_EXIT, PROLOGUE_MOUNT_EXIT, validate_staging_input
from hpcstage.staging.steps import build_job_spec, declared_outputs
from moto import mock_aws

BUCKET = "mounted"
HEAD = "i-0123456789abcdef0"

STAND_INS = {
    # findmnt -rn -o FSTYPE,SOURCE --mountpoint PATH: answers $FINDMNT_SAYS for $MOUNTED only
    "findmnt": '[ "$5" = "$MOUNTED" ] && [ -n "$FINDMNT_SAYS" ] && echo "$FINDMNT_SAYS"\n',
    # aws s3 cp --only-show-errors SRC DST, with s3:// served from $FAKE_S3
    "aws": '[ "$1 $2 $3" = "s3 cp --only-show-errors" ] || exit 2\n'
    '[ -z "$AWS_FAILS" ] || exit 1\n'
    'case $4 in s3://*) cp -- "$FAKE_S3/${4#s3://}" "$5" ;;\n'
    '  *) mkdir -p "$(dirname "$FAKE_S3/${5#s3://}")" && cp -- "$4" "$FAKE_S3/${5#s3://}" ;; esac\n',
}


def job_script(tmp_path: Path, command: str) -> tuple[str, str]:
    mount = tmp_path / "mnt"
    (mount / "in").mkdir(parents=True)
    (mount / "in" / "first.dat").write_text("x")
    event = {
        "inventory": "s3://results/inventory/mounted/run-1",
        "selection": {"prefixes": ["in/"]},
        "target": {
            "type": "mountpoint",
            "mount_path": str(mount),
            "bucket": BUCKET,
            "head_node_instance_id": HEAD,
        },
        "job": {"backend": "ssm", "command": command, "workdir": str(tmp_path / "work")},
        "output": f"s3://{BUCKET}/out/{{run_id}}/",
    }
    cfg = validate_staging_input(event, run_id="r1", work_bucket="results")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="results")
        selection = {"job_root": str(mount), "output_dir": str(mount / "out" / "r1")}
        s3.put_object(Bucket="results", Key="staging/r1/selection.json", Body=json.dumps(selection).encode())
        spec = build_job_spec(s3, cfg, fetch_lists=True)
    (tmp_path / "work").mkdir()
    return build_script(spec), str(mount)


def run(tmp_path: Path, script: str, mount: str, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir, fake_s3 = tmp_path / "bin", tmp_path / "fake-s3"
    bin_dir.mkdir(exist_ok=True)
    for name, body in STAND_INS.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    lists = fake_s3 / "results" / "staging" / "r1"
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "files.txt").write_text(f"{mount}/in/first.dat\n")
    (lists / "files.nul").write_text(f"{mount}/in/first.dat\0")
    environment: dict[str, Any] = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "FAKE_S3": str(fake_s3),
        "MOUNTED": mount,
        "FINDMNT_SAYS": "fuse mountpoint-s3",
        **env,
    }
    return subprocess.run(["bash", "-c", script], env=environment, capture_output=True, text=True, timeout=60)


def test_the_epilogue_records_every_output_and_keeps_the_jobs_status(tmp_path: Path) -> None:
    command = 'printf 12345 > "$HPCSTAGE_OUTPUT_DIR/a.csv"\nmkdir "$HPCSTAGE_OUTPUT_DIR/s"\n' + (
        "printf xy > \"$HPCSTAGE_OUTPUT_DIR\"'/s/new\nline $(x).txt'\nexit 3"
    )
    script, mount = job_script(tmp_path, command)
    done = run(tmp_path, script, mount)
    assert done.returncode == 3, done.stderr
    record = (tmp_path / "fake-s3" / "results" / "staging" / "r1" / "declared-outputs.nul").read_bytes()
    assert sorted(declared_outputs(record)) == [("a.csv", 5), ("s/new\nline $(x).txt", 2)]


@pytest.mark.parametrize(
    ("findmnt_says", "message"),
    [
        ("fuse.s3fs s3fs", "is not a Mountpoint for Amazon S3 mount"),
        ("", "is not a Mountpoint for Amazon S3 mount"),
    ],
)
def test_the_prologue_refuses_a_node_without_the_mount(
    tmp_path: Path, findmnt_says: str, message: str
) -> None:
    script, mount = job_script(tmp_path, 'touch "$HPCSTAGE_OUTPUT_DIR/ran"')
    done = run(tmp_path, script, mount, FINDMNT_SAYS=findmnt_says)
    assert done.returncode == PROLOGUE_MOUNT_EXIT
    assert message in done.stderr
    assert not (Path(mount) / "out" / "r1" / "ran").exists()


def test_the_prologue_refuses_a_mount_where_the_staged_files_do_not_show(tmp_path: Path) -> None:
    script, mount = job_script(tmp_path, "true")
    (Path(mount) / "in" / "first.dat").unlink()  # another bucket or prefix is mounted
    done = run(tmp_path, script, mount)
    assert done.returncode == PROLOGUE_MOUNT_EXIT
    assert f"{mount}/in/first.dat does not show through the mount" in done.stderr


def test_a_successful_job_whose_outputs_cannot_be_recorded_fails(tmp_path: Path) -> None:
    script, mount = job_script(tmp_path, "true")
    bin_dir = tmp_path / "bin"
    done = run(tmp_path, script, mount)
    assert done.returncode == 0, done.stderr
    # the record upload fails (here: aws fails for every call after the lists are fetched)
    (bin_dir / "aws").write_text(
        '#!/bin/sh\ncase $4 in s3://*) cp -- "$FAKE_S3/${4#s3://}" "$5" ;; *) exit 1 ;; esac\n'
    )
    done = run_keep_stand_ins(tmp_path, script, mount)
    assert done.returncode == EPILOGUE_RECORD_EXIT


def run_keep_stand_ins(tmp_path: Path, script: str, mount: str) -> subprocess.CompletedProcess[str]:
    environment = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "FAKE_S3": str(tmp_path / "fake-s3"),
        "MOUNTED": mount,
        "FINDMNT_SAYS": "fuse mountpoint-s3",
    }
    return subprocess.run(["bash", "-c", script], env=environment, capture_output=True, text=True, timeout=60)
