"""The bench endpoint answers ListObjectsV2 exactly like moto for the same keys."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer

from bench import keyspace as K
from bench.localserver import serve

KEYS = [
    "a",
    "a b",
    "a+b",
    "a%2Fb",
    "a&b<c>",
    "a/b",
    "a/b/c",
    "a/c",
    "dir with space/x 1.txt",
    "dir with space/y+z",
    "données/été.csv",
    "données/hiver.csv",
    "photos/2019/img_0001.jpg",
    "photos/2019/img_0002.jpg",
    "photos/2020/img 3.jpg",
    "Zürich/1",
    "日本語/ファイル.txt",
    "😀/emoji",
    "~tilde",
    "#hash",
    "!bang",
    "z",
    *[f"logs/{i:04d}.log" for i in range(180)],
    *[f"tmp/{chr(0x41 + i % 26)}{i}" for i in range(60)],
]

CASES: list[dict[str, Any]] = [
    {},
    {"MaxKeys": 7},
    {"Prefix": "photos/"},
    {"StartAfter": "m"},
    {"StartAfter": "logs/0100.log", "MaxKeys": 33},
    {"Prefix": "a", "Delimiter": "/"},
    {"Delimiter": "/", "MaxKeys": 3},
    {"Delimiter": "/"},
    {"EncodingType": "url", "MaxKeys": 50},
    {"Prefix": "dir with space/", "EncodingType": "url"},
    {"Prefix": "données/", "EncodingType": "url", "Delimiter": "/"},
    {"Prefix": "nothing-here"},
    {"Prefix": "logs/", "StartAfter": "logs/0177.log"},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _client(url: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


@pytest.fixture(scope="module")
def endpoints() -> Iterator[tuple[Any, Any, K.Keyspace]]:
    ks = K.explicit(KEYS)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        mc = _client(f"http://{host}:{port}")
        mc.create_bucket(Bucket="bench-bucket")
        for r in range(ks.n):
            mc.put_object(
                Bucket="bench-bucket", Key=ks.key(r), Body=b"x" * ks.size(r), StorageClass=ks.storage_class(r)
            )
        with serve({"bench-bucket": ks}, latency_s=0.0) as server:
            yield mc, _client(server.url), ks
    finally:
        moto.stop()


def _pages(client: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    token = None
    for _ in range(1000):
        p = dict(params, Bucket="bench-bucket")
        if token:
            p["ContinuationToken"] = token
        resp = client.list_objects_v2(**p)
        out.append(
            {
                "keys": [(o["Key"], o["Size"], o["StorageClass"]) for o in resp.get("Contents", [])],
                "prefixes": [c["Prefix"] for c in resp.get("CommonPrefixes", [])],
                **{
                    k: resp.get(k)
                    for k in (
                        "KeyCount",
                        "IsTruncated",
                        "Prefix",
                        "MaxKeys",
                        "StartAfter",
                        "EncodingType",
                        "Delimiter",
                        "Name",
                    )
                },
                "has_next": "NextContinuationToken" in resp,
            }
        )
        if not resp["IsTruncated"]:
            return out
        token = resp["NextContinuationToken"]
    raise AssertionError("pagination did not end")


@pytest.mark.parametrize("params", CASES, ids=[str(c) for c in CASES])
def test_same_pages_as_moto(endpoints: tuple[Any, Any, K.Keyspace], params: dict[str, Any]) -> None:
    moto_client, bench_client, _ = endpoints
    assert _pages(bench_client, params) == _pages(moto_client, params)


def test_head_bucket_and_missing_bucket(endpoints: tuple[Any, Any, K.Keyspace]) -> None:
    _, bench_client, _ = endpoints
    assert bench_client.head_bucket(Bucket="bench-bucket")["ResponseMetadata"]["HTTPStatusCode"] == 200
    with pytest.raises(bench_client.exceptions.ClientError):
        bench_client.head_bucket(Bucket="no-such-bucket")


def test_large_model_pages_without_storing_objects() -> None:
    ks = K.make("unicode", 5_000_000)
    with serve({"big": ks}, latency_s=0.0) as server:
        c = _client(server.url)
        last = ks.key(ks.n - 1)
        resp = c.list_objects_v2(Bucket="big", StartAfter=ks.key(ks.n - 1500))
        assert resp["KeyCount"] == 1000 and resp["IsTruncated"]
        resp = c.list_objects_v2(Bucket="big", ContinuationToken=resp["NextContinuationToken"])
        assert resp["KeyCount"] == 499 and not resp["IsTruncated"]
        assert resp["Contents"][-1]["Key"] == last


@pytest.mark.parametrize(
    "q",
    [
        {"list-type": "2"},
        {"list-type": "2", "encoding-type": "url", "start-after": "b", "max-keys": "7"},
        {"list-type": "2", "delimiter": "/", "prefix": ""},
    ],
)
def test_precomputed_pages_equal_rendered_ones(q: dict[str, str]) -> None:
    from bench.localserver import KeyspaceBucket, list_v2_xml

    ks = K.make("unicode", 3000)
    plain, pre = KeyspaceBucket("b", ks), KeyspaceBucket("b", ks)
    pre.precompute()
    assert list_v2_xml(pre, q) == list_v2_xml(plain, q)
    assert pre._frags and not plain._frags
