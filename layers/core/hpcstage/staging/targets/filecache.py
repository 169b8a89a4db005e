"""FileCacheTarget: Amazon File Cache in front of the source bucket.

A cache takes no data repository tasks (the API accepts only fs- ids), so everything is Lustre HSM
on the head node: the cache loads lazily on first read, ``lfs hsm_restore`` prefetches the
selection, ``lfs hsm_archive`` exports, ``lfs hsm_state`` verifies ("exists archived" and not
"dirty") and ``lfs hsm_release`` frees space, only for verified files. The data repository
associations are made with the cache and are not managed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..hsm import HeadNode
from ..manifest import StagingManifest
from .base import RUNNING, SUCCEEDED, Handle, Progress
from .lustre import LustreTarget


class FileCacheTarget(LustreTarget):
    kind = "filecache"

    def __init__(
        self,
        *,
        s3: Any,
        head: HeadNode,
        mount_point: str,
        cache_path: str,
        data_repository_path: str,
        run_id: str,
        prefetch: bool = True,
    ) -> None:
        super().__init__(
            s3=s3,
            head=head,
            mount_point=mount_point,
            namespace_path=cache_path,
            data_repository_path=data_repository_path,
            run_id=run_id,
            prefetch=prefetch,
        )

    def stage(self, manifest: StagingManifest) -> Handle:
        files = sum(1 for _ in self.manifest_files(manifest))
        handle = self._handle("stage", self.run_id, phase="done", files=files)
        if self.prefetch:
            handle.data["restore_list"], _ = self.prefetch_list(manifest)
            handle.data["phase"] = "restore"
        return handle

    def stage_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "stage")
        if handle.data["phase"] == "failed":
            return self.failed(handle, "stage", handle.data["error"])
        if handle.data["phase"] == "restore":
            return self.restore_progress(handle)
        return self.finished(handle, "stage")

    def export(self, paths: Sequence[str]) -> Handle:
        rels = self._checked_paths(paths)
        list_url, _ = self.head.put_paths("archive", (self.abs_path(r) for r in rels))
        self.head.archive(list_url)
        return self._handle("export", self.run_id, archive_list=list_url)

    def export_progress(self, handle: Handle) -> Progress:
        """Archiving is done when no file under the paths has an HSM action pending; a file then
        not exported (dirty, lost, never archived) means its archive failed."""
        self._check_handle(handle, "export")
        counts = self.head.counts(handle.data["archive_list"])
        broken = counts.errors + counts.unreadable
        if broken:
            return self.failed(
                handle,
                "export",
                f"lfs could not report the HSM state of {broken} file(s)",
                0,
                counts.files,
                broken,
            )
        if counts.pending:
            return Progress(counts.archived, counts.files, 0, RUNNING, handle, phase="export")
        if counts.idle_not_exported:
            return self.failed(
                handle,
                "export",
                f"the archive of {counts.idle_not_exported} of {counts.files} file(s) failed: no HSM action "
                "is pending but lfs hsm_state does not show them exported (exists archived, not dirty)",
                counts.archived,
                counts.files,
                counts.idle_not_exported,
            )
        return Progress(counts.archived, counts.files, 0, SUCCEEDED, handle, phase="export")

    def release(self, paths: Sequence[str]) -> Handle:
        rels = self._checked_paths(paths)
        verified = self.require_verified(rels)
        # Release exactly the files just verified, not whatever a directory holds by now.
        list_url, _ = self.head.put_paths("release", (self.abs_path(r) for r in verified.verified))
        self.head.release(list_url)
        return self._handle("release", self.run_id, phase="done", files=verified.checked)

    def release_progress(self, handle: Handle) -> Progress:
        # `lfs hsm_release` is synchronous: when release() returned, the space was freed.
        self._check_handle(handle, "release")
        return self.finished(handle, "release")
