"""The S3 adapter: client construction, URL parsing, and one counted ListObjectsV2 call.

Throttling (503 SlowDown) and 5xx are retried by botocore's "standard" retry mode, which uses
exponential backoff with full jitter; we count the retries it made from the response metadata.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote_plus

from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from .errors import BucketError, InputError

LIST_MAX_KEYS = 1000
# S3 Standard LIST price: $0.005 per 1,000 requests (billed with PUT/COPY/POST).
LIST_PRICE_PER_1000 = 0.005

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


def retry_config(max_attempts: int = 10, pool: int = 50) -> Config:
    return Config(
        retries={"mode": "standard", "max_attempts": max_attempts},
        max_pool_connections=pool,
        connect_timeout=10,
        read_timeout=60,
    )


def fast_timestamp(value: str) -> datetime:
    """S3's ISO 8601 timestamps ("2024-03-01T12:00:00.000Z"), parsed in ~1 us.

    botocore's default parser goes through dateutil, which was 75 % of the CPU time of a listing
    (bench/cpu_per_key.py); Python 3.11's fromisoformat reads these strings exactly.
    """
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        from botocore.utils import parse_timestamp

        return parse_timestamp(value)  # type: ignore[no-any-return]


_CONTENTS = re.compile(rb"<Contents>(.*?)</Contents>", re.S)
_FIELD = re.compile(rb"<(\w+)>([^<]*)</\1>")
_ENTITIES = {b"&quot;": b'"', b"&apos;": b"'", b"&lt;": b"<", b"&gt;": b">"}


def _xml_text(raw: bytes) -> str:
    if b"&" in raw:
        for ent, ch in _ENTITIES.items():
            raw = raw.replace(ent, ch)
        raw = raw.replace(b"&amp;", b"&")
        if b"&#" in raw:
            import html

            return html.unescape(raw.decode("utf-8"))
    return raw.decode("utf-8")


def _content_row(block: bytes) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for tag, value in _FIELD.findall(block):
        if tag == b"Key":
            row["Key"] = _xml_text(value)
        elif tag == b"Size":
            row["Size"] = int(value)
        elif tag == b"LastModified":
            row["LastModified"] = fast_timestamp(value.decode())
        elif tag == b"ETag":
            row["ETag"] = _xml_text(value)
        elif tag == b"StorageClass":
            row["StorageClass"] = value.decode()
        elif tag == b"ChecksumAlgorithm":
            row.setdefault("ChecksumAlgorithm", []).append(value.decode())
        elif tag == b"ChecksumType":
            row["ChecksumType"] = value.decode()
    return row


def _fast_list_parse(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    """Parse ListObjectsV2's <Contents> with one regex pass instead of botocore's generic parser.

    botocore still sends, signs, retries and parses errors and every other field; only successful
    bodies are touched: their <Contents> elements are lifted out (so botocore parses a small
    document) and handed back as the same dicts botocore would build. tests/unit/test_fast_parse.py
    checks the two parsers agree on hostile keys; bench/cpu_per_key.py measures the gain.
    """
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or not isinstance(body, bytes) or b"<Contents>" not in body:
        return
    # Only a complete ListBucketResult is touched. A truncated body or an <Error> sent with status
    # 200 is left whole, so botocore's own check (_handle_200_error) turns it into a retried 500.
    # Running before that check also spares it a full ElementTree parse of every page.
    if b"<ListBucketResult" not in body[:512] or not body.rstrip().endswith(b"</ListBucketResult>"):
        return
    blocks = _CONTENTS.findall(body)
    customized_response_dict["Contents"] = [_content_row(b) for b in blocks]
    response_dict["body"] = _CONTENTS.sub(b"", body)


def _handle_200_error_or_fast_parse(
    operation_model: Any, response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **kw: Any
) -> None:
    """botocore's 200-error check, except for a complete ListObjectsV2 body, which is parsed fast.

    botocore checks every S3 200 body for an embedded <Error> or a truncated document by parsing it
    whole with ElementTree (a third of the remaining CPU per page). A body that opens a
    ListBucketResult and closes it is neither, so that check is skipped for it; every other body
    goes to botocore's own handler unchanged.
    """
    from botocore import handlers

    if operation_model.name == "ListObjectsV2":
        before = response_dict.get("body")
        _fast_list_parse(response_dict, customized_response_dict)
        if response_dict.get("body") is not before:
            return
    handlers._handle_200_error(operation_model, response_dict, **kw)  # noqa: SLF001


def enable_fast_list_parsing(client: Any) -> Any:
    """Use the fast ListObjectsV2 parser on this client (botocore is pinned: this hooks its handler)."""
    from botocore import handlers

    events = client.meta.events
    events.unregister("before-parse.s3.*", handlers._handle_200_error)  # noqa: SLF001
    events.register_first("before-parse.s3.*", _handle_200_error_or_fast_parse)
    return client


def make_s3_client(endpoint_url: str | None = None, region: str | None = None, pool: int = 50) -> Any:
    import boto3  # imported here so that importing the core never needs AWS configuration

    session = boto3.session.Session()
    # A session of our own: the faster timestamp parser applies to our clients only.
    session._session.get_component("response_parser_factory").set_parser_defaults(  # noqa: SLF001
        timestamp_parser=fast_timestamp
    )
    client = session.client(
        "s3", endpoint_url=endpoint_url, region_name=region, config=retry_config(pool=pool)
    )
    return enable_fast_list_parsing(client)


@dataclass(frozen=True)
class S3Url:
    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def parse_s3_url(url: str) -> S3Url:
    if not url.startswith("s3://"):
        raise InputError(f"not an S3 URL (expected s3://bucket[/prefix]): {url!r}")
    rest = url[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET_RE.match(bucket) or ".." in bucket:
        raise InputError(f"invalid bucket name {bucket!r} in {url!r}")
    return S3Url(bucket=bucket, prefix=prefix)


class RequestCounter:
    """Thread-safe LIST request tally (requests S3 answered, and retries botocore made)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0

    def add(self, requests: int, retries: int) -> None:
        with self._lock:
            self.requests += requests
            self.retries += retries


def list_page(
    s3: Any,
    bucket: str,
    prefix: str,
    *,
    start_after: str | None = None,
    token: str | None = None,
    max_keys: int = LIST_MAX_KEYS,
    counter: RequestCounter | None = None,
) -> dict[str, Any]:
    """One ListObjectsV2 call with EncodingType=url; keys in the answer are decoded in place."""
    params: dict[str, Any] = {"Bucket": bucket, "MaxKeys": max_keys, "EncodingType": "url"}
    if prefix:
        params["Prefix"] = prefix
    if token:
        params["ContinuationToken"] = token
    elif start_after is not None:
        params["StartAfter"] = start_after
    try:
        resp: dict[str, Any] = s3.list_objects_v2(**params)
    except ClientError as err:
        raise translate_client_error(err, bucket) from err
    except (EndpointConnectionError, NoCredentialsError) as err:
        raise BucketError(f"cannot reach S3 for bucket {bucket!r}: {err}") from err
    if counter is not None:
        counter.add(1, int(resp.get("ResponseMetadata", {}).get("RetryAttempts", 0)))
    if resp.get("EncodingType") == "url":
        for obj in resp.get("Contents", ()):
            obj["Key"] = unquote_plus(obj["Key"])
    return resp


def translate_client_error(err: ClientError, bucket: str) -> Exception:
    code = err.response.get("Error", {}).get("Code", "")
    if code in ("NoSuchBucket", "404"):
        return BucketError(f"no such bucket: {bucket}")
    if code in ("AccessDenied", "403", "AllAccessDisabled"):
        return BucketError(f"access denied listing bucket {bucket} (needs s3:ListBucket)")
    if code in ("PermanentRedirect", "AuthorizationHeaderMalformed", "301"):
        return BucketError(f"bucket {bucket} is in another region: set --region or AWS_REGION")
    return err
