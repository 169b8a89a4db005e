"""Batch jobs on Slurm: one JobSpec, three backends (local CLI, SSM to a ParallelCluster head node,
slurmrestd), and a bounded `wait`. Backends live in their modules (`hpcstage.jobs.local`,
`.ssm`, `.rest`) so importing this package needs neither Slurm nor AWS."""

from .base import (
    JobBackend,
    JobError,
    JobLookupError,
    JobSpec,
    JobState,
    JobStatus,
    JobWaitTimeout,
    SlurmCommandError,
    wait,
)
from .script import build_script

__all__ = [
    "JobBackend",
    "JobError",
    "JobLookupError",
    "JobSpec",
    "JobState",
    "JobStatus",
    "JobWaitTimeout",
    "SlurmCommandError",
    "build_script",
    "wait",
]
