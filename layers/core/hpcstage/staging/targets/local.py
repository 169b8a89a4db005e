"""LocalTarget: a directory on this machine playing the cache (the embedded default).

Layout under ``root``:
    data/<key>              staged objects and job outputs (the job root)
    .hpcstage/state.json    what is staged, exported, verified and released, and each operation's cursor
    .hpcstage/plans/*.jsonl the items of each operation
    .hpcstage/tmp/          downloads in flight (renamed into data/ only when complete)

Work is done in slices (``max_objects_per_call``; all at once by default), so a progress call
continues where the last call stopped, and a crashed process loses at most one slice, which is
redone idempotently. One process at a time: calls take an exclusive lock on the state file.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from ...inventory.output import _file_md5
from ...s3util import parse_s3_url
from ..errors import ReleaseRefusedError, StagingError, TargetConfigError, UnsafePathError
from ..manifest import StagingManifest
from ..paths import as_prefix, check_inside, is_folder_marker, relative_path, validate_all
from .base import FAILED, RUNNING, SUCCEEDED, Handle, JobPaths, Progress, Target, VerifyResult

STATE_VERSION = 1
_MAX_ERRORS_KEPT = 50
_CHUNK = 1 << 20
_SAVE_EVERY = 1000


class LocalTarget(Target):
    kind = "local"

    def __init__(
        self,
        root: str | os.PathLike[str],
        s3: Any,
        *,
        export_url: str | None = None,
        max_workers: int = 8,
        max_objects_per_call: int | None = None,
        run_id: str = "local",
    ) -> None:
        if max_workers < 1:
            raise TargetConfigError(f"max_workers must be at least 1, not {max_workers}")
        if max_objects_per_call is not None and max_objects_per_call < 1:
            raise TargetConfigError(f"max_objects_per_call must be at least 1, not {max_objects_per_call}")
        self.root = Path(root).absolute()
        self.data_root = self.root / "data"
        self._meta = self.root / ".hpcstage"
        for d in (self.data_root, self._meta / "plans", self._meta / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        self.s3 = s3
        self.export_location = parse_s3_url(export_url) if export_url else None
        self.max_workers = max_workers
        self.max_objects_per_call = max_objects_per_call
        self.run_id = run_id

    # -- capacity and job view -------------------------------------------------------------

    def free_bytes(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def job_paths(self, manifest: StagingManifest) -> JobPaths:
        root = str(self.data_root)
        files = [os.path.join(root, relative_path(e.key)) for e in manifest if not is_folder_marker(e.key)]
        return JobPaths(root=root, files=files)

    # -- stage -----------------------------------------------------------------------------

    def stage(self, manifest: StagingManifest) -> Handle:
        manifest.bucket()  # one bucket per manifest, or a clear error before anything is written
        validate_all(e.key for e in manifest)
        items = (
            {"bucket": e.bucket, "key": e.key, "size": e.size, "rel": relative_path(e.key)} for e in manifest
        )
        op_id = self._start("stage", items)
        return self._handle("stage", self.run_id, op_id=op_id)

    def stage_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "stage")
        return self._advance(handle, self._download)

    def _download(self, item: dict[str, Any], state: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        rel = item["rel"]
        dest = self._dest(rel)
        if is_folder_marker(item["key"]):
            self._make_dirs(dest)
            return rel, None
        known = state["staged"].get(rel)
        same_object = known and (known["bucket"], known["key"], known["size"]) == (
            item["bucket"],
            item["key"],
            item["size"],
        )
        if same_object and _unchanged(dest, known):
            return rel, known  # staged by an earlier call: nothing to do
        self._make_dirs(dest.parent)
        tmp = self._meta / "tmp" / uuid.uuid4().hex
        try:
            response = self.s3.get_object(Bucket=item["bucket"], Key=item["key"])
            body = response["Body"]
            with open(tmp, "wb") as f:
                for chunk in iter(lambda: body.read(_CHUNK), b""):
                    f.write(chunk)
            size = tmp.stat().st_size
            if size != item["size"]:
                raise StagingError(
                    f"s3://{item['bucket']}/{item['key']} is {size} bytes, the manifest says {item['size']}: "
                    "it changed since the inventory; select again"
                )
            # rename() replaces a symlink at dest rather than writing through it.
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                tmp.unlink()
        st = dest.stat()
        etag = str(response.get("ETag", "")).strip('"')
        return rel, {
            "bucket": item["bucket"],
            "key": item["key"],
            "size": st.st_size,
            "etag": etag,
            "mtime_ns": st.st_mtime_ns,
        }

    # -- export ----------------------------------------------------------------------------

    def export(self, paths: Sequence[str]) -> Handle:
        if self.export_location is None:
            raise TargetConfigError("this local target has no export_url (s3://bucket/prefix) to export to")
        files, problems = self._expand(paths)
        if problems:
            raise StagingError(
                f"cannot export {len(problems)} path(s): "
                + "; ".join(f"{p}: {r}" for p, r in list(problems.items())[:10])
            )
        loc = self.export_location
        items = ({"rel": rel, "bucket": loc.bucket, "key": as_prefix(loc.prefix) + rel} for rel in files)
        op_id = self._start("export", items)
        return self._handle("export", self.run_id, op_id=op_id)

    def export_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "export")
        return self._advance(handle, self._upload)

    def _upload(self, item: dict[str, Any], state: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        rel = item["rel"]
        path = self._dest(rel)
        check_inside(self.data_root, path)
        before = path.lstat()
        md5 = _file_md5(str(path))
        self.s3.upload_file(str(path), item["bucket"], item["key"])
        after = path.lstat()
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise StagingError(f"{rel} changed while it was uploaded; export it again when it is complete")
        return rel, {
            "bucket": item["bucket"],
            "key": item["key"],
            "size": before.st_size,
            "md5": md5,
            "mtime_ns": before.st_mtime_ns,
        }

    # -- verify and release ----------------------------------------------------------------

    def verify_exported(self, paths: Sequence[str]) -> VerifyResult:
        with self._locked() as state:
            files, problems = self._expand(paths, state)
            reasons = dict(problems)
            verified: list[str] = []
            for rel in files:
                reason = self._verify_one(rel, state)
                if reason is None:
                    verified.append(rel)
                    path = self._dest(rel)
                    if path.exists():
                        st = path.stat()
                        state["verified"][rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
                else:
                    reasons[rel] = reason
                    state["verified"].pop(rel, None)
            self._save(state)
        missing = sorted(reasons)
        return VerifyResult(
            all_archived=not missing, missing=missing, checked=len(files), reasons=reasons, verified=verified
        )

    def _verify_one(self, rel: str, state: dict[str, Any]) -> str | None:
        """None when rel has a current copy in S3, else why not."""
        exported = state["exported"].get(rel)
        staged = state["staged"].get(rel)
        record, origin = (exported, "export") if exported else (staged, "source")
        if record is None:
            return "never exported and not staged from S3"
        path = self._dest(rel)
        if path.exists():
            if not _unchanged(path, record):
                return f"changed since its {origin} copy was made"
        elif rel not in state["released"]:
            return "missing locally and not released by hpcstage"
        try:
            head = self.s3.head_object(Bucket=record["bucket"], Key=record["key"])
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            return f"s3://{record['bucket']}/{record['key']} cannot be checked ({code or err})"
        if head["ContentLength"] != record["size"]:
            return f"s3://{record['bucket']}/{record['key']} is {head['ContentLength']} bytes, expected {record['size']}"
        etag = str(head.get("ETag", "")).strip('"')
        expected = record.get("md5") if origin == "export" else record.get("etag")
        # A multipart ETag ("<md5 of md5s>-<parts>") is not the file's MD5; size is all we compare then.
        if expected and "-" not in etag and etag != expected:
            return f"s3://{record['bucket']}/{record['key']} has ETag {etag}, expected {expected}"
        return None

    def release(self, paths: Sequence[str]) -> Handle:
        with self._locked() as state:
            files, problems = self._expand(paths, state)
            refused = dict(problems)
            for rel in files:
                if rel in state["released"] and not self._dest(rel).exists():
                    continue
                seen = state["verified"].get(rel)
                if seen is None:
                    refused[rel] = "not verified as exported"
                elif not _unchanged(self._dest(rel), seen):
                    refused[rel] = "changed since it was verified"
            if refused:
                listed = sorted(refused)[:20]
                raise ReleaseRefusedError(
                    f"refusing to release: {len(refused)} file(s) not verified as exported, nothing released: "
                    + "; ".join(f"{p!r} ({refused[p]})" for p in listed),
                    listed,
                    len(refused),
                )
            for rel in files:
                path = self._dest(rel)
                if path.exists():
                    path.unlink()
                    _remove_empty_parents(path.parent, self.data_root)
                state["released"][rel] = True
            op_id = self._new_op(state, "release", total=len(files))
            op = state["ops"][op_id]
            op["done"] = op["cursor"] = len(files)
            self._save(state)
        return self._handle("release", self.run_id, op_id=op_id)

    def release_progress(self, handle: Handle) -> Progress:
        self._check_handle(handle, "release")
        with self._locked() as state:
            return self._progress(handle, state)

    # -- the operation engine --------------------------------------------------------------

    def _start(self, kind: str, items: Iterator[dict[str, Any]]) -> str:
        with self._locked() as state:
            op_id = self._new_op(state, kind, total=0)
            total = 0
            with open(self._meta / "plans" / f"{op_id}.jsonl", "w", encoding="utf-8") as f:
                for item in items:
                    f.write(json.dumps(item, ensure_ascii=False) + "\n")
                    total += 1
            state["ops"][op_id]["total"] = total
            self._save(state)
        return op_id

    def _new_op(self, state: dict[str, Any], kind: str, *, total: int) -> str:
        op_id = f"{kind}-{state['next_op']:05d}"
        state["next_op"] += 1
        state["ops"][op_id] = {
            "kind": kind,
            "total": total,
            "cursor": 0,
            "done": 0,
            "failed": 0,
            "errors": [],
        }
        return op_id

    def _advance(
        self,
        handle: Handle,
        work: Callable[[dict[str, Any], dict[str, Any]], tuple[str, dict[str, Any] | None]],
    ) -> Progress:
        """Do the next slice of the operation's items in a bounded thread pool, then report."""
        with self._locked() as state:
            op = self._op(state, handle)
            budget = op["total"] - op["cursor"]
            if self.max_objects_per_call is not None:
                budget = min(budget, self.max_objects_per_call)
            if budget > 0:
                record_key = "staged" if op["kind"] == "stage" else "exported"
                chunk_size = self.max_workers * 4
                unsaved = 0
                with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
                    items = self._plan_items(handle.data["op_id"], op["cursor"], budget)
                    while chunk := list(itertools.islice(items, chunk_size)):
                        for item, outcome in zip(
                            chunk, pool.map(lambda i: _attempt(work, i, state), chunk), strict=True
                        ):
                            if isinstance(outcome, str):
                                op["failed"] += 1
                                if len(op["errors"]) < _MAX_ERRORS_KEPT:
                                    op["errors"].append(f"{item['key']!r}: {outcome}")
                            else:
                                rel, record = outcome
                                if record is not None:
                                    state[record_key][rel] = record
                                    state["released"].pop(rel, None)
                                op["done"] += 1
                        op["cursor"] += len(chunk)
                        unsaved += len(chunk)
                        if unsaved >= _SAVE_EVERY:
                            self._save(state)  # a crash loses at most this many items' records
                            unsaved = 0
                self._save(state)
            return self._progress(handle, state)

    def _plan_items(self, op_id: str, start: int, count: int) -> Iterator[dict[str, Any]]:
        with open(self._meta / "plans" / f"{op_id}.jsonl", encoding="utf-8") as f:
            for line in itertools.islice(f, start, start + count):
                yield json.loads(line)

    def _progress(self, handle: Handle, state: dict[str, Any]) -> Progress:
        op = self._op(state, handle)
        status = RUNNING if op["cursor"] < op["total"] else (FAILED if op["failed"] else SUCCEEDED)
        message = "; ".join(op["errors"][:5])
        if op["failed"] > 5:
            message += f" (and {op['failed'] - 5} more failures)"
        return Progress(
            done=op["done"],
            total=op["total"],
            failed=op["failed"],
            state=status,
            handle=handle,
            phase=op["kind"],
            message=message,
        )

    def _op(self, state: dict[str, Any], handle: Handle) -> dict[str, Any]:
        op_id = handle.data.get("op_id")
        if op_id not in state["ops"]:
            raise StagingError(
                f"no operation {op_id!r} in {self._meta / 'state.json'}: wrong root for this handle?"
            )
        op: dict[str, Any] = state["ops"][op_id]
        return op

    # -- paths and state -------------------------------------------------------------------

    def _dest(self, rel: str) -> Path:
        return self.data_root / rel

    def _make_dirs(self, directory: Path) -> None:
        """mkdir -p below the data root, one component at a time, never through a symlink
        (a job could plant one pointing anywhere; mkdir -p would follow it)."""
        current = self.data_root
        for part in directory.relative_to(self.data_root).parts:
            current = current / part
            # exist_ok: another download thread may have made it a moment ago. Checked after, too,
            # because mkdir(exist_ok=True) is satisfied by a symlink to a directory.
            current.mkdir(exist_ok=True)
            if current.is_symlink():
                raise UnsafePathError(f"{current} is a symlink; refusing to stage through it")

    def _expand(
        self, paths: Sequence[str], state: dict[str, Any] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """Files under ``paths`` (relative to the job root), and the paths that cannot be used.

        Symlinks are never followed: a job could point one at any file on this machine.
        Released files, which no longer exist here, are included when named directly.
        """
        if isinstance(paths, str):
            raise TypeError("paths must be a list of paths, not a string")
        files: list[str] = []
        problems: dict[str, str] = {}
        for given in paths:
            try:
                rel = relative_path(given, what="path")
                path = self._dest(rel)
                check_inside(self.data_root, path.parent)
            except UnsafePathError as err:
                problems[given] = str(err)
                continue
            if path.is_symlink():
                problems[rel] = "is a symlink; only regular files are exported"
            elif path.is_dir():
                files.extend(self._walk(rel, problems))
            elif path.is_file() or (state is not None and rel in state["released"]):
                files.append(rel)
            else:
                problems[rel] = "does not exist"
        return files, problems

    def _walk(self, rel: str, problems: dict[str, str]) -> Iterator[str]:
        for dirpath, dirnames, filenames in os.walk(self._dest(rel)):
            base = os.path.relpath(dirpath, self.data_root)
            for name in dirnames:
                if os.path.islink(os.path.join(dirpath, name)):
                    problems[os.path.join(base, name)] = "is a symlink; only regular files are exported"
            for name in sorted(filenames):
                child = os.path.join(base, name)
                if os.path.islink(os.path.join(dirpath, name)):
                    problems[child] = "is a symlink; only regular files are exported"
                else:
                    yield child

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        with open(self._meta / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self._load()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> dict[str, Any]:
        path = self._meta / "state.json"
        if not path.exists():
            return {
                "version": STATE_VERSION,
                "next_op": 1,
                "staged": {},
                "exported": {},
                "verified": {},
                "released": {},
                "ops": {},
            }
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if state.get("version") != STATE_VERSION:
            raise StagingError(f"{path} has state version {state.get('version')}, expected {STATE_VERSION}")
        return state

    def _save(self, state: dict[str, Any]) -> None:
        path = self._meta / "state.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)


def _attempt(
    work: Callable[[dict[str, Any], dict[str, Any]], tuple[str, dict[str, Any] | None]],
    item: dict[str, Any],
    state: dict[str, Any],
) -> tuple[str, dict[str, Any] | None] | str:
    """The item's outcome, or why it failed: per-object failures are counted, not fatal."""
    try:
        return work(item, state)
    except (ClientError, OSError, StagingError) as err:
        return str(err)


def _unchanged(path: Path, record: dict[str, Any]) -> bool:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    return st.st_size == record["size"] and st.st_mtime_ns == record["mtime_ns"]


def _remove_empty_parents(directory: Path, stop: Path) -> None:
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (or not ours to remove): stop climbing
        directory = directory.parent
