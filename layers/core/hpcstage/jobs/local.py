"""LocalSlurm: jobs on the Slurm of this machine (scripts/slurm-local.sh, or a real cluster's
login node), through sbatch/squeue/scontrol/scancel run as argv lists, never through a shell."""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Callable, Sequence

from .base import JobSpec, JobStatus, SlurmCommandError, check_job_id
from .script import build_script
from .slurmcli import (
    INVALID_JOB_ID,
    active_status,
    finished_status,
    parse_sbatch_output,
    sacct_argv,
    sbatch_argv,
    scancel_argv,
    scontrol_argv,
    squeue_argv,
)

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class LocalSlurm:
    def __init__(self, *, command_timeout_s: float = 30.0, run: Runner = subprocess.run) -> None:
        self._timeout_s = command_timeout_s
        self._run_process = run
        self._names: dict[str, str] = {}

    def submit(self, spec: JobSpec) -> str:
        argv = sbatch_argv()
        if spec.user and spec.user != getpass.getuser():
            # runuser (root only) switches user without a shell; `--` ends its options.
            argv = ["runuser", "-u", spec.user, "--", *argv]
        done = self._run(argv, stdin=build_script(spec))
        if done.returncode != 0:
            raise SlurmCommandError(f"sbatch failed (exit {done.returncode}): {done.stderr.strip()[:500]}")
        job_id = parse_sbatch_output(done.stdout)
        self._names[job_id] = spec.name
        return job_id

    def status(self, job_id: str, *, name: str | None = None) -> JobStatus:
        name = name if name is not None else self._names.get(check_job_id(job_id))
        queued = self._run(squeue_argv(job_id))
        if queued.returncode != 0 and INVALID_JOB_ID not in queued.stderr:
            raise SlurmCommandError(
                f"squeue failed (exit {queued.returncode}): {queued.stderr.strip()[:500]}"
            )
        active = active_status(queued.stdout, job_id, name)
        if active is not None:
            return active
        shown = self._run(scontrol_argv(job_id))
        errors = queued.stderr + shown.stderr
        accounted = None
        if not shown.stdout.strip() and INVALID_JOB_ID in errors:
            # Past MinJobAge the controller has forgotten the job; accounting (slurmdbd) has not.
            done = self._run(sacct_argv(job_id))
            accounted, errors = done.stdout if done.returncode == 0 else "", errors + done.stderr
        return finished_status(shown.stdout, job_id, name, errors=errors, sacct_out=accounted)

    def cancel(self, job_id: str, *, name: str | None = None) -> None:
        name = name if name is not None else self._names.get(check_job_id(job_id))
        done = self._run(scancel_argv(job_id, name))
        if done.returncode != 0:
            raise SlurmCommandError(
                f"scancel {job_id} failed (exit {done.returncode}): {done.stderr.strip()[:500]}"
            )

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return self._run_process(
                list(argv),
                input=stdin,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="surrogateescape",
                timeout=self._timeout_s,
                check=False,
            )
        except FileNotFoundError as err:
            raise SlurmCommandError(f"{argv[0]} not found: is the Slurm client installed?") from err
        except subprocess.TimeoutExpired as err:
            raise SlurmCommandError(f"{argv[0]} did not answer within {self._timeout_s:g}s") from err
