"""MountpointTarget: the bucket mounted on the cluster with Mountpoint for Amazon S3; nothing is copied.

Staging only checks, on the head node, that the mount is there; the job reads
``<mount_path>/<key below the mounted prefix>``. Files a job writes through the mount are S3 objects
once closed, so export starts nothing, verification asks S3 directly, and release (after
verification, like every target) has no cache to free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from ..errors import ReleaseRefusedError, TargetNotReadyError, UnsafePathError
from ..hsm import HeadNode
from ..manifest import StagingManifest
from ..paths import as_prefix, is_folder_marker, relative_path, strip_prefix
from .base import SUCCEEDED, Handle, JobPaths, Progress, Target, VerifyResult
from .lustre import absolute_dir


class MountpointTarget(Target):
    kind = "mountpoint"

    def __init__(
        self,
        *,
        s3: Any,
        head: HeadNode,
        mount_path: str,
        bucket: str,
        prefix: str = "",
        run_id: str = "mountpoint",
    ) -> None:
        self.s3 = s3
        self.head = head
        self.mount_path = absolute_dir(mount_path, "mount_path")
        self.bucket = bucket
        self.prefix = as_prefix(prefix)
        self.run_id = run_id

    def free_bytes(self) -> None:
        return None  # nothing is copied, so there is no space to run out of

    def _rel(self, key: str) -> str:
        return relative_path(strip_prefix(key, self.prefix))

    def _files(self, manifest: StagingManifest) -> list[str]:
        files: list[str] = []
        for entry in manifest:
            if entry.bucket != self.bucket:
                raise UnsafePathError(
                    f"s3://{entry.bucket}/{entry.key} is not in the mounted bucket {self.bucket}"
                )
            if not is_folder_marker(entry.key):
                files.append(self._rel(entry.key))
        return files

    def job_paths(self, manifest: StagingManifest) -> JobPaths:
        return JobPaths(
            root=self.mount_path, files=[f"{self.mount_path.rstrip('/')}/{f}" for f in self._files(manifest)]
        )

    def stage(self, manifest: StagingManifest) -> Handle:
        files = len(self._files(manifest))
        if not self.head.is_mounted(self.mount_path):
            raise TargetNotReadyError(
                f"{self.mount_path} is not a mount point on {self.head.instance_id}: mount s3://{self.bucket}/"
                f"{self.prefix} there with mount-s3 first"
            )
        return self._handle("stage", self.run_id, files=files)

    def stage_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "stage")
        files = int(handle.data["files"])
        return Progress(files, files, 0, SUCCEEDED, handle, phase="stage")

    def export(self, paths: Sequence[str]) -> Handle:
        rels = [relative_path(p, what="path") for p in paths]
        return self._handle("export", self.run_id, paths=len(rels))

    def export_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "export")
        n = int(handle.data["paths"])
        return Progress(n, n, 0, SUCCEEDED, handle, phase="export", message="written through the mount")

    def verify_exported(self, paths: Sequence[str]) -> VerifyResult:
        """Each path must be an object, or a prefix with objects under it (a directory)."""
        reasons: dict[str, str] = {}
        verified: list[str] = []
        for given in paths:
            rel = relative_path(given, what="path")
            key = self.prefix + rel
            try:
                self.s3.head_object(Bucket=self.bucket, Key=key)
                verified.append(rel)
                continue
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                    reasons[rel] = f"s3://{self.bucket}/{key} cannot be checked: {err}"
                    continue
            listing = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=key + "/", MaxKeys=1)
            if listing.get("KeyCount", 0):
                verified.append(rel)
            else:
                reasons[rel] = f"no object s3://{self.bucket}/{key} and nothing under it"
        missing = sorted(reasons)
        return VerifyResult(
            all_archived=not missing, missing=missing, checked=len(paths), reasons=reasons, verified=verified
        )

    def release(self, paths: Sequence[str]) -> Handle:
        result = self.verify_exported(paths)
        if not result.all_archived:
            raise ReleaseRefusedError(
                f"refusing to release: {len(result.missing)} path(s) not in S3: {', '.join(result.missing[:20])}",
                result.missing[:20],
                len(result.missing),
            )
        return self._handle("release", self.run_id, paths=len(result.verified))

    def release_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "release")
        n = int(handle.data["paths"])
        return Progress(n, n, 0, SUCCEEDED, handle, phase="release", message="no cache to free")
