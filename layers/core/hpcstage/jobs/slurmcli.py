"""Slurm command lines (as argv lists) and the parsing of their output, shared by the backends
that run the Slurm CLI: LocalSlurm runs them directly, ParallelClusterSSM on the head node.

Finished jobs: `squeue -h -j ID` lists a job only while it is pending, running or completing;
once it is gone, `scontrol -o show job ID` still reports JobState and ExitCode=code:signal for
MinJobAge seconds (300 on ParallelCluster, whose slurm.conf sets MinJobAge=300; 3600 in
scripts/slurm-local.sh). After that only accounting knows the job: `sacct -j ID` (its start time
then defaults to the epoch), which needs slurmdbd (ParallelCluster's Scheduling/SlurmSettings/Database).
"""

from __future__ import annotations

import re

from .base import TERMINAL_STATES, JobLookupError, JobState, JobStatus, SlurmCommandError, check_job_id

INVALID_JOB_ID = "Invalid job id specified"
# State, reason, name. Name last: it is the only field that may hold the separator.
SQUEUE_FORMAT = "%T|%r|%j"

_STATE_MAP = {
    "PENDING": JobState.PENDING,
    "CONFIGURING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "DEADLINE": JobState.FAILED,
    "PREEMPTED": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "REVOKED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
}

_JOB_STATE_RE = re.compile(r"(?:^| )JobState=(\S+)")
_REASON_RE = re.compile(r"(?:^| )Reason=(\S+)")
_EXIT_CODE_RE = re.compile(r"(?:^| )ExitCode=(\d+):(\d+)")


def map_state(slurm_state: str) -> JobState:
    # sacct adds words ("CANCELLED by 0"), squeue may add flags ("RUNNING+"): keep the state word.
    word = re.split(r"[\s+]", slurm_state.strip(), maxsplit=1)[0].upper()
    return _STATE_MAP.get(word, JobState.UNKNOWN)


def sbatch_argv() -> list[str]:
    # The script comes on stdin; its #SBATCH lines carry the options.
    return ["sbatch", "--parsable"]


def squeue_argv(job_id: str) -> list[str]:
    return ["squeue", "-h", "-j", check_job_id(job_id), "-o", SQUEUE_FORMAT]


def scontrol_argv(job_id: str) -> list[str]:
    return ["scontrol", "-o", "show", "job", check_job_id(job_id)]


def sacct_argv(job_id: str) -> list[str]:
    # -X: the allocation only, not its steps; -P: '|'-separated; the name last, as it may hold '|'.
    return ["sacct", "-n", "-P", "-X", "-j", check_job_id(job_id), "-o", "State,ExitCode,JobName"]


def scancel_argv(job_id: str, name: str | None) -> list[str]:
    # With --name, scancel leaves the job alone if the id now belongs to a job of another name.
    name_filter = [f"--name={name}"] if name else []
    return ["scancel", *name_filter, check_job_id(job_id)]


def parse_sbatch_output(stdout: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;CLUSTER` as its last line; anything before it comes
    from elsewhere (a login shell's profile scripts under `runuser -l`, for one)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    job_id = lines[-1].split(";", 1)[0] if lines else ""
    try:
        return check_job_id(job_id)
    except ValueError:
        raise SlurmCommandError(f"sbatch printed no job id: {stdout.strip()[:200]!r}") from None


def active_status(squeue_out: str, job_id: str, name: str | None) -> JobStatus | None:
    """The status from squeue while the job is queued or running; None once squeue no longer lists it."""
    line = next((ln for ln in squeue_out.splitlines() if ln.strip()), None)
    if line is None:
        return None
    slurm_state, _, rest = line.partition("|")
    reason, _, listed_name = rest.partition("|")
    if name is not None and listed_name != name:
        raise JobLookupError(f"job {job_id} is now {listed_name!r}, not {name!r}: the id was reused")
    state = map_state(slurm_state)
    if state in (JobState.PENDING, JobState.RUNNING):
        return JobStatus(state, reason="" if reason == "None" else reason)
    return None


def accounted_status(sacct_out: str, job_id: str, name: str | None) -> JobStatus | None:
    """The status from `sacct_argv` output; None when accounting has no record of the job."""
    line = next((ln for ln in sacct_out.splitlines() if ln.strip()), None)
    if line is None:
        return None
    slurm_state, _, rest = line.partition("|")
    exit_field, _, listed_name = rest.partition("|")
    if name is not None and listed_name != name:
        raise JobLookupError(f"job {job_id} is now {listed_name!r}, not {name!r}: the id was reused")
    state = map_state(slurm_state)
    code, _, sig = exit_field.partition(":")
    exit_code = int(code) if code.isdigit() and state in TERMINAL_STATES else None
    signal = int(sig) if sig.isdigit() and int(sig) else None
    return JobStatus(state, exit_code, signal)


def finished_status(
    scontrol_out: str, job_id: str, name: str | None, errors: str = "", sacct_out: str | None = None
) -> JobStatus:
    """scontrol's answer while the controller still holds the job; past MinJobAge, sacct's
    (``sacct_out`` is given only when scontrol failed)."""
    if not scontrol_out.strip() and sacct_out is not None:
        status = accounted_status(sacct_out, job_id, name)
        if status is not None:
            return status
    return final_status(scontrol_out, job_id, name, errors)


def final_status(scontrol_out: str, job_id: str, name: str | None, errors: str = "") -> JobStatus:
    """The status from one `scontrol -o show job ID` line (one line per job: names have no newlines)."""
    line = next((ln for ln in scontrol_out.splitlines() if ln.strip()), None)
    if line is None:
        if INVALID_JOB_ID in errors:
            sacct_said = " ".join(
                ln.strip() for ln in errors.splitlines() if ln.strip() and INVALID_JOB_ID not in ln
            )
            raise JobLookupError(
                f"Slurm no longer knows job {job_id}: not in squeue, purged from the controller after "
                "MinJobAge (300 s on ParallelCluster), and sacct has no record of it"
                + (f" ({sacct_said[:300]})" if sacct_said else "")
                + "; keep finished jobs with slurmdbd accounting (ParallelCluster: Scheduling/SlurmSettings/Database)"
            )
        raise SlurmCommandError(f"scontrol printed nothing for job {job_id}: {errors.strip()[:300]}")
    fields = _fields_after_name(line, job_id, name)
    state_match = _JOB_STATE_RE.search(fields)
    if state_match is None:
        raise SlurmCommandError(f"no JobState in scontrol output for job {job_id}: {line[:300]!r}")
    reason_match = _REASON_RE.search(fields)
    exit_match = _EXIT_CODE_RE.search(fields)
    exit_code = int(exit_match.group(1)) if exit_match else None
    signal = int(exit_match.group(2)) if exit_match else None
    state = map_state(state_match.group(1))
    return JobStatus(
        state=state,
        exit_code=exit_code if state in TERMINAL_STATES else None,
        signal=signal or None,
        reason=reason_match.group(1) if reason_match and reason_match.group(1) != "None" else "",
    )


def _fields_after_name(line: str, job_id: str, name: str | None) -> str:
    """The part of the line after `JobName=...`.

    The job name comes before JobState and may contain text such as " JobState=COMPLETED", so
    fields are searched only after it. With the name known, its exact extent is known too; without
    it, the name is taken to end at the first " UserId=" (pass the name to be safe).
    """
    head = f"JobId={job_id} JobName="
    if not line.startswith(head):
        raise SlurmCommandError(f"unexpected scontrol output for job {job_id}: {line[:200]!r}")
    after_head = line[len(head) :]
    if name is not None:
        if not after_head.startswith(f"{name} UserId="):
            listed = after_head.split(" UserId=", 1)[0]
            raise JobLookupError(f"job {job_id} is now {listed!r}, not {name!r}: the id was reused")
        return after_head[len(name) :]
    _, sep, rest = after_head.partition(" UserId=")
    if not sep:
        raise SlurmCommandError(f"no UserId in scontrol output for job {job_id}: {line[:200]!r}")
    return " UserId=" + rest
