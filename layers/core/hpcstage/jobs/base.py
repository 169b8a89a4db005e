"""What a batch job is (JobSpec), what became of it (JobStatus), and how backends are driven.

A JobSpec is validated when it is built, so every backend gets the same guarantees: names and paths
that survive sbatch's `#SBATCH` line parser unchanged, environment names that are valid shell
identifiers, and no NUL bytes anywhere (they cannot be passed in an argv or a script).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Protocol

from ..errors import HpcstageError
from ..shell import check_user_name

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PARTITION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
JOB_ID_RE = re.compile(r"[0-9]{1,10}")
# sbatch reads `#SBATCH` lines with its own parser: quotes work as in the shell, but a backslash
# is dropped and a line cannot span lines. Control characters and backslashes are therefore refused
# in anything that goes on such a line. '%' starts a filename pattern (%j, %u, ...) in --output.
_CONTROL_OR_BACKSLASH_RE = re.compile(r"[\x00-\x1f\x7f\\]")
MAX_NAME_LENGTH = 200


class JobError(HpcstageError):
    """A job could not be submitted, looked up or cancelled."""


class JobLookupError(JobError):
    """The scheduler no longer knows this job, or the id now belongs to another job."""


class SlurmCommandError(JobError):
    """A Slurm command failed (controller down, permission denied, bad option, ...)."""


class JobWaitTimeout(JobError, TimeoutError):
    def __init__(self, job_id: str, last: JobStatus, waited_s: float) -> None:
        super().__init__(f"job {job_id} still {last.state} after {waited_s:g}s")
        self.job_id = job_id
        self.last = last


class JobState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    UNKNOWN = "UNKNOWN"


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT})


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        return self.state is JobState.COMPLETED and self.exit_code == 0


@dataclass(frozen=True)
class JobSpec:
    """One batch job. `command` is the job's shell script body (bash), run in `workdir`;
    Slurm writes the job's output to `output_dir`/slurm-<jobid>.out."""

    name: str
    command: str
    workdir: str
    output_dir: str
    environment: Mapping[str, str] = field(default_factory=dict)
    file_list: str | None = None
    cpus: int = 1
    time_limit_min: int = 60
    partition: str | None = None
    user: str | None = None

    def __post_init__(self) -> None:
        _check_sbatch_value("job name", self.name)
        if len(self.name) > MAX_NAME_LENGTH:
            raise ValueError(f"job name longer than {MAX_NAME_LENGTH} characters")
        if not self.command.strip() or "\0" in self.command:
            raise ValueError("command must be non-empty shell text without NUL bytes")
        _check_absolute_path("workdir", self.workdir)
        _check_absolute_path("output_dir", self.output_dir)
        _check_sbatch_value("output_dir", self.output_dir)
        if "%" in self.output_dir:
            raise ValueError(
                f"output_dir must not contain '%' (a Slurm filename pattern): {self.output_dir!r}"
            )
        if self.file_list is not None:
            _check_absolute_path("file_list", self.file_list)
        if self.cpus < 1 or self.time_limit_min < 1:
            raise ValueError("cpus and time_limit_min must be at least 1")
        if self.partition is not None and not PARTITION_RE.fullmatch(self.partition):
            raise ValueError(f"invalid partition name {self.partition!r}")
        if self.user is not None:
            check_user_name(self.user)
        object.__setattr__(self, "environment", MappingProxyType(_checked_environment(self.environment)))

    @property
    def output_path(self) -> str:
        # %j rather than %x: a job name may hold '/' or '..', which must not steer the path.
        return str(PurePosixPath(self.output_dir) / "slurm-%j.out")


def _check_sbatch_value(what: str, value: str) -> None:
    if not value or _CONTROL_OR_BACKSLASH_RE.search(value):
        raise ValueError(f"{what} must be non-empty, without control characters or backslashes: {value!r}")


def _check_absolute_path(what: str, value: str) -> None:
    if "\0" in value or not PurePosixPath(value).is_absolute():
        raise ValueError(f"{what} must be an absolute path without NUL bytes: {value!r}")


def _checked_environment(environment: Mapping[str, str]) -> dict[str, str]:
    checked = {}
    for name, value in environment.items():
        if not ENV_NAME_RE.fullmatch(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"environment value for {name} must be a str without NUL bytes")
        checked[name] = value
    return checked


def check_job_id(job_id: str) -> str:
    """Slurm job ids we hand out are plain numbers; anything else is refused before it reaches a command."""
    if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id):
        raise ValueError(f"invalid Slurm job id {job_id!r}")
    return job_id


class JobBackend(Protocol):
    """Submit, inspect and cancel batch jobs.

    `name` (the JobSpec name) lets a backend check that a job id still belongs to the job it
    submitted: Slurm may hand an id out again after its state is reset. Backends remember the
    names of jobs they submitted themselves, so `name` matters to a caller in a later process.
    """

    def submit(self, spec: JobSpec) -> str: ...

    def status(self, job_id: str, *, name: str | None = None) -> JobStatus: ...

    def cancel(self, job_id: str, *, name: str | None = None) -> None: ...


def wait(
    backend: JobBackend,
    job_id: str,
    *,
    poll_s: float,
    max_wait_s: float,
    sleep: Callable[[float], None] = time.sleep,
    on_update: Callable[[JobStatus], None] | None = None,
    name: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> JobStatus:
    """Poll until the job is finished; raise JobWaitTimeout after `max_wait_s`.

    Waited time is the larger of the total slept and the clock's reading, so the bound also holds
    with an injected sleep that returns at once. `on_update` sees each status that differs from the last.
    """
    if poll_s <= 0 or max_wait_s <= 0:
        raise ValueError("poll_s and max_wait_s must be positive")
    started, slept = clock(), 0.0
    status = backend.status(job_id, name=name)
    if on_update:
        on_update(status)
    while not status.terminal:
        waited = max(slept, clock() - started)
        if waited >= max_wait_s:
            raise JobWaitTimeout(job_id, status, max_wait_s)
        delay = min(poll_s, max_wait_s - waited)
        sleep(delay)
        slept += delay
        previous, status = status, backend.status(job_id, name=name)
        if on_update and status != previous:
            on_update(status)
    return status
