"""bench/steal_trace.py: the traced simulator accounts for every key and every LIST request of a run."""

from __future__ import annotations

import pytest

from bench.sim.des import Config
from bench.steal_trace import RangeDone, by_size, fleet_config, main, run


def _cfg() -> Config:
    return fleet_config(listers=20, per_lister=4)


@pytest.mark.parametrize("shape", ["multi-tenant", "uniform", "deep-tree"])
def test_the_ranges_hold_every_key_and_every_page_request(shape: str) -> None:
    res, trace = run(shape, 300_000, seed=2, cfg=_cfg(), every=1.0)
    assert res.exact, res.exact_detail
    assert sum(r.keys for r in trace.ranges) == 300_000
    # every LIST request is a page of some range or a directory request
    assert sum(r.requests for r in trace.ranges) + res.dir_requests == res.list_requests
    # every range but the bucket's first was split off a donor's, and listed once
    assert len(trace.ranges) == 1 + trace.remote_pieces + trace.local_pieces
    assert trace.remote_pieces > 0 and trace.local_pieces > 0


def test_the_samples_follow_the_run() -> None:
    res, trace = run("dated", 300_000, seed=1, cfg=_cfg(), every=0.5, until=6.0)
    assert trace.samples, "no sample taken"
    times = [s.t for s in trace.samples]
    assert times == sorted(times) and times[-1] <= 6.0
    # at most one sample an interval
    assert len({int(t / 0.5) for t in times}) == len(times)
    for s in trace.samples:
        assert s.listing + s.idle == 20 * 4
        assert sum(s.streams) <= s.listing
        assert all(p <= n for p, n in zip(s.paced, s.streams, strict=True))
        assert sum(s.pool_left) == s.pool_pages
    assert (
        sum(s.remote_pieces + s.local_pieces for s in trace.samples)
        <= trace.remote_pieces + trace.local_pieces
    )
    # the run starts from one range: the first sample has the whole key space with one stream
    assert trace.samples[0].streams == [1] and trace.samples[0].pages_left == [300]


def test_by_size_classes_ranges_by_pages() -> None:
    rows = by_size(
        [
            RangeDone(0, 1),
            RangeDone(999, 1),
            RangeDone(1_000, 2),
            RangeDone(5_500, 6),
            RangeDone(300_000, 301),
        ]
    )
    assert rows == [
        ("< 1", 2, pytest.approx(1 + 0.001)),
        ("< 4", 1, pytest.approx(1.0)),
        ("< 16", 1, pytest.approx(0.5)),
        ("< 64", 0, 0.0),
        ("< 256", 0, 0.0),
        (">= 256", 1, pytest.approx(1.0)),
    ]


def test_the_command_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["--size", "1e5", "--shape", "uniform", "--listers", "10", "--per-lister", "2", "--ranges"]) == 0
    )
    out = capsys.readouterr().out
    assert "| t | listing | idle |" in out
    assert "| range size (pages) | ranges |" in out
    assert "exact True" in out
