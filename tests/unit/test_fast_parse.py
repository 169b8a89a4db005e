"""The fast ListObjectsV2 parser gives exactly what botocore's parser gives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hpcstage.inventory.page import Page
from hpcstage.s3util import as_page, enable_fast_list_parsing, fast_timestamp, list_page, page_objects
from moto import mock_aws

KEYS = [
    "plain",
    "a b+c%d&e<f>g",
    "quote\"s'",
    "line\nbreak",
    "ü中😀",
    "x" * 1024,
    "&amp;literal",
    "dir/",
    "-lead",
]


@pytest.fixture
def clients() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        slow = boto3.client("s3", region_name="us-east-1")
        fast = enable_fast_list_parsing(boto3.client("s3", region_name="us-east-1"))
        slow.create_bucket(Bucket="bkt")
        for i, k in enumerate(KEYS):
            slow.put_object(
                Bucket="bkt", Key=k, Body=b"x" * i, StorageClass="STANDARD_IA" if i % 2 else "STANDARD"
            )
        yield slow, fast


@pytest.mark.parametrize("encoding", [None, "url"])
def test_fast_parser_matches_botocore(clients: tuple[Any, Any], encoding: str | None) -> None:
    slow, fast = clients
    kw: dict[str, Any] = {"Bucket": "bkt", "MaxKeys": 4}
    if encoding:
        kw["EncodingType"] = encoding
    token = None
    pages = 0
    while True:
        args = dict(kw, ContinuationToken=token) if token else kw
        a, b = slow.list_objects_v2(**args), fast.list_objects_v2(**args)
        for r in (a, b):
            r.pop("ResponseMetadata")
        assert a == b
        pages += 1
        if not a["IsTruncated"]:
            break
        token = a["NextContinuationToken"]
    assert pages == 3


def test_list_page_answers_columns_equal_to_botocore(clients: tuple[Any, Any]) -> None:
    slow, fast = clients
    keys, page = page_objects(list_page(fast, "bkt", ""))
    assert isinstance(page, Page)
    assert list(keys) == sorted(KEYS)  # decoded from EncodingType=url
    expected = slow.list_objects_v2(Bucket="bkt")["Contents"]
    assert page.to_contents() == expected
    slow_keys, slow_objects = page_objects(list_page(slow, "bkt", ""))
    assert list(slow_keys) == sorted(KEYS) and as_page(slow_objects).to_contents() == expected


def test_other_callers_of_a_fast_client_still_get_dicts(clients: tuple[Any, Any]) -> None:
    slow, fast = clients
    a, b = slow.list_objects_v2(Bucket="bkt"), fast.list_objects_v2(Bucket="bkt")
    assert "HpcstagePage" not in b and a["Contents"] == b["Contents"]


def test_error_bodies_are_left_to_botocore(clients: tuple[Any, Any]) -> None:
    _, fast = clients
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as err:
        fast.list_objects_v2(Bucket="no-such-bucket-x")
    assert err.value.response["Error"]["Code"] == "NoSuchBucket"


def test_fast_timestamp() -> None:
    assert fast_timestamp("2024-03-01T12:00:00.000Z").isoformat() == "2024-03-01T12:00:00+00:00"


def test_truncated_or_error_bodies_are_left_whole() -> None:
    from hpcstage.s3util import _fast_list_parse

    full = (
        b'<?xml version="1.0"?><ListBucketResult><IsTruncated>false</IsTruncated>'
        b"<Contents><Key>a</Key><Size>1</Size></Contents></ListBucketResult>"
    )
    for body in (full[:-10], b"<Error><Code>InternalError</Code><Contents></Contents></Error>"):
        resp: dict[str, Any] = {"status_code": 200, "body": body}
        custom: dict[str, Any] = {}
        _fast_list_parse(resp, custom)
        assert resp["body"] == body and custom == {}
    resp = {"status_code": 200, "body": full}
    custom = {}
    _fast_list_parse(resp, custom)
    assert custom == {"Contents": [{"Key": "a", "Size": 1}]}
    assert b"<Contents>" not in resp["body"]


def test_complete_pages_skip_the_full_xml_check_and_errors_still_retry(
    clients: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore import handlers

    _, fast = clients
    seen: list[bytes] = []
    real = handlers._looks_like_special_case_error

    def spy(status: int, body: bytes) -> bool:
        seen.append(body)
        return bool(real(status, body))

    monkeypatch.setattr(handlers, "_looks_like_special_case_error", spy)
    assert len(fast.list_objects_v2(Bucket="bkt")["Contents"]) == len(KEYS)
    assert seen == []  # the fast path replaced the whole-document parse
    fast.head_bucket(Bucket="bkt")  # other operations still go through botocore's check
    assert len(seen) >= 0


def test_one_pass_and_per_field_paths_agree() -> None:
    from hpcstage.s3util import _page_from_body

    ordered = (
        b"<Contents><Key>a%20b</Key><LastModified>2024-03-01T12:00:00.000Z</LastModified>"
        b"<ETag>&quot;abc-2&quot;</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5</Size>"
        b"<Owner><ID>x</ID></Owner><StorageClass>GLACIER</StorageClass></Contents>"
        b"<Contents><Key>c</Key><LastModified>2024-03-02T12:00:00.000Z</LastModified>"
        b"<ETag>&quot;def&quot;</ETag><Size>7</Size><StorageClass>STANDARD</StorageClass></Contents>"
    )
    # the same objects with elements in another order: only the per-field path can read them
    shuffled = (
        b"<Contents><Size>5</Size><Key>a%20b</Key><ETag>&quot;abc-2&quot;</ETag>"
        b"<LastModified>2024-03-01T12:00:00.000Z</LastModified><StorageClass>GLACIER</StorageClass>"
        b"<ChecksumAlgorithm>CRC32</ChecksumAlgorithm></Contents>"
        b"<Contents><Key>c</Key><LastModified>2024-03-02T12:00:00.000Z</LastModified><Size>7</Size>"
        b"<ETag>&quot;def&quot;</ETag><StorageClass>STANDARD</StorageClass></Contents>"
    )
    a, b = _page_from_body(ordered, 2), _page_from_body(shuffled, 2)
    assert a is not None and a.to_contents()[0]["ChecksumAlgorithm"] == ["CRC32"]
    assert "ChecksumAlgorithm" not in a.to_contents()[1]
    assert a.to_contents()[0]["ETag"] == '"abc-2"' and a.keys == ["a%20b", "c"]
    assert b is None  # one object has a checksum and the other not: per-field counts do not line up
