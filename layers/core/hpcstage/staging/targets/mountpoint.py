"""MountpointTarget: the bucket mounted on the cluster with Mountpoint for Amazon S3; nothing is copied.

Staging only checks, on the head node, that the mount is there (the mount table shows
``fuse mountpoint-s3``) and that a selected object shows through it (the table does not name the
bucket); the job's prologue checks the same on the node that runs it. The job reads
``<mount_path>/<key below the mounted prefix>``. Files a job writes through the mount are S3 objects
once closed, so export starts nothing; the job's epilogue records what it wrote (size and path) and
verification finds each of those as an object of that size. Release (after verification, like every
target) has no cache to free.

Mountpoint writes only new files, sequentially from the start, and cannot append to or rename
files of general purpose buckets (awslabs/mountpoint-s3 doc/SEMANTICS.md): a job must write its
outputs that way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from ..errors import ReleaseRefusedError, TargetNotReadyError, UnsafePathError
from ..hsm import MOUNTPOINT_S3_MOUNT, HeadNode
from ..manifest import StagingManifest
from ..paths import as_prefix, is_folder_marker, relative_path, strip_prefix
from .base import SUCCEEDED, Handle, JobPaths, Progress, Target, VerifyResult
from .lustre import absolute_dir

_ABSENT = ("404", "NoSuchKey", "NotFound", "403", "AccessDenied", "Forbidden")


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
        files = self._files(manifest)
        sample = f"{self.mount_path.rstrip('/')}/{files[0]}" if files else self.mount_path
        mount, present = self.head.mount_info(self.mount_path, sample)
        if mount != MOUNTPOINT_S3_MOUNT:
            found = f"the mount table shows {mount!r}" if mount else "it is not a mount point"
            raise TargetNotReadyError(
                f"{self.mount_path} on {self.head.instance_id} is not a Mountpoint for Amazon S3 mount ({found}): "
                f"mount s3://{self.bucket}/{self.prefix} there with mount-s3 first"
            )
        if not present:
            raise TargetNotReadyError(
                f"{sample} does not show through the mount on {self.head.instance_id}: is s3://{self.bucket}/"
                f"{self.prefix} (bucket and --prefix) what is mounted at {self.mount_path}?"
            )
        return self._handle("stage", self.run_id, files=len(files))

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
                # HeadObject of a missing key answers 403 without s3:ListBucket on the bucket (a
                # prefix-scoped grant does not count): like 404, it may be a directory.
                if err.response.get("Error", {}).get("Code") not in _ABSENT:
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

    def verify_declared(self, output_dir: str, declared: Sequence[tuple[str, int]]) -> VerifyResult:
        """Each file the job recorded (path below ``output_dir``, size) must be an object of that size."""
        base = relative_path(output_dir, what="path")
        reasons: dict[str, str] = {}
        verified: list[str] = []
        for name, size in declared:
            rel = f"{base}/{relative_path(name, what='output path')}"
            key = self.prefix + rel
            try:
                head = self.s3.head_object(Bucket=self.bucket, Key=key)
            except ClientError as err:
                code = err.response.get("Error", {}).get("Code")
                reasons[rel] = (
                    f"no object s3://{self.bucket}/{key}"
                    if code in _ABSENT
                    else f"s3://{self.bucket}/{key} cannot be checked: {err}"
                )
                continue
            if head.get("ContentLength") != size:
                reasons[rel] = (
                    f"s3://{self.bucket}/{key} holds {head.get('ContentLength')} bytes, the job wrote {size}"
                )
            else:
                verified.append(rel)
        missing = sorted(reasons)
        return VerifyResult(
            all_archived=not missing,
            missing=missing,
            checked=len(declared),
            reasons=reasons,
            verified=verified,
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
