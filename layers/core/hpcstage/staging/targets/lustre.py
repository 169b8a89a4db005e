"""What FSx for Lustre and Amazon File Cache share: an S3 prefix shown as a Lustre directory.

A data repository association maps ``s3://bucket/prefix/`` onto ``<mount_point><namespace>``; a key
``prefix/a/b`` is then the file ``<mount_point><namespace>/a/b`` on the head node (the job root is
``<mount_point><namespace>``). Both prefetch with ``lfs hsm_restore`` and verify exports with
``lfs hsm_state``, run on the head node through ``HeadNode``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from typing import Any

from ...s3util import parse_s3_url
from ..errors import ReleaseRefusedError, TargetConfigError, UnsafePathError
from ..hsm import HeadNode
from ..manifest import StagingManifest
from ..paths import as_prefix, is_folder_marker, relative_path, strip_prefix
from .base import FAILED, RUNNING, SUCCEEDED, Handle, JobPaths, Progress, Target, VerifyResult


def absolute_dir(value: str, name: str) -> str:
    """An absolute directory path without ``..``, ``.`` or empty components (trailing / dropped)."""
    if not isinstance(value, str) or not value.startswith("/"):
        raise TargetConfigError(f"{name} must be an absolute path, not {value!r}")
    if value == "/":
        return "/"
    try:
        rel = relative_path(value.lstrip("/").rstrip("/"), what=name)
    except UnsafePathError as err:
        raise TargetConfigError(str(err)) from err
    return "/" + rel


class LustreTarget(Target):
    def __init__(
        self,
        *,
        s3: Any,
        head: HeadNode,
        mount_point: str,
        namespace_path: str,
        data_repository_path: str,
        run_id: str,
        prefetch: bool = True,
    ) -> None:
        repo = parse_s3_url(data_repository_path)
        self.repo_bucket = repo.bucket
        self.repo_prefix = as_prefix(repo.prefix)
        self.repo_url = f"s3://{self.repo_bucket}/{self.repo_prefix}"
        self.s3 = s3
        self.head = head
        self.mount_point = absolute_dir(mount_point, "mount_point")
        self.namespace = absolute_dir(namespace_path, "namespace path")
        self.job_root = posixpath.join(self.mount_point, self.namespace.lstrip("/")).rstrip("/") or "/"
        self.run_id = run_id
        self.prefetch = prefetch

    # -- path mapping ----------------------------------------------------------------------

    def rel_for_key(self, key: str) -> str:
        return relative_path(strip_prefix(key, self.repo_prefix))

    def abs_path(self, rel: str) -> str:
        return posixpath.join(self.job_root, rel)

    def mount_relative(self, rel: str) -> str:
        """The path FSx data repository tasks take: relative to the mount point."""
        return posixpath.join(self.namespace.lstrip("/"), rel)

    def rel_from_abs(self, path: str) -> str:
        root = self.job_root.rstrip("/") + "/"
        if not path.startswith(root):
            raise UnsafePathError(
                f"head node reported {path!r}, which is outside the job root {self.job_root!r}"
            )
        return path[len(root) :]

    def manifest_files(self, manifest: StagingManifest) -> Iterator[str]:
        """Job-root-relative paths of the manifest's files; every key is checked first, and all
        problems are reported together so one run shows every bad key."""
        bad: list[str] = []
        count = 0
        for entry in manifest:
            try:
                if entry.bucket != self.repo_bucket:
                    raise UnsafePathError(
                        f"s3://{entry.bucket}/{entry.key} is not in the repository bucket {self.repo_bucket}"
                    )
                self.rel_for_key(entry.key)
            except UnsafePathError as err:
                count += 1
                if len(bad) < 10:
                    bad.append(str(err))
        if count:
            raise UnsafePathError(f"{count} object(s) cannot be staged on this target: " + "; ".join(bad))
        return (self.rel_for_key(e.key) for e in manifest if not is_folder_marker(e.key))

    def job_paths(self, manifest: StagingManifest) -> JobPaths:
        return JobPaths(
            root=self.job_root, files=[self.abs_path(rel) for rel in self.manifest_files(manifest)]
        )

    def _checked_paths(self, paths: Sequence[str]) -> list[str]:
        if isinstance(paths, str):
            raise TypeError("paths must be a list of paths, not a string")
        return [relative_path(p, what="path") for p in paths]

    # -- capacity, verification, prefetch --------------------------------------------------

    def free_bytes(self) -> int:
        # The mount point, not the job root: that directory appears only once the data
        # repository association exists, and df reports the same file system either way.
        return self.head.free_bytes(self.mount_point)

    def verify_exported(self, paths: Sequence[str]) -> VerifyResult:
        rels = self._checked_paths(paths)
        list_url, _ = self.head.put_paths("verify", (self.abs_path(r) for r in rels))
        states = self.head.states(list_url)
        reasons: dict[str, str] = {}
        verified: list[str] = []
        for path, state in states.items():
            rel = self.rel_from_abs(path)
            if isinstance(state, str):
                reasons[rel] = state
            elif not state.exported:
                reasons[rel] = "hsm_state: " + (
                    " ".join(sorted(state.flags)) or "no HSM flags (never archived)"
                )
            else:
                verified.append(rel)
        missing = sorted(reasons)
        return VerifyResult(
            all_archived=not missing, missing=missing, checked=len(states), reasons=reasons, verified=verified
        )

    def require_verified(self, paths: Sequence[str]) -> VerifyResult:
        """Verify, and raise ReleaseRefusedError (before anything is released) unless all are."""
        result = self.verify_exported(paths)
        if not result.all_archived:
            listed = result.missing[:20]
            raise ReleaseRefusedError(
                f"refusing to release: {len(result.missing)} file(s) not verified as exported, nothing "
                "released: " + "; ".join(f"{p!r} ({result.reasons.get(p, '')})" for p in listed),
                listed,
                len(result.missing),
            )
        return result

    def prefetch_list(self, manifest: StagingManifest) -> tuple[str, int]:
        return self.head.put_paths("restore", (self.abs_path(r) for r in self.manifest_files(manifest)))

    def restore_progress(self, handle: Handle) -> Progress:
        """Queue the hsm_restore requests once, then count files restored: no HSM action pending
        and not released. An idle file still released is a failed restore (a restore that failed
        also ends in NOOP), so it fails the stage instead of being counted as done."""
        data = handle.data
        if not data.get("restore_requested"):
            self.head.restore(data["restore_list"])
            data["restore_requested"] = True
            return Progress(
                0, data["files"], 0, RUNNING, handle, phase="restore", message="restore requested"
            )
        counts = self.head.counts(data["restore_list"])
        expected = data["files"]
        if counts.files < expected:
            # The count only sees files that exist: fewer means some never arrived (a failed import).
            return self.failed(
                handle,
                "restore",
                f"{expected - counts.files} of {expected} selected file(s) are not on the file system",
                counts.restored,
                expected,
                expected - counts.files,
            )
        broken = counts.errors + counts.unreadable
        if broken:
            return self.failed(
                handle,
                "restore",
                f"lfs could not report the HSM state of {broken} of {expected} file(s)",
                counts.restored,
                expected,
                broken,
            )
        if counts.pending == 0 and counts.idle_released:
            return self.failed(
                handle,
                "restore",
                f"the restore of {counts.idle_released} of {expected} file(s) failed: no HSM action is "
                "pending but lfs hsm_state still shows them released",
                counts.restored,
                expected,
                counts.idle_released,
            )
        state = SUCCEEDED if counts.pending == 0 else RUNNING
        if state == SUCCEEDED:
            data["phase"] = "done"
        return Progress(counts.restored, counts.files, 0, state, handle, phase="restore")

    def finished(self, handle: Handle, phase: str) -> Progress:
        files = int(handle.data.get("files", 0))
        return Progress(files, files, 0, SUCCEEDED, handle, phase=phase)

    @staticmethod
    def failed(
        handle: Handle, phase: str, message: str, done: int = 0, total: int = 0, failed: int = 0
    ) -> Progress:
        handle.data["phase"] = "failed"
        handle.data["error"] = message
        return Progress(done, total, failed, FAILED, handle, phase=phase, message=message)
