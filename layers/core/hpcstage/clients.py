"""One cached client factory for Lambda handlers (the core itself always takes clients as arguments)."""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

from .s3util import AccessOptions, _data_loader, make_s3_client


@functools.cache
def s3() -> Any:
    # AWS_ENDPOINT_URL_S3 is honoured by botocore itself; passing it keeps local runs explicit.
    return make_s3_client(os.environ.get("AWS_ENDPOINT_URL_S3"), pool=64)


# One boto3 Session for the clients below: each Session loads the endpoint and partition data again (three
# clients, each with a Session of its own: 0.56-0.68 s here; from one Session: 0.34 s). A Session is not
# thread-safe (clients are), so clients are made under a lock.
_session_lock = threading.Lock()


@functools.cache
def _session() -> Any:
    import boto3

    session = boto3.session.Session()
    # botocore's data files (endpoint rules, partitions) read once for this Session and the S3 clients' (the
    # loader s3util's sessions share): the launcher's DynamoDB client, made after its S3 client, took
    # 0.12-0.17 s with a loader of its own, 0.05-0.06 s with the shared one.
    core = session._session  # noqa: SLF001
    core.register_component("data_loader", _data_loader(core.get_config_variable("data_path")))
    return session


@functools.cache
def client(service: str, pool: int | None = None) -> Any:
    """The handler's client of ``service``; ``pool``: its connection pool (botocore's default is 10), for a
    caller that sends that many requests at once (the launcher's Invokes: fleet.LAUNCH_THREADS)."""
    with _session_lock:
        if pool is None:
            return _session().client(service)
        from botocore.config import Config

        return _session().client(service, config=Config(max_pool_connections=pool))


@functools.cache
def source_s3(access: AccessOptions) -> Any:
    """The S3 client of a listing target reached with ``access`` (a role to assume, requester pays, anonymous)."""
    if access.default:
        return s3()
    return make_s3_client(os.environ.get("AWS_ENDPOINT_URL_S3"), pool=64, access=access)


def reset() -> None:
    """Forget every client and the Session (tests that change the environment or the mock between cases)."""
    s3.cache_clear()
    source_s3.cache_clear()
    client.cache_clear()
    _session.cache_clear()
