"""Shared fixtures. Credentials are isolated so no test can reach a real AWS account."""

from __future__ import annotations

import os
from collections.abc import Iterator
from unittest import mock

import pytest

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}


@pytest.fixture(autouse=True)
def aws_credentials() -> Iterator[None]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "TMPDIR", "LANG", "MOTO_PORT")
        or k.startswith("HPCSTAGE_")
        or k.startswith("SLURM_")
    }
    with mock.patch.dict(os.environ, {**keep, **FAKE_ENV}, clear=True):
        yield


@pytest.fixture
def local_slurm() -> None:
    """Skip (or, with HPCSTAGE_REQUIRE_SLURM=1 as in CI, fail) when the local Slurm does not answer."""
    from hpcstage.localstaging import slurm_problem

    problem = slurm_problem()
    if problem is None:
        return
    message = f"local Slurm not answering ({problem}); start it with: sudo scripts/slurm-local.sh start"
    if os.environ.get("HPCSTAGE_REQUIRE_SLURM") == "1":
        pytest.fail(message)
    pytest.skip(message)
