"""Checks made before a listing starts: can the bucket be listed at all, and is there anything to list.

One ListObjectsV2 call with MaxKeys=1 answers both, on a client with short timeouts and two attempts,
so a missing bucket, refused credentials or an endpoint that never answers is reported within seconds
instead of after the first stream's retries (or, for an S3 output, after the whole listing).
"""

from __future__ import annotations

import difflib
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..errors import EmptyResultError
from ..s3util import translate_botocore_error, translate_client_error


def call(s3: Any, bucket: str, **params: Any) -> dict[str, Any]:
    """One S3 call; its failure comes back as an HpcstageError with a one-line message."""
    try:
        resp: dict[str, Any] = s3.list_objects_v2(Bucket=bucket, **params)
    except ClientError as err:
        raise translate_client_error(err, bucket) from err
    except BotoCoreError as err:
        raise translate_botocore_error(err) from err
    return resp


def parent_prefix(prefix: str) -> str:
    """The folder a prefix sits in: "a/b/c" and "a/b/c/" -> "a/b/"; "a" -> ""."""
    trimmed = prefix[:-1] if prefix.endswith("/") else prefix
    cut = trimmed.rfind("/")
    return trimmed[: cut + 1] if cut >= 0 else ""


def neighbours(s3: Any, bucket: str, prefix: str, limit: int = 5) -> list[str]:
    """Prefixes (and keys) that exist beside ``prefix``, the closest spellings first."""
    parent = parent_prefix(prefix)
    resp = call(s3, bucket, Prefix=parent, Delimiter="/", MaxKeys=1000)
    names = [p["Prefix"] for p in resp.get("CommonPrefixes", ())]
    names += [o["Key"] for o in resp.get("Contents", ())]
    if not names:
        return []
    close = difflib.get_close_matches(prefix, names, n=limit, cutoff=0.6)
    return close + [n for n in names if n not in close][: max(0, limit - len(close))]


def check_listable(s3: Any, bucket: str, prefix: str) -> None:
    """Raise (one line, with the fix) unless the bucket can be listed and holds a key under ``prefix``."""
    params: dict[str, Any] = {"MaxKeys": 1}
    if prefix:
        params["Prefix"] = prefix
    resp = call(s3, bucket, **params)
    if resp.get("KeyCount", len(resp.get("Contents", ()))):
        return
    if not prefix:
        raise EmptyResultError(f"bucket {bucket} holds no object: nothing to inventory")
    near = neighbours(s3, bucket, prefix)
    hint = (
        "; what exists beside it: " + ", ".join(f"s3://{bucket}/{n}" for n in near)
        if near
        else f"; nothing exists under s3://{bucket}/{parent_prefix(prefix)} either"
    )
    raise EmptyResultError(f"no object under s3://{bucket}/{prefix}{hint}")
