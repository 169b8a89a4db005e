"""The fast ListObjectsV2 parser gives exactly what botocore's parser gives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hpcstage.inventory.page import Page
from hpcstage.s3util import as_page, enable_fast_list_parsing, fast_timestamp, list_page, page_objects
from hypothesis import given, settings
from hypothesis import strategies as st
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


# The columnar path (s3util._page_from_run): the same page as botocore's parser reads, or None (then the
# regex paths decide, as before it existed).
_CHECKSUM_LAYOUTS = {
    "plain": lambda o: "",
    "algorithm": lambda o: f"<ChecksumAlgorithm>{o['checksum']}</ChecksumAlgorithm>",
    "algorithm and type": lambda o: (
        f"<ChecksumAlgorithm>{o['checksum']}</ChecksumAlgorithm><ChecksumType>FULL_OBJECT</ChecksumType>"
    ),
}


def _xml_escape(text: str) -> str:
    """Key text as S3 writes it without EncodingType (a CR as a character reference, as S3 does)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#xD;")


def _s3_encode(key: str) -> str:
    from urllib.parse import quote

    return quote(key, safe="/").replace("%20", "+")


def _body(
    objects: list[dict[str, Any]], *, url: bool, checksum: str = "plain", owner: str = "", restore: str = ""
) -> bytes:
    head = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>bkt</Name><Prefix></Prefix><KeyCount>{len(objects)}</KeyCount><MaxKeys>1000</MaxKeys>"
        + ("<EncodingType>url</EncodingType>" if url else "")
        + "<IsTruncated>false</IsTruncated>"
    )
    contents = "".join(
        f"<Contents><Key>{_s3_encode(o['key']) if url else _xml_escape(o['key'])}</Key>"
        f"<LastModified>{o['date']}</LastModified><ETag>{o['etag']}</ETag>{_CHECKSUM_LAYOUTS[checksum](o)}"
        f"<Size>{o['size']}</Size>{owner}<StorageClass>{o['class']}</StorageClass>{restore}</Contents>"
        for o in objects
    )
    return (head + contents + "</ListBucketResult>").encode()


def _botocore_contents(body: bytes, *, url: bool) -> list[dict[str, Any]]:
    from urllib.parse import unquote_plus

    from botocore.parsers import create_parser

    model = boto3.client("s3", region_name="us-east-1").meta.service_model.operation_model("ListObjectsV2")
    rows: list[dict[str, Any]] = create_parser("rest-xml").parse(
        {"status_code": 200, "headers": {}, "body": body}, model.output_shape
    )["Contents"]
    for row in rows:
        row.pop("ChecksumType", None)  # not a column of the inventory
        row.pop("Owner", None)
        row.pop("RestoreStatus", None)
        if url:
            row["Key"] = unquote_plus(row["Key"])
    return rows


def _parsed(body: bytes) -> Page:
    """The page the hook hands to list_page (columnar path first, then the regex paths)."""
    from hpcstage import s3util

    s3util._WANT_PAGE.on = True
    try:
        resp: dict[str, Any] = {"status_code": 200, "headers": {}, "body": body}
        custom: dict[str, Any] = {}
        s3util._fast_list_parse(resp, custom)
    finally:
        s3util._WANT_PAGE.on = False
    assert b"<Contents>" not in resp["body"]
    page: Page = custom[s3util.PAGE_KEY]
    return page


def _columnar(body: bytes, *, url: bool) -> Page | None:
    from hpcstage.s3util import _page_from_run

    first, last = body.find(b"<Contents>"), body.rfind(b"</Contents>") + len(b"</Contents>")
    return _page_from_run(body[first:last], url=url)


def _objects(keys: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "key": k,
            "date": f"2024-0{1 + i % 9}-1{i % 10}T0{i % 10}:1{i % 6}:00.{i * 37 % 1000:03d}Z",
            "etag": ("&quot;{}&quot;" if i % 3 else '"{}"').format(
                "9b2cf535f27731c9" + ("-12" if i % 4 == 0 else "")
            ),
            "size": (i * 2654435761) % (1 << 45),
            "class": ["STANDARD", "GLACIER", "STANDARD_IA", "DEEP_ARCHIVE"][i % 4],
            "checksum": ["CRC32", "CRC64NVME", "SHA256"][i % 3],
        }
        for i, k in enumerate(sorted(set(keys)))
    ]


def _assert_same_page(page: Page, expected: list[dict[str, Any]]) -> None:
    assert page.to_contents() == expected
    assert page.keys == [row["Key"] for row in expected]
    assert page.key_array().to_pylist() == page.keys
    assert page.multipart().to_pylist() == ["-" in row["ETag"] for row in expected]


HOSTILE_KEYS = [
    *KEYS,
    "".join(chr(c) for c in range(1, 128)),
    "a b+c%d&e<f>g",
    "100%25 literal %2541",
    "line\nbreak\r\ttab",
    "cr\ronly",
    "trailing%",
    "%",
    "+",
    "x=3D=y",
    "ü中😀 é",
    "y" * 1024,
    "z" * 5000,  # longer than any key S3 accepts: the slices have no length limit of their own
    "&#xD;&lt;",
]


@pytest.mark.parametrize("checksum", list(_CHECKSUM_LAYOUTS))
@pytest.mark.parametrize("keys", [HOSTILE_KEYS, ["one key"], ["%41", "%%41A", "a%0Ab", "c%"]])
def test_columnar_path_reads_url_encoded_pages_as_botocore(keys: list[str], checksum: str) -> None:
    body = _body(_objects(keys), url=True, checksum=checksum)
    expected = _botocore_contents(body, url=True)
    page = _columnar(body, url=True)
    assert page is not None  # S3's layouts with EncodingType=url: never left to the regex paths
    _assert_same_page(page, expected)
    _assert_same_page(_parsed(body), expected)


@pytest.mark.parametrize("checksum", list(_CHECKSUM_LAYOUTS))
def test_columnar_path_without_url_encoding_reads_raw_keys_and_leaves_entities_and_cr_to_the_regex_paths(
    checksum: str,
) -> None:
    plain = [k for k in HOSTILE_KEYS if not any(c in k for c in "&<>\r")]
    body = _body(_objects(plain), url=False, checksum=checksum)
    page = _columnar(body, url=False)
    assert page is not None and "line\nbreak" in page.keys  # a raw newline stays inside its key
    _assert_same_page(page, _botocore_contents(body, url=False))
    for hostile in ("a&amp;b", "x<y", "cr\rkey"):  # written as entities (a CR as &#xD;)
        body = _body(_objects([*plain, hostile]), url=False, checksum=checksum)
        assert _columnar(body, url=False) is None
        _assert_same_page(_parsed(body), _botocore_contents(body, url=False))
    # A raw CR (S3 never sends one) is left to the regex paths, which keep it where an XML parser would
    # read a newline: as they always did.
    raw_cr = _body(_objects(plain), url=False, checksum=checksum).replace(b"<Key>plain", b"<Key>pl\rain")
    assert _columnar(raw_cr, url=False) is None
    assert "pl\rain" in _parsed(raw_cr).keys


@pytest.mark.parametrize(
    "elements",
    [
        {"owner": "<Owner><ID>abc</ID><DisplayName>me</DisplayName></Owner>"},  # FetchOwner
        {"restore": "<RestoreStatus><IsRestoreInProgress>true</IsRestoreInProgress></RestoreStatus>"},
    ],
)
def test_other_elements_go_to_the_regex_paths(elements: dict[str, str]) -> None:
    objects = _objects(["a", "b b", "c+%2B"])
    body = _body(objects, url=True, **elements)
    assert _columnar(body, url=True) is None
    _assert_same_page(_parsed(body), _botocore_contents(body, url=True))


def test_pages_of_mixed_or_odd_objects_go_to_the_regex_paths() -> None:
    import pyarrow as pa

    objects = _objects(["a", "b", "c"])  # checksums CRC32, CRC64NVME, SHA256
    with_checksums = _body(objects, url=True, checksum="algorithm")
    mixed = with_checksums.replace(b"<ChecksumAlgorithm>SHA256</ChecksumAlgorithm>", b"")
    empty_algorithm = _body([dict(o, checksum="") for o in objects], url=True, checksum="algorithm")
    two_algorithms = with_checksums.replace(
        b"</ChecksumAlgorithm>", b"</ChecksumAlgorithm><ChecksumAlgorithm>SHA1</ChecksumAlgorithm>", 1
    )
    for body in (mixed, empty_algorithm, two_algorithms):
        assert _columnar(body, url=True) is None
    _assert_same_page(_parsed(mixed), _botocore_contents(mixed, url=True))
    assert [c.get("ChecksumAlgorithm") for c in _parsed(mixed).to_contents()] == [
        ["CRC32"],
        ["CRC64NVME"],
        None,
    ]
    assert "ChecksumAlgorithm" not in _parsed(empty_algorithm).to_contents()[0]  # read as none, as before
    from hpcstage import s3util

    s3util._WANT_PAGE.on = True
    try:  # several algorithms on one object: the per-object path answers dicts, every algorithm kept
        custom: dict[str, Any] = {}
        s3util._fast_list_parse({"status_code": 200, "body": two_algorithms}, custom)
    finally:
        s3util._WANT_PAGE.on = False
    assert [c["ChecksumAlgorithm"] for c in custom["Contents"]] == [
        ["CRC32", "SHA1"],
        ["CRC64NVME"],
        ["SHA256"],
    ]
    bad_size = _body(objects, url=True).replace(b"<Size>", b"<Size>x", 1)
    assert _columnar(bad_size, url=True) is None
    with pytest.raises(pa.ArrowInvalid, match="int64"):  # the regex paths still refuse it, as before
        _parsed(bad_size)
    invalid_utf8 = _body(objects, url=False).replace(b"<Key>a</Key>", b"<Key>a\xff</Key>")
    assert _columnar(invalid_utf8, url=False) is None
    with pytest.raises(UnicodeDecodeError):
        _parsed(invalid_utf8)


@settings(max_examples=150, deadline=None)
@given(
    keys=st.lists(
        st.text(
            alphabet=st.one_of(
                st.sampled_from(["%", "+", "=", " ", "&", "<", ">", "\n", "\r", "/", "A", "0", "f"]),
                st.characters(blacklist_categories=("Cs",)),
            ),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=12,
        unique=True,
    ),
    checksum=st.sampled_from(list(_CHECKSUM_LAYOUTS)),
)
def test_random_hostile_keys_read_as_botocore_reads_them(keys: list[str], checksum: str) -> None:
    body = _body(_objects(keys), url=True, checksum=checksum)
    expected = _botocore_contents(body, url=True)
    page = _columnar(body, url=True)
    assert page is not None
    _assert_same_page(page, expected)
