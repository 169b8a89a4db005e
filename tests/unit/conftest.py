import sys
from pathlib import Path

import pytest

# tests/fakes.py is a test helper module shared by the tiers, imported by its file name.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Example credentials from the environment and no AWS config files: a client signs with them alone."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
