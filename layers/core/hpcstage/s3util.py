"""The S3 adapter: client construction, URL parsing, and one counted ListObjectsV2 call.

Throttling (503 SlowDown) and 5xx are retried by botocore's "standard" retry mode, which uses
exponential backoff with full jitter; we count the retries it made from the response metadata.
"""

from __future__ import annotations

import binascii
import contextlib
import dataclasses
import functools
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote_plus

import pyarrow as pa
import pyarrow.compute as pc
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)

from .errors import AccessDeniedError, BucketError, ConfigError, EndpointError, HpcstageError, InputError
from .inventory.page import EMPTY, TS, Page, strip_quotes
from .s3direct import QUERY_NAMES, DirectLister, complete_list_result, enabled_by_environment, retry_wait

LIST_MAX_KEYS = 1000
# S3 Standard LIST price: $0.005 per 1,000 requests (billed with PUT/COPY/POST).
LIST_PRICE_PER_1000 = 0.005

BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class Timeouts:
    """How long to wait for S3 and how often to try. The defaults bound an endpoint that accepts
    connections and never answers: a probe (``probe()``, 2 attempts) fails in about half a minute."""

    connect: float = 5
    read: float = 15
    attempts: int = 10

    def probe(self) -> Timeouts:
        return Timeouts(connect=self.connect, read=self.read, attempts=min(self.attempts, 2))


def retry_config(
    max_attempts: int = 10, pool: int = 50, connect_timeout: float = 10, read_timeout: float = 60
) -> Config:
    return Config(
        retries={"mode": "standard", "max_attempts": max_attempts},
        max_pool_connections=pool,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
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


_PAGE_FIELDS = {
    name: re.compile(rb"<" + name + rb">([^<]*)</" + name + rb">")
    for name in (b"Key", b"LastModified", b"ETag", b"Size", b"StorageClass", b"ChecksumAlgorithm")
}
# Set by list_page around its own call: the fast parser then answers with columns (a Page) instead
# of boto3 dicts. Other callers of the same client get ordinary dicts.
_WANT_PAGE = threading.local()
PAGE_KEY = "HpcstagePage"
_URL_ENCODED = b"<EncodingType>url</EncodingType>"
# binary_slice's "to the end": its default stop (and any stop near 2**63) overflows the kernel's output-size
# estimate, n * (stop - start), and raises "Negative buffer resize" (apache/arrow#51222); with 2**31 the
# estimate stays within int64 for any page and the kernel takes the smaller bound, the input's size.
_NO_END = 1 << 31


# S3's documented element order inside <Contents>; one pass reads every object of a page.
_ONE_PASS = re.compile(
    rb"<Contents><Key>([^<]*)</Key><LastModified>([^<]*)</LastModified><ETag>([^<]*)</ETag>"
    rb"(?:<ChecksumAlgorithm>([^<]*)</ChecksumAlgorithm>)?(?:<ChecksumType>[^<]*</ChecksumType>)?"
    rb"<Size>([^<]*)</Size>(?:<Owner>(?:(?!</Owner>).)*</Owner>)?<StorageClass>([^<]*)</StorageClass>"
    rb"(?:<RestoreStatus>(?:(?!</RestoreStatus>).)*</RestoreStatus>)?</Contents>",
    re.S,
)


# The object layouts the columnar path reads, in S3's element order: plain, or with one checksum algorithm
# and optionally its type. Other pages (Owner, RestoreStatus, several algorithms, objects unlike the first)
# go to the regex paths below.
_LAYOUTS = (
    (b"Key", b"LastModified", b"ETag", b"Size", b"StorageClass"),
    (b"Key", b"LastModified", b"ETag", b"ChecksumAlgorithm", b"Size", b"StorageClass"),
    (b"Key", b"LastModified", b"ETag", b"ChecksumAlgorithm", b"ChecksumType", b"Size", b"StorageClass"),
)
_ELEMENT = re.compile(rb"<(\w+)>[^<]*</\1>")


@functools.lru_cache(maxsize=len(_LAYOUTS))
def _run_of(layout: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """A run of <Contents> elements of exactly ``layout``, no '<' in any value (an empty ChecksumAlgorithm,
    which the regex paths read as none, is left to them)."""
    fields = b"".join(
        b"<%s>[^<]%s</%s>" % (tag, b"++" if tag == b"ChecksumAlgorithm" else b"*+", tag) for tag in layout
    )
    return re.compile(b"(?:<Contents>" + fields + b"</Contents>)*")


@functools.lru_cache(maxsize=256)
def _every(start: int, stop: int, step: int) -> pa.Array:
    return pa.array(range(start, stop, step), pa.int32())


def _page_from_run(run: bytes, *, url: bool) -> Page | None:
    """The page's columns computed in Arrow from the run of <Contents> elements (keys decoded when ``url``);
    None when the run is not of one of ``_LAYOUTS`` or holds what the regex paths decide key by key (an XML
    entity or a CR in a key, invalid UTF-8, a value Arrow cannot cast).

    Once the run matches its layout, "</Contents>" + run split at each "</" gives one token per element, in
    the layout's order, each its value behind a prefix of fixed length ("Key><LastModified>" before a date,
    "Contents><Contents><Key>" before a key): a strided take and a slice make each column.
    """
    layout = tuple(_ELEMENT.findall(run, 10, run.find(b"</Contents>")))
    if layout not in _LAYOUTS or b"\r" in run or _run_of(layout).fullmatch(run) is None:
        return None
    width = len(layout) + 1  # the elements' tokens and the "StorageClass>" before "</Contents>"
    tokens = pc.list_flatten(pc.split_pattern(pa.array([b"</Contents>" + run], pa.binary()), b"</"))
    n = (len(tokens) - 2) // width  # "" before the first "</" and "Contents>" after the last

    def column(tag: bytes) -> pa.Array:
        j = layout.index(tag)
        skip = len(b"Contents><Contents><Key>") if j == 0 else len(layout[j - 1]) + len(tag) + 3
        return pc.binary_slice(pc.take(tokens, _every(1 + j, 1 + width * n, width)), skip, _NO_END)

    try:
        raw_keys = column(b"Key").cast(pa.string())
        joined = pc.binary_join(pa.ListArray.from_arrays(_every(0, n + 1, n), raw_keys), "\n")[0].as_py()
        if "&" in joined:
            return None  # an XML entity in a key
        key_array: pa.Array | None = None
        if not url:
            keys, key_array = raw_keys.to_pylist(), raw_keys
        elif (decoded := _unquote_joined(joined, n)) is not None:
            keys = decoded.split("\n")
        else:  # a newline in a key, raw or escaped
            keys = unquote_plus_keys(raw_keys.to_pylist())
        page = Page(
            keys=keys,
            sizes=column(b"Size").cast(pa.string()).cast(pa.int64()),
            dates=column(b"LastModified").cast(pa.string()).cast(TS),
            etags=strip_quotes(column(b"ETag").cast(pa.string())),
            classes=column(b"StorageClass").cast(pa.string()),
            checksums=(
                column(b"ChecksumAlgorithm").cast(pa.string())
                if b"ChecksumAlgorithm" in layout
                else pa.nulls(n, pa.string())
            ),
        )
    except pa.ArrowInvalid:
        return None  # invalid UTF-8, a size or a date Arrow cannot read: the regex paths raise as they always did
    if key_array is not None:
        page.set_key_array(key_array)
    return page


def _page_from_body(body: bytes, n: int) -> Page | None:
    """Columns from the <Contents> run; None when the fields do not line up one per object."""
    rows = _ONE_PASS.findall(body)
    if len(rows) == n:
        keys_b, dates, etags, checks, sizes, classes = (list(col) for col in zip(*rows, strict=True))
        return _page(keys_b, sizes, dates, etags, classes, checks if any(checks) else None, n)
    f = {name: rx.findall(body) for name, rx in _PAGE_FIELDS.items()}
    if any(len(f[name]) != n for name in (b"Key", b"LastModified", b"ETag", b"Size", b"StorageClass")):
        return None
    checks = f[b"ChecksumAlgorithm"]
    if checks and len(checks) != n:
        return None  # several algorithms on some objects: the per-object path handles it
    return _page(f[b"Key"], f[b"Size"], f[b"LastModified"], f[b"ETag"], f[b"StorageClass"], checks or None, n)


def _page(
    raw_keys: list[bytes],
    sizes: list[bytes],
    dates: list[bytes],
    etags: list[bytes],
    classes: list[bytes],
    checks: list[bytes] | None,
    n: int,
) -> Page:
    joined = b"\n".join(raw_keys)
    keys = joined.decode("utf-8").split("\n") if b"&" not in joined else []
    if len(keys) != n:  # entities, or raw newlines (no EncodingType=url): key by key
        keys = [_xml_text(k) for k in raw_keys]
    if checks is not None:
        checks = [c or None for c in checks]  # type: ignore[misc]
    return Page.from_xml_fields(keys, sizes, dates, etags, classes, checks)


def _fast_list_parse(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    """Parse ListObjectsV2's <Contents> in Arrow (or regex passes) instead of botocore's generic parser.

    botocore still sends, signs, retries and parses errors and every other field; only successful
    bodies are touched: their <Contents> elements are lifted out (so botocore parses a small
    document) and handed back as a Page for list_page (``_WANT_PAGE``), else as the same dicts
    botocore would build. tests/unit/test_fast_parse.py checks the parsers agree with botocore's on
    hostile keys; bench/cpu_per_key.py measures the gain.
    """
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or not isinstance(body, bytes) or b"<Contents>" not in body:
        return
    # Only a complete ListBucketResult is touched. A truncated body or an <Error> sent with status
    # 200 is left whole, so botocore's own check (_handle_200_error) turns it into a retried 500.
    # Running before that check also spares it a full ElementTree parse of every page.
    if not complete_list_result(body):
        return
    if getattr(_WANT_PAGE, "on", False):
        # S3 sends the objects as one run: cut it out in one step and read its columns (keys decoded
        # when the answer says EncodingType url), else fall through to the per-object path.
        first, last = body.find(b"<Contents>"), body.rfind(b"</Contents>") + len(b"</Contents>")
        run = body[first:last]
        url = _URL_ENCODED in body[:first] or _URL_ENCODED in body[last:]
        page = _page_from_run(run, url=url)
        if page is None:
            n = body.count(b"<Contents>")
            if body.count(b"</Contents><Contents>", first, last) == n - 1:  # one run of n objects
                page = _page_from_body(run, n)
                if page is not None and url:
                    page.keys = unquote_plus_keys(page.keys)
        if page is not None:
            customized_response_dict[PAGE_KEY] = page
            response_dict["body"] = body[:first] + body[last:]
            return
    parts = body.split(b"<Contents>")
    blocks, rest = [], [parts[0]]
    for part in parts[1:]:
        end = part.find(b"</Contents>")
        if end < 0:
            return  # malformed: botocore's parser reports it
        blocks.append(part[:end])
        rest.append(part[end + 11 :])
    customized_response_dict["Contents"] = [_content_row(b) for b in blocks]
    response_dict["body"] = b"".join(rest)


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
    cache_user_agent(client)
    return count_requests(client)


def cache_user_agent(client: Any) -> Any:
    """Build this client's User-Agent header once per set of features instead of twice per request.

    botocore builds the header from ~30 sanitized components when a request is made and again when it is
    sent (``UserAgentString.to_string``, ``rebuild_and_replace_user_agent_handler``): 10-15 % of the CPU
    of a ListObjectsV2 request (bench/cpu_per_key.py's request floor). Every component is fixed for the
    client's life except the features (the client's, and those the request's context registered on the
    way, e.g. the retry mode), so the string is kept per pair of feature sets: the same header as before.
    """
    creator = getattr(client, "_user_agent_creator", None)
    if creator is None or "to_string" in vars(creator):
        return client
    from botocore.context import get_context

    build = creator.to_string
    built: dict[tuple[frozenset[str], frozenset[str]], str] = {}

    def to_string() -> str:
        ctx = get_context()
        key = (frozenset(creator._client_features or ()), frozenset(ctx.features if ctx is not None else ()))  # noqa: SLF001
        found = built.get(key)
        if found is None:
            found = built[key] = build()
        return found

    creator.to_string = to_string
    return client


# The attempts botocore sends for the list_page call running in this thread (see count_requests).
_SENT = threading.local()


def _count_attempt(**_: Any) -> None:
    if getattr(_SENT, "n", None) is not None:
        counter = _SENT.counter
        if counter is not None and counter.before_attempt is not None:
            counter.before_attempt()
        _SENT.n += 1


def _count_slowdown(
    response: Any = None, attempts: int | None = None, request_dict: Any = None, **_: Any
) -> float | None:
    """``needs-retry`` handler: count an attempt S3 answered with 503 SlowDown (the request-rate signal the
    listers pace on, hpcstage.inventory.pacing); 500s and resets are failures, not rate signals.

    Returns None, so botocore's retry handler decides whether and when to retry; except for a 503 SlowDown
    on a counter with a ``throttle_delay``, below the client's attempt limit: then the retry waits that
    delay (botocore's endpoint sleeps the first answer of its ``needs-retry`` handlers that is not None,
    and this one, registered for the operation, is asked before botocore's own for the service)."""
    if getattr(_SENT, "n", None) is None:
        return None
    slow = False
    if response is not None:
        http, parsed = response
        slow = http.status_code == 503 and parsed.get("Error", {}).get("Code") == "SlowDown"
    _SENT.slow += slow
    counter = _SENT.counter
    if counter is None:
        return None
    if counter.after_attempt is not None:
        counter.after_attempt(slow)
    if not slow or counter.throttle_delay is None or attempts is None:
        return None
    config = ((request_dict or {}).get("context") or {}).get("client_config")
    limit = (getattr(config, "retries", None) or {}).get("total_max_attempts")
    if limit is not None and attempts >= limit:
        return None  # the last attempt: botocore's handler gives up
    return counter.throttle_delay(attempts)


def count_requests(client: Any) -> Any:
    """Count every ListObjectsV2 attempt this client sends, failed and retried ones included, and of them
    the ones answered 503 SlowDown.

    botocore emits ``before-send`` once per HTTP attempt (botocore.endpoint), whatever the attempt's
    outcome: a 503 that is retried, a reset connection, the final error. Every one of them reached S3 (or
    was meant to) and is billed, so the summary's request count and cost take them all.
    """
    client.meta.events.register("before-send.s3.ListObjectsV2", _count_attempt, unique_id="hpcstage-count")
    client.meta.events.register(
        "before-send.s3.ListObjectVersions", _count_attempt, unique_id="hpcstage-count-versions"
    )
    client.meta.events.register("needs-retry.s3.ListObjectsV2", _count_slowdown, unique_id="hpcstage-slow")
    client.meta.events.register(
        "needs-retry.s3.ListObjectVersions", _count_slowdown, unique_id="hpcstage-slow-versions"
    )
    client.meta.hpcstage_counts_requests = True  # type: ignore[attr-defined]
    return client


@dataclass(frozen=True)
class AccessOptions:
    """How to reach a source bucket that may not be the caller's own (CLI options, execution input).

    - ``profile``: a named profile of the AWS config/credentials files (``--profile``).
    - ``unsigned``: anonymous requests, for public buckets such as the AWS Open Data registry
      (``--no-sign-request``, as aws-cli and s5cmd).
    - ``role_arn`` / ``external_id``: a role to assume for this target (cross-account); the credentials are
      refreshed before they expire, so a long run keeps listing.
    - ``request_payer``: send ``RequestPayer=requester`` (requester-pays buckets: the LIST requests are
      billed to the caller, and the summary says so).
    """

    profile: str | None = None
    unsigned: bool = False
    role_arn: str | None = None
    external_id: str | None = None
    role_session_name: str = "hpcstage-inventory"
    request_payer: bool = False

    def __post_init__(self) -> None:
        if self.unsigned and (self.role_arn or self.profile):
            raise InputError(
                "--no-sign-request sends no credentials: it cannot be combined with a role or profile"
            )
        if self.external_id and not self.role_arn:
            raise InputError("an external id is only used with a role to assume (--role-arn)")
        if self.role_arn is not None and not ROLE_ARN.match(self.role_arn):
            raise InputError(f"not an IAM role ARN: {self.role_arn!r} (arn:aws:iam::123456789012:role/NAME)")
        if self.external_id is not None and not EXTERNAL_ID.match(self.external_id):
            raise InputError("an external id is 2 to 1,224 characters of letters, digits and +=,.@:/-")

    @property
    def default(self) -> bool:
        return self == AccessOptions()

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v != getattr(AccessOptions(), k)}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> AccessOptions:
        return cls(**(d or {}))


ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
EXTERNAL_ID = re.compile(r"^[\w+=,.@:/-]{2,1224}$")
# S3 operations a listing sends that take RequestPayer.
_PAYER_OPERATIONS = ("ListObjectsV2", "ListObjectVersions", "ListObjects")


def _add_request_payer(params: dict[str, Any], **_: Any) -> None:
    params.setdefault("RequestPayer", "requester")


def _session(access: AccessOptions) -> Any:
    import boto3  # imported here so that importing the core never needs AWS configuration
    from botocore.exceptions import ProfileNotFound

    try:
        session = boto3.session.Session(profile_name=access.profile)
    except ProfileNotFound:
        known = boto3.session.Session().available_profiles
        raise ConfigError(
            f"no AWS profile named {access.profile!r} (profiles in your AWS config: {', '.join(sorted(known)) or 'none'})"
        ) from None
    # One loader of botocore's data files (the S3 model, endpoint rules: ~0.3-0.5 CPU-s of JSON) for every
    # session of the process: the probe's client and the listing's no longer each read them.
    core = session._session  # noqa: SLF001
    core.register_component("data_loader", _data_loader(core.get_config_variable("data_path")))
    return session


@functools.lru_cache(maxsize=4)
def _data_loader(data_path: str | None) -> Any:
    from botocore.loaders import create_loader

    return create_loader(data_path)


def assume_role_refresher(sts: Any, access: AccessOptions) -> Any:
    """A function botocore calls for fresh credentials of ``access.role_arn`` (and again before they expire)."""

    def refresh() -> dict[str, str]:
        params: dict[str, Any] = {"RoleArn": access.role_arn, "RoleSessionName": access.role_session_name}
        if access.external_id:
            params["ExternalId"] = access.external_id
        try:
            creds = sts.assume_role(**params)["Credentials"]
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            raise AccessDeniedError(
                f"cannot assume role {access.role_arn} ({code}): the role's trust policy must allow this "
                "principal" + (" with this external id" if access.external_id else "")
            ) from err
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    return refresh


def make_s3_client(
    endpoint_url: str | None = None,
    region: str | None = None,
    pool: int = 50,
    access: AccessOptions | None = None,
    sts: Any = None,
    timeouts: Timeouts | None = None,
    direct: bool | None = None,
) -> Any:
    """An S3 client for listing: fast page parsing, request counting, and the target's ``access`` options.

    ``direct``: list pages through hpcstage.s3direct (default: on, unless ``HPCSTAGE_DIRECT_LIST=0``).

    ``sts`` (tests, the local runtime) is the STS client used to assume ``access.role_arn``; by default one
    of the same session (profile) is made.
    """
    access = access or AccessOptions()
    session = _session(access)
    # A session of our own: the faster timestamp parser applies to our clients only.
    session._session.get_component("response_parser_factory").set_parser_defaults(  # noqa: SLF001
        timestamp_parser=fast_timestamp
    )
    config = (
        retry_config(pool=pool)
        if timeouts is None
        else retry_config(timeouts.attempts, pool, timeouts.connect, timeouts.read)
    )
    if access.unsigned:
        from botocore import UNSIGNED

        config = config.merge(Config(signature_version=UNSIGNED))
    if access.role_arn:
        from botocore.credentials import DeferredRefreshableCredentials

        sts = sts or session.client("sts", region_name=region)
        creds = DeferredRefreshableCredentials(
            refresh_using=assume_role_refresher(sts, access), method="assume-role"
        )
        session._session._credentials = creds  # noqa: SLF001 - as botocore's own assume-role provider does
    client = session.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)
    if access.request_payer:
        for op in _PAYER_OPERATIONS:
            client.meta.events.register(f"before-parameter-build.s3.{op}", _add_request_payer)
    client.meta.hpcstage_access = access  # type: ignore[attr-defined]
    if enabled_by_environment() if direct is None else direct:
        # A botocore without the parts the direct path reuses (it is pinned) lists every page itself.
        with contextlib.suppress(AttributeError):
            client.meta.hpcstage_direct = DirectLister(client, lambda rd, cd: _fast_list_parse(rd, cd))  # type: ignore[attr-defined]
    if sts is None:
        # an injected STS client (tests, the local runtime) cannot be made again elsewhere
        client.meta.hpcstage_spec = ClientSpec(endpoint_url, region, pool, access, timeouts)  # type: ignore[attr-defined]
    return enable_fast_list_parsing(client)


@dataclass(frozen=True)
class ClientSpec:
    """What ``make_s3_client`` was called with: enough to make the same client in another process
    (credentials come again from the same chain there: environment, profile, role)."""

    endpoint_url: str | None = None
    region: str | None = None
    pool: int = 50
    access: AccessOptions = dataclasses.field(default_factory=lambda: AccessOptions())
    timeouts: Timeouts | None = None

    def make(self, pool: int | None = None) -> Any:
        return make_s3_client(
            self.endpoint_url,
            self.region,
            pool=self.pool if pool is None else pool,
            access=self.access,
            timeouts=self.timeouts,
        )


def client_spec(s3: Any) -> ClientSpec | None:
    """How to make ``s3`` again in another process; None for clients made elsewhere (plain boto3, stubs)."""
    found = getattr(getattr(s3, "meta", None), "hpcstage_spec", None)
    return found if isinstance(found, ClientSpec) else None


def in_process_mock() -> bool:
    """Whether an in-process mock (moto's ``mock_aws``) answers this process's boto3 requests: another
    process would not see it (its requests would go to the real endpoint), so listing stays in this one.
    Looked up without importing moto (it is a test and local-runtime dependency only)."""
    models = sys.modules.get("moto.core.models")
    return bool(getattr(getattr(models, "botocore_stubber", None), "enabled", False))


def access_summary(access: AccessOptions) -> dict[str, Any]:
    """What summary.json records about how the target was reached (never an external id)."""
    out: dict[str, Any] = {}
    if access.request_payer:
        out["request_payer"] = True
    if access.role_arn:
        out["role_arn"] = access.role_arn
    if access.unsigned:
        out["unsigned"] = True
    if access.profile:
        out["profile"] = access.profile
    return out


def client_access(s3: Any) -> AccessOptions:
    """The access options an S3 client was made with (default ones for clients made elsewhere)."""
    found = getattr(getattr(s3, "meta", None), "hpcstage_access", None)
    return found if isinstance(found, AccessOptions) else AccessOptions()


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
    if not BUCKET_NAME.match(bucket) or ".." in bucket:
        raise InputError(f"invalid bucket name {bucket!r} in {url!r}")
    return S3Url(bucket=bucket, prefix=prefix)


class RequestCounter:
    """Thread-safe LIST request tally: requests sent (every attempt), retries (attempts beyond the first) and
    throttled (attempts answered 503 SlowDown; on a client without ``count_requests``, every retry).

    On a client with ``count_requests``, ``before_attempt`` runs before each attempt is sent, retries
    included (it may sleep: the fleet's listers wait there for their pacer's slot), and ``after_attempt``
    when each attempt is answered, with whether the answer was 503 SlowDown."""

    def __init__(
        self,
        before_attempt: Callable[[], None] | None = None,
        after_attempt: Callable[[bool], None] | None = None,
        throttle_delay: Callable[[int], float] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0
        self.throttled = 0
        self.before_attempt = before_attempt
        self.after_attempt = after_attempt
        # How long a 503 SlowDown waits before its retry, given the attempts made so far, instead of
        # botocore's backoff (up to 20 s); None: botocore's. The fleet's listers pace their attempts, so
        # their retries need no backoff beyond the pacer's window (hpcstage.inventory.pacing).
        self.throttle_delay = throttle_delay

    def add(self, requests: int, retries: int, throttled: int | None = None) -> None:
        with self._lock:
            self.requests += requests
            self.retries += retries
            self.throttled += retries if throttled is None else throttled


def _counted_call(
    s3: Any,
    operation: str,
    bucket: str,
    params: dict[str, Any],
    counter: RequestCounter | None,
    *,
    action: str,
    botocore_error: Callable[[BotoCoreError], Exception | None],
    fast_page: bool = False,
) -> dict[str, Any]:
    """One call of a listing ``operation``, every attempt (failed ones included) added to ``counter``. S3's
    refusals become one line naming ``action``; botocore's own errors what ``botocore_error`` makes of them
    (None: raised as they are). ``fast_page``: a ListObjectsV2 answer's Contents go through the fast page
    parser (``PAGE_KEY``)."""
    _WANT_PAGE.on = fast_page
    hooked = getattr(getattr(s3, "meta", None), "hpcstage_counts_requests", False)
    _SENT.n = 0
    _SENT.slow = 0
    _SENT.counter = counter
    attempts: int | None = None
    direct = _direct_lister(s3, params) if fast_page and hooked else None
    try:
        found = _direct_page(direct, bucket, params, counter) if direct is not None else None
        if found is not None:
            resp: dict[str, Any] = found
        elif direct is not None and direct.template(bucket) is None:
            direct.capturing(bucket)
            answered: dict[str, Any] | None = None
            try:
                resp = answered = getattr(s3, operation)(**params)
            finally:
                direct.keep(bucket, answered)
        else:
            resp = getattr(s3, operation)(**params)
        attempts = _SENT.n if hooked else 1 + int(resp.get("ResponseMetadata", {}).get("RetryAttempts", 0))
    except ClientError as err:
        meta = err.response.get("ResponseMetadata", {})
        attempts = _SENT.n if hooked else 1 + int(meta.get("RetryAttempts", 0))
        raise translate_client_error(err, bucket, action=action) from err
    except BotoCoreError as err:
        attempts = _SENT.n if hooked else 1
        translated = botocore_error(err)
        if translated is None:
            raise
        raise translated from err
    except BaseException:
        attempts = _SENT.n if hooked else 1
        raise
    finally:
        _WANT_PAGE.on = False
        _SENT.n = None
        _SENT.counter = None
        if counter is not None and attempts:
            counter.add(attempts, attempts - 1, _SENT.slow if hooked else None)
    return resp


def _direct_lister(s3: Any, params: dict[str, Any]) -> DirectLister | None:
    """The client's direct ListObjectsV2 path (hpcstage.s3direct) when these ``params`` can take it: a
    client made by ``make_s3_client``, page parameters only."""
    direct = getattr(s3.meta, "hpcstage_direct", None)
    if direct is None or any(k != "Bucket" and k not in QUERY_NAMES for k in params):
        return None
    return direct  # type: ignore[no-any-return]


def _direct_page(
    direct: DirectLister, bucket: str, params: dict[str, Any], counter: RequestCounter | None
) -> dict[str, Any] | None:
    """One direct attempt at a page, counted as botocore's attempts are (``_count_attempt`` before it is
    sent, its 503 SlowDown after); None when there is no template yet or the attempt failed. After a
    failure that a retry would wait for (5xx, a reset, a timeout, a bad body), the wait of botocore's first
    retry (or the fleet's throttle delay for a 503) is spent here, before the page goes to botocore; any
    other refusal drops the template (botocore's call then redirects or raises, and is captured again)."""
    template = direct.template(bucket)
    if template is None:
        return None
    _count_attempt()
    answer = direct.attempt(template, params)
    _SENT.slow += answer.slowdown
    if counter is not None and counter.after_attempt is not None:
        counter.after_attempt(answer.slowdown)
    if answer.parsed is not None:
        return answer.parsed
    if answer.transient:
        delay = counter.throttle_delay if counter is not None and answer.slowdown else None
        time.sleep(retry_wait(1, delay))
    else:
        direct.forget(bucket)
    return None


def _counted_list(
    s3: Any, bucket: str, params: dict[str, Any], counter: RequestCounter | None, *, fast_page: bool
) -> dict[str, Any]:
    """One ListObjectsV2 call (``_counted_call``), botocore's errors as one line each."""
    return _counted_call(
        s3,
        "list_objects_v2",
        bucket,
        params,
        counter,
        action="s3:ListBucket",
        botocore_error=translate_botocore_error,
        fast_page=fast_page,
    )


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
    resp = _counted_list(s3, bucket, params, counter, fast_page=True)
    if resp.get(PAGE_KEY) is None and resp.get("EncodingType") == "url":  # a Page's keys come decoded
        for obj in resp.get("Contents", ()):
            obj["Key"] = unquote_plus(obj["Key"])
    return resp


def list_dirs(
    s3: Any, bucket: str, params: dict[str, Any], *, counter: RequestCounter | None = None
) -> tuple[list[str], bool]:
    """(CommonPrefixes, IsTruncated) of one ListObjectsV2 call with a Delimiter (``Cursor.explore``), counted
    like ``list_page``. botocore's own parser reads the answer and decodes the URL-encoded prefixes."""
    resp = _counted_list(s3, bucket, {"Bucket": bucket, **params}, counter, fast_page=False)
    prefixes = [p["Prefix"] for p in resp.get("CommonPrefixes") or () if p.get("Prefix")]
    return prefixes, bool(resp.get("IsTruncated"))


# A '%' that does not start an escape of two hex digits (urllib leaves it as it is).
_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")


def _unquote_ascii(raw: bytes) -> bytes | None:
    """``urllib.parse.unquote_to_bytes(raw)`` when every '%' in ``raw`` starts an escape, else None.

    Quoted-printable's "=XX" is percent-encoding with another escape byte, and binascii decodes it in C:
    each '=' of ``raw`` is first written as its own escape "=3D" and each '%' becomes '='. With every '%'
    followed by two hex digits, every '=' is then followed by two hex digits, so ``a2b_qp`` meets no soft
    line break ("=\n") and no stray '=': it decodes exactly the escapes urllib would, and nothing else.
    """
    if _BAD_ESCAPE.search(raw) is not None:
        return None
    return binascii.a2b_qp(raw.replace(b"=", b"=3D").replace(b"%", b"="))


def unquote_plus_keys(keys: list[str]) -> list[str]:
    """``[unquote_plus(k) for k in keys]``, computed page-wise.

    The page is decoded as one newline-joined string and split again; a page with a raw newline in a key,
    or an escaped one (%0A), cannot be split back and goes key by key. An ASCII page (what S3 sends with
    EncodingType=url) is decoded in C (``_unquote_ascii``); the UTF-8 decoding with errors="replace" is
    urllib's.
    """
    decoded = _unquote_joined("\n".join(keys), len(keys))
    return decoded.split("\n") if decoded is not None else [unquote_plus(k) for k in keys]


def _unquote_joined(joined: str, n: int) -> str | None:
    """``unquote_plus`` of ``n`` keys joined by newlines, or None when the result cannot be split back
    into ``n`` keys (a raw newline in a key, or an escaped one)."""
    if joined.count("\n") != n - 1:
        return None
    if "%" not in joined:
        return joined.replace("+", " ") if "+" in joined else joined
    if joined.isascii():
        decoded = _unquote_ascii(joined.encode("ascii").replace(b"+", b" "))
        if decoded is not None and decoded.count(b"\n") == n - 1:
            return decoded.decode("utf-8", "replace")
    text = unquote_plus(joined)  # its ASCII runs decode alone: the newlines between keys split no character
    return text if text.count("\n") == n - 1 else None


def list_versions_page(
    s3: Any,
    bucket: str,
    prefix: str,
    *,
    key_marker: str | None = None,
    version_id_marker: str | None = None,
    max_keys: int = LIST_MAX_KEYS,
    counter: RequestCounter | None = None,
) -> dict[str, Any]:
    """One ListObjectVersions call, counted like ``list_page``.

    botocore asks for EncodingType=url itself and decodes the keys and markers of the answer (its
    ``decode_list_object_versions`` handler), so keys arrive decoded.
    """
    params: dict[str, Any] = {"Bucket": bucket, "MaxKeys": max_keys}
    if prefix:
        params["Prefix"] = prefix
    if key_marker is not None:
        params["KeyMarker"] = key_marker
        if version_id_marker is not None:
            params["VersionIdMarker"] = version_id_marker
    return _counted_call(
        s3,
        "list_object_versions",
        bucket,
        params,
        counter,
        action="s3:ListBucketVersions",
        botocore_error=lambda err: (
            BucketError(f"cannot reach S3 for bucket {bucket!r}: {err}")
            if isinstance(err, EndpointConnectionError | NoCredentialsError)
            else None
        ),
    )


class _KeysView(Sequence[str]):
    """Keys of boto3-shaped contents, read one at a time (a lazily built page stays lazy)."""

    def __init__(self, contents: Sequence[dict[str, Any]]) -> None:
        self.contents = contents

    def __len__(self) -> int:
        return len(self.contents)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [o["Key"] for o in self.contents[i]]
        return self.contents[i]["Key"]


def page_objects(resp: dict[str, Any]) -> tuple[Sequence[str], Page | Sequence[dict[str, Any]]]:
    """(keys, objects) of a list_page answer: a columnar Page from the fast parser, else the
    boto3-shaped Contents as they came (moto, botocore's parser, the simulator)."""
    page: Page | None = resp.get(PAGE_KEY)
    if page is not None:
        return page.keys, page
    contents = resp.get("Contents") or []
    return _KeysView(contents), contents


def head(objects: Page | Sequence[dict[str, Any]], n: int) -> Page | Sequence[dict[str, Any]]:
    return objects.head(n) if isinstance(objects, Page) else objects[:n]


def as_page(objects: Page | Sequence[dict[str, Any]]) -> Page:
    if isinstance(objects, Page):
        return objects
    return Page.from_contents(objects) if len(objects) else EMPTY


def translate_client_error(
    err: ClientError, bucket: str, *, action: str = "s3:ListBucket", where: str = ""
) -> Exception:
    """S3's answer as one line that says what to do (``where`` names the part of the bucket refused); codes
    not known here are left as they are."""
    code = str(err.response.get("Error", {}).get("Code", ""))
    headers = err.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}) or {}
    if code in ("NoSuchBucket", "404"):
        return BucketError(f"no such bucket: {bucket} (check the name; `aws s3 ls` lists yours)")
    if code in ("AccessDenied", "403", "AllAccessDisabled"):
        message = err.response.get("Error", {}).get("Message", "")
        hint = f"needs {action}"
        if "kms" in message.lower():
            hint += (
                "; the bucket uses SSE-KMS: listing needs no key, reading objects (staging) needs kms:Decrypt"
            )
        hint += "; a requester-pays bucket also needs --request-payer"
        return AccessDeniedError(
            f"access denied listing bucket {bucket}{' ' + where if where else ''} ({hint})"
        )
    if code in (
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
        "IllegalLocationConstraintException",
        "301",
    ):
        region = headers.get("x-amz-bucket-region") or err.response.get("Error", {}).get("Region")
        loc = f"region {region}: pass --region {region}" if region else "another region: pass --region"
        return BucketError(f"bucket {bucket} is in {loc} (or set AWS_DEFAULT_REGION)")
    if code in (
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
    ):
        return ConfigError(
            f"S3 refused the credentials in use ({code}): check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
            "or AWS_PROFILE, and refresh a session token (`aws sso login`)"
        )
    return err


def translate_botocore_error(err: BotoCoreError) -> HpcstageError:
    """botocore's own errors (no answer from S3, or no configuration to send one) as one line each."""
    if isinstance(err, NoCredentialsError):
        return ConfigError(
            "unable to locate AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "or run `aws configure`"
        )
    if isinstance(err, ProfileNotFound):
        return ConfigError(f"{err}: the profiles are in ~/.aws/config (`aws configure list-profiles`)")
    if isinstance(err, PartialCredentialsError | CredentialRetrievalError | NoRegionError):
        return ConfigError(str(err))
    if isinstance(err, ConnectTimeoutError | ReadTimeoutError):
        return EndpointError(
            f"{err} (S3 did not answer in time; raise --connect-timeout/--read-timeout if the endpoint is slow)"
        )
    if isinstance(err, EndpointConnectionError | ConnectionClosedError):
        return EndpointError(f"{err} (check --endpoint-url and the network)")
    return EndpointError(f"{type(err).__name__}: {err}")
