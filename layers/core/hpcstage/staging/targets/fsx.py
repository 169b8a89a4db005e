"""FsxLustreTarget: FSx for Lustre linked to the source bucket by a data repository association.

stage:   ensure the association (reuse a matching one, create it otherwise) → IMPORT_METADATA tasks
         for the selected objects (or their directories), 100 paths a task → when every import
         task succeeded, ``lfs hsm_restore`` the files on the head node and count NOOPs.
export:  EXPORT_TO_REPOSITORY tasks for the given paths.
release: RELEASE_DATA_FROM_FILESYSTEM tasks, only after ``lfs hsm_state`` shows every file exported.

Task batches are submitted up to ``max_active_tasks`` at a time (FSx answers
DataRepositoryTaskExecuting while another task runs on the file system; that is retried with
jittered backoff a bounded number of times, then left for the next progress call). Each task's
ClientRequestToken is derived from the run id, the batch index and the batch's paths, so a
retried call — or a Lambda retried after a crash — gets the same task back instead of a second one.
The batch plan is kept in S3 (``work_url``) in pages of 50 batches, so the handle stays small and a
poll reads one page, however many batches there are.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from ..errors import StagingError, TargetConfigError, TargetNotReadyError, UnsafePathError
from ..hsm import HeadNode
from ..manifest import StagingManifest
from .base import RUNNING, SUCCEEDED, Handle, Progress
from .lustre import LustreTarget

MAX_PATHS_PER_TASK = 100
MAX_PATH_CHARS = 4096
MAX_TASK_IDS_PER_DESCRIBE = 50
MAX_TOKEN_CHARS = 63
BATCHES_PER_PLAN_PAGE = 50
IMPORT = "IMPORT_METADATA_FROM_REPOSITORY"
EXPORT = "EXPORT_TO_REPOSITORY"
RELEASE = "RELEASE_DATA_FROM_FILESYSTEM"
_ACTIVE = frozenset({"PENDING", "EXECUTING", "CANCELING"})
_DRA_WAIT = frozenset({"CREATING", "UPDATING"})
_TOKEN_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
# Characters the FSx API refuses in a data repository task path (DataRepositoryTaskPath's pattern
# in the botocore fsx model: ^[^\u0000\u0085\u2028\u2029\r\n]{0,4096}$); NUL is refused earlier.
_TASK_PATH_UNSAFE = re.compile("[\u0085\u2028\u2029\r\n]")
# What data repository associations and release tasks need (FSx for Lustre user guide: DRAs on
# Lustre 2.12/2.15, not SCRATCH_1; no S3 linking on Intelligent-Tiering storage).
DRA_LUSTRE_VERSIONS = ("2.12", "2.15")
IMPORT_GRANULARITIES = ("directory", "object")


def client_token(run_id: str, purpose: str, index: int, paths: Iterable[str] = ()) -> str:
    """A ClientRequestToken (<= 63 of [A-Za-z0-9_.-]) fixed by run id, purpose, index and paths.

    The readable run-id part may be cut; the digest covers all of it, so distinct runs or batches
    never share a token (a shared token with different paths would be IdempotentParameterMismatch).
    """
    digest = hashlib.sha256("\0".join([run_id, purpose, str(index), *paths]).encode("utf-8", "surrogatepass"))
    tail = f"-{purpose[:3]}{index}-{digest.hexdigest()[:16]}"
    head = _TOKEN_UNSAFE.sub("_", run_id)[: MAX_TOKEN_CHARS - len(tail)]
    return (head + tail) if head else tail.lstrip("-")


def batched(items: Sequence[str], size: int = MAX_PATHS_PER_TASK) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def import_paths(rels: Iterable[str], granularity: str) -> list[str]:
    """Repository-relative paths to import: each object, or the fewest directories covering them
    (importing a directory's metadata costs little and saves tasks: FSx runs them one at a time).

    Directories end in "/" (so ``a/b/`` never also imports ``a/bc``); "" is the repository root.
    """
    if granularity == "object":
        return sorted(set(rels))
    dirs = {posixpath.dirname(r) for r in rels}
    if "" in dirs:
        return [""]
    chosen: set[str] = set()
    for d in sorted(dirs, key=lambda d: d.count("/")):  # ancestors before their descendants
        parts = d.split("/")
        if not any("/".join(parts[:i]) in chosen for i in range(1, len(parts))):
            chosen.add(d)
    return sorted(d + "/" for d in chosen)


class FsxLustreTarget(LustreTarget):
    kind = "fsx"

    def __init__(
        self,
        *,
        fsx: Any,
        s3: Any,
        head: HeadNode,
        file_system_id: str,
        mount_point: str,
        file_system_path: str,
        data_repository_path: str,
        run_id: str,
        report_path: str | None = None,
        import_granularity: str = "directory",
        max_active_tasks: int = 1,
        submit_attempts: int = 5,
        backoff_base_s: float = 2.0,
        backoff_cap_s: float = 30.0,
        auto_import_events: Sequence[str] = (),
        auto_export_events: Sequence[str] = (),
        imported_file_chunk_size_mib: int | None = None,
        prefetch: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(
            s3=s3,
            head=head,
            mount_point=mount_point,
            namespace_path=file_system_path,
            data_repository_path=data_repository_path,
            run_id=run_id,
            prefetch=prefetch,
        )
        if not re.fullmatch(r"fs-[0-9a-f]{8,}", file_system_id or ""):
            raise TargetConfigError(
                f"file_system_id must look like fs-0123456789abcdef0, not {file_system_id!r}"
            )
        if import_granularity not in IMPORT_GRANULARITIES:
            raise TargetConfigError(
                f"import_granularity must be one of {', '.join(IMPORT_GRANULARITIES)}, not {import_granularity!r}"
            )
        if not 1 <= max_active_tasks <= 1000 or submit_attempts < 1:
            raise TargetConfigError("max_active_tasks must be 1..1000 and submit_attempts at least 1")
        if report_path and not report_path.rstrip("/").startswith(self.repo_url.rstrip("/")):
            # CompletionReport.Path "must be located within the file system's ExportPath" (fsx model):
            # with an association, inside its data repository.
            raise TargetConfigError(
                f"report_path must lie inside the linked data repository {self.repo_url} "
                f"(e.g. {self.repo_url}hpcstage-reports), not {report_path!r}"
            )
        self.fsx = fsx
        self.file_system_id = file_system_id
        self.file_system_path = self.namespace
        self.report: dict[str, Any] = (
            {
                "Enabled": True,
                "Path": report_path,
                "Format": "REPORT_CSV_20191124",
                "Scope": "FAILED_FILES_ONLY",
            }
            if report_path
            else {"Enabled": False}
        )
        self.import_granularity = import_granularity
        self.max_active_tasks = max_active_tasks
        self.submit_attempts = submit_attempts
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.auto_import_events = list(auto_import_events)
        self.auto_export_events = list(auto_export_events)
        self.imported_file_chunk_size_mib = imported_file_chunk_size_mib
        self.sleep = sleep
        self.rng = rng or random.Random()

    # -- path mapping and preconditions ----------------------------------------------------

    def rel_for_key(self, key: str) -> str:
        rel = super().rel_for_key(key)
        bad = _TASK_PATH_UNSAFE.search(rel)
        if bad:
            raise UnsafePathError(
                f"{key!r} holds {bad.group()!r}, which FSx data repository task paths refuse "
                "(carriage return, line feed, U+0085, U+2028, U+2029)"
            )
        return rel

    def check_file_system(self) -> dict[str, Any]:
        """The file system can take a data repository association and release tasks, or a clear error."""
        try:
            found = self.fsx.describe_file_systems(FileSystemIds=[self.file_system_id]).get("FileSystems", [])
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "FileSystemNotFound":
                found = []
            else:
                raise
        if not found:
            raise TargetConfigError(
                f"FSx file system {self.file_system_id} does not exist in this account and Region"
            )
        fs = found[0]
        lustre = fs.get("LustreConfiguration", {})
        problems = []
        if fs.get("FileSystemType") != "LUSTRE":
            problems.append(f"it is an {fs.get('FileSystemType')} file system, not LUSTRE")
        if fs.get("Lifecycle") != "AVAILABLE":
            problems.append(f"its lifecycle is {fs.get('Lifecycle')}, not AVAILABLE")
        if fs.get("FileSystemTypeVersion") not in DRA_LUSTRE_VERSIONS:
            problems.append(
                f"it runs Lustre {fs.get('FileSystemTypeVersion')}; data repository associations need "
                f"{' or '.join(DRA_LUSTRE_VERSIONS)}"
            )
        if lustre.get("DeploymentType") == "SCRATCH_1":
            problems.append("SCRATCH_1 file systems take no data repository associations")
        if fs.get("StorageType") == "INTELLIGENT_TIERING":
            problems.append("Intelligent-Tiering file systems cannot be linked to S3")
        if problems:
            raise TargetNotReadyError(
                f"FSx file system {self.file_system_id} cannot be an fsx target: " + "; ".join(problems)
            )
        return fs

    # -- stage -----------------------------------------------------------------------------

    def stage(self, manifest: StagingManifest) -> Handle:
        rels = list(self.manifest_files(manifest))  # every key checked before any AWS call
        self.check_file_system()
        paths = [self.repo_url + p for p in import_paths(rels, self.import_granularity)]
        queue = self._new_queue(IMPORT, "import", paths)
        handle = self._handle("stage", self.run_id, phase="association", tasks=queue, files=len(rels))
        if self.prefetch:
            handle.data["restore_list"], _ = self.prefetch_list(manifest)
        association = self.ensure_association()
        handle.data["association_id"] = association["AssociationId"]
        if association.get("Lifecycle") == "AVAILABLE":
            handle.data["phase"] = "import"
            self._advance(queue)
        return handle

    def stage_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "stage")
        data = handle.data
        if data["phase"] == "failed":
            return self.failed(handle, "stage", data["error"])
        if data["phase"] == "association":
            lifecycle, message = self._association_state(data["association_id"])
            if lifecycle in _DRA_WAIT:
                return Progress(0, 1, 0, RUNNING, handle, phase="association", message=lifecycle)
            if lifecycle != "AVAILABLE":
                return self.failed(
                    handle, "association", f"data repository association {lifecycle}: {message}"
                )
            data["phase"] = "import"
        if data["phase"] == "import":
            progress = self._queue_progress(handle, data["tasks"], "import")
            if progress.state != SUCCEEDED:
                return progress
            # Whether to prefetch was decided (and the list written) when staging started.
            data["phase"] = "restore" if "restore_list" in data else "done"
        if data["phase"] == "restore":
            return self.restore_progress(handle)
        return self.finished(handle, "stage")

    # -- export and release ----------------------------------------------------------------

    def export(self, paths: Sequence[str]) -> Handle:
        rels = self._checked_paths(paths)
        queue = self._new_queue(EXPORT, "export", [self.mount_relative(r) for r in rels])
        self._advance(queue)
        return self._handle("export", self.run_id, tasks=queue)

    def export_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "export")
        return self._queue_progress(handle, handle.data["tasks"], "export")

    def release(self, paths: Sequence[str]) -> Handle:
        """Release by directory: a given directory is one task path, and given files count by their
        directory, so 100k verified inputs are a few task paths, not 1,000 tasks of 100 files
        (FSx runs one task at a time). A release task frees only files whose data is in S3 and not
        changed since (FSx: exported files), and runs only after every given path was verified."""
        rels = self._checked_paths(paths)
        verified = self.require_verified(rels)
        files = set(verified.verified)
        dirs = {(posixpath.dirname(r) if r in files else r) for r in rels}
        chosen: list[str] = []
        for d in sorted(dirs, key=lambda d: (d.count("/"), d)):  # ancestors before descendants
            if not any(d == c or d.startswith(c + "/") or c == "" for c in chosen):
                chosen.append(d)
        task_paths = sorted(
            self.mount_relative(d).rstrip("/") if d else self.namespace.strip("/") or "/" for d in chosen
        )
        queue = self._new_queue(RELEASE, "release", task_paths)
        self._advance(queue)
        return self._handle("release", self.run_id, tasks=queue, files=verified.checked)

    def release_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "release")
        return self._queue_progress(handle, handle.data["tasks"], "release")

    # -- the data repository association ---------------------------------------------------

    def ensure_association(self) -> dict[str, Any]:
        """The association of file_system_path with the repository, created if there is none.

        Another association on the same or an overlapping file system path is a configuration
        error (FSx forbids overlaps), reported rather than replaced.
        """
        for existing in self._associations():
            fs_path = existing.get("FileSystemPath", "")
            repo = existing.get("DataRepositoryPath", "")
            same_path = fs_path.rstrip("/") == self.file_system_path.rstrip("/")
            if same_path and repo.rstrip("/") == self.repo_url.rstrip("/"):
                lifecycle = existing.get("Lifecycle", "")
                if lifecycle not in _DRA_WAIT and lifecycle != "AVAILABLE":
                    detail = existing.get("FailureDetails", {}).get("Message", "")
                    raise TargetNotReadyError(
                        f"data repository association {existing.get('AssociationId')} for {self.repo_url} "
                        f"is {lifecycle}" + (f": {detail}" if detail else "")
                    )
                return existing
            if _overlaps(fs_path, self.file_system_path):
                raise TargetConfigError(
                    f"{self.file_system_id} already associates {fs_path} with {repo}; it overlaps "
                    f"{self.file_system_path} -> {self.repo_url}: use that path or another file_system_path"
                )
        request: dict[str, Any] = {
            "FileSystemId": self.file_system_id,
            "FileSystemPath": self.file_system_path,
            "DataRepositoryPath": self.repo_url,
            # Import only what is selected (by tasks), not the whole prefix up front.
            "BatchImportMetaDataOnCreate": False,
            "ClientRequestToken": client_token(
                self.run_id, "association", 0, [self.file_system_path, self.repo_url]
            ),
        }
        if self.imported_file_chunk_size_mib:
            request["ImportedFileChunkSize"] = self.imported_file_chunk_size_mib
        if self.auto_import_events or self.auto_export_events:
            request["S3"] = {
                "AutoImportPolicy": {"Events": self.auto_import_events},
                "AutoExportPolicy": {"Events": self.auto_export_events},
            }
        association: dict[str, Any] = self.fsx.create_data_repository_association(**request)["Association"]
        return association

    def _associations(self) -> Iterable[dict[str, Any]]:
        request: dict[str, Any] = {"Filters": [{"Name": "file-system-id", "Values": [self.file_system_id]}]}
        for _ in range(1000):  # at most 8 associations per file system: a bound, not a limit in practice
            page = self.fsx.describe_data_repository_associations(**request)
            yield from page.get("Associations", [])
            if not page.get("NextToken"):
                return
            request["NextToken"] = page["NextToken"]
        raise StagingError("DescribeDataRepositoryAssociations kept returning NextToken")

    def _association_state(self, association_id: str) -> tuple[str, str]:
        found = self.fsx.describe_data_repository_associations(AssociationIds=[association_id]).get(
            "Associations", []
        )
        if not found:
            return "MISSING", f"{association_id} no longer exists"
        return found[0].get("Lifecycle", ""), found[0].get("FailureDetails", {}).get("Message", "")

    # -- the task queue --------------------------------------------------------------------

    def _new_queue(self, task_type: str, purpose: str, paths: list[str]) -> dict[str, Any]:
        for p in paths:
            if len(p) > MAX_PATH_CHARS:
                raise UnsafePathError(
                    f"path {p[:80]!r}... is longer than the {MAX_PATH_CHARS} characters FSx accepts"
                )
        batches = batched(paths)
        # Pages of batches, so a poll reads only the page it submits from, never the whole plan.
        plan = f"plans/{purpose}-{client_token(self.run_id, purpose, len(batches), paths)}"
        for page in range(0, len(batches), BATCHES_PER_PLAN_PAGE):
            body = json.dumps(batches[page : page + BATCHES_PER_PLAN_PAGE]).encode()
            self.head.put_json(f"{plan}/{page // BATCHES_PER_PLAN_PAGE:06d}.json", body)
        return {
            "type": task_type,
            "purpose": purpose,
            "plan": self.head.url(plan),
            "batches": len(batches),
            "next": 0,
            "active": [],
            "tasks_done": 0,
            "succeeded": 0,
            "failed": 0,
            "errors": [],
        }

    def _advance(self, queue: dict[str, Any]) -> None:
        """Collect finished tasks, then submit batches while there is room."""
        active: list[str] = queue["active"]
        for i in range(0, len(active), MAX_TASK_IDS_PER_DESCRIBE):
            chunk = active[i : i + MAX_TASK_IDS_PER_DESCRIBE]
            tasks = self.fsx.describe_data_repository_tasks(TaskIds=chunk).get("DataRepositoryTasks", [])
            for task in tasks:
                lifecycle = task["Lifecycle"]
                if lifecycle in _ACTIVE:
                    continue
                status = task.get("Status", {})
                queue["tasks_done"] += 1
                queue["succeeded"] += int(status.get("SucceededCount", 0))
                queue["failed"] += int(status.get("FailedCount", 0))
                if lifecycle != "SUCCEEDED":
                    message = task.get("FailureDetails", {}).get("Message", "no failure details")
                    queue["errors"].append(f"{task['TaskId']} {lifecycle}: {message}")
                queue["active"] = [t for t in queue["active"] if t != task["TaskId"]]
        if queue["errors"]:
            return  # no new work after a failure: the operation is FAILED
        pages: dict[int, list[list[str]]] = {}
        while len(queue["active"]) < self.max_active_tasks and queue["next"] < queue["batches"]:
            index = queue["next"]
            page, offset = divmod(index, BATCHES_PER_PLAN_PAGE)
            if page not in pages:
                pages[page] = json.loads(self.head.get_bytes(f"{queue['plan']}/{page:06d}.json"))
            task_id = self._create_task(queue, index, pages[page][offset])
            if task_id is None:
                return  # another task still runs on the file system: try again on the next poll
            queue["active"].append(task_id)
            queue["next"] = index + 1

    def _create_task(self, queue: dict[str, Any], index: int, paths: list[str]) -> str | None:
        request: dict[str, Any] = {
            "Type": queue["type"],
            "FileSystemId": self.file_system_id,
            "Paths": paths,
            "Report": self.report,
            "ClientRequestToken": client_token(self.run_id, queue["purpose"], index, paths),
        }
        if queue["type"] == RELEASE:
            # Release regardless of last access: the caller has verified these exact paths.
            request["ReleaseConfiguration"] = {"DurationSinceLastAccess": {"Unit": "DAYS", "Value": 0}}
        for attempt in range(self.submit_attempts):
            try:
                task: dict[str, Any] = self.fsx.create_data_repository_task(**request)["DataRepositoryTask"]
                return str(task["TaskId"])
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") != "DataRepositoryTaskExecuting":
                    raise
            if attempt + 1 < self.submit_attempts:
                # Full jitter: pollers that collided do not retry in step.
                self.sleep(self.rng.uniform(0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt)))
        return None

    def _queue_progress(self, handle: Handle, queue: dict[str, Any], phase: str) -> Progress:
        self._advance(queue)
        done, total = queue["tasks_done"], queue["batches"]
        if queue["errors"]:
            message = "; ".join(queue["errors"][:5])
            return self.failed(handle, phase, message, done, total, failed=len(queue["errors"]))
        if queue["next"] >= total and not queue["active"]:
            if queue["failed"]:
                return self.failed(
                    handle,
                    phase,
                    f"{queue['failed']} file(s) failed in {phase} tasks",
                    done,
                    total,
                    queue["failed"],
                )
            return Progress(done, total, 0, SUCCEEDED, handle, phase=phase)
        waiting = "" if queue["active"] else "waiting for another data repository task to finish"
        return Progress(done, total, 0, RUNNING, handle, phase=phase, message=waiting)


def _overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)
