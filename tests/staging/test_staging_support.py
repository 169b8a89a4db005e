"""Shared helpers for the staging tests (this module holds no tests of its own).

- an inventory written with the project's own Parquet writer (``PartWriter`` + ``write_manifest``);
- SSM and FSx expectations for botocore's Stubber (every request checked against the service model);
- stand-in ``lfs`` (tests/fakes.py) and ``aws`` programs so the head-node scripts can run here for real.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.stub import ANY, Stubber
from fakes import install_fake_lfs
from hpcstage.inventory.output import LocalStore, PartWriter, write_manifest
from hpcstage.ssm import output_key

INSTANCE_ID = "i-0123456789abcdef0"
FS_ID = "fs-0123456789abcdef0"
WORK_BUCKET = "work-bucket"
WORK_URL = f"s3://{WORK_BUCKET}/staging"
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)


def inventory_objects(n: int = 1000) -> list[dict[str, Any]]:
    """Deterministic ListObjectsV2-style rows: key i lives under raw/, proc/ or logs/ (i % 3), ends in
    .nc/.csv/.txt/.nc (i % 4), is i*10 bytes, was modified BASE_TIME + i hours, and cycles classes."""
    prefixes = ("raw/", "proc/", "logs/")
    exts = ("nc", "csv", "txt", "nc")
    classes = ("STANDARD", "STANDARD_IA", "GLACIER", "DEEP_ARCHIVE", "GLACIER_IR")
    return [
        {
            "Key": f"{prefixes[i % 3]}{i:04d}.{exts[i % 4]}",
            "Size": i * 10,
            "LastModified": BASE_TIME + timedelta(hours=i),
            "ETag": f'"{i:032x}"',
            "StorageClass": classes[i % 5],
        }
        for i in range(n)
    ]


def write_inventory(root: Path, bucket: str, objects: Sequence[dict[str, Any]], part_rows: int = 300) -> Path:
    """An inventory directory (data/*.parquet + manifest.json) as the inventory pipeline writes it,
    split into several parts and row groups so that reading must go part by part, batch by batch."""
    store = LocalStore(root)
    writer = PartWriter(store, bucket, "r00001", row_group_rows=100, part_rows=part_rows)
    for i in range(0, len(objects), 50):
        writer.add_page(objects[i : i + 50])
    parts = writer.close()
    write_manifest(store, bucket, parts, destination_arn=f"arn:aws:s3:::{bucket}-inventory", created_ms=0)
    return root


# -- SSM ---------------------------------------------------------------------------------------


def command_id() -> str:
    return str(uuid.uuid4())  # 36 characters, as the API requires


def expect_command(
    stubber: Stubber,
    *,
    commands: list[str] | Any = ANY,
    stdout: str = "",
    stderr: str = "",
    status: str = "Success",
    exit_code: int = 0,
    cid: str | None = None,
) -> str:
    """Queue one SendCommand and its GetCommandInvocation (finished at the first poll)."""
    cid = cid or command_id()
    stubber.add_response(
        "send_command",
        {"Command": {"CommandId": cid}},
        {
            "InstanceIds": [INSTANCE_ID],
            "DocumentName": "AWS-RunShellScript",
            "Parameters": {"commands": commands, "executionTimeout": ANY},
            "TimeoutSeconds": ANY,
            "OutputS3BucketName": WORK_BUCKET,
            "OutputS3KeyPrefix": ANY,
        },
    )
    stubber.add_response(
        "get_command_invocation",
        {
            "CommandId": cid,
            "InstanceId": INSTANCE_ID,
            "Status": status,
            "ResponseCode": exit_code,
            "StandardOutputContent": stdout,
            "StandardErrorContent": stderr,
        },
        {"CommandId": cid, "InstanceId": INSTANCE_ID},
    )
    return cid


def ssm_output_key(run_id: str, cid: str, stream: str = "stdout") -> str:
    """Where HeadNode asks SSM to put a command's full output."""
    return output_key(f"staging/{run_id}/ssm-output", cid, INSTANCE_ID, stream)


def capture_commands(ssm: Any) -> list[str]:
    """Record the commands of every SendCommand the client makes (the Stubber still checks them)."""
    sent: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.extend(params["Parameters"]["commands"])

    ssm.meta.events.register("provide-client-params.ssm.SendCommand", record)
    return sent


# -- stand-in programs for running head-node scripts here ----------------------------------------

AWS_STUB = r"""#!/bin/bash
# aws s3 cp [--only-show-errors] s3://BUCKET/KEY DEST, served from the directory $FAKE_S3.
args=()
for a in "$@"; do [ "$a" = "--only-show-errors" ] || args+=("$a"); done
[ "${args[0]}" = s3 ] && [ "${args[1]}" = cp ] || { echo "aws stub: unsupported: $*" >&2; exit 2; }
src=${args[2]#s3://}
cp -- "$FAKE_S3/$src" "${args[3]}"
"""


def install_stubs(bin_dir: Path) -> None:
    """The stand-in ``lfs`` of tests/fakes.py and an ``aws`` that serves ``s3 cp`` from a directory."""
    install_fake_lfs(bin_dir)
    path = bin_dir / "aws"
    path.write_text(AWS_STUB)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def recorded_lfs_calls(log_dir: Path) -> list[list[str]]:
    calls = []
    for f in sorted(log_dir.iterdir()):
        raw = f.read_bytes()
        calls.append([a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]])
    return calls


def stub_env(bin_dir: Path, fake_s3: Path, log_dir: Path, **extra: str) -> dict[str, str]:
    state_dir = log_dir.parent / "lfs-state"
    state_dir.mkdir(exist_ok=True)
    return {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "FAKE_S3": str(fake_s3),
        "LFS_LOG_DIR": str(log_dir),
        "LFS_STATE_DIR": str(state_dir),
        "HOME": str(log_dir),
        "LANG": "C.UTF-8",
        **extra,
    }


class LocalShellSsm:
    """An SSM stand-in that runs each command here with /bin/sh (as the SSM agent runs
    AWS-RunShellScript), with stand-in ``lfs`` and ``aws`` on PATH.

    Requests are checked against the real SSM service model, as Stubber would. Before each command
    the work bucket (moto) is mirrored into $FAKE_S3 so the script's ``aws s3 cp`` finds its list.
    """

    def __init__(
        self, s3: Any, fake_s3: Path, env: dict[str, str], cwd: Path, shell: str = "/bin/sh"
    ) -> None:
        import botocore.session

        self._model = botocore.session.get_session().get_service_model("ssm")
        self.s3 = s3
        self.fake_s3 = fake_s3
        self.env = env
        self.cwd = cwd
        self.shell = shell
        self.commands: list[str] = []
        self._results: dict[str, dict[str, Any]] = {}

    def _validate(self, operation: str, params: dict[str, Any]) -> None:
        from botocore.validate import validate_parameters

        validate_parameters(params, self._model.operation_model(operation).input_shape)

    def _mirror_work_bucket(self) -> None:
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=WORK_BUCKET):
            for obj in page.get("Contents", []):
                path = self.fake_s3 / WORK_BUCKET / obj["Key"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self.s3.get_object(Bucket=WORK_BUCKET, Key=obj["Key"])["Body"].read())

    def send_command(self, **params: Any) -> dict[str, Any]:
        import subprocess

        self._validate("SendCommand", params)
        self._mirror_work_bucket()
        script = "\n".join(params["Parameters"]["commands"])
        self.commands.append(script)
        done = subprocess.run(
            [self.shell, "-c", script],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            timeout=120,
            check=False,
        )
        cid = command_id()
        self._results[cid] = {
            "CommandId": cid,
            "InstanceId": params["InstanceIds"][0],
            "Status": "Success" if done.returncode == 0 else "Failed",
            "ResponseCode": done.returncode,
            "StandardOutputContent": done.stdout.decode("utf-8", "replace"),
            "StandardErrorContent": done.stderr.decode("utf-8", "replace"),
        }
        return {"Command": {"CommandId": cid}}

    def get_command_invocation(self, **params: Any) -> dict[str, Any]:
        self._validate("GetCommandInvocation", params)
        return self._results[params["CommandId"]]


def counts_stdout(
    files: int,
    *,
    pending: int = 0,
    released: int = 0,
    not_exported: int = 0,
    unreadable: int = 0,
    errors: int = 0,
) -> str:
    """What hsm.COUNT_SCRIPT prints: of the idle files, those not released are resident and those
    not 'not exported' are exported."""
    idle = files - pending - unreadable - errors
    return (
        f"HSM_FILES {files}\nHSM_PENDING {pending}\nHSM_IDLE_RESIDENT {idle - released}\n"
        f"HSM_IDLE_RELEASED {released}\nHSM_IDLE_EXPORTED {idle - not_exported}\n"
        f"HSM_IDLE_NOT_EXPORTED {not_exported}\nHSM_UNREADABLE {unreadable}\nHSM_ERRORS {errors}\n"
    )
