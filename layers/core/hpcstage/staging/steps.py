"""The staging state machine's steps, as plain functions of (clients, run) -> small JSON.

statemachines/staging.asl.json drives them: validate -> select (-> restore) -> stage -> job ->
export -> verify -> release -> report, and on any failure cleanup. Everything a later step needs is
an object under the run's work prefix ``s3://<work bucket>/<work prefix>/<run id>/``; the state
machine carries only ``run`` (where that prefix is, and the poll settings its Wait and Choice states
read) and a few counters, so no payload grows with the number of objects.

Work objects:
    config.json          the validated input (StagingConfig)
    manifest.csv         the staging manifest written by selection
    archived.csv         selected objects in archive classes (restore policy)
    selection.json       the selection summary, capacity and restore numbers
    files.txt/files.nul  absolute paths of the staged files, as the job sees them (newline / NUL)
    inputs.nul           the same files relative to the job root (what cleanup may release)
    handles/<op>.json    the target's handle of the running stage/export/release operation
    job.json             the Slurm job: id, name, where its log is, its last state
    declared-outputs.nul what a Mountpoint job wrote (size and path of each file)
    verify.json, release.json, cleanup.json, report.json

Errors are exception classes (staging.errors): their names become the Step Functions error names,
and their messages the causes a person reads.
"""

from __future__ import annotations

import json
import posixpath
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from ..errors import InputError
from ..inventory.output import latest_key, latest_run
from ..inventory.report import human_bytes
from ..jobs.base import (
    JobBackend,
    JobError,
    JobLookupError,
    JobSpec,
    JobState,
    JobStatus,
    check_job_id,
)
from ..s3util import parse_s3_url
from ..shell import quote
from . import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    Handle,
    MountpointTarget,
    SelectionError,
    StagingError,
    StagingManifest,
    Target,
    check_archived,
    check_capacity,
    make_target,
    restored_count,
    select_objects,
)
from .config import (
    CANCEL_WAIT_S,
    DECLARED_OUTPUTS,
    DEFAULT_CLUSTER_USER,
    EPILOGUE_RECORD_EXIT,
    MAX_SCRIPT_BYTES,
    PROLOGUE_FETCH_EXIT,
    PROLOGUE_MKDIR_EXIT,
    PROLOGUE_MOUNT_EXIT,
    RELEASE_WAIT_S,
    StagingConfig,
    config_from_run,
    job_name,
)
from .errors import (
    ExportFailedError,
    ExportNotVerifiedError,
    JobCancelledError,
    JobFailedError,
    JobTimedOutError,
    NoInventoryError,
    ReleaseFailedError,
    StageFailedError,
)
from .hsm import MOUNTPOINT_S3_MOUNT
from .manifest import ManifestFile

_OPERATION_ERRORS: dict[str, type[StagingError]] = {
    "stage": StageFailedError,
    "export": ExportFailedError,
    "release": ReleaseFailedError,
}


# --------------------------------------------------------------------------------------------------
# Clients and work objects
# --------------------------------------------------------------------------------------------------


class LazyClients(Mapping[str, Any]):
    """boto3 clients made on first use, so a task builds only the clients its target needs."""

    NAMES = ("s3", "fsx", "ssm", "secretsmanager", "stepfunctions", "ec2")

    def __init__(self, factory: Callable[[str], Any], **given: Any) -> None:
        self._factory = factory
        self._clients: dict[str, Any] = dict(given)

    def __getitem__(self, name: str) -> Any:
        if name not in self.NAMES:
            raise KeyError(name)
        if name not in self._clients:
            self._clients[name] = self._factory(name)
        return self._clients[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.NAMES)

    def __len__(self) -> int:
        return len(self.NAMES)


def _put_json(s3: Any, cfg: StagingConfig, name: str, doc: Any) -> str:
    s3.put_object(Bucket=cfg.work.bucket, Key=cfg.work_key(name), Body=json.dumps(doc).encode())
    return cfg.work_object(name)


def _get_bytes(s3: Any, cfg: StagingConfig, name: str) -> bytes | None:
    try:
        body: bytes = s3.get_object(Bucket=cfg.work.bucket, Key=cfg.work_key(name))["Body"].read()
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
    return body


def _get_json(s3: Any, cfg: StagingConfig, name: str) -> Any:
    body = _get_bytes(s3, cfg, name)
    return None if body is None else json.loads(body)


def _require_json(s3: Any, cfg: StagingConfig, name: str) -> Any:
    doc = _get_json(s3, cfg, name)
    if doc is None:
        raise StagingError(f"{cfg.work_object(name)} is missing: the step that writes it did not run")
    return doc


def _nul_list(body: bytes | None) -> list[str]:
    if not body:
        return []
    return [p.decode("utf-8", "surrogateescape") for p in body.split(b"\0") if p]


def _target(cfg: StagingConfig, clients: Mapping[str, Any]) -> Target:
    return make_target(cfg.target, clients)


def _manifest(s3: Any, cfg: StagingConfig) -> StagingManifest:
    return StagingManifest.from_s3(s3, cfg.work_object("manifest.csv"))


# --------------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------------


def resolve_head_nodes(cfg: StagingConfig, clients: Mapping[str, Any] | None) -> StagingConfig:
    """Find the head node of each ``cluster_name`` by ParallelCluster's tags (once, for the whole
    run), and the cluster user from its OS when none was configured."""
    from ..jobs.ssm import find_head_node

    found: dict[str, tuple[str, str | None]] = {}

    def head_of(name: str) -> tuple[str, str | None]:
        if name not in found:
            if clients is None:
                raise InputError(f"cluster {name!r}: finding its head node needs an EC2 client")
            found[name] = find_head_node(clients["ec2"], name)
        return found[name]

    target, job = dict(cfg.target), dict(cfg.job)
    if target.get("cluster_name") and not target.get("head_node_instance_id"):
        target["head_node_instance_id"] = head_of(target["cluster_name"])[0]
    os_user = None
    if job.get("backend") == "ssm":
        if job.get("cluster_name") and not job.get("head_node_instance_id"):
            job["head_node_instance_id"], os_user = head_of(job["cluster_name"])
        job["cluster_user"] = job.get("cluster_user") or os_user or DEFAULT_CLUSTER_USER
    return replace(cfg, target=target, job=job)


def validate_task(
    s3: Any,
    cfg: StagingConfig,
    clients: Mapping[str, Any] | None = None,
    *,
    results_bucket: str = "",
    results_prefix: str = "inventory",
) -> dict[str, Any]:
    """Look up the latest inventory if the input asks for it (in ``results_bucket``, where the
    inventory state machine writes), find head nodes named by cluster (``clients["ec2"]``, made only
    then), record the validated input under the run's work prefix, and return what the state
    machine carries."""
    cfg = resolve_latest_inventory(s3, cfg, results_bucket=results_bucket, results_prefix=results_prefix)
    if cfg.target.get("cluster_name") or cfg.job.get("backend") == "ssm":
        cfg = resolve_head_nodes(cfg, clients)
    _put_json(s3, cfg, "config.json", cfg.to_dict())
    return cfg.run()


def resolve_latest_inventory(
    s3: Any, cfg: StagingConfig, *, results_bucket: str, results_prefix: str
) -> StagingConfig:
    """For ``{"latest": "s3://bucket/prefix"}``: the newest successful inventory run of that bucket
    and prefix, read from the ``_latest`` pointer the inventory state machine rewrites after each
    run (inventory.output.latest_key). The run found is recorded in config.json, so every later step
    reads that one run even if a newer one finishes meanwhile."""
    if cfg.latest_inventory_of is None:
        return cfg
    if not results_bucket:
        raise InputError(
            "'inventory' names the latest inventory, but this function has no RESULTS_BUCKET to look it up in"
        )
    of = parse_s3_url(cfg.latest_inventory_of)
    key = latest_key(results_prefix, of.bucket, of.prefix)
    run = latest_run(s3, results_bucket, key)
    if run is None:
        event = json.dumps({"bucket": of.bucket, "prefix": of.prefix} if of.prefix else {"bucket": of.bucket})
        raise NoInventoryError(
            f"there is no inventory of {cfg.latest_inventory_of} yet (no s3://{results_bucket}/{key}): make one "
            f"with the stack's inventory state machine, e.g. `sam remote invoke InventoryStateMachine "
            f"--stack-name STACK --event '{event}'`, or name an inventory run's s3:// URL in 'inventory'"
        )
    return replace(cfg, inventory=run.uri().rstrip("/"))


def select_task(clients: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """Select from the inventory, write the manifest and the job's file lists, check archive classes
    and capacity. Raises before anything is staged when the selection cannot be staged."""
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    result = select_objects(
        cfg.inventory,
        cfg.selection,
        s3=s3,
        output=cfg.work_object("manifest.csv"),
        output_format="csv",
    )
    if result.objects == 0:
        raise SelectionError(
            f"the selection matched none of the {result.rows_scanned:,} inventory rows in {cfg.inventory}"
        )
    if result.missing_keys:
        listed = ", ".join(map(repr, result.missing_keys[:10]))
        raise SelectionError(
            f"{len(result.missing_keys)} explicitly listed key(s) are not in the inventory: {listed}"
        )
    restore_requested = check_archived(
        result, cfg.archived_policy, s3=s3, days=cfg.restore_days, tier=cfg.restore_tier
    )
    if result.archived:
        sink = ManifestFile(cfg.work_object("archived.csv"), "csv", s3=s3)
        for entry in result.archived:
            sink.write(entry)
        sink.close()
    target = _target(cfg, clients)
    free = target.free_bytes()
    check_capacity(result.bytes, free, headroom=cfg.capacity_headroom)

    paths = target.job_paths(_manifest(s3, cfg))
    root = paths.root.rstrip("/") or "/"
    rels = [_relative_to(root, f) for f in paths.files]
    with_newline = [r for r in rels if "\n" in r]
    if with_newline:
        raise SelectionError(
            f"{len(with_newline)} selected key(s) contain a newline, which the job's one-path-per-line "
            f"HPCSTAGE_FILE_LIST cannot hold: {', '.join(map(repr, with_newline[:5]))}; leave them out"
        )
    clash = [r for r in rels if r == cfg.output_dir or r.startswith(cfg.output_dir + "/")]
    if clash:
        raise SelectionError(
            f"{len(clash)} selected file(s) would lie in the job's output directory {cfg.output_dir!r} "
            f"(e.g. {clash[0]!r}): choose an 'output' prefix that no selected key starts with"
        )
    s3.put_object(
        Bucket=cfg.work.bucket,
        Key=cfg.work_key("files.txt"),
        Body="".join(f + "\n" for f in paths.files).encode("utf-8", "surrogateescape"),
    )
    s3.put_object(
        Bucket=cfg.work.bucket,
        Key=cfg.work_key("files.nul"),
        Body=b"".join(f.encode("utf-8", "surrogateescape") + b"\0" for f in paths.files),
    )
    s3.put_object(
        Bucket=cfg.work.bucket,
        Key=cfg.work_key("inputs.nul"),
        Body=b"".join(r.encode("utf-8", "surrogateescape") + b"\0" for r in rels),
    )
    summary = result.to_dict()
    summary.update(
        {
            "free_bytes": free,
            "restore_requested": restore_requested,
            "files": len(paths.files),
            "job_root": root,
            "output_dir": posixpath.join(root, cfg.output_dir),
        }
    )
    _put_json(s3, cfg, "selection.json", summary)
    return {
        "objects": result.objects,
        "bytes": result.bytes,
        "files": len(paths.files),
        "archived_objects": len(result.archived),
        "restore_pending": restore_requested,
        "manifest": cfg.work_object("manifest.csv"),
    }


def _relative_to(root: str, path: str) -> str:
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise StagingError(f"the target placed {path!r} outside its job root {root!r}")
    return path[len(prefix) :]


def restore_poll_task(s3: Any, run: Mapping[str, Any], polls: int) -> dict[str, Any]:
    """How many selected archived objects still wait for their S3 restore."""
    cfg = config_from_run(s3, run)
    entries = list(StagingManifest.from_s3(s3, cfg.work_object("archived.csv")))
    done = restored_count(s3, entries)
    return {"pending": len(entries) - done, "restored": done, "total": len(entries), "polls": polls + 1}


def _save_handle(s3: Any, cfg: StagingConfig, operation: str, handle: Handle) -> None:
    _put_json(s3, cfg, f"handles/{operation}.json", handle.to_dict())


def _load_handle(s3: Any, cfg: StagingConfig, operation: str) -> Handle:
    return Handle.from_dict(_require_json(s3, cfg, f"handles/{operation}.json"))


def stage_start_task(clients: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    target = _target(cfg, clients)
    handle = target.stage(_manifest(s3, cfg))
    _save_handle(s3, cfg, "stage", handle)
    return {"state": RUNNING, "polls": 0, "done": 0, "total": 0, "failed": 0}


def operation_poll_task(
    clients: Mapping[str, Any], run: Mapping[str, Any], operation: str, polls: int
) -> dict[str, Any]:
    """One progress call of a stage, export or release; a FAILED operation raises its error."""
    if operation not in _OPERATION_ERRORS:
        raise ValueError(f"operation must be one of {', '.join(_OPERATION_ERRORS)}, not {operation!r}")
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    target = _target(cfg, clients)
    progress = target.progress(_load_handle(s3, cfg, operation))
    _save_handle(s3, cfg, operation, progress.handle)
    if progress.state == FAILED:
        raise _OPERATION_ERRORS[operation](
            f"{operation} failed on the {cfg.target['type']} target: {progress.failed} of {progress.total} "
            f"failed ({progress.phase}): {progress.message[:1500]}"
        )
    return {
        "state": progress.state,
        "polls": polls + 1,
        "done": progress.done,
        "total": progress.total,
        "failed": progress.failed,
    }


def export_start_task(clients: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    handle = _target(cfg, clients).export([cfg.output_dir])
    _save_handle(s3, cfg, "export", handle)
    return {"state": RUNNING, "polls": 0, "done": 0, "total": 0, "failed": 0}


def verify_task(clients: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """Every file in the job's output directory must have a verified copy in S3."""
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    target = _target(cfg, clients)
    if isinstance(target, MountpointTarget):
        # Every file the job wrote through the mount, by its own record; none is "at least one object".
        body = _get_bytes(s3, cfg, DECLARED_OUTPUTS)
        if body is None:
            raise ExportNotVerifiedError(
                f"the job left no record of its outputs ({cfg.work_object(DECLARED_OUTPUTS)}): it was killed "
                "before its epilogue, or could not write to the work bucket (see the cluster-side policy); "
                "nothing can be verified"
            )
        result = target.verify_declared(cfg.output_dir, declared_outputs(body))
    else:
        result = target.verify_exported([cfg.output_dir])
    _put_json(s3, cfg, "verify.json", result.to_dict(max_listed=1000))
    if not result.all_archived:
        listed = "; ".join(f"{p!r}: {result.reasons.get(p, '')}" for p in result.missing[:10])
        raise ExportNotVerifiedError(
            f"{len(result.missing)} of {result.checked} output file(s) have no verified copy under {cfg.output}; "
            f"they stay in the cache, nothing was released: {listed}"
        )
    return {"checked": result.checked, "verified": len(result.verified), "output": cfg.output}


def release_start_task(clients: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """Release the staged inputs still identical to their S3 source, and the verified outputs.

    An input the job changed is no longer a copy of anything in S3: it is kept, and reported.
    """
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    target = _target(cfg, clients)
    inputs = _nul_list(_get_bytes(s3, cfg, "inputs.nul"))
    checked = target.verify_exported(inputs) if inputs else None
    released_inputs = checked.verified if checked else []
    kept = checked.missing if checked else []
    handle = target.release([*released_inputs, cfg.output_dir])
    _save_handle(s3, cfg, "release", handle)
    _put_json(
        s3,
        cfg,
        "release.json",
        {
            "inputs_released": len(released_inputs),
            "inputs_kept": len(kept),
            "kept_sample": {p: (checked.reasons.get(p, "") if checked else "") for p in kept[:50]},
            "outputs_released": cfg.output_dir,
        },
    )
    return {"state": RUNNING, "polls": 0, "done": 0, "total": 0, "failed": 0, "inputs_kept": len(kept)}


# --------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------


def _secret_token(secrets: Any, secret_arn: str) -> Callable[[], str]:
    cache: dict[str, str] = {}

    def token() -> str:
        if "value" not in cache:
            cache["value"] = str(secrets.get_secret_value(SecretId=secret_arn)["SecretString"]).strip()
        return cache["value"]

    return token


def make_backend(cfg: StagingConfig, clients: Mapping[str, Any]) -> JobBackend:
    job = cfg.job
    if job["backend"] == "local":
        from ..jobs.local import LocalSlurm

        return LocalSlurm()
    if job["backend"] == "ssm":
        from ..jobs.ssm import ParallelClusterSSM

        return ParallelClusterSSM(
            clients["ssm"],
            job["head_node_instance_id"],
            user=job["cluster_user"] or DEFAULT_CLUSTER_USER,
            command_timeout_s=int(job.get("command_timeout_s", 120)),
            output_s3_bucket=cfg.work.bucket,
            output_s3_prefix=cfg.work_key("ssm-output"),
            s3=clients["s3"],
        )
    from ..jobs.rest import SlurmRest

    return SlurmRest(
        job["base_url"],
        user_name=job["user_name"],
        token=_secret_token(clients["secretsmanager"], job["jwt_secret_arn"]),
    )


def _job_command(s3: Any, cfg: StagingConfig) -> str:
    if "command" in cfg.job:
        return str(cfg.job["command"])
    loc = parse_s3_url(cfg.job["script"])
    head = s3.head_object(Bucket=loc.bucket, Key=loc.prefix)
    if head["ContentLength"] > MAX_SCRIPT_BYTES:
        raise InputError(f"job script {cfg.job['script']} is over {MAX_SCRIPT_BYTES // 1024} KiB")
    body = s3.get_object(Bucket=loc.bucket, Key=loc.prefix)["Body"].read()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"job script {cfg.job['script']} is not UTF-8 text") from None
    if "\0" in text or not text.strip():
        raise InputError(f"job script {cfg.job['script']} is empty or holds NUL bytes")
    return text


def build_job_spec(s3: Any, cfg: StagingConfig, fetch_lists: bool) -> JobSpec:
    """The job: a prologue hpcstage writes (every value quoted), then the requested command."""
    selection = _require_json(s3, cfg, "selection.json")
    workdir = cfg.job["workdir"]
    file_list = posixpath.join(workdir, f"hpcstage-{cfg.run_id}.files")
    environment = {
        **cfg.job["env"],
        "HPCSTAGE_RUN_ID": cfg.run_id,
        "HPCSTAGE_STAGED_ROOT": selection["job_root"],
        "HPCSTAGE_OUTPUT_DIR": selection["output_dir"],
        "HPCSTAGE_FILE_LIST0": file_list + "0",
    }
    prologue = [
        "# hpcstage prologue: the output directory, and the staged file lists",
        f'mkdir -p -- "$HPCSTAGE_OUTPUT_DIR" || exit {PROLOGUE_MKDIR_EXIT}',
    ]
    if fetch_lists:
        for name, variable in (("files.txt", "HPCSTAGE_FILE_LIST"), ("files.nul", "HPCSTAGE_FILE_LIST0")):
            prologue.append(
                f'aws s3 cp --only-show-errors {quote(cfg.work_object(name))} "${variable}" '
                f"|| exit {PROLOGUE_FETCH_EXIT}"
            )
    if cfg.target["type"] == "mountpoint":
        prologue.extend(_mountpoint_prologue(cfg))
    prologue.append("# the job")
    return JobSpec(
        name=job_name(cfg.run_id),
        command="\n".join(prologue) + "\n" + _job_command(s3, cfg),
        workdir=workdir,
        output_dir=workdir,
        environment=environment,
        file_list=file_list,
        cpus=cfg.job["cpus"],
        time_limit_min=cfg.job["time_limit_min"],
        partition=cfg.job.get("partition"),
        user=cfg.job.get("user"),
    )


def _mountpoint_prologue(cfg: StagingConfig) -> list[str]:
    """On the node that runs the job: the mount is Mountpoint's and the first staged file shows
    through it (the mount table cannot name the bucket); at exit, record every output file
    (size and path) for verification, keeping the job's own exit status."""
    mount = quote(cfg.target["mount_path"])
    declared = quote(cfg.work_object(DECLARED_OUTPUTS))
    return [
        "# hpcstage: the Mountpoint mount on this node",
        f'[ "$(findmnt -rn -o FSTYPE,SOURCE --mountpoint {mount})" = {quote(MOUNTPOINT_S3_MOUNT)} ] || '
        f'{{ echo "hpcstage: "{mount}" is not a Mountpoint for Amazon S3 mount on $(hostname)" >&2; '
        f"exit {PROLOGUE_MOUNT_EXIT}; }}",
        'IFS= read -r hpcstage_first < "$HPCSTAGE_FILE_LIST" || hpcstage_first=',
        '[ -z "$hpcstage_first" ] || [ -e "$hpcstage_first" ] || '
        '{ echo "hpcstage: $hpcstage_first does not show through the mount on $(hostname)" >&2; '
        f"exit {PROLOGUE_MOUNT_EXIT}; }}",
        "hpcstage_record_outputs() {",
        "  local rc=$? list",
        f"  list=$(mktemp) || exit {EPILOGUE_RECORD_EXIT}",
        '  if find "$HPCSTAGE_OUTPUT_DIR" -type f -printf \'%s\\t%P\\0\' >"$list" &&',
        f'    aws s3 cp --only-show-errors "$list" {declared}; then :',
        f'  elif [ "$rc" -eq 0 ]; then rc={EPILOGUE_RECORD_EXIT}',
        "  fi",
        '  rm -f -- "$list"',
        '  exit "$rc"',
        "}",
        "trap hpcstage_record_outputs EXIT",
    ]


def declared_outputs(body: bytes) -> list[tuple[str, int]]:
    """The epilogue's record: ``size TAB path NUL`` per file → [(path, size)]."""
    entries: list[tuple[str, int]] = []
    for record in body.split(b"\0"):
        if not record:
            continue
        size, sep, path = record.partition(b"\t")
        if not sep or not size.isdigit() or not path:
            raise StagingError(f"unreadable entry in the job's output record: {record[:200]!r}")
        entries.append((path.decode("utf-8", "surrogateescape"), int(size)))
    return entries


def _write_local_lists(s3: Any, cfg: StagingConfig, spec: JobSpec) -> None:
    """A local target is on this machine: the lists go straight into the job's workdir."""
    Path(spec.workdir).mkdir(parents=True, exist_ok=True)
    file_list = spec.file_list or posixpath.join(spec.workdir, "files")
    for name, dest in (("files.txt", file_list), ("files.nul", file_list + "0")):
        s3.download_file(cfg.work.bucket, cfg.work_key(name), dest)
    output_dir = Path(spec.environment["HPCSTAGE_OUTPUT_DIR"])
    output_dir.mkdir(parents=True, exist_ok=True)


def submit_job_task(clients: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """Submit the job once: a retried invocation finds job.json and returns the job already submitted."""
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    existing = _get_json(s3, cfg, "job.json")
    if existing is not None:
        return {"job_id": existing["job_id"], "state": existing.get("state", "PENDING"), "polls": 0}
    local = cfg.target["type"] == "local"
    spec = build_job_spec(s3, cfg, fetch_lists=not local)
    if local:
        _write_local_lists(s3, cfg, spec)
    job_id = make_backend(cfg, clients).submit(spec)
    record = {
        "job_id": job_id,
        "name": spec.name,
        "backend": cfg.job["backend"],
        "log": posixpath.join(spec.output_dir, f"slurm-{job_id}.out"),
        "submitted": datetime.now(UTC).isoformat(),
        "state": JobState.PENDING.value,
    }
    _put_json(s3, cfg, "job.json", record)
    return {"job_id": job_id, "state": JobState.PENDING.value, "polls": 0}


def _log_tail(cfg: StagingConfig, log: str, max_chars: int = 800) -> str:
    """The end of the job's Slurm output, when it is readable here (the local backend)."""
    if cfg.job["backend"] != "local":
        return ""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_chars))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def describe_job_end(job: Mapping[str, Any], status: JobStatus) -> str:
    exit_code = "unknown" if status.exit_code is None else str(status.exit_code)
    text = f"job {job['job_id']} ({job['name']}) ended {status.state.value} with exit code {exit_code}"
    if status.signal:
        text += f" (signal {status.signal})"
    if status.reason:
        text += f", reason {status.reason}"
    return text + f"; its Slurm output is {job['log']}"


def job_poll_task(clients: Mapping[str, Any], run: Mapping[str, Any], polls: int) -> dict[str, Any]:
    """The job's state; a job that ended without success raises JobFailedError (or a subclass)
    whose message holds the exit code."""
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    job = _require_json(s3, cfg, "job.json")
    status = make_backend(cfg, clients).status(check_job_id(job["job_id"]), name=job["name"])
    if status.terminal:
        job.update(state=status.state.value, exit_code=status.exit_code, signal=status.signal)
        _put_json(s3, cfg, "job.json", job)
    if status.terminal and not status.succeeded:
        message = describe_job_end(job, status)
        tail = _log_tail(cfg, job["log"])
        if tail:
            message += f"; it ends with: {tail}"
        if status.state is JobState.CANCELLED:
            raise JobCancelledError(message)
        if status.state is JobState.TIMEOUT:
            raise JobTimedOutError(message)
        raise JobFailedError(message)
    return {
        "job_id": job["job_id"],
        "state": status.state.value,
        "exit_code": status.exit_code,
        "polls": polls + 1,
    }


# --------------------------------------------------------------------------------------------------
# Report and cleanup
# --------------------------------------------------------------------------------------------------


def report_task(s3: Any, run: Mapping[str, Any]) -> dict[str, Any]:
    cfg = config_from_run(s3, run)
    selection = _require_json(s3, cfg, "selection.json")
    job = _require_json(s3, cfg, "job.json")
    verify = _get_json(s3, cfg, "verify.json") or {}
    release = _get_json(s3, cfg, "release.json") or {}
    report = {
        "run_id": cfg.run_id,
        "inventory": cfg.inventory,
        "target": cfg.target["type"],
        "objects": selection["objects"],
        "bytes": selection["bytes"],
        "size": human_bytes(selection["bytes"]),
        "job_id": job["job_id"],
        "job_state": job.get("state"),
        "exit_code": job.get("exit_code"),
        "outputs": verify.get("verified_count", 0),
        "output": cfg.output,
        "inputs_released": release.get("inputs_released", 0),
        "inputs_kept": release.get("inputs_kept", 0),
        "finished": datetime.now(UTC).isoformat(),
    }
    report["report"] = _put_json(s3, cfg, "report.json", {**report, "release": release, "verify": verify})
    return report


def _stop_job(cfg: StagingConfig, clients: Mapping[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """Cancel the job if it is still queued or running, and wait (bounded) for it to end.

    ``ended`` is False when the job may still be running (Slurm did not answer, or the job did not
    stop in time): the caller must then keep the inputs it reads.
    """
    backend = make_backend(cfg, clients)
    job_id, name = check_job_id(job["job_id"]), job["name"]
    outcome: dict[str, Any] = {"job_id": job_id, "cancelled": False}
    try:
        status = backend.status(job_id, name=name)
        outcome["was"] = status.state.value
        if not status.terminal:
            backend.cancel(job_id, name=name)
            outcome["cancelled"] = True
            deadline = time.monotonic() + CANCEL_WAIT_S
            for _ in range(int(CANCEL_WAIT_S) + 1):
                status = backend.status(job_id, name=name)
                if status.terminal or time.monotonic() >= deadline:
                    break
                time.sleep(1.0)
    except JobLookupError as err:
        # Slurm forgot the job (purged after MinJobAge, or the id was reused): it is not running ours.
        outcome.update(state=JobState.UNKNOWN.value, ended=True, note=str(err))
        return outcome
    except JobError as err:
        outcome.update(state=JobState.UNKNOWN.value, ended=False, note=f"could not check or cancel: {err}")
        return outcome
    outcome.update(state=status.state.value, exit_code=status.exit_code, ended=status.terminal)
    return outcome


def _release_inputs(s3: Any, cfg: StagingConfig, target: Target, inputs: list[str]) -> dict[str, Any]:
    """Release the staged inputs that are still exact copies of their source; nothing else."""
    checked = target.verify_exported(inputs)
    outcome: dict[str, Any] = {
        "inputs": len(inputs),
        "inputs_released": 0,
        "inputs_kept": len(checked.missing),
        "kept_sample": {p: checked.reasons.get(p, "") for p in checked.missing[:20]},
    }
    if not checked.verified:
        return outcome
    handle = target.release(checked.verified)
    deadline = time.monotonic() + RELEASE_WAIT_S
    progress = target.progress(handle)
    for _ in range(int(RELEASE_WAIT_S) + 1):
        if progress.finished or time.monotonic() >= deadline:
            break
        time.sleep(1.0)
        progress = target.progress(handle)
    outcome["release_state"] = progress.state
    outcome["inputs_released"] = len(checked.verified) if progress.state == SUCCEEDED else progress.done
    if progress.state == RUNNING:
        # Still going (an FSx release task): whoever looks can continue from this handle.
        outcome["release_handle"] = _put_json(s3, cfg, "handles/cleanup-release.json", handle.to_dict())
    return outcome


def cleanup_task(
    clients: Mapping[str, Any], run: Mapping[str, Any], error: Mapping[str, Any] | None
) -> dict[str, Any]:
    """After a failure: cancel the job if it still runs, release the staged inputs (only those
    unchanged since staging), and never release outputs (they may be the only copy).

    Returns what was done; the state machine then reports the original error.
    """
    s3 = clients["s3"]
    cfg = config_from_run(s3, run)
    outcome: dict[str, Any] = {"run_id": cfg.run_id, "error": (error or {}).get("Error")}
    job = _get_json(s3, cfg, "job.json")
    job_still_running = False
    if job is not None:
        outcome["job"] = _stop_job(cfg, clients, job)
        job_still_running = not outcome["job"]["ended"]
    staged = _get_json(s3, cfg, "handles/stage.json") is not None
    if not staged:
        outcome["inputs"] = "nothing was staged"
    elif job_still_running:
        outcome["inputs"] = f"kept: job {job['job_id'] if job else ''} did not end after scancel"
    else:
        inputs = _nul_list(_get_bytes(s3, cfg, "inputs.nul"))
        try:
            outcome.update(_release_inputs(s3, cfg, _target(cfg, clients), inputs))
        except (StagingError, ClientError) as err:
            # Reported with the run's failure; the inputs stay staged, which loses nothing.
            outcome["release_error"] = f"{type(err).__name__}: {err}"
    selection = _get_json(s3, cfg, "selection.json")
    if selection is not None:
        outcome["outputs_kept"] = selection["output_dir"]
    _put_json(s3, cfg, "cleanup.json", outcome)
    return outcome
