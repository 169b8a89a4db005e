"""`hpcstage run`'s progress: the last counts line comes from the reduce's summary in the Launch state's output,
not from the fleet's table (a read of every lease partition after the execution has ended)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hpcstage.localcli import _reduced, _RunWatch

REDUCED = {"objects": 100000, "bytes": 915893013730, "list_requests": 100, "ranges_listed": 1, "retries": 0}


def launch_exit(fleet: Any) -> dict[str, Any]:
    output = json.dumps({"config": {}, "fleet": fleet})
    return {"type": "TaskStateExited", "stateExitedEventDetails": {"name": "Launch", "output": output}}


class NoTable:
    def leases(self) -> Any:
        raise AssertionError("the fleet's table was read")


def test_the_last_counts_line_comes_from_the_reduce_summary() -> None:
    out = io.StringIO()
    watch = _RunWatch(aws=None, stream=out)
    watch.run, watch._store = ("table", "run"), NoTable()
    watch.on_event(launch_exit({"done": True, "reduced": REDUCED}))
    assert out.getvalue().startswith(
        "  listing: 100,000 objects, 852.99 GiB, 1 of 1 ranges listed, 100 LIST, 0:0"
    )


def test_without_a_reduce_summary_the_counts_come_from_the_table() -> None:
    class Lease:
        objects, bytes, requests, state = 7, 2048, 3, "done"

    class Table:
        def leases(self) -> list[Lease]:
            return [Lease(), Lease()]

    out = io.StringIO()
    watch = _RunWatch(aws=None, stream=out)
    watch.run, watch._store = ("table", "run"), Table()
    watch.on_event(launch_exit({"done": True}))  # the Reduce state reduces: no summary yet
    assert out.getvalue().startswith("  listing: 14 objects, 4.00 KiB, 2 of 2 ranges listed, 6 LIST, ")


@pytest.mark.parametrize(
    "output,expected",
    [
        (json.dumps({"fleet": {"done": True, "reduced": REDUCED}}), REDUCED),
        (json.dumps({"fleet": {"done": True}}), None),
        (json.dumps({"fleet": {"done": True, "reduced": {**REDUCED, "objects": "many"}}}), None),
        (json.dumps({"fleet": {"done": True, "reduced": {"objects": 1}}}), None),
        (json.dumps({"fleet": "not a dict"}), None),
        ("not json", None),
        (None, None),
    ],
)
def test_reduced(output: str | None, expected: Any) -> None:
    assert _reduced(output) == expected
