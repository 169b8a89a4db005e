"""bench/reduce_records.py: its synthetic roll-ups go through the fleet's records path in full (no fallback)."""

from __future__ import annotations

import pytest
from hpcstage.inventory import fleet

from bench import reduce_records as rr


@pytest.mark.parametrize("segments", [1, 3])
def test_the_records_path_counts_every_object_of_the_built_roll_ups(segments: int) -> None:
    store = rr.build(records=120, per_rollup=50, segments=segments)
    assert len(store.rollups(16)) == 3  # 50 + 50 + 20 records
    with fleet.gc_paused():
        assert rr.records_path(store, 120) == 120 * segments * rr.ROWS


def test_a_missing_record_is_refused_not_counted() -> None:
    store = rr.build(records=60, per_rollup=50, segments=1)
    with pytest.raises(SystemExit, match="fell back: 0 leases of 61"):
        rr.records_path(store, 61)
