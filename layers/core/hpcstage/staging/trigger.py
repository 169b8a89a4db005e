"""Starting staging runs from S3 objects: a staging request (.json) or a marker object, read,
laid over the stack's default request, and started once per object version (idempotent)."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..errors import InputError
from .config import StagingDefaults, validate_staging_input
from .errors import (
    TriggerObjectError,
)

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
