"""ListObjectsV2 pages sent with botocore's own signer and HTTP session, without its per-call machinery.

A botocore call runs ~3,000 Python function calls before and after the HTTP exchange (parameter
validation, endpoint rules, serialization, a dozen events, the retry handler), a large part of a
listing's CPU per page (bench/cpu_per_key.py; bench/RESULTS.md). For one bucket and one client, all of that
gives the same answer for every page except the query string. So the first page of a bucket goes
through botocore as any call does, and what botocore built for it (the URL up to the query, headers,
the signing context) is kept as the bucket's template when that call succeeded at its first attempt;
the following pages copy the template with their own query, are signed by the client's
``RequestSigner`` (credentials refreshed, SigV4 or unsigned, as chosen for the first page) and sent
on the urllib3 connection pool the client's HTTP session would send them on (its TLS settings and
timeouts; through a proxy, by the session itself).

Only a whole ListBucketResult answered 200 is read here. Anything else (an error status, a 503
SlowDown, a dropped connection, a truncated body or an <Error> sent with 200) is one counted attempt,
and the page is then asked again through botocore, which retries, redirects and raises as it always
does (after the same delay a retry would have waited). tests/unit/test_s3direct.py checks that a
direct request is byte for byte the request botocore signs (URL, headers, signature) for hostile
prefixes and keys, path-style and virtual-host addressing, requester pays, session tokens and unsigned
clients; ``HPCSTAGE_DIRECT_LIST=0`` turns the path off.
"""

from __future__ import annotations

import os
import random
import re
import threading
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import unescape

from botocore.awsrequest import AWSRequest
from botocore.exceptions import HTTPClientError
from botocore.utils import percent_encode_sequence
from urllib3.exceptions import HTTPError as URLLib3Error
from urllib3.util.retry import Retry

OPERATION = "ListObjectsV2"
# The request parameters a direct page may carry, and their query names (S3 API reference, ListObjectsV2).
QUERY_NAMES = {
    "Prefix": "prefix",
    "ContinuationToken": "continuation-token",
    "StartAfter": "start-after",
    "MaxKeys": "max-keys",
    "EncodingType": "encoding-type",
}
# The signers the template is kept for: SigV4 and unsigned (S3 Express sessions and others go to botocore).
_AUTH_TYPES = ("v4", "none")


# The top-level elements of a ListObjectsV2 answer without Contents, and how botocore types them
# (the output shape's members; CommonPrefixes, a list, is left to botocore's parser).
_TOP_TYPES: dict[bytes, Any] = {
    b"Name": str,
    b"Prefix": str,
    b"Delimiter": str,
    b"MaxKeys": int,
    b"EncodingType": str,
    b"KeyCount": int,
    b"IsTruncated": lambda text: text == "true",
    b"ContinuationToken": str,
    b"NextContinuationToken": str,
    b"StartAfter": str,
}
_SHELL = re.compile(
    rb"\s*(?:<\?xml[^>]*\?>\s*)?<ListBucketResult(?:\s[^>]*)?>(.*)</ListBucketResult>\s*", re.S
)
_TOP = re.compile(rb"<(\w+)>([^<]*)</\1>")
_ELEMENTS = re.compile(rb"(?:\s*<(\w+)>[^<]*</\1>)*\s*")
_ENTITIES = {"&quot;": '"', "&apos;": "'"}


def light_parse(response_dict: dict[str, Any]) -> dict[str, Any] | None:
    """What botocore's parser makes of a ListObjectsV2 body whose Contents the page parser took out: flat
    top-level elements only. None for anything else (CommonPrefixes, an element it does not know or sees
    twice, a numeric character reference, CDATA), which botocore's parser then reads;
    tests/unit/test_s3direct.py compares the two."""
    shell = _SHELL.fullmatch(response_dict["body"])
    if shell is None:
        return None
    inner = shell[1]
    if b"&#" in inner or _ELEMENTS.fullmatch(inner) is None:
        return None
    parsed: dict[str, Any] = {}
    found = _TOP.findall(inner)
    for tag, value in found:
        kind = _TOP_TYPES.get(tag)
        name = tag.decode()
        if kind is None or name in parsed:
            return None
        try:
            parsed[name] = kind(unescape(value.decode("utf-8"), _ENTITIES))
        except ValueError:  # not UTF-8, or not a number: botocore's parser says what is wrong
            return None
    headers = response_dict["headers"]
    meta: dict[str, Any] = {}
    if "x-amzn-requestid" in headers:
        meta["RequestId"] = headers["x-amzn-requestid"]
    elif "x-amz-request-id" in headers:
        meta["RequestId"] = headers["x-amz-request-id"]
        meta["HostId"] = headers.get("x-amz-id-2", "")
    meta["HTTPStatusCode"] = response_dict["status_code"]
    meta["HTTPHeaders"] = {k.lower(): v for k, v in headers.items()}
    parsed["ResponseMetadata"] = meta
    if "x-amz-request-charged" in headers:
        parsed["RequestCharged"] = headers["x-amz-request-charged"]
    return parsed


def complete_list_result(body: bytes) -> bool:
    """Whether ``body`` opens a ListBucketResult and closes it: neither truncated nor an <Error> sent with 200
    (botocore turns those into a retried 500)."""
    return b"<ListBucketResult" in body[:512] and body.rstrip().endswith(b"</ListBucketResult>")


def enabled_by_environment() -> bool:
    return os.environ.get("HPCSTAGE_DIRECT_LIST", "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class Route:
    """Where a template's pages go in botocore's connection pools: its scheme, host and port, and the request
    target (path and query) of a URL as the part of it after ``origin``."""

    scheme: str
    host: str
    port: int
    origin: str  # "scheme://netloc", which the request target follows in every URL of the template


_NO_RETRY = Retry(False)


@dataclass(frozen=True)
class Template:
    """What botocore built for one bucket's page, less the query string."""

    base: str  # the URL up to the variable query, its separator ('?' or '&') included (a GET, no body)
    headers: tuple[tuple[str, str], ...]
    auth_path: str | None
    context: dict[str, Any]
    route: Route | None = None  # set when kept (DirectLister.route); None: botocore's session sends the pages


def template_from(request_dict: dict[str, Any], context: dict[str, Any]) -> Template | None:
    """The template of a request botocore built (``before-call``), or None when it is not one a direct page
    can copy: a query this module does not write, an URL it cannot split, a signer it does not keep."""
    query = dict(request_dict.get("query_string") or {})
    url = request_dict.get("url")
    if (
        not isinstance(url, str)
        or not set(query) <= set(QUERY_NAMES.values())
        or request_dict.get("method") != "GET"
        or request_dict.get("body") not in (b"", None)
        or context.get("auth_type") not in _AUTH_TYPES
        or (context.get("signing") or {}).get("identity_cache") is not None
    ):
        return None
    encoded = percent_encode_sequence(query)
    if not encoded or not url.endswith(encoded) or url[-len(encoded) - 1] not in "?&":
        return None
    return Template(
        base=url[: -len(encoded)],
        headers=tuple((str(k), v) for k, v in request_dict.get("headers", {}).items()),
        auth_path=request_dict.get("auth_path"),
        context={k: v for k, v in context.items() if k not in ("retries", "input_params", "s3_redirect")},
    )


def direct_request(template: Template, params: dict[str, Any]) -> AWSRequest:
    """The unsigned request for ``params`` (Bucket and ``QUERY_NAMES``), as botocore would build it."""
    query = {QUERY_NAMES[name]: value for name, value in params.items() if name != "Bucket"}
    request = AWSRequest(
        method="GET",
        url=template.base + percent_encode_sequence(query),
        data=b"",
        headers=dict(template.headers),
        auth_path=template.auth_path,
    )
    request.context = dict(template.context)
    return request


class Answer:
    """What one direct attempt came to: ``parsed`` (a botocore-shaped answer) or None, and whether it was a
    503 SlowDown (the request-rate signal) and whether a retry should wait (5xx, resets, timeouts)."""

    __slots__ = ("parsed", "slowdown", "transient")

    def __init__(
        self, parsed: dict[str, Any] | None, slowdown: bool = False, transient: bool = False
    ) -> None:
        self.parsed = parsed
        self.slowdown = slowdown
        self.transient = transient


class DirectLister:
    """The direct path of one client: bucket templates, signing, sending and reading answers.

    ``parse_body(response_dict, customized)`` is the fast page parser (s3util's): it takes the Contents
    out of a complete body and leaves the rest for botocore's parser."""

    def __init__(self, client: Any, parse_body: Any) -> None:
        self._parse_body = parse_body
        self._templates: dict[str, Template] = {}
        self._lock = threading.Lock()
        model = client.meta.service_model
        self._output_shape = model.operation_model(OPERATION).output_shape
        endpoint = client._endpoint  # noqa: SLF001 - its HTTP session: pool, proxies, TLS, timeouts
        self._parser = endpoint._response_parser_factory.create_parser(model.resolved_protocol)  # noqa: SLF001
        self._http = endpoint.http_session
        self._send = self._http.send
        self._signer = client._request_signer  # noqa: SLF001
        self._capture = threading.local()

        def sent_by_botocore(request: Any) -> Any:
            self._capture.wire = True  # the call went over the session, not to an answering handler
            self._capture.agent = request.headers.get("User-Agent")  # as botocore rebuilt it to send
            return self._send(request)

        # A template is only kept from a call that went over the wire: a handler that answers before
        # sending (moto's in-process mock, a test's stub) makes no template, so its client never goes direct.
        self._http.send = sent_by_botocore
        client.meta.events.register(
            f"before-call.s3.{OPERATION}", self._captured, unique_id="hpcstage-direct-capture"
        )

    # -- templates ---------------------------------------------------------------------------------
    def template(self, bucket: str) -> Template | None:
        return self._templates.get(bucket)

    def forget(self, bucket: str) -> None:
        with self._lock:
            self._templates.pop(bucket, None)

    def capturing(self, bucket: str) -> None:
        """The next botocore call of ListObjectsV2 in this thread is a candidate template for ``bucket``."""
        self._capture.bucket = bucket
        self._capture.found = None
        self._capture.wire = False
        self._capture.agent = None

    def _captured(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if getattr(self._capture, "bucket", None) is not None and self._capture.found is None:
            self._capture.found = template_from(params, context)

    def keep(self, bucket: str, parsed: dict[str, Any] | None) -> None:
        """End of a captured call: keep its template when it succeeded at its first attempt, unredirected."""
        found, wire = getattr(self._capture, "found", None), getattr(self._capture, "wire", False)
        self._capture.bucket = self._capture.found = None
        if found is None or parsed is None or not wire:
            return
        meta = parsed.get("ResponseMetadata") or {}
        if meta.get("RetryAttempts", 0) == 0 and meta.get("HTTPStatusCode") == 200:
            agent = self._capture.agent
            if agent is not None:  # the header botocore sent (features the call registered included)
                text = agent.decode() if isinstance(agent, bytes) else str(agent)
                found = replace(
                    found, headers=tuple((k, text if k == "User-Agent" else v) for k, v in found.headers)
                )
            found = replace(found, route=self.route(found))
            with self._lock:
                self._templates[bucket] = found

    # -- the connection ----------------------------------------------------------------------------
    def route(self, template: Template) -> Route | None:
        """The template's route to the pool botocore's session would send its pages on, or None when
        botocore's own ``send`` must take them (a proxy, a per-request timeout, a URL whose request target is
        not simply what follows its origin). Computed once per template, when it is kept."""
        http = self._http
        parts = urlsplit(template.base)
        origin = f"{parts.scheme}://{parts.netloc}"
        probe = template.base + "x=1"
        if (
            parts.scheme in ("http", "https")
            and parts.hostname
            and template.context.get("read_timeout") is None
            and http._proxy_config.proxy_url_for(probe) is None  # noqa: SLF001
            and probe.startswith(origin + "/")
            and http._path_url(probe) == probe[len(origin) :]  # noqa: SLF001
        ):
            port = parts.port or (443 if parts.scheme == "https" else 80)
            return Route(scheme=parts.scheme, host=parts.hostname, port=port, origin=origin)
        return None

    def _send_on(self, route: Route, request: Any) -> tuple[int, Any, bytes]:
        """``request`` sent as botocore's session sends it (its pool manager, TLS settings and timeouts, no
        retries, the body read whole), without the session's per-request wrapping: status, headers, body.
        Errors are urllib3's, which botocore's ``send`` would have turned into HTTPClientErrors."""
        pool = self._http._manager.connection_from_host(route.host, route.port, route.scheme)  # noqa: SLF001
        self._http._setup_ssl_cert(pool, route.origin, self._http._verify)  # noqa: SLF001
        response = pool.urlopen(
            method="GET",
            url=request.url[len(route.origin) :],
            body=request.body,
            headers=request.headers,
            retries=_NO_RETRY,
            assert_same_host=False,
            preload_content=False,
            decode_content=False,
            chunked=False,
            enforce_content_length=False,
        )
        try:
            body = response.read()
        finally:
            response.release_conn()
        return response.status, response.headers, body

    # -- one attempt -------------------------------------------------------------------------------
    def attempt(self, template: Template, params: dict[str, Any]) -> Answer:
        """Sign and send one page request; the answer parsed, or why not."""
        request = direct_request(template, params)
        self._signer.sign(OPERATION, request)
        for key, value in request.headers.items():
            if isinstance(value, str):
                request.headers[key] = value.encode("utf-8")
        prepared = request.prepare()
        route = template.route
        if route is None:
            try:
                response = self._send(prepared)
            except HTTPClientError:
                return Answer(None, transient=True)
            status, headers, body = response.status_code, response.headers, response.content
        else:
            try:
                status, headers, body = self._send_on(route, prepared)
            except (URLLib3Error, OSError):
                return Answer(None, transient=True)  # what botocore raises as an HTTPClientError
        if status != 200:
            slowdown = status == 503 and b"<Code>SlowDown</Code>" in body
            return Answer(None, slowdown=slowdown, transient=status >= 500)
        if not complete_list_result(body):
            return Answer(None, transient=True)  # botocore turns it into a retried 500
        response_dict = {
            "headers": headers,
            "status_code": status,
            "body": body,
            "context": {"operation_name": OPERATION},
        }
        customized: dict[str, Any] = {}
        self._parse_body(response_dict, customized)
        parsed = light_parse(response_dict) or self._parser.parse(response_dict, self._output_shape)
        parsed.update(customized)
        parsed.setdefault("ResponseMetadata", {})["RetryAttempts"] = 0
        return Answer(parsed)


def retry_wait(attempts: int, throttle_delay: Any = None) -> float:
    """How long the botocore call that follows a failed direct attempt waits first: the fleet's throttle
    delay for a 503 when it has one, else the first step of botocore's standard backoff (full jitter
    under 2 ** (attempts - 1) seconds, botocore.retries.standard.ExponentialBackoff)."""
    if throttle_delay is not None:
        return float(throttle_delay(attempts))
    return random.random() * (2 ** (attempts - 1))
