"""One cached client factory for Lambda handlers (the core itself always takes clients as arguments)."""

from __future__ import annotations

import functools
import os
from typing import Any

from .s3util import AccessOptions, make_s3_client


@functools.cache
def s3() -> Any:
    # AWS_ENDPOINT_URL_S3 is honoured by botocore itself; passing it keeps local runs explicit.
    return make_s3_client(os.environ.get("AWS_ENDPOINT_URL_S3"), pool=64)


@functools.cache
def client(service: str) -> Any:
    import boto3

    return boto3.session.Session().client(service)


@functools.cache
def source_s3(access: AccessOptions) -> Any:
    """The S3 client of a listing target reached with ``access`` (a role to assume, requester pays, anonymous)."""
    if access.default:
        return s3()
    return make_s3_client(os.environ.get("AWS_ENDPOINT_URL_S3"), pool=64, access=access)
