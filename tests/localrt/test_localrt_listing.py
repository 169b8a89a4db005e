"""The sorted key index behind ListObjectsV2 answers exactly as moto's own listing does.

Every comparison walks all pages of both implementations, each following its own continuation
tokens, and requires the same entries (the very same key objects), truncation flags and tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hpcstage.local import LocalAws, motopatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import FakeKey, S3Backend, s3_backends

MAX_PAGES = 10_000


@pytest.fixture
def local() -> Iterator[LocalAws]:
    with LocalAws() as aws:
        yield aws


def backend() -> S3Backend:
    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


def describe(entries: Any) -> list[tuple[str, Any]]:
    """Entries as comparable values: keys by identity (the same object), common prefixes by name."""
    return [("key", id(entry)) if isinstance(entry, FakeKey) else ("prefix", entry) for entry in entries]


def all_pages(
    listing: Any, bucket: Any, prefix: Any, delimiter: Any, start_after: Any, max_keys: int
) -> list[Any]:
    pages = []
    token = None
    for _ in range(MAX_PAGES):
        entries, truncated, token = listing(bucket, prefix, delimiter, token, start_after, max_keys)
        pages.append((describe(entries), truncated, token))
        if not truncated:
            return pages
    raise AssertionError("listing did not end")


def assert_same_listing(
    bucket_name: str, prefix: Any, delimiter: Any, start_after: Any, max_keys: int
) -> None:
    s3 = backend()
    bucket = s3.get_bucket(bucket_name)

    def patched(*args: Any) -> Any:
        return s3.list_objects_v2(*args)

    def original(*args: Any) -> Any:
        return motopatch.original_list_objects_v2(s3, *args)

    expected = all_pages(original, bucket, prefix, delimiter, start_after, max_keys)
    actual = all_pages(patched, bucket, prefix, delimiter, start_after, max_keys)
    assert actual == expected, (prefix, delimiter, start_after, max_keys)


KEYS = sorted(
    {
        f"{top}/{mid}/{leaf}"
        for top in ("a", "b", "dir1", "dir1-x", "é")
        for mid in ("b", "c-d", "x")
        for leaf in range(7)
    }
    | {"a", "a/", "a//double", "ab", "abab/cd", "b-only", "z", "zz/\U0010ffff/end", "zz/\U0010ffffz", "zz/a"}
)
PREFIXES = [None, "", "a", "a/", "a/b", "dir1", "dir1/", "é/", "zz/", "nothing-here"]
DELIMITERS = [None, "", "/", "-", "ab", "\U0010ffff"]
START_AFTERS = [None, "", "a/b/3", "a/c-d", "dir1/", "dir1/x/9", "zz/\U0010ffff", "\uffff"]


@pytest.fixture
def populated(local: LocalAws) -> str:
    # Given a versioned bucket in which some keys' latest version is a delete marker
    s3 = local.client("s3")
    s3.create_bucket(Bucket="listing")
    s3.put_bucket_versioning(Bucket="listing", VersioningConfiguration={"Status": "Enabled"})
    for key in KEYS:
        backend().put_object("listing", key, b"x")
    for key in ("a/x/0", "a/x/1", "a/x/2", "a/x/3", "a/x/4", "a/x/5", "a/x/6", "b-only", "dir1/c-d/3"):
        s3.delete_object(Bucket="listing", Key=key)
    return "listing"


@pytest.mark.parametrize("delimiter", DELIMITERS)
def test_single_pages_match_for_every_prefix_start_after_and_size(populated: str, delimiter: Any) -> None:
    for prefix, start_after, max_keys in itertools.product(PREFIXES, START_AFTERS, (0, 1000)):
        assert_same_listing(populated, prefix, delimiter, start_after, max_keys)


@pytest.mark.parametrize("max_keys", [1, 7])
def test_paged_listings_match_page_by_page(populated: str, max_keys: int) -> None:
    for prefix, delimiter in itertools.product(PREFIXES, DELIMITERS):
        for start_after in (None, "a/c-d"):
            assert_same_listing(populated, prefix, delimiter, start_after, max_keys)


def test_the_index_follows_puts_and_deletes_without_being_rebuilt(local: LocalAws) -> None:
    s3 = local.client("s3")
    s3.create_bucket(Bucket="follow")
    for key in ("k/1", "k/3"):
        s3.put_object(Bucket="follow", Key=key, Body=b"x")
    s3.list_objects_v2(Bucket="follow")
    index = backend().get_bucket("follow").keys.__dict__["_hpcstage_sorted_names"]

    s3.put_object(Bucket="follow", Key="k/2", Body=b"x")
    s3.put_object(Bucket="follow", Key="k/2", Body=b"y")  # an overwrite adds no name
    s3.delete_object(Bucket="follow", Key="k/1")
    listed = s3.list_objects_v2(Bucket="follow")

    assert [item["Key"] for item in listed["Contents"]] == ["k/2", "k/3"]
    assert backend().get_bucket("follow").keys.__dict__["_hpcstage_sorted_names"] is index
    assert index == ["k/2", "k/3"]


def test_boto3_pages_are_identical_with_and_without_the_patch(local: LocalAws) -> None:
    # Given 2,500 keys in 50 "directories"
    s3 = local.client("s3")
    s3.create_bucket(Bucket="through-boto3")
    for number in range(2500):
        backend().put_object("through-boto3", f"d{number % 50:02d}/k{number:05d}", b"x")
    requests: list[dict[str, Any]] = [
        {},
        {"Delimiter": "/"},
        {"Prefix": "d07/", "StartAfter": "d07/k01000"},
        {"Prefix": "d1", "Delimiter": "/", "MaxKeys": 3},
        {"StartAfter": "d48/", "MaxKeys": 999},
    ]

    def pages(request: dict[str, Any]) -> list[Any]:
        result = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="through-boto3", **request):
            page.pop("ResponseMetadata")
            result.append(page)
        return result

    # When each request is paged through with the index and with moto's own listing
    with_index = [pages(request) for request in requests]
    motopatch.remove_patches()
    try:
        without_index = [pages(request) for request in requests]
    finally:
        motopatch.apply_patches()

    # Then every page is the same, and the listings are complete
    assert with_index == without_index
    assert sum(page["KeyCount"] for page in with_index[0]) == 2500
    assert [p["Prefix"] for p in with_index[1][0]["CommonPrefixes"]] == [f"d{n:02d}/" for n in range(50)]


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[str, Any]]:
    names = st.text(alphabet="ab/-é", min_size=0, max_size=6)
    query = st.tuples(
        st.none() | names,  # prefix
        st.sampled_from([None, "/", "-", "b/"]),  # delimiter
        st.none() | names,  # start after
        st.integers(min_value=0, max_value=4),  # max keys
    )
    steps = st.one_of(
        st.tuples(st.just("put"), names),
        st.tuples(st.just("delete"), names),
        st.tuples(st.just("list"), query),
    )
    return draw(st.lists(steps, min_size=1, max_size=30))


def test_random_keys_and_queries_match(local: LocalAws) -> None:
    s3 = local.client("s3")
    buckets = itertools.count()

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(steps=operations(), versioned=st.booleans())
    def check(steps: list[tuple[str, Any]], versioned: bool) -> None:
        name = f"random-{next(buckets)}"
        s3.create_bucket(Bucket=name)
        if versioned:
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        for action, argument in steps:
            if action == "put" and argument:
                backend().put_object(name, argument, b"x")
            elif action == "delete" and argument:
                backend().delete_object(name, argument)
            elif action == "list":
                assert_same_listing(name, *argument)
        assert_same_listing(name, None, "/", None, 2)

    check()


def test_list_object_versions_after_a_key_marker_starts_at_the_next_key_as_s3_does(local: LocalAws) -> None:
    """ListObjectVersions with KeyMarker alone answers the versions of the keys after the marker, newest
    first, and paging on from there with NextKeyMarker/NextVersionIdMarker gives every one of them once.
    moto 5.2.5 alone dropped the first version at or after the marker (the newest of the next key)."""
    s3 = local.client("s3")
    s3.create_bucket(Bucket="versioned-bkt")
    s3.put_bucket_versioning(Bucket="versioned-bkt", VersioningConfiguration={"Status": "Enabled"})
    made: dict[str, list[str]] = {}
    for key in ["a", "b", "b/x", "c"]:
        for body in range(3):
            made.setdefault(key, []).append(
                s3.put_object(Bucket="versioned-bkt", Key=key, Body=bytes(body))["VersionId"]
            )

    def walk(**kw: Any) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        while True:
            resp = s3.list_object_versions(Bucket="versioned-bkt", MaxKeys=2, **kw)
            out += [(v["Key"], v["VersionId"]) for v in resp.get("Versions", [])]
            if not resp["IsTruncated"]:
                return out
            kw = {"KeyMarker": resp["NextKeyMarker"], "VersionIdMarker": resp["NextVersionIdMarker"]}

    newest_first = {k: list(reversed(v)) for k, v in made.items()}
    after = lambda *keys: [(k, v) for k in keys for v in newest_first[k]]  # noqa: E731
    assert walk(KeyMarker="a0") == after("b", "b/x", "c")  # a marker that is no key
    assert walk(KeyMarker="b") == after("b/x", "c")  # a key: its versions are not listed again
    assert walk(KeyMarker="0") == after("a", "b", "b/x", "c")
    assert walk(KeyMarker="d") == []
    motopatch.remove_patches(("s3_listing",))
    try:
        assert walk(KeyMarker="a0") == after("b", "b/x", "c")[1:]  # moto's own answer: b's newest is lost
    finally:
        motopatch.apply_patches(("s3_listing",))
