"""Seeding moto S3 quickly (straight into the backend) and brute-force expectations."""

from __future__ import annotations

from typing import Any

from moto.s3.models import s3_backends

ACCOUNT = "123456789012"


def seed(bucket: str, objects: dict[str, tuple[int, str]]) -> None:
    """objects: key -> (size, storage class). ~25k objects/s instead of ~650/s through boto3."""
    be = s3_backends[ACCOUNT]["aws"]
    for key, (size, cls) in objects.items():
        be.put_object(bucket, key, b"\0" * size, storage=cls)


def brute_force(s3: Any, bucket: str, prefix: str = "") -> tuple[int, int]:
    n = total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", ()):
            n += 1
            total += o["Size"]
    return n, total
