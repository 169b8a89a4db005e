"""The direct ListObjectsV2 path (hpcstage.s3direct) sends what botocore sends, and falls back to botocore.

A local HTTP server records every request as it arrives (request line and headers) and answers from a
script. With the signing clock frozen, a client on the direct path and one without it list the same
sequence of hostile prefixes and start keys: the requests must be the same bytes (the signature included),
except for botocore's SDK telemetry headers, which direct requests do not carry (so they also show which
requests went direct). Failed direct attempts (503 SlowDown, 500, a dropped connection, a truncated or
<Error> body with 200, a refusal) are counted and the page is answered through botocore.
"""

from __future__ import annotations

import datetime
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hpcstage.errors import AccessDeniedError
from hpcstage.s3util import AccessOptions, RequestCounter, list_page, make_s3_client, page_objects

PAGE = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    "<Name>bkt</Name><Prefix></Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType>"
    "<IsTruncated>true</IsTruncated><NextContinuationToken>{token}</NextContinuationToken>"
    "<Contents><Key>a+b%3D</Key><LastModified>2024-03-01T12:00:00.000Z</LastModified>"
    "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>7</Size><StorageClass>STANDARD</StorageClass>"
    "</Contents><Contents><Key>%E2%82%AC/x</Key><LastModified>2024-03-02T12:00:00.000Z</LastModified>"
    "<ETag>&quot;1b2cf535f27731c974343645a3985328-2&quot;</ETag><Size>9</Size><StorageClass>GLACIER</StorageClass>"
    "</Contents></ListBucketResult>"
)
SLOWDOWN = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
INTERNAL = b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"
DENIED = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
TELEMETRY = ("amz-sdk-invocation-id", "amz-sdk-request")
# Prefixes and start keys no encoder should get wrong: reserved and unreserved URL characters, '%', '+',
# spaces, every control character S3 allows in a key, non-ASCII, a long key.
HOSTILE = [
    "",
    "a b+c/~%25%/=&?#;,:@$!'()*[]{}|\\^`\"<>",
    "".join(chr(c) for c in range(1, 32)) + "\x7f",
    "données/日本語/emoji-😀/",
    "x" * 1024,
    "%2F%252F+plus%20space",
]


class Recorder:
    """A local S3 stand-in: records each request and answers by the script (a list of actions, then pages)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.script: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                owner.requests.append((self.requestline, {k.lower(): v for k, v in self.headers.items()}))
                action = owner.script.pop(0) if owner.script else "page"
                if action == "drop":
                    self.close_connection = True
                    return
                status, body = {
                    "page": (200, PAGE.format(token=len(owner.requests)).encode()),
                    "slowdown": (503, SLOWDOWN),
                    "internal": (500, INTERNAL),
                    "denied": (403, DENIED),
                    "truncated": (200, PAGE.format(token=1).encode()[:-40]),
                    "error200": (200, b'<?xml version="1.0" encoding="UTF-8"?>\n' + INTERNAL),
                }[action]
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.close()


@pytest.fixture
def frozen(credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HPCSTAGE_DIRECT_LIST", raising=False)
    at = datetime.datetime(2026, 11, 25, 12, 0, 0)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *a, **k: at)
    monkeypatch.setattr("time.sleep", lambda _s: None)  # the waits before a failed page's retry


def calls() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in HOSTILE:
        out.append({"prefix": p})
        out.append({"prefix": p, "start_after": p + "\U0010ffff"})
        out.append({"prefix": "", "token": "1/" + p + "=="})
    out.append({"prefix": "d/", "max_keys": 7})
    return out


def listed(client: Any, bucket: str) -> list[tuple[list[str], list[int], Any, Any]]:
    answers = []
    for call in calls():
        resp = list_page(
            client,
            bucket,
            call["prefix"],
            start_after=call.get("start_after"),
            token=call.get("token"),
            max_keys=call.get("max_keys", 1000),
        )
        keys, objects = page_objects(resp)
        sizes = objects.sizes.to_pylist()  # type: ignore[union-attr]
        answers.append((list(keys), sizes, resp.get("IsTruncated"), resp.get("NextContinuationToken")))
    return answers


def same_bytes(request: tuple[str, dict[str, str]]) -> tuple[str, dict[str, str]]:
    """A recorded request less botocore's telemetry headers, the User-Agent's feature ids sorted (botocore
    writes them in set order, which varies between clients)."""
    line, headers = request
    out = {k: v for k, v in headers.items() if k not in TELEMETRY}
    out["user-agent"] = re.sub(
        r" m/([^ ]*)", lambda m: " m/" + ",".join(sorted(m[1].split(","))), out["user-agent"]
    )
    return line, out


CASES = {
    "path-style": ({}, "bkt", None),
    "requester pays": ({"access": AccessOptions(request_payer=True)}, "bkt", None),
    "unsigned": ({"access": AccessOptions(unsigned=True)}, "bkt", None),
    "session token": ({}, "bkt", "FwoGZXIvYXdzEB4aDHN0cy10b2tlbi0+/="),
    "virtual host via a proxy": ({"region": "us-west-2"}, "bkt-1", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_direct_requests_are_the_requests_botocore_signs(
    case: str, recorder: Recorder, frozen: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    kwargs, bucket, token = CASES[case]
    endpoint = f"http://127.0.0.1:{recorder.port}"
    if token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    if case == "virtual host via a proxy":
        # S3's own endpoint, reached through the local server as an HTTP proxy: botocore puts the bucket in
        # the host name, and the proxy sees the absolute URL.
        monkeypatch.setenv("HTTP_PROXY", endpoint)
        monkeypatch.setenv("NO_PROXY", "")
        config = tmp_path / "config"
        config.write_text("[default]\ns3 =\n    addressing_style = virtual\n")
        monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
        endpoint = "http://s3.us-west-2.amazonaws.com"
    seen = {}
    routes: dict[str, Any] = {}
    for direct in (False, True):
        recorder.requests.clear()
        client = make_s3_client(
            endpoint, kwargs.get("region", "us-east-1"), access=kwargs.get("access"), direct=direct
        )
        answers = listed(client, bucket)
        seen[direct] = (answers, list(recorder.requests))
        if direct:
            routes[case] = client.meta.hpcstage_direct.template(bucket).route
    plain, fast = seen[False][1], seen[True][1]
    assert len(plain) == len(fast) == len(calls())
    # botocore sent the first page (the template); every other page went direct (no SDK telemetry headers)
    assert [all(h in r[1] for h in TELEMETRY) for r in fast] == [True] + [False] * (len(fast) - 1)
    assert all(all(h in r[1] for h in TELEMETRY) for r in plain)
    assert [same_bytes(r) for r in fast] == [same_bytes(r) for r in plain]
    if case == "unsigned":
        assert not any("authorization" in h for _, h in fast)
    else:
        assert all(
            h["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261125/")
            for _, h in fast
        )
    if case == "requester pays":
        assert all(h["x-amz-request-payer"] == "requester" for _, h in fast)
    if token:
        assert all(h["x-amz-security-token"] == token for _, h in fast)
    if case == "virtual host via a proxy":
        assert fast[1][0].startswith("GET http://bkt-1.s3.us-west-2.amazonaws.com/?list-type=2&")
        assert routes[case] is None  # through a proxy, botocore's session sends the direct pages
    else:  # straight to the pool botocore's session would use
        assert (routes[case].host, routes[case].port) == ("127.0.0.1", recorder.port)
        assert routes[case].origin == endpoint
    assert seen[True][0] == seen[False][0]
    assert seen[True][0][0] == (["a b=", "€/x"], [7, 9], True, "1")


@pytest.mark.parametrize(
    "fault,slow", [("slowdown", 1), ("internal", 0), ("drop", 0), ("truncated", 0), ("error200", 0)]
)
def test_a_failed_direct_attempt_is_counted_and_the_page_asked_again_through_botocore(
    fault: str, slow: int, recorder: Recorder, frozen: None
) -> None:
    client = make_s3_client(f"http://127.0.0.1:{recorder.port}", "us-east-1", direct=True)
    counter = RequestCounter()
    list_page(client, "bkt", "", counter=counter)  # the template
    direct = client.meta.hpcstage_direct
    assert direct.template("bkt").route is not None  # the attempt goes straight to the pool
    recorder.script = [fault]
    resp = list_page(client, "bkt", "", start_after="a", counter=counter)
    assert list(page_objects(resp)[0]) == ["a b=", "€/x"]
    assert (counter.requests, counter.retries, counter.throttled) == (3, 1, slow)
    # the retry was botocore's (telemetry headers); the template is kept: the next page goes direct again
    assert [all(h in r[1] for h in TELEMETRY) for r in recorder.requests] == [True, False, True]
    list_page(client, "bkt", "", start_after="b", counter=counter)
    assert "amz-sdk-request" not in recorder.requests[-1][1]
    assert counter.requests == 4


def test_a_refused_direct_attempt_drops_the_template_and_botocore_raises(
    recorder: Recorder, frozen: None
) -> None:
    client = make_s3_client(f"http://127.0.0.1:{recorder.port}", "us-east-1", direct=True)
    counter = RequestCounter()
    list_page(client, "bkt", "", counter=counter)
    recorder.script = ["denied", "denied"]
    with pytest.raises(AccessDeniedError, match="access denied listing bucket bkt"):
        list_page(client, "bkt", "", start_after="a", counter=counter)
    assert (counter.requests, counter.retries) == (3, 1)
    assert client.meta.hpcstage_direct.template("bkt") is None
    list_page(client, "bkt", "", start_after="b", counter=counter)  # through botocore, and learnt again
    list_page(client, "bkt", "", start_after="c", counter=counter)
    assert [all(h in r[1] for h in TELEMETRY) for r in recorder.requests] == [True, False, True, True, False]


def test_no_template_from_a_call_answered_before_the_wire(frozen: None) -> None:
    """moto's in-process mock and test stubs answer in ``before-send``: nothing was sent, so nothing is
    replayed and every page keeps going to the handler."""
    from botocore.awsrequest import AWSResponse

    class Raw:
        def __init__(self, body: bytes) -> None:
            self.body = body

        def stream(self, **_: Any) -> Iterator[bytes]:
            yield self.body

    client = make_s3_client("http://127.0.0.1:9", "us-east-1", direct=True)
    answered: list[str] = []

    def answer(request: Any, **_: Any) -> AWSResponse:
        answered.append(request.url)
        body = PAGE.format(token=len(answered)).encode()
        return AWSResponse(request.url, 200, {"Content-Length": str(len(body))}, Raw(body))

    client.meta.events.register_last("before-send.s3.ListObjectsV2", answer)
    for i in range(3):
        list_page(client, "bkt", "", start_after=str(i))
    assert len(answered) == 3
    assert client.meta.hpcstage_direct.template("bkt") is None


@pytest.mark.parametrize("value,on", [("0", False), ("off", False), ("1", True), (None, True)])
def test_the_environment_switch(
    value: str | None, on: bool, frozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is not None:
        monkeypatch.setenv("HPCSTAGE_DIRECT_LIST", value)
    client = make_s3_client("http://127.0.0.1:9", "us-east-1")
    assert (getattr(client.meta, "hpcstage_direct", None) is not None) is on


LEFTOVERS = [
    # what the page parser leaves of S3's answers: flat elements, no Contents
    b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Name>bkt</Name><Prefix></Prefix><KeyCount>1000</KeyCount><MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType>"
    b"<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    b"</ListBucketResult>",
    b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b.k-t</Name><Prefix>a%20b&amp;c&lt;&gt;&quot;&apos;</Prefix>'
    b"<StartAfter>z%F4%8F%BF%BF</StartAfter><ContinuationToken>t&amp;1</ContinuationToken><KeyCount>0</KeyCount>"
    b"<MaxKeys>7</MaxKeys><Delimiter>/</Delimiter><IsTruncated>false</IsTruncated></ListBucketResult>",
    # moto's layout: indented, a newline before the end
    b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">\n'
    b"  <Name>bkt</Name>\n  <Prefix>d/</Prefix>\n  <MaxKeys>1000</MaxKeys>\n  <KeyCount>3</KeyCount>\n"
    b"  <IsTruncated>false</IsTruncated>\n  \n</ListBucketResult>\n",
    # left to botocore's parser (light_parse says None)
    b"<ListBucketResult><Name>bkt</Name><CommonPrefixes><Prefix>a/</Prefix></CommonPrefixes></ListBucketResult>",
    b"<ListBucketResult><Name>bkt</Name><Prefix>&#233;</Prefix></ListBucketResult>",
    b"<ListBucketResult><Name>bkt</Name><Name>again</Name></ListBucketResult>",
    b"<ListBucketResult><Name>bkt</Name><Unknown>x</Unknown></ListBucketResult>",
    b"<ListBucketResult><Name><![CDATA[bkt]]></Name></ListBucketResult>",
    b"<ListBucketResult><Name>bkt</Name><Prefix/></ListBucketResult>",
]


@pytest.mark.parametrize("i", range(len(LEFTOVERS)))
@pytest.mark.parametrize("charged", [False, True])
def test_the_light_parse_is_botocores_parse(i: int, charged: bool) -> None:
    import botocore.session
    from botocore.parsers import RestXMLParser
    from hpcstage.s3direct import light_parse
    from urllib3 import HTTPHeaderDict

    shape = (
        botocore.session.get_session().get_service_model("s3").operation_model("ListObjectsV2").output_shape
    )
    headers = HTTPHeaderDict(
        {"x-amz-request-id": "R1", "x-amz-id-2": "H/2=", "Content-Type": "application/xml"}
    )
    if charged:
        headers["x-amz-request-charged"] = "requester"
    response = {"headers": headers, "status_code": 200, "body": LEFTOVERS[i], "context": {}}
    light = light_parse(dict(response))
    if i >= 3:
        assert light is None
        return
    assert light is not None
    assert light == RestXMLParser().parse(dict(response), shape)


def test_a_botocore_without_the_parts_reused_lists_through_botocore(
    frozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpcstage import s3direct

    def missing(self: Any, client: Any, parse_body: Any) -> None:
        raise AttributeError("'S3' object has no attribute '_request_signer'")

    monkeypatch.setattr(s3direct.DirectLister, "__init__", missing)
    client = make_s3_client("http://127.0.0.1:9", "us-east-1", direct=True)
    assert getattr(client.meta, "hpcstage_direct", None) is None
