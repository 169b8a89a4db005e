"""The one interface every staging target offers, and the small JSON-able values it passes around.

Every long operation is split into a start call that returns a Handle and a progress call that
takes the Handle and returns Progress (with the Handle to pass next time). Neither blocks for
long, so a state machine drives them with Wait -> progress -> Choice, and a Lambda can die between
calls without losing anything: what a target needs to continue is in the Handle (or, for the local
target, in its state file).

Paths given to export, verify_exported and release are relative to the job root
(``job_paths(...).root``), checked by ``paths.relative_path`` so none can leave it.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..manifest import StagingManifest

RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
STATES = (RUNNING, SUCCEEDED, FAILED)
OPERATIONS = ("stage", "export", "release")


@dataclass
class Handle:
    """Where a started operation stands; round-trips through JSON (Step Functions state)."""

    target: str
    operation: str
    run_id: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "operation": self.operation, "run_id": self.run_id, "data": self.data}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Handle:
        missing = [k for k in ("target", "operation", "run_id") if k not in d]
        if missing:
            raise ValueError(f"not a staging handle: missing {', '.join(missing)}")
        if d["operation"] not in OPERATIONS:
            raise ValueError(
                f"handle operation must be one of {', '.join(OPERATIONS)}, not {d['operation']!r}"
            )
        return cls(
            target=d["target"], operation=d["operation"], run_id=d["run_id"], data=dict(d.get("data") or {})
        )


StageHandle = Handle


@dataclass
class Progress:
    """``done``/``total``/``failed`` count the units of ``phase`` (files, or tasks while FSx imports).

    ``state`` is RUNNING, SUCCEEDED or FAILED; ``handle`` is what to pass to the next progress call.
    """

    done: int
    total: int
    failed: int
    state: str
    handle: Handle
    phase: str = ""
    message: str = ""

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"progress state must be one of {', '.join(STATES)}, not {self.state!r}")

    @property
    def finished(self) -> bool:
        return self.state != RUNNING

    def to_dict(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "total": self.total,
            "failed": self.failed,
            "state": self.state,
            "phase": self.phase,
            "message": self.message,
            "handle": self.handle.to_dict(),
        }


@dataclass
class VerifyResult:
    """``all_archived``: every file under the given paths has a verified copy in S3.

    ``missing`` lists the job-root-relative files without one, ``reasons`` says why, and
    ``verified`` lists the files that have one.
    """

    all_archived: bool
    missing: list[str]
    checked: int = 0
    reasons: dict[str, str] = field(default_factory=dict)
    verified: list[str] = field(default_factory=list)

    def to_dict(self, max_listed: int = 50) -> dict[str, Any]:
        return {
            "all_archived": self.all_archived,
            "checked": self.checked,
            "verified_count": len(self.verified),
            "missing_count": len(self.missing),
            "missing": self.missing[:max_listed],
            "reasons": dict(list(self.reasons.items())[:max_listed]),
        }


@dataclass
class JobPaths:
    """Where a job finds the staged files: ``root`` and each file's absolute path under it."""

    root: str
    files: list[str]


class Target(abc.ABC):
    """A place where a job reads staged inputs and writes outputs (a cache in front of S3)."""

    kind: str = ""

    @abc.abstractmethod
    def free_bytes(self) -> int | None:
        """Free space for staging, or None when the target copies nothing (no limit applies)."""

    @abc.abstractmethod
    def stage(self, manifest: StagingManifest) -> Handle:
        """Start making the manifest's objects readable under the job root."""

    @abc.abstractmethod
    def stage_progress(self, handle: Handle) -> Progress: ...

    @abc.abstractmethod
    def export(self, paths: Sequence[str]) -> Handle:
        """Start copying these files or directories (relative to the job root) to S3."""

    @abc.abstractmethod
    def export_progress(self, handle: Handle) -> Progress: ...

    @abc.abstractmethod
    def verify_exported(self, paths: Sequence[str]) -> VerifyResult:
        """Check that every file under ``paths`` has a complete, current copy in S3."""

    @abc.abstractmethod
    def release(self, paths: Sequence[str]) -> Handle:
        """Free the cache space of ``paths``; refuses (ReleaseRefusedError) unless all are verified."""

    @abc.abstractmethod
    def release_progress(self, handle: Handle) -> Progress: ...

    @abc.abstractmethod
    def job_paths(self, manifest: StagingManifest) -> JobPaths: ...

    def progress(self, handle: Handle) -> Progress:
        """One poll entry point for a state machine: dispatch on the handle's operation."""
        if handle.target != self.kind:
            raise ValueError(f"this is a {self.kind} target; the handle belongs to a {handle.target} target")
        if handle.operation == "stage":
            return self.stage_progress(handle)
        if handle.operation == "export":
            return self.export_progress(handle)
        return self.release_progress(handle)

    def _handle(self, operation: str, run_id: str, **data: Any) -> Handle:
        return Handle(target=self.kind, operation=operation, run_id=run_id, data=data)

    def _check_handle(self, handle: Handle, operation: str) -> None:
        if handle.target != self.kind or handle.operation != operation:
            raise ValueError(
                f"expected a {self.kind} {operation} handle, got a {handle.target} {handle.operation} handle"
            )
