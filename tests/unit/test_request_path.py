"""The trimmed request path sends what botocore's own would: the cached User-Agent header (``cache_user_agent``)
is byte for byte the one botocore builds, on every attempt, retries included, and follows the request's features.

No socket is opened: a ``before-send`` handler answers each attempt (botocore sends nothing when one returns a
response), so the headers of every attempt are seen as they would go out.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.context import start_as_current_context
from botocore.useragent import UserAgentString, register_feature_id
from hpcstage.s3util import RequestCounter, list_page, make_s3_client, page_objects

PAGE = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Name>bkt</Name><Prefix></Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType>"
    b"<IsTruncated>false</IsTruncated><Contents><Key>a+b%3D</Key><LastModified>2024-03-01T12:00:00.000Z"
    b"</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>7</Size>"
    b"<StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>"
)
SLOWDOWN = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"


class _Raw(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.read()


def answering(client: Any, statuses: list[int]) -> list[str]:
    """Answer the client's ListObjectsV2 attempts with ``statuses`` in turn (then 200); return the User-Agent
    header of every attempt."""
    sent: list[str] = []
    pending = list(statuses)

    def answer(request: Any, **_: Any) -> AWSResponse:
        sent.append(str(request.headers["User-Agent"]))
        status = pending.pop(0) if pending else 200
        body = PAGE if status == 200 else SLOWDOWN
        return AWSResponse(request.url, status, {"Content-Length": str(len(body))}, _Raw(body))

    client.meta.events.register_last("before-send.s3.ListObjectsV2", answer)
    return sent


def test_the_cached_user_agent_is_the_header_botocore_builds_on_every_attempt(
    credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)  # the retry's backoff
    cached = make_s3_client("http://127.0.0.1:9", "us-east-1")
    plain = make_s3_client("http://127.0.0.1:9", "us-east-1")
    del plain._user_agent_creator.to_string  # botocore's own builder again
    headers = {}
    for name, client in (("cached", cached), ("plain", plain)):
        sent = answering(client, [503, 503])
        counter = RequestCounter()
        for _ in range(2):
            keys, _objects = page_objects(list_page(client, "bkt", "", counter=counter))
            assert list(keys) == ["a b="]
        assert (counter.requests, counter.retries, counter.throttled) == (4, 2, 2)
        headers[name] = sent
    assert len(headers["cached"]) == 4
    assert headers["cached"] == headers["plain"]
    assert "cfg/retry-mode#standard" in headers["cached"][0]


def test_the_user_agent_is_built_once_per_set_of_features(
    credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    original = UserAgentString.to_string

    def counting(self: Any) -> str:
        built.append(original(self))
        return built[-1]

    monkeypatch.setattr(UserAgentString, "to_string", counting)
    client = make_s3_client("http://127.0.0.1:9", "us-east-1")  # its cache wraps the counting builder
    creator = client._user_agent_creator
    sent = answering(client, [])
    for _ in range(5):
        list_page(client, "bkt", "")
    assert len(sent) == 5 and len(set(sent)) == 1
    # two feature sets: the request's when its dict is made, and with the retry mode when it is sent (botocore
    # built it twice per request: 10 times)
    assert len(built) == 2
    with start_as_current_context():
        register_feature_id("PAGINATOR")  # a feature the requests did not have: built again, with it
        in_paginator = creator.to_string()
        assert in_paginator == original(creator)
    assert len(built) == 3
    features = in_paginator.split(" m/")[1].split(" ")[0].split(",")
    assert "C" in features and in_paginator != sent[0]
