"""The simulated S3 client answers ListObjectsV2 exactly as moto does for the same keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hpcstage.s3util import list_page
from moto import mock_aws
from moto.s3.models import s3_backends

from bench import keyspace as K
from bench.sim.params import DEFAULT
from bench.sim.s3 import S3World

SHAPES = ["unicode", "dated", "multi-tenant"]


@pytest.fixture(scope="module", params=SHAPES)
def both(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any, str, K.Keyspace]]:
    ks = K.make(request.param, 1_500)
    world = S3World(ks, DEFAULT, fast=False)
    with mock_aws():
        moto = boto3.client("s3", region_name="us-east-1")
        moto.create_bucket(Bucket=world.bucket)
        backend = s3_backends["123456789012"]["aws"]
        for r in range(ks.n):
            fake = backend.put_object(world.bucket, ks.key(r), b"")
            fake.contentsize = ks.size(r)  # moto reports Size from this; the bodies are not needed
        yield world.client(0.0), moto, world.bucket, ks


def pages(
    client: Any, bucket: str, prefix: str, start_after: str | None, max_keys: int
) -> list[list[tuple[str, int]]]:
    out, token = [], None
    for _ in range(10_000):
        resp = list_page(client, bucket, prefix, start_after=start_after, token=token, max_keys=max_keys)
        out.append([(o["Key"], o["Size"]) for o in resp.get("Contents", [])])
        if not resp["IsTruncated"]:
            return out
        token = resp["NextContinuationToken"]
    raise AssertionError("no end of listing")


@pytest.mark.parametrize("max_keys", [1000, 97, 1])
@pytest.mark.parametrize("where", ["all", "prefix", "start_after", "prefix+start_after", "nothing"])
def test_same_pages_as_moto(both: tuple[Any, Any, str, K.Keyspace], where: str, max_keys: int) -> None:
    sim, moto, bucket, ks = both
    keys = sorted(ks.key(r) for r in range(ks.n))
    some = keys[len(keys) // 3]
    prefix = {
        "prefix": some[: max(1, len(some) // 2)],
        "prefix+start_after": some[:1],
        "nothing": "zzz-none/",
    }.get(where, "")
    start_after = some if where in ("start_after", "prefix+start_after") else None
    if max_keys == 1 and where != "nothing":
        prefix = some  # one key a page: keep the listing short
    expected = pages(moto, bucket, prefix, start_after, max_keys)
    assert pages(sim, bucket, prefix, start_after, max_keys) == expected
    assert sum(len(p) for p in expected) == sum(
        1 for k in keys if k.startswith(prefix) and (start_after is None or k > start_after)
    )
