"""ParallelClusterSSM: Slurm jobs on an AWS ParallelCluster head node, through SSM Run Command.

The ParallelCluster API has no job operations, so the Slurm CLI runs on the head node. SSM runs
commands as root; each one is wrapped in `runuser -l USER -c ...` (as aws-parallelcluster-ui does)
so jobs belong to the cluster user. Every command line is assembled from `hpcstage.shell` quoted
pieces: the only unquoted text is our own `|`, `;`, `||`, `<` and the fixed lines around them.

The job script travels through S3 (the work bucket) and reaches sbatch on stdin: inside
`runuser -c TEXT` the whole TEXT is one argument, which Linux caps at 128 KiB (MAX_ARG_STRLEN).
The head node is an instance id, or found by the tags ParallelCluster puts on it
(`parallelcluster:cluster-name`, `parallelcluster:node-type=HeadNode`); the cluster user then
follows from its OS (`parallelcluster:attributes` starts with it).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from ..shell import as_user, check_user_name, command, quote
from ..ssm import CommandResult, run_command
from .base import JobError, JobSpec, JobStatus, SlurmCommandError, check_job_id
from .script import build_script
from .slurmcli import (
    active_status,
    finished_status,
    parse_sbatch_output,
    sacct_argv,
    sbatch_argv,
    scancel_argv,
    scontrol_argv,
    squeue_argv,
)

# Printed between the squeue and scontrol outputs of one status command, and before sacct's when
# scontrol no longer knows the job. squeue and scontrol lines start with a state word or
# "JobId=", so no line of theirs can equal either, whatever the job name.
STATUS_SEPARATOR = "@@hpcstage:scontrol@@"
SACCT_SEPARATOR = "@@hpcstage:sacct@@"
# Without an S3 location for scripts, a script still goes inline if it is this small (the whole
# runuser -c argument must stay below Linux's 128 KiB per argument, with room for quoting).
MAX_INLINE_SCRIPT_BYTES = 32 * 1024
# The default user of each ParallelCluster base OS (aws-parallelcluster-cookbook,
# cookbooks/aws-parallelcluster-shared/attributes/users_*.rb).
CLUSTER_USERS = {
    "alinux2": "ec2-user",
    "alinux2023": "ec2-user",
    "rhel8": "ec2-user",
    "rhel9": "ec2-user",
    "rocky8": "rocky",
    "rocky9": "rocky",
    "ubuntu2004": "ubuntu",
    "ubuntu2204": "ubuntu",
    "ubuntu2404": "ubuntu",
    "centos7": "centos",
}


class HeadNodeNotFoundError(JobError):
    """No running head node carries the cluster's ParallelCluster tags (or more than one does)."""


def find_head_node(ec2: Any, cluster_name: str) -> tuple[str, str | None]:
    """(instance id, default cluster user or None) of the running head node of ``cluster_name``."""
    found: list[dict[str, Any]] = []
    for page in ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": "tag:parallelcluster:cluster-name", "Values": [cluster_name]},
            {"Name": "tag:parallelcluster:node-type", "Values": ["HeadNode"]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ]
    ):
        for reservation in page.get("Reservations", []):
            found.extend(reservation.get("Instances", []))
    if len(found) != 1:
        raise HeadNodeNotFoundError(
            f"{len(found)} running instances are tagged parallelcluster:cluster-name={cluster_name} and "
            "parallelcluster:node-type=HeadNode; expected exactly one (is the cluster name right, and the cluster up?)"
        )
    tags = {t.get("Key"): t.get("Value", "") for t in found[0].get("Tags", [])}
    base_os = tags.get("parallelcluster:attributes", "").split(",")[0].strip()
    return str(found[0]["InstanceId"]), CLUSTER_USERS.get(base_os)


class ParallelClusterSSM:
    def __init__(
        self,
        ssm: Any,
        head_node_id: str,
        *,
        user: str,
        command_timeout_s: int = 120,
        max_wait_s: float = 300.0,
        poll_interval_s: float = 2.0,
        output_s3_bucket: str | None = None,
        output_s3_prefix: str | None = None,
        s3: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._ssm = ssm
        self._head_node_id = head_node_id
        self._user = check_user_name(user)
        self._run_options: dict[str, Any] = {
            "timeout_s": command_timeout_s,
            "max_wait_s": max_wait_s,
            "poll_interval_s": poll_interval_s,
            "output_s3_bucket": output_s3_bucket,
            "output_s3_prefix": output_s3_prefix,
            "s3": s3,
            "sleep": sleep,
        }
        self._submitted: dict[str, tuple[str, str]] = {}  # job id -> (name, user)

    def submit(self, spec: JobSpec) -> str:
        user = spec.user or self._user
        script = build_script(spec)
        result = (
            self._submit_through_s3(user, script)
            if self._can_stage_scripts()
            else self._submit_inline(user, script)
        )
        if not result.succeeded:
            raise SlurmCommandError(
                f"sbatch failed on {self._head_node_id} (exit {result.exit_code}): "
                f"{result.stderr.strip()[:500]}"
            )
        job_id = parse_sbatch_output(result.stdout)
        self._submitted[job_id] = (spec.name, user)
        return job_id

    def status(self, job_id: str, *, name: str | None = None) -> JobStatus:
        name, user = self._name_and_user(job_id, name)
        mark_sacct = command(["printf", "%s\\n", SACCT_SEPARATOR])
        shell_text = " ; ".join(
            [
                command(squeue_argv(job_id)),
                command(["printf", "%s\\n", STATUS_SEPARATOR]),
                # sacct only when scontrol no longer knows the job (ended more than MinJobAge ago)
                f"{command(scontrol_argv(job_id))} || {{ {mark_sacct} ; {command(sacct_argv(job_id))} ; }}",
            ]
        )
        result = self._run(user, shell_text, f"hpcstage status {job_id}")
        squeue_out, _, rest = result.stdout.partition(f"{STATUS_SEPARATOR}\n")
        active = active_status(squeue_out, job_id, name)
        if active is not None:
            return active
        scontrol_out, asked_sacct, sacct_out = rest.partition(f"{SACCT_SEPARATOR}\n")
        return finished_status(
            scontrol_out, job_id, name, errors=result.stderr, sacct_out=sacct_out if asked_sacct else None
        )

    def cancel(self, job_id: str, *, name: str | None = None) -> None:
        name, user = self._name_and_user(job_id, name)
        result = self._run(user, command(scancel_argv(job_id, name)), f"hpcstage scancel {job_id}")
        if not result.succeeded:
            raise SlurmCommandError(
                f"scancel {job_id} failed on {self._head_node_id} (exit {result.exit_code}): "
                f"{result.stderr.strip()[:500]}"
            )

    def _can_stage_scripts(self) -> bool:
        options = self._run_options
        return options["s3"] is not None and options["output_s3_bucket"] is not None

    def _submit_through_s3(self, user: str, script: str) -> CommandResult:
        """Upload the script (named by its content), then on the head node: fetch it as root into a
        private temporary file and hand it to sbatch on stdin."""
        body = script.encode("utf-8")
        prefix = (self._run_options["output_s3_prefix"] or "").strip("/")
        key = "/".join(p for p in (prefix, "scripts", hashlib.sha256(body).hexdigest() + ".sh") if p)
        bucket = self._run_options["output_s3_bucket"]
        self._run_options["s3"].put_object(Bucket=bucket, Key=key, Body=body)
        url = f"s3://{bucket}/{key}"
        shell_text = "\n".join(
            [
                "f=$(mktemp) || exit 1",
                "trap 'rm -f -- \"$f\"' EXIT",
                f'aws s3 cp --only-show-errors {quote(url)} "$f" || exit 1',
                f'{as_user(user, command(sbatch_argv()))} < "$f"',
            ]
        )
        return self._run_root(shell_text, "hpcstage sbatch")

    def _submit_inline(self, user: str, script: str) -> CommandResult:
        if len(script.encode("utf-8")) > MAX_INLINE_SCRIPT_BYTES:
            raise SlurmCommandError(
                f"the job script is {len(script.encode('utf-8')) // 1024} KiB: scripts over "
                f"{MAX_INLINE_SCRIPT_BYTES // 1024} KiB go through S3; give this backend an S3 bucket (output_s3_bucket)"
            )
        # One quoted printf argument (printf is a shell builtin); no heredoc, whose end marker a
        # script could contain.
        shell_text = f"{command(['printf', '%s', script])} | {command(sbatch_argv())}"
        return self._run(user, shell_text, "hpcstage sbatch")

    def _name_and_user(self, job_id: str, name: str | None) -> tuple[str | None, str]:
        known_name, user = self._submitted.get(check_job_id(job_id), (None, self._user))
        return (name if name is not None else known_name), user

    def _run(self, user: str, shell_text: str, comment: str) -> CommandResult:
        return self._run_root(as_user(user, shell_text), comment)

    def _run_root(self, shell_text: str, comment: str) -> CommandResult:
        return run_command(self._ssm, self._head_node_id, [shell_text], comment=comment, **self._run_options)
