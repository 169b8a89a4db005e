"""ParallelClusterSSM: Slurm jobs on an AWS ParallelCluster head node, through SSM Run Command.

The ParallelCluster API has no job operations, so the Slurm CLI runs on the head node. SSM runs
commands as root; each one is wrapped in `runuser -l USER -c ...` (as aws-parallelcluster-ui does)
so jobs belong to the cluster user. Every command line is assembled from `hpcstage.shell` quoted
pieces: the only unquoted text is our own `|` and `;`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..shell import as_user, check_user_name, command
from ..ssm import CommandResult, run_command
from .base import JobSpec, JobStatus, SlurmCommandError, check_job_id
from .script import build_script
from .slurmcli import (
    active_status,
    final_status,
    parse_sbatch_output,
    sbatch_argv,
    scancel_argv,
    scontrol_argv,
    squeue_argv,
)

# Printed between the squeue and scontrol outputs of one status command. squeue lines start with a
# state word, so no squeue line can equal it, whatever the job name.
STATUS_SEPARATOR = "@@hpcstage:scontrol@@"


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
        # The script travels as one quoted printf argument (printf is a shell builtin, so no
        # argv length limit applies); no heredoc, whose end marker a script could contain.
        shell_text = f"{command(['printf', '%s', build_script(spec)])} | {command(sbatch_argv())}"
        result = self._run(user, shell_text, "hpcstage sbatch")
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
        shell_text = " ; ".join(
            [
                command(squeue_argv(job_id)),
                command(["printf", "%s\\n", STATUS_SEPARATOR]),
                command(scontrol_argv(job_id)),
            ]
        )
        # scontrol's exit code is the command's: non-zero for an unknown job, which final_status reports.
        result = self._run(user, shell_text, f"hpcstage status {job_id}")
        squeue_out, _, scontrol_out = result.stdout.partition(f"{STATUS_SEPARATOR}\n")
        active = active_status(squeue_out, job_id, name)
        if active is not None:
            return active
        return final_status(scontrol_out, job_id, name, errors=result.stderr)

    def cancel(self, job_id: str, *, name: str | None = None) -> None:
        name, user = self._name_and_user(job_id, name)
        result = self._run(user, command(scancel_argv(job_id, name)), f"hpcstage scancel {job_id}")
        if not result.succeeded:
            raise SlurmCommandError(
                f"scancel {job_id} failed on {self._head_node_id} (exit {result.exit_code}): "
                f"{result.stderr.strip()[:500]}"
            )

    def _name_and_user(self, job_id: str, name: str | None) -> tuple[str | None, str]:
        known_name, user = self._submitted.get(check_job_id(job_id), (None, self._user))
        return (name if name is not None else known_name), user

    def _run(self, user: str, shell_text: str, comment: str) -> CommandResult:
        return run_command(
            self._ssm,
            self._head_node_id,
            [as_user(user, shell_text)],
            comment=comment,
            **self._run_options,
        )
