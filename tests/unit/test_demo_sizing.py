"""`make demo`'s S3 readers and fleet follow the machine's cores (localcli.demo_s3_readers, demo_fleet)."""

from __future__ import annotations

import pytest
from hpcstage import localcli


@pytest.mark.parametrize(
    ("cores", "readers", "streams"),
    [(None, 0, 1), (1, 0, 1), (2, 2, 2), (3, 3, 3), (8, 4, 4), (64, 4, 4)],
)
def test_a_reader_and_a_stream_a_core_none_on_one_core_at_most_four(
    monkeypatch: pytest.MonkeyPatch, cores: int | None, readers: int, streams: int
) -> None:
    monkeypatch.setattr(localcli.os, "cpu_count", lambda: cores)
    assert localcli.demo_s3_readers() == readers
    assert localcli.demo_fleet() == {"max_listers": 1, "streams": streams}
    # the fleet follows the readers the endpoint has, when named (bench.demo_machine --readers)
    assert localcli.demo_fleet(0) == {"max_listers": 1, "streams": 1}
    assert localcli.demo_fleet(3) == {"max_listers": 1, "streams": 3}
