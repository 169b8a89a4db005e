"""fleet.reduce_run pauses Python's cyclic garbage collector while it runs, and restores it as it was."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from hpcstage.inventory import fleet


def test_the_reduce_runs_with_the_collector_paused_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def fake(**kw: Any) -> dict[str, Any]:
        seen.append(gc.isenabled())
        return {"objects": 1}

    monkeypatch.setattr(fleet, "_reduce_run", fake)
    assert gc.isenabled()
    assert fleet.reduce_run(s3=None, ddb=None, cfg=None) == {"objects": 1}  # type: ignore[arg-type]
    assert seen == [False] and gc.isenabled()


def test_a_failing_reduce_restores_the_collector_and_a_paused_one_stays_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom(**kw: Any) -> dict[str, Any]:
        raise RuntimeError("reduce failed")

    monkeypatch.setattr(fleet, "_reduce_run", boom)
    with pytest.raises(RuntimeError, match="reduce failed"):
        fleet.reduce_run(s3=None, ddb=None, cfg=None)  # type: ignore[arg-type]
    assert gc.isenabled()
    gc.disable()
    try:
        with fleet.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller had paused it: it stays so
    finally:
        gc.enable()
