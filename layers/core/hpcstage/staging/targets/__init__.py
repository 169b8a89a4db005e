"""Staging targets: where jobs read staged inputs and write outputs. See ``base.Target``."""

from .base import FAILED, RUNNING, SUCCEEDED, Handle, JobPaths, Progress, StageHandle, Target, VerifyResult
from .filecache import FileCacheTarget
from .fsx import FsxLustreTarget
from .local import LocalTarget
from .mountpoint import MountpointTarget

__all__ = [
    "FAILED",
    "RUNNING",
    "SUCCEEDED",
    "FileCacheTarget",
    "FsxLustreTarget",
    "Handle",
    "JobPaths",
    "LocalTarget",
    "MountpointTarget",
    "Progress",
    "StageHandle",
    "Target",
    "VerifyResult",
]
