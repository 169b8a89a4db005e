"""A staging request and its configuration: its limits and defaults, the validated configuration (StagingConfig) and the
checks that turn an execution input into one, each failure one line saying what to fix."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InputError
from ..inputs import schema, validate
from ..jobs.base import JobSpec
from ..s3util import S3Url, parse_s3_url
from . import Selection, make_target
from .paths import UnsafePathError, as_prefix, relative_path

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
MAX_SCRIPT_BYTES = 256 * 1024
# A standard execution may have 25,000 history events; one poll (Wait, Task, Choice) writes about
# ten, and the fixed states about a hundred. The sum of all poll bounds must stay below this.
MAX_TOTAL_POLLS = 2300
# The input's fields, bounds and defaults are schemas/staging-input.schema.json's; these are read from it.
_SCHEMA = schema("staging-input")
DEFAULT_WAITS: dict[str, int] = {
    name: prop["default"] for name, prop in _SCHEMA["properties"]["waits"]["properties"].items()
}
_JOB_DEFAULTS: dict[str, Any] = {
    name: prop["default"] for name, prop in _SCHEMA["$defs"]["jobFields"].items() if "default" in prop
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
    # An inventory run's s3:// URL; empty until validate_task looks up ``latest_inventory_of``.
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
    # {"latest": "s3://bucket/prefix"} in the input: the bucket and prefix whose newest inventory is used.
    latest_inventory_of: str | None = None

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


def _with_run_id(value: str, run_id: str) -> str:
    return value.replace("{run_id}", run_id)


def _with_target_type(event: Any, defaults: StagingDefaults) -> Any:
    """A target that names no type is of the stack's StagingTargetType."""
    if isinstance(event, dict) and isinstance(event.get("target"), dict) and "type" not in event["target"]:
        return {**event, "target": {**event["target"], "type": defaults.target_type}}
    return event


def validate_staging_input(
    event: Any,
    *,
    run_id: str,
    work_bucket: str,
    work_prefix: str = "staging",
    defaults: StagingDefaults | None = None,
) -> StagingConfig:
    """Check a staging request and fill its defaults; every message says what is wrong and how to fix it.

    The fields, their forms and defaults are checked against schemas/staging-input.schema.json
    (hpcstage.inputs); what follows are the checks a schema cannot state: defaults from the stack,
    where the output lands, which backend fits which target, the poll budget.

    ``{run_id}`` in ``output``, ``target.root`` and ``job.workdir`` is replaced by the run id, so one
    request (a scheduled or triggered one) gives each run its own places.
    """
    defaults = defaults or StagingDefaults()
    if not RUN_ID_RE.match(run_id):
        raise InputError(f"run id {run_id!r} is not a valid name (letters, digits, . _ -; at most 80)")
    doc = validate(_with_target_type(event, defaults), "staging-input")

    given = doc["inventory"]
    latest_of = given["latest"] if isinstance(given, dict) else None
    inventory = "" if latest_of is not None else str(parse_s3_url(given)).rstrip("/")
    if latest_of is not None:
        parse_s3_url(latest_of)  # the bucket's name rules beyond the schema's pattern (no "..")
    Selection.from_dict(doc["selection"])  # SelectionError (an InputError) names the problem

    target = _target_config(doc["target"], run_id, defaults)
    output = parse_s3_url(_with_run_id(doc["output"], run_id))
    output_dir, export_url = _output_dir(target, output)
    if export_url is not None:
        target["export_url"] = export_url
    base = work_prefix.strip("/")
    work = f"s3://{work_bucket}/{base}/{run_id}" if base else f"s3://{work_bucket}/{run_id}"
    if target["type"] != "local":
        target["work_url"] = f"{work}/head-node"
    job = _job_config(doc["job"], target, run_id, defaults)
    waits = _waits(doc["waits"], job["time_limit_min"])
    return StagingConfig(
        run_id=run_id,
        work_url=work,
        inventory=inventory,
        selection=doc["selection"],
        target=target,
        job=job,
        output=f"s3://{output.bucket}/{output.prefix.strip('/')}/",
        output_dir=output_dir,
        archived_policy=doc["archived_policy"],
        restore_days=doc["restore_days"],
        restore_tier=doc["restore_tier"],
        capacity_headroom=float(doc["capacity_headroom"]),
        waits=waits,
        latest_inventory_of=latest_of,
    )


def _target_config(given: dict[str, Any], run_id: str, defaults: StagingDefaults) -> dict[str, Any]:
    target = dict(given, run_id=run_id)
    kind = target["type"]
    if kind == "local":
        target["root"] = _with_run_id(target["root"], run_id).rstrip("/") or "/"
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
    """A cluster name from the input is checked by the schema; one from the stack (ClusterName) here."""
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
    backend = given["backend"]
    if (target["type"] == "local") != (backend == "local"):
        raise InputError(
            "a local target needs the local job backend (the cache is a directory on this machine), and the "
            f"fsx, filecache and mountpoint targets need ssm or rest; got a {target['type']} target with "
            f"the {backend} backend"
        )
    job: dict[str, Any] = {"backend": backend}
    if "command" in given:
        job["command"] = given["command"]
    else:
        job["script"] = given["script"]
    job["cpus"] = given.get("cpus", _JOB_DEFAULTS["cpus"])
    job["time_limit_min"] = given.get("time_limit_min", _JOB_DEFAULTS["time_limit_min"])
    job["env"] = dict(given.get("env", {}))
    for name in ("partition", "user"):
        if given.get(name) is not None:
            job[name] = given[name]
    if "workdir" in given:
        job["workdir"] = _with_run_id(given["workdir"], run_id).rstrip("/") or "/"
    else:  # the schema requires it for ssm and rest
        job["workdir"] = posixpath.join(target["root"], "jobs", run_id)
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
        job["command_timeout_s"] = given.get("command_timeout_s", _JOB_DEFAULTS["command_timeout_s"])
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


def _waits(waits: dict[str, int], time_limit_min: int) -> dict[str, int]:
    """The poll budget of one execution (each bound alone is the schema's)."""
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
    return dict(waits)


def job_name(run_id: str) -> str:
    return f"hpcstage-{run_id}"


def config_from_run(s3: Any, run: Mapping[str, Any]) -> StagingConfig:
    work = parse_s3_url(str(run["work"]))
    body = s3.get_object(Bucket=work.bucket, Key=f"{work.prefix.rstrip('/')}/config.json")["Body"].read()
    return StagingConfig.from_dict(json.loads(body))
