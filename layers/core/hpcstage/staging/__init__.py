"""Staging: select -> stage -> (job) -> export -> verify -> release, behind one Target interface.

``select_objects`` turns inventory Parquet into a staging manifest; ``make_target`` builds the target
named by a config's ``type`` (local, fsx, filecache, mountpoint) from clients the caller made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InputError
from .errors import (
    ArchivedObjectsError,
    InsufficientCapacityError,
    ReleaseRefusedError,
    RemoteCommandError,
    SelectionError,
    StagingError,
    TargetConfigError,
    TargetNotReadyError,
    UnsafePathError,
)
from .hsm import HeadNode
from .manifest import ManifestEntry, ManifestFile, StagingManifest
from .select import Selection, SelectionResult, check_archived, check_capacity, restored_count, select_objects
from .targets import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    FileCacheTarget,
    FsxLustreTarget,
    Handle,
    JobPaths,
    LocalTarget,
    MountpointTarget,
    Progress,
    StageHandle,
    Target,
    VerifyResult,
)

_HEAD_NODE_FIELDS = frozenset(
    {
        "head_node_instance_id",
        "cluster_name",  # found by its tags before the run (staging.steps.resolve_head_nodes)
        "work_url",
        "restore_parallelism",
        "ssm_timeout_s",
        "ssm_max_wait_s",
        "ssm_poll_interval_s",
    }
)
# type -> (required fields, optional fields, clients needed)
_SCHEMA: dict[str, tuple[frozenset[str], frozenset[str], tuple[str, ...]]] = {
    "local": (
        frozenset({"root"}),
        frozenset({"export_url", "max_workers", "max_objects_per_call", "run_id"}),
        ("s3",),
    ),
    "fsx": (
        frozenset(
            {"file_system_id", "mount_point", "file_system_path", "data_repository_path", "run_id"}
            | {"head_node_instance_id", "work_url"}
        ),
        frozenset(
            {
                "report_path",
                "import_granularity",
                "max_active_tasks",
                "submit_attempts",
                "prefetch",
                "auto_import_events",
                "auto_export_events",
                "imported_file_chunk_size_mib",
            }
        )
        | _HEAD_NODE_FIELDS,
        ("s3", "fsx", "ssm"),
    ),
    "filecache": (
        frozenset(
            {
                "mount_point",
                "cache_path",
                "data_repository_path",
                "run_id",
                "head_node_instance_id",
                "work_url",
            }
        ),
        frozenset({"prefetch"}) | _HEAD_NODE_FIELDS,
        ("s3", "ssm"),
    ),
    "mountpoint": (
        frozenset({"mount_path", "bucket", "head_node_instance_id", "work_url"}),
        frozenset({"prefix", "run_id"}) | _HEAD_NODE_FIELDS,
        ("s3", "ssm"),
    ),
}
TARGET_TYPES = tuple(_SCHEMA)


def make_target(
    config: Mapping[str, Any], clients: Any, *, sleep: Callable[[float], None] = time.sleep
) -> Target:
    """Build the target a config describes. ``clients`` is a mapping or an object with ``s3``,
    ``fsx`` and ``ssm`` (only those the type needs). Missing or unknown fields raise TargetConfigError
    naming them, so a typo is not silently ignored."""
    if not isinstance(config, Mapping):
        raise TargetConfigError(f"target config must be an object, not {type(config).__name__}")
    kind = config.get("type")
    if kind not in _SCHEMA:
        raise TargetConfigError(f"target type must be one of {', '.join(TARGET_TYPES)}, not {kind!r}")
    required, optional, needed_clients = _SCHEMA[kind]
    missing = sorted(f for f in required if config.get(f) in (None, ""))
    if missing:
        raise TargetConfigError(f"{kind} target config is missing {', '.join(missing)}")
    unknown = sorted(set(config) - required - optional - {"type"})
    if unknown:
        raise TargetConfigError(
            f"unknown field(s) for a {kind} target: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(required | optional))})"
        )
    c = {name: _client(clients, name, kind) for name in needed_clients}
    try:
        return _build(kind, config, c, sleep)
    except InputError as err:
        if isinstance(err, TargetConfigError):
            raise
        # A malformed URL in the config (export_url, work_url, data_repository_path, ...).
        raise TargetConfigError(f"{kind} target config: {err}") from err


def _build(kind: str, config: Mapping[str, Any], c: dict[str, Any], sleep: Callable[[float], None]) -> Target:
    if kind == "local":
        return LocalTarget(
            config["root"],
            c["s3"],
            export_url=config.get("export_url"),
            max_workers=int(config.get("max_workers", 8)),
            max_objects_per_call=config.get("max_objects_per_call"),
            run_id=str(config.get("run_id", "local")),
        )
    run_id = str(config.get("run_id", kind))
    head = HeadNode(
        c["ssm"],
        c["s3"],
        config["head_node_instance_id"],
        config["work_url"],
        run_id,
        parallel=int(config.get("restore_parallelism", 16)),
        timeout_s=int(config.get("ssm_timeout_s", 600)),
        max_wait_s=float(config.get("ssm_max_wait_s", 600)),
        poll_interval_s=float(config.get("ssm_poll_interval_s", 2)),
        sleep=sleep,
    )
    if kind == "fsx":
        return FsxLustreTarget(
            fsx=c["fsx"],
            s3=c["s3"],
            head=head,
            file_system_id=config["file_system_id"],
            mount_point=config["mount_point"],
            file_system_path=config["file_system_path"],
            data_repository_path=config["data_repository_path"],
            run_id=run_id,
            report_path=config.get("report_path"),
            import_granularity=config.get("import_granularity", "directory"),
            max_active_tasks=int(config.get("max_active_tasks", 1)),
            submit_attempts=int(config.get("submit_attempts", 5)),
            auto_import_events=config.get("auto_import_events", ()),
            auto_export_events=config.get("auto_export_events", ()),
            imported_file_chunk_size_mib=config.get("imported_file_chunk_size_mib"),
            prefetch=bool(config.get("prefetch", True)),
            sleep=sleep,
        )
    if kind == "filecache":
        return FileCacheTarget(
            s3=c["s3"],
            head=head,
            mount_point=config["mount_point"],
            cache_path=config["cache_path"],
            data_repository_path=config["data_repository_path"],
            run_id=run_id,
            prefetch=bool(config.get("prefetch", True)),
        )
    return MountpointTarget(
        s3=c["s3"],
        head=head,
        mount_path=config["mount_path"],
        bucket=config["bucket"],
        prefix=config.get("prefix", ""),
        run_id=run_id,
    )


def _client(clients: Any, name: str, kind: str) -> Any:
    client = clients.get(name) if isinstance(clients, Mapping) else getattr(clients, name, None)
    if client is None:
        raise TargetConfigError(f"a {kind} target needs an {name!r} client")
    return client


__all__ = [
    "FAILED",
    "RUNNING",
    "SUCCEEDED",
    "TARGET_TYPES",
    "ArchivedObjectsError",
    "FileCacheTarget",
    "FsxLustreTarget",
    "Handle",
    "HeadNode",
    "InsufficientCapacityError",
    "JobPaths",
    "LocalTarget",
    "ManifestEntry",
    "ManifestFile",
    "MountpointTarget",
    "Progress",
    "ReleaseRefusedError",
    "RemoteCommandError",
    "Selection",
    "SelectionError",
    "SelectionResult",
    "StageHandle",
    "StagingError",
    "StagingManifest",
    "Target",
    "TargetConfigError",
    "TargetNotReadyError",
    "UnsafePathError",
    "VerifyResult",
    "check_archived",
    "check_capacity",
    "make_target",
    "restored_count",
    "select_objects",
]
