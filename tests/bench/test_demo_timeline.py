"""bench.demo_machine's --timeline: what it records around a wrapped call, and how it lays the marks out."""

from __future__ import annotations

import pytest

from bench.demo_machine import Timeline


class Box:
    def double(self, n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        return 2 * n


def test_a_wrapped_call_returns_its_result_and_leaves_a_mark_even_when_it_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeline = Timeline()
    monkeypatch.setattr(Box, "double", Box.double)  # restored after the test
    timeline._wrap(Box, "double", lambda self, n: f"double({n})")

    assert Box().double(21) == 42
    with pytest.raises(ValueError, match="^negative$"):
        Box().double(-1)

    assert [label for label, *_ in timeline.marks] == ["double(21)", "double(-1)"]
    assert all(start <= end for _, start, end, _ in timeline.marks)
    assert {thread for *_, thread in timeline.marks} == {"MainThread"}


def test_the_report_orders_first_and_last_calls_the_lists_and_the_end_by_time() -> None:
    timeline = Timeline()
    timeline.marks = [
        ("before the run", 5.0, 5.5, "main"),  # earlier than the run's start: left out
        ("claim", 10.25, 10.5, "stream_0"),
        ("import", 10.0, 10.125, "worker"),
        ("claim", 12.0, 12.25, "stream_0"),
    ]
    lists = [(10.5, 0.375), (11.0, 0.5)]

    report = timeline.report(10.0, lists, 13.0, [])

    assert report.splitlines() == [
        "    0.000 s  import: 0.125 s [worker]",
        "    0.250 s  claim: 0.250 s [stream_0]; 2 calls, 0.500 s in all",
        "    0.500 s  first LIST arrives at the endpoint (0.375 s there)",
        "    1.500 s  last LIST answered (2 LIST)",
        "    2.000 s  claim (last): 0.250 s [stream_0]",
        "    3.000 s  run_execution returned (the poll saw the end)",
    ]
