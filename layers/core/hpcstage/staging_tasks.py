"""The staging state machine's tasks, as plain functions of (clients, run) -> small JSON.

statemachines/staging.asl.json drives them: validate -> select (-> restore) -> stage -> job ->
export -> verify -> release -> report, and on any failure cleanup. Everything a later task needs is
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
    verify.json, release.json, cleanup.json, report.json

Errors are exception classes: their names become the Step Functions error names, and their
messages the causes a person reads.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from .errors import InputError
from .inventory.report import human_bytes
from .jobs.base import (
    ENV_NAME_RE,
    JobBackend,
    JobError,
    JobLookupError,
    JobSpec,
    JobState,
    JobStatus,
    check_job_id,
)
from .s3util import S3Url, parse_s3_url
from .shell import quote
from .staging import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    TARGET_TYPES,
    Handle,
    MountpointTarget,
    Selection,
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
from .staging.hsm import MOUNTPOINT_S3_MOUNT
from .staging.manifest import ManifestFile
from .staging.paths import UnsafePathError, as_prefix, relative_path
from .staging.select import ARCHIVE_POLICIES, RESTORE_TIERS

# --------------------------------------------------------------------------------------------------
# Errors (their class names are the Step Functions error names)
# --------------------------------------------------------------------------------------------------


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


_OPERATION_ERRORS: dict[str, type[StagingError]] = {
    "stage": StageFailedError,
    "export": ExportFailedError,
    "release": ReleaseFailedError,
}

# --------------------------------------------------------------------------------------------------
# Limits and defaults
# --------------------------------------------------------------------------------------------------

RUN_ID_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")
INSTANCE_ID_RE = re.compile(r"^i-[0-9a-f]{8,17}$")
# ParallelCluster's cluster name rule (pcluster constants PCLUSTER_NAME_REGEX, at most 60 characters).
CLUSTER_NAME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,59}$")
DEFAULT_CLUSTER_USER = "ec2-user"
# Stands for the head node in validation until validate_task finds it by its tags.
_HEAD_NODE_PLACEHOLDER = "i-00000000000000000"
RESERVED_ENV_PREFIX = "HPCSTAGE_"
MAX_SCRIPT_BYTES = 256 * 1024
MAX_ENV_VARIABLES = 100
# A standard execution may have 25,000 history events; one poll (Wait, Task, Choice) writes about
# ten, and the fixed states about a hundred. The sum of all poll bounds must stay below this.
MAX_TOTAL_POLLS = 2300
DEFAULT_WAITS: dict[str, int] = {
    "poll_seconds": 30,
    "max_polls": 240,
    "job_poll_seconds": 60,
    "job_max_polls": 1440,
    "restore_poll_seconds": 900,
    "restore_max_polls": 96,
}
_WAIT_RANGES: dict[str, tuple[int, int]] = {
    "poll_seconds": (0, 3600),
    "max_polls": (1, MAX_TOTAL_POLLS),
    "job_poll_seconds": (0, 3600),
    "job_max_polls": (1, MAX_TOTAL_POLLS),
    "restore_poll_seconds": (0, 3600),
    "restore_max_polls": (1, MAX_TOTAL_POLLS),
}
# A job that cannot start its own prologue exits with these (JobSpec uses 97 for a missing workdir).
PROLOGUE_MKDIR_EXIT = 96
PROLOGUE_FETCH_EXIT = 95
PROLOGUE_MOUNT_EXIT = 93
# A job whose outputs could not be recorded (Mountpoint targets) ends with this if it had succeeded.
EPILOGUE_RECORD_EXIT = 92
# What the job's epilogue writes for a Mountpoint target: `size TAB path-below-output-dir NUL` per file.
DECLARED_OUTPUTS = "declared-outputs.nul"
# After scancel, cleanup waits at most this long for the job to end before deciding on release.
CANCEL_WAIT_S = 30.0
RELEASE_WAIT_S = 60.0

INPUT_FIELDS = (
    "inventory",
    "selection",
    "target",
    "job",
    "output",
    "archived_policy",
    "restore_days",
    "restore_tier",
    "capacity_headroom",
    "waits",
)
_LOCAL_TARGET_FIELDS = frozenset({"type", "root", "max_workers", "max_objects_per_call"})
# Fields hpcstage sets itself; a request giving them would be silently overridden, so it is refused.
_RESERVED_TARGET_FIELDS = frozenset({"run_id", "export_url", "work_url"})
_JOB_FIELDS: dict[str, frozenset[str]] = {
    "common": frozenset(
        {"backend", "command", "script", "cpus", "time_limit_min", "env", "partition", "user", "workdir"}
    ),
    "local": frozenset(),
    "ssm": frozenset({"head_node_instance_id", "cluster_name", "command_timeout_s"}),
    "rest": frozenset({"base_url"}),
}


@dataclass(frozen=True)
class StagingDefaults:
    """Deployment-wide defaults (the Lambda environment, set from template.yaml Parameters)."""

    target_type: str = "local"
    head_node_instance_id: str = ""
    cluster_name: str = ""
    cluster_user: str = ""  # empty: the head node OS's default user (ec2-user when not known)
    slurm_rest_url: str = ""
    slurm_jwt_secret_arn: str = ""
    fsx_file_system_id: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StagingDefaults:
        return cls(
            target_type=environ.get("DEFAULT_TARGET_TYPE") or "local",
            head_node_instance_id=environ.get("HEAD_NODE_INSTANCE_ID", ""),
            cluster_name=environ.get("CLUSTER_NAME", ""),
            cluster_user=environ.get("CLUSTER_USER", ""),
            slurm_rest_url=environ.get("SLURM_REST_URL", ""),
            slurm_jwt_secret_arn=environ.get("SLURM_JWT_SECRET_ARN", ""),
            fsx_file_system_id=environ.get("FSX_FILE_SYSTEM_ID", ""),
        )


@dataclass
class StagingConfig:
    """The validated execution input (schemas/staging-input.schema.json), with defaults filled."""

    run_id: str
    work_url: str
    inventory: str
    selection: dict[str, Any]
    target: dict[str, Any]
    job: dict[str, Any]
    output: str
    output_dir: str
    archived_policy: str = "fail"
    restore_days: int = 7
    restore_tier: str = "Bulk"
    capacity_headroom: float = 0.1
    waits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_WAITS))

    @property
    def work(self) -> S3Url:
        return parse_s3_url(self.work_url)

    def work_key(self, name: str) -> str:
        return f"{self.work.prefix.rstrip('/')}/{name}"

    def work_object(self, name: str) -> str:
        return f"s3://{self.work.bucket}/{self.work_key(name)}"

    def run(self) -> dict[str, Any]:
        """What the state machine carries: where the work objects are, and the poll settings."""
        return {"run_id": self.run_id, "work": self.work_url, **self.waits}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StagingConfig:
        return cls(**d)


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------


def _whole(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"'{name}' must be a whole number from {lo} to {hi}, got {value!r}")
    return value


def _object(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"'{name}' must be a JSON object, got {type(value).__name__}")
    return value


def _s3_url(value: Any, name: str, example: str) -> S3Url:
    if not isinstance(value, str):
        raise InputError(f"'{name}' must be an s3:// URL (e.g. {example}), got {value!r}")
    try:
        return parse_s3_url(value)
    except InputError as err:
        raise InputError(f"'{name}': {err}") from None


def _absolute(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value or "\n" in value:
        raise InputError(f"'{name}' must be an absolute path (e.g. /scratch/hpcstage), got {value!r}")
    if any(part in (".", "..") for part in value.split("/")):
        raise InputError(f"'{name}' must not contain '.' or '..' components, got {value!r}")
    return value.rstrip("/") or "/"


def _with_run_id(value: Any, run_id: str) -> Any:
    return value.replace("{run_id}", run_id) if isinstance(value, str) else value


def validate_staging_input(
    event: Any,
    *,
    run_id: str,
    work_bucket: str,
    work_prefix: str = "staging",
    defaults: StagingDefaults | None = None,
) -> StagingConfig:
    """Check a staging request and fill its defaults; every message says what is wrong and how to fix it.

    ``{run_id}`` in ``output``, ``target.root`` and ``job.workdir`` is replaced by the run id, so one
    request (a scheduled or triggered one) gives each run its own places.
    """
    defaults = defaults or StagingDefaults()
    if not isinstance(event, dict):
        raise InputError(f"the input must be a JSON object, got {type(event).__name__}")
    unknown = sorted(set(event) - set(INPUT_FIELDS))
    if unknown:
        raise InputError(f"unknown input field(s): {', '.join(unknown)}; allowed: {', '.join(INPUT_FIELDS)}")
    missing = [f for f in ("inventory", "selection", "target", "job", "output") if f not in event]
    if missing:
        raise InputError(f"missing input field(s): {', '.join(missing)}")
    if not RUN_ID_RE.match(run_id):
        raise InputError(f"run id {run_id!r} is not a valid name (letters, digits, . _ -; at most 80)")

    inventory = _s3_url(event["inventory"], "inventory", "s3://results/inventory/my-data/run-1")
    selection_doc = _object(event["selection"], "selection")
    if not selection_doc:
        raise InputError(
            "'selection' is empty: it would stage every object in the inventory; give at least one "
            "criterion (prefixes, globs, manifest, min_size, max_size, modified_after, ...)"
        )
    Selection.from_dict(selection_doc)  # SelectionError (an InputError) names the problem

    policy = event.get("archived_policy", "fail")
    if policy not in ARCHIVE_POLICIES:
        raise InputError(f"'archived_policy' must be one of {', '.join(ARCHIVE_POLICIES)}, got {policy!r}")
    restore_days = _whole(event.get("restore_days", 7), "restore_days", 1, 365)
    restore_tier = event.get("restore_tier", "Bulk")
    if restore_tier not in RESTORE_TIERS:
        raise InputError(f"'restore_tier' must be one of {', '.join(RESTORE_TIERS)}, got {restore_tier!r}")
    headroom = event.get("capacity_headroom", 0.1)
    if isinstance(headroom, bool) or not isinstance(headroom, int | float) or not 0 <= headroom <= 10:
        raise InputError(f"'capacity_headroom' must be a fraction from 0 to 10 (0.1 = 10%), got {headroom!r}")

    target = _target_config(_object(event["target"], "target"), run_id, defaults)
    output = _s3_url(_with_run_id(event["output"], run_id), "output", "s3://my-results/outputs/{run_id}/")
    output_dir, export_url = _output_dir(target, output)
    if export_url is not None:
        target["export_url"] = export_url
    base = work_prefix.strip("/")
    work = f"s3://{work_bucket}/{base}/{run_id}" if base else f"s3://{work_bucket}/{run_id}"
    if target["type"] != "local":
        target["work_url"] = f"{work}/head-node"
    job = _job_config(_object(event["job"], "job"), target, run_id, defaults)
    waits = _waits(event.get("waits", {}), job["time_limit_min"])
    return StagingConfig(
        run_id=run_id,
        work_url=work,
        inventory=str(inventory).rstrip("/"),
        selection=selection_doc,
        target=target,
        job=job,
        output=f"s3://{output.bucket}/{output.prefix.strip('/')}/",
        output_dir=output_dir,
        archived_policy=policy,
        restore_days=restore_days,
        restore_tier=restore_tier,
        capacity_headroom=float(headroom),
        waits=waits,
    )


def _target_config(given: dict[str, Any], run_id: str, defaults: StagingDefaults) -> dict[str, Any]:
    target = dict(given)
    target.setdefault("type", defaults.target_type)
    kind = target["type"]
    if kind not in TARGET_TYPES:
        raise InputError(f"'target.type' must be one of {', '.join(TARGET_TYPES)}, got {kind!r}")
    reserved = sorted(_RESERVED_TARGET_FIELDS & set(target))
    if reserved:
        raise InputError(
            f"'target' field(s) {', '.join(reserved)} are set by hpcstage (from 'output' and the run); remove them"
        )
    target["run_id"] = run_id
    if kind == "local":
        unknown = sorted(set(target) - _LOCAL_TARGET_FIELDS - {"run_id"})
        if unknown:
            raise InputError(
                f"unknown field(s) for a local target: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(_LOCAL_TARGET_FIELDS - {'type'}))})"
            )
        if "root" not in target:
            raise InputError("a local target needs 'root': the directory playing the cache (absolute path)")
        target["root"] = _absolute(_with_run_id(target["root"], run_id), "target.root")
        for name in ("max_workers", "max_objects_per_call"):
            if name in target:
                _whole(target[name], f"target.{name}", 1, 100_000)
        return target
    if not target.get("head_node_instance_id") and not target.get("cluster_name"):
        if defaults.head_node_instance_id:
            target["head_node_instance_id"] = defaults.head_node_instance_id
        elif defaults.cluster_name:
            target["cluster_name"] = defaults.cluster_name
    if kind == "fsx" and not target.get("file_system_id") and defaults.fsx_file_system_id:
        target["file_system_id"] = defaults.fsx_file_system_id
    head = target.get("head_node_instance_id")
    if head is None and target.get("cluster_name") is not None:
        _cluster_name(target["cluster_name"], "target.cluster_name")
    elif not isinstance(head, str) or not INSTANCE_ID_RE.match(head):
        raise InputError(
            f"a {kind} target needs 'head_node_instance_id' (e.g. i-0123456789abcdef0) or 'cluster_name' (the "
            f"ParallelCluster cluster, whose head node is found by its tags), or the HeadNodeInstanceId or "
            f"ClusterName parameter of the stack; got {head!r}"
        )
    # The target's own checks (required and unknown fields, paths, ids) without touching AWS:
    # building a remote target only parses its configuration.
    probe = dict(target, work_url="s3://probe-bucket/probe")
    probe.setdefault("head_node_instance_id", _HEAD_NODE_PLACEHOLDER)
    placeholder = object()
    make_target(probe, {"s3": placeholder, "fsx": placeholder, "ssm": placeholder})
    return target


def _cluster_name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not CLUSTER_NAME_RE.match(value):
        raise InputError(
            f"'{name}' must be a ParallelCluster cluster name (a letter, then letters, digits and -; "
            f"at most 60), got {value!r}"
        )
    return value


def _output_dir(target: dict[str, Any], output: S3Url) -> tuple[str, str | None]:
    """The job-root-relative directory whose export lands exactly at ``output``, and for a local
    target the export_url that makes it so."""
    kind = target["type"]
    prefix = output.prefix.strip("/")
    if not prefix:
        raise InputError(
            f"'output' must name a key prefix, not a whole bucket (e.g. s3://{output.bucket}/outputs/{{run_id}}/)"
        )
    if kind == "local":
        rel, export_url = prefix, f"s3://{output.bucket}/"
    else:
        if kind == "mountpoint":
            bucket, base = target["bucket"], as_prefix(str(target.get("prefix", "")))
            through = "the mount"
        else:
            repo = parse_s3_url(target["data_repository_path"])
            bucket, base = repo.bucket, as_prefix(repo.prefix)
            through = "the data repository association"
        if output.bucket != bucket or not (prefix + "/").startswith(base) or len(prefix) + 1 <= len(base):
            raise InputError(
                f"a {kind} target writes outputs to S3 through {through}, so 'output' must be below "
                f"s3://{bucket}/{base} (e.g. s3://{bucket}/{base}outputs/{{run_id}}/), got s3://{output.bucket}/{prefix}/"
            )
        rel, export_url = prefix[len(base) :], None
    try:
        return relative_path(rel, what="output directory"), export_url
    except UnsafePathError as err:
        raise InputError(f"'output': {err}") from None


def _job_config(
    given: dict[str, Any], target: dict[str, Any], run_id: str, defaults: StagingDefaults
) -> dict[str, Any]:
    backend = given.get("backend")
    if backend not in ("local", "ssm", "rest"):
        raise InputError(f"'job.backend' must be one of local, ssm, rest, got {backend!r}")
    allowed = _JOB_FIELDS["common"] | _JOB_FIELDS[backend]
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise InputError(
            f"unknown field(s) for a {backend} job: {', '.join(unknown)} (known: {', '.join(sorted(allowed))})"
        )
    if (target["type"] == "local") != (backend == "local"):
        raise InputError(
            "a local target needs the local job backend (the cache is a directory on this machine), and the "
            f"fsx, filecache and mountpoint targets need ssm or rest; got a {target['type']} target with "
            f"the {backend} backend"
        )
    if ("command" in given) == ("script" in given):
        raise InputError(
            "'job' needs exactly one of 'command' (shell text) or 'script' (s3:// URL of a script)"
        )
    job: dict[str, Any] = {"backend": backend}
    if "command" in given:
        command = given["command"]
        if not isinstance(command, str) or not command.strip() or "\0" in command:
            raise InputError("'job.command' must be non-empty shell text without NUL bytes")
        job["command"] = command
    else:
        script = _s3_url(given["script"], "job.script", "s3://my-bucket/scripts/analyse.sh")
        if not script.prefix or script.prefix.endswith("/"):
            raise InputError(f"'job.script' must name an object, not a prefix: {given['script']!r}")
        job["script"] = str(script)
    job["cpus"] = _whole(given.get("cpus", 1), "job.cpus", 1, 1024)
    job["time_limit_min"] = _whole(given.get("time_limit_min", 60), "job.time_limit_min", 1, 525_600)
    env = given.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise InputError('\'job.env\' must be an object of string values, e.g. {"THREADS": "8"}')
    if len(env) > MAX_ENV_VARIABLES:
        raise InputError(f"'job.env' has {len(env)} variables; at most {MAX_ENV_VARIABLES}")
    for name in env:
        if not ENV_NAME_RE.fullmatch(name):
            raise InputError(f"'job.env' name {name!r} is not a valid environment variable name")
        if name.startswith(RESERVED_ENV_PREFIX):
            raise InputError(f"'job.env' name {name!r} is reserved: hpcstage sets the HPCSTAGE_* variables")
    job["env"] = dict(env)
    for name in ("partition", "user"):
        if given.get(name) is not None:
            if not isinstance(given[name], str):
                raise InputError(f"'job.{name}' must be a string, got {given[name]!r}")
            job[name] = given[name]
    if "workdir" in given:
        job["workdir"] = _absolute(_with_run_id(given["workdir"], run_id), "job.workdir")
    elif backend == "local":
        job["workdir"] = posixpath.join(target["root"], "jobs", run_id)
    else:
        raise InputError(
            f"a {backend} job needs 'workdir': an existing directory on the cluster (e.g. /home/ec2-user/hpcstage) "
            "where the job runs and Slurm writes its log"
        )
    if backend == "ssm":
        head = given.get("head_node_instance_id")
        cluster = given.get("cluster_name")
        if head is None and cluster is None:
            head, cluster = target.get("head_node_instance_id"), target.get("cluster_name")
        if head is None and cluster is not None:
            job["cluster_name"] = _cluster_name(cluster, "job.cluster_name")
        elif not isinstance(head, str) or not INSTANCE_ID_RE.match(head):
            raise InputError(
                f"an ssm job needs 'head_node_instance_id' (e.g. i-0123456789abcdef0) or 'cluster_name', got {head!r}"
            )
        else:
            job["head_node_instance_id"] = head
        # Filled from the head node's OS when it is found by its tags (validate_task).
        job["cluster_user"] = defaults.cluster_user
        job["command_timeout_s"] = _whole(
            given.get("command_timeout_s", 120), "job.command_timeout_s", 30, 3600
        )
    elif backend == "rest":
        base_url = given.get("base_url") or defaults.slurm_rest_url
        if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
            raise InputError(
                f"a rest job needs 'base_url' (e.g. http://head-node:6820) or the SlurmRestUrl parameter; got {base_url!r}"
            )
        if not defaults.slurm_jwt_secret_arn:
            raise InputError(
                "a rest job needs the slurmrestd JWT in Secrets Manager: set the SlurmJwtSecretArn parameter"
            )
        job["base_url"] = base_url
        job["user_name"] = job.get("user") or defaults.cluster_user or DEFAULT_CLUSTER_USER
        job["jwt_secret_arn"] = defaults.slurm_jwt_secret_arn
    try:
        # The same checks the job will meet at submission, now, with stand-in paths.
        JobSpec(
            name=job_name(run_id),
            command=job.get("command", "true"),
            workdir=job["workdir"],
            output_dir=job["workdir"],
            environment=job["env"],
            cpus=job["cpus"],
            time_limit_min=job["time_limit_min"],
            partition=job.get("partition"),
            user=job.get("user"),
        )
    except ValueError as err:
        raise InputError(f"'job': {err}") from None
    return job


def _waits(given: Any, time_limit_min: int) -> dict[str, int]:
    given = _object(given, "waits")
    unknown = sorted(set(given) - set(DEFAULT_WAITS))
    if unknown:
        raise InputError(
            f"unknown 'waits' field(s): {', '.join(unknown)}; allowed: {', '.join(DEFAULT_WAITS)}"
        )
    waits = {name: given.get(name, default) for name, default in DEFAULT_WAITS.items()}
    for name, (lo, hi) in _WAIT_RANGES.items():
        _whole(waits[name], f"waits.{name}", lo, hi)
    total = waits["max_polls"] * 3 + waits["job_max_polls"] + waits["restore_max_polls"]
    if total > MAX_TOTAL_POLLS:
        raise InputError(
            f"the poll bounds allow {total} polls (3 x max_polls + job_max_polls + restore_max_polls); at most "
            f"{MAX_TOTAL_POLLS} fit in one execution's 25,000 history events: poll less often instead"
        )
    job_wait_s = waits["job_poll_seconds"] * waits["job_max_polls"]
    if job_wait_s < time_limit_min * 60:
        raise InputError(
            f"waits.job_poll_seconds x waits.job_max_polls ({job_wait_s} s) is shorter than the job's time limit "
            f"({time_limit_min} min): the run would give up on a job still allowed to run"
        )
    return waits


def job_name(run_id: str) -> str:
    return f"hpcstage-{run_id}"


def config_from_run(s3: Any, run: Mapping[str, Any]) -> StagingConfig:
    work = parse_s3_url(str(run["work"]))
    body = s3.get_object(Bucket=work.bucket, Key=f"{work.prefix.rstrip('/')}/config.json")["Body"].read()
    return StagingConfig.from_dict(json.loads(body))


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
    from .jobs.ssm import find_head_node

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


def validate_task(s3: Any, cfg: StagingConfig, clients: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Find head nodes named by cluster (``clients["ec2"]``, made only then), record the validated
    input under the run's work prefix, and return what the state machine carries."""
    if cfg.target.get("cluster_name") or cfg.job.get("backend") == "ssm":
        cfg = resolve_head_nodes(cfg, clients)
    _put_json(s3, cfg, "config.json", cfg.to_dict())
    return cfg.run()


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
        from .jobs.local import LocalSlurm

        return LocalSlurm()
    if job["backend"] == "ssm":
        from .jobs.ssm import ParallelClusterSSM

        return ParallelClusterSSM(
            clients["ssm"],
            job["head_node_instance_id"],
            user=job["cluster_user"] or DEFAULT_CLUSTER_USER,
            command_timeout_s=int(job.get("command_timeout_s", 120)),
            output_s3_bucket=cfg.work.bucket,
            output_s3_prefix=cfg.work_key("ssm-output"),
            s3=clients["s3"],
        )
    from .jobs.rest import SlurmRest

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


# --------------------------------------------------------------------------------------------------
# The S3 trigger
# --------------------------------------------------------------------------------------------------

MAX_REQUEST_BYTES = 256 * 1024


@dataclass(frozen=True)
class TriggerObject:
    """The object named by an EventBridge "Object Created" event, and what identifies this version."""

    bucket: str
    key: str
    identity: str

    def to_dict(self) -> dict[str, str]:
        return {"bucket": self.bucket, "key": self.key, "identity": self.identity}


def trigger_object(event: Any) -> TriggerObject:
    """The object of an S3 "Object Created" event delivered by EventBridge."""
    if not isinstance(event, dict) or event.get("detail-type") != "Object Created":
        kind = event.get("detail-type") if isinstance(event, dict) else type(event).__name__
        raise TriggerObjectError(f"expected an S3 'Object Created' EventBridge event, got {kind!r}")
    detail = event.get("detail")
    detail = detail if isinstance(detail, dict) else {}
    bucket_doc = detail.get("bucket")
    bucket = bucket_doc.get("name") if isinstance(bucket_doc, dict) else None
    obj = detail.get("object")
    obj = obj if isinstance(obj, dict) else {}
    key = obj.get("key")
    if not isinstance(bucket, str) or not bucket or not isinstance(key, str) or not key:
        raise TriggerObjectError("the event has no detail.bucket.name and detail.object.key")
    # The version id names the object version exactly; without versioning, the ETag and the
    # sequencer (which orders writes to one key) tell a rewrite apart from a redelivery.
    version = obj.get("version-id")
    identity = (
        f"version:{version}" if version else f"etag:{obj.get('etag', '')}:seq:{obj.get('sequencer', '')}"
    )
    if identity == "etag::seq:":
        raise TriggerObjectError(
            f"the event for s3://{bucket}/{key} has no version-id, etag or sequencer to identify it"
        )
    return TriggerObject(bucket, key, identity)


def execution_name(obj: TriggerObject) -> str:
    """Deterministic: the same object version always gives the same name (Step Functions then
    refuses a second execution), and no character of the key reaches the name."""
    digest = hashlib.sha256(
        "\0".join((obj.bucket, obj.key, obj.identity)).encode("utf-8", "surrogatepass")
    ).hexdigest()
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", posixpath.basename(obj.key.rstrip("/")))[:24].strip("-")
    return f"s3-{stem}-{digest[:40]}" if stem else f"s3-{digest[:40]}"


def read_trigger_request(s3: Any, obj: TriggerObject) -> Any:
    """The JSON staging request in the trigger object."""
    key = obj.key
    try:
        head = s3.head_object(Bucket=obj.bucket, Key=key)
    except ClientError as err:
        # S3 event notifications URL-encode keys ("a b" -> "a+b"); try the decoded key too.
        decoded = urllib.parse.unquote_plus(key)
        if (
            err.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound")
            or decoded == key
        ):
            raise
        key = decoded
        head = s3.head_object(Bucket=obj.bucket, Key=key)
    if head["ContentLength"] > MAX_REQUEST_BYTES:
        raise TriggerObjectError(
            f"s3://{obj.bucket}/{key} is {head['ContentLength']:,} bytes; a staging request is at most "
            f"{MAX_REQUEST_BYTES // 1024} KiB"
        )
    body = s3.get_object(Bucket=obj.bucket, Key=key)["Body"].read()
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TriggerObjectError(f"s3://{obj.bucket}/{key} is not valid JSON: {err}") from None
    if not isinstance(request, dict):
        raise TriggerObjectError(
            f"s3://{obj.bucket}/{key} must hold a JSON object (a staging request), not {type(request).__name__}"
        )
    return request


def trigger_input(
    s3: Any,
    obj: TriggerObject,
    *,
    default_request: Mapping[str, Any],
    work_bucket: str,
    work_prefix: str,
    defaults: StagingDefaults,
) -> dict[str, Any]:
    """The execution input: a ``*.json`` trigger object is a staging request (laid over the
    defaults); any other object (a ``_READY`` marker) means "the inventory in this directory is
    ready", staged with the default request."""
    if obj.key.endswith(".json"):
        request: dict[str, Any] = {**default_request, **read_trigger_request(s3, obj)}
    else:
        parent = posixpath.dirname(obj.key)
        request = {**default_request, "inventory": f"s3://{obj.bucket}/{parent}".rstrip("/")}
    try:
        # Refuse a bad request here, where the person who wrote the object will see why, rather
        # than start an execution that fails in its first state.
        validate_staging_input(
            request,
            run_id="trigger-check",
            work_bucket=work_bucket,
            work_prefix=work_prefix,
            defaults=defaults,
        )
    except InputError as err:
        raise TriggerObjectError(f"s3://{obj.bucket}/{obj.key}: {err}") from None
    return request


def start_staging(
    sfn: Any, state_machine_arn: str, obj: TriggerObject, request: Mapping[str, Any]
) -> dict[str, Any]:
    """Start the execution under its deterministic name; one that already exists is success."""
    name = execution_name(obj)
    try:
        started = sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input=json.dumps(request))
        return {"execution_arn": started["executionArn"], "name": name, "started": True}
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
    execution_arn = state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"
    return {"execution_arn": execution_arn, "name": name, "started": False}


def default_request_from_env(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"DEFAULT_STAGING_REQUEST is not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise InputError("DEFAULT_STAGING_REQUEST must be a JSON object")
    return doc
