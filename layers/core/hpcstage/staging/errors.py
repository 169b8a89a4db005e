"""Staging errors. Each message is one line a person can act on without reading the code."""

from __future__ import annotations

from ..errors import HpcstageError, InputError


class StagingError(HpcstageError):
    """A staging step could not be done as asked."""


class SelectionError(InputError, ValueError):
    """The selection document is malformed (a ValueError, so plain validation code can catch it)."""


class NoInventoryError(InputError):
    """The input names the latest inventory of a bucket (and prefix) that has none recorded."""


class TargetConfigError(InputError, ValueError):
    """A target's configuration is missing a field or has a wrong one."""


class UnsafePathError(StagingError, ValueError):
    """An object key or path would land outside the staging root (or cannot be a file name at all)."""


class ArchivedObjectsError(StagingError):
    """Selected objects are in an archive storage class and cannot be read until restored."""

    def __init__(self, message: str, keys: list[str], total: int) -> None:
        super().__init__(message)
        self.keys = keys
        self.total = total


class InsufficientCapacityError(StagingError):
    """The selection does not fit in the target's free space."""

    def __init__(self, message: str, needed_bytes: int, free_bytes: int) -> None:
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.free_bytes = free_bytes


class ReleaseRefusedError(StagingError):
    """Release was asked for files that are not verified as exported; nothing was released."""

    def __init__(self, message: str, unverified: list[str], total: int) -> None:
        super().__init__(message)
        self.unverified = unverified
        self.total = total


class RemoteCommandError(StagingError):
    """A command run on the head node through SSM did not succeed."""


class TargetNotReadyError(StagingError):
    """The target is not usable right now (file system not mounted, association failed, ...)."""


# The state machine's errors (their class names are the Step Functions error names).


class JobFailedError(StagingError):
    """The batch job ended without success; the message holds its state and exit code."""


class JobCancelledError(JobFailedError):
    """The batch job was cancelled (scancel, or the scheduler) before it finished."""


class JobTimedOutError(JobFailedError):
    """Slurm ended the job at its time limit."""


class StageFailedError(StagingError):
    """Some selected objects could not be staged."""


class ExportFailedError(StagingError):
    """Some job outputs could not be exported."""


class ReleaseFailedError(StagingError):
    """The cache space of some files could not be released."""


class ExportNotVerifiedError(StagingError):
    """Some job outputs have no verified copy in S3: they are kept in the cache, not released."""


class TriggerObjectError(InputError):
    """The S3 object that triggered a run is not a usable staging request."""
