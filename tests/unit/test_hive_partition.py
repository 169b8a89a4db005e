"""The dt= partition a run adds to its target's Hive table is its start to the millisecond: two runs of one target
started within the same second (the local runtime lists a small target in under one) keep a partition each."""

from __future__ import annotations

from hpcstage.inventory.output import hive_partition

START = 1795642485000  # 2026-11-25 21:34:45.000 UTC


def test_the_partition_is_the_start_to_the_millisecond() -> None:
    assert hive_partition(START) == "2026-11-25-21-34-45-000"
    assert hive_partition(START + 107) == "2026-11-25-21-34-45-107"
    assert hive_partition(START + 999) == "2026-11-25-21-34-45-999"
    assert hive_partition(START + 1000) == "2026-11-25-21-34-46-000"


def test_runs_started_in_one_second_keep_a_partition_each_in_start_order() -> None:
    starts = [START + 5, START + 107, START + 990, START + 1001]
    parts = [hive_partition(ms) for ms in starts]
    assert len(set(parts)) == len(starts)
    assert parts == sorted(parts)
