"""bench/steal_trace.py: the traced simulator accounts for every key and every LIST request of a run."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from bench.sim.des import Config, Result, Sim
from bench.sim.des_shapes import make_any
from bench.sim.params import DEFAULT
from bench.steal_trace import Account, RangeDone, by_last_page, by_size, fleet_config, main, piece_rows, run


def _cfg() -> Config:
    return fleet_config(listers=20, per_lister=4)


def _run_figures(res: Result) -> tuple[float, int, int, int]:
    """What two runs of the same simulation must share: makespan, LIST requests, directory requests, splits."""
    return res.makespan, res.list_requests, res.dir_requests, res.splits


@pytest.mark.parametrize("shape", ["multi-tenant", "uniform", "deep-tree"])
def test_the_ranges_hold_every_key_and_every_page_request(shape: str) -> None:
    res, trace, _ = run(shape, 300_000, seed=2, cfg=_cfg(), every=1.0)
    assert res.exact, res.exact_detail
    assert sum(r.keys for r in trace.ranges) == 300_000
    # every LIST request is a page of some range or a directory request
    assert sum(r.requests for r in trace.ranges) + res.dir_requests == res.list_requests
    # every range but the bucket's first was split off a donor's, and listed once
    assert len(trace.ranges) == 1 + trace.remote_pieces + trace.local_pieces
    assert trace.remote_pieces > 0 and trace.local_pieces > 0


def test_the_samples_follow_the_run() -> None:
    res, trace, _ = run("dated", 300_000, seed=1, cfg=_cfg(), every=0.5, until=6.0)
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


def test_by_last_page_classes_ranges_by_their_last_pages_emptiness() -> None:
    rows = dict(
        by_last_page(
            [
                RangeDone(900, 1),
                RangeDone(1_900, 2),
                RangeDone(300, 1),
                RangeDone(1_000, 1),
                RangeDone(1_000, 2),
            ]
        )
    )
    assert rows["0.1"] == 2 and rows["0.7"] == 1 and rows["0.0"] == 1 and rows[">= 1"] == 1
    assert sum(rows.values()) == 5 and len(rows) == 11


def test_the_command_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--size",
        "1e5",
        "--shape",
        "uniform",
        "--listers",
        "10",
        "--per-lister",
        "2",
        "--ranges",
        "--account",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| t | listing | idle |" in out
    assert "| range size (pages) | ranges |" in out
    assert "| LIST requests beyond keys / 1,000, a range (its last page's emptiness) | ranges |" in out
    assert "| where the streams' time went (20 streams) |" in out
    assert "| pages answered |" in out
    assert "exact True" in out


def test_the_account_holds_every_stream_second() -> None:
    res, _, rows = run("multi-tenant", 300_000, seed=2, cfg=_cfg(), every=1.0)
    assert res.exact, res.exact_detail
    got = dict(rows)
    sim_streams = 20 * 4
    start = res.phases["first_lister"]
    window = sim_streams * (res.phases["list_end"] - start)
    # what the streams did with a piece and the time without one add up to every stream's whole window
    assert sum(got.values()) == pytest.approx(window, rel=1e-9)
    # nothing was counted twice: the categories fit in the time the streams held a piece
    assert got["other, with a piece"] >= -1e-6
    assert all(v >= -1e-6 for v in got.values()), got
    assert got["pages answered"] > 0
    # 80 streams never reach a partition's request cap, and no fault was injected: no failed attempt, no wait
    assert "failed attempts (503, 500, resets)" not in got
    assert "retry waits (botocore, the pacer's window)" not in got
    assert got.get("pacer waits", 0.0) == 0.0


def test_account_holding_and_full_span() -> None:
    acct = Account(steps=[(1.0, 2), (3.0, 1), (4.0, 0)])
    assert acct.holding(0.0, 5.0) == pytest.approx(2 * 2 + 1 * 1)
    assert acct.holding(2.0, 3.5) == pytest.approx(2 * 1 + 1 * 0.5)
    assert acct.holding(4.0, 5.0) == 0.0
    # two streams: full (at most 1 % without a piece) only from 1.0 until the change at 3.0
    assert acct.full_span(2, 0.0, 5.0) == (1.0, 3.0)
    assert Account(steps=[(1.0, 1)]).full_span(2, 0.0, 5.0) == (0.0, 0.0)


def test_admitted_requests_stay_within_each_partitions_cap_and_add_up_with_the_503s() -> None:
    # three partitions of 100,000 keys, each admitting 20 page requests a second: 80 streams throttle
    params = replace(
        DEFAULT, s3=replace(DEFAULT.s3, partition_rate_limit=20.0, objects_per_partition=100_000)
    )
    res, trace, _ = run("uniform", 300_000, seed=1, cfg=_cfg(), params=params, every=10.0)
    assert res.exact, res.exact_detail
    assert res.throttled > 0
    assert {p for p, _ in trace.admitted} == {0, 1, 2}
    assert max(trace.admitted.values()) == 20
    # every page request sent was admitted or answered 503 SlowDown
    assert sum(trace.admitted.values()) + res.throttled == trace.sent


def test_split_attempts_are_recorded_until_the_second_asked() -> None:
    res, trace, _ = run("users", 300_000, seed=1, cfg=_cfg(), every=10.0, splits_until=math.inf)
    assert res.exact, res.exact_detail
    assert trace.splits
    # every piece the run split off is one of a recorded attempt's; an attempt that gave none names no cut
    assert sum(s.pieces for s in trace.splits) == trace.remote_pieces + trace.local_pieces
    assert all((s.pieces > 0) == (s.path != "") for s in trace.splits)
    assert {s.path for s in trace.splits} - {""} <= {"bisect", "tree", "named", "known", "leaf", "flat"}
    # the first attempt is the bucket's first range's, and its estimate was unknown
    first = trace.splits[0]
    assert first.end is None and first.before is None and first.pieces > 0
    times = [s.t for s in trace.splits]
    assert times == sorted(times)
    _, early, _ = run("users", 300_000, seed=1, cfg=_cfg(), every=10.0, splits_until=times[len(times) // 2])
    assert 0 < len(early.splits) < len(trace.splits)
    assert all(s.t < times[len(times) // 2] for s in early.splits)
    plain, none, _ = run("users", 300_000, seed=1, cfg=_cfg(), every=10.0)
    assert none.splits == []
    # recording the attempts does not change the run
    assert _run_figures(plain) == _run_figures(res)


def test_the_command_prints_admitted_requests_and_splits(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--size", "1e5", "--shape", "dated", "--listers", "10", "--per-lister", "2", "--admitted"]
    assert main([*argv, "--splits", "100"]) == 0
    out = capsys.readouterr().out
    assert "| second | page requests admitted, per partition (cap 5500 a second) |" in out
    assert "| t | donor's position | range end | estimate before / after (pages) | pieces | cut |" in out


def test_every_range_records_when_and_how_large_its_donor_cut_it() -> None:
    res, trace, _ = run("users", 300_000, seed=1, cfg=_cfg(), every=10.0)
    assert res.exact, res.exact_detail
    # only the bucket's first range was not cut by a donor; the others were cut while the run went on, by a
    # donor that estimated them (an open remainder's pieces may come without one)
    assert [p.cut for p in trace.ranges].count(None) == 1
    assert all(0 < p.cut <= res.makespan for p in trace.ranges if p.cut is not None)
    assert any(p.estimate > 0 for p in trace.ranges)
    # a never-throttled run of this size enters its endgame (fleet.ENDGAME_QUIET_S) and cuts pieces there
    assert {p.endgame for p in trace.ranges} == {False, True}
    rows = piece_rows(trace.ranges, lambda p: p.endgame)
    assert sum(c for _, c, _, _, _ in rows) == len(trace.ranges)
    assert sum(pages for _, _, pages, _, _ in rows) == pytest.approx(300_000 / 1000)
    assert sum(over for _, _, _, over, _ in rows) == pytest.approx(res.list_requests - res.dir_requests - 300)


def test_piece_rows_class_pieces_and_count_those_under_a_page() -> None:
    pieces = [
        RangeDone(2500, 3),
        RangeDone(400, 1, cut=1.5, endgame=True, estimate=8.0),
        RangeDone(10_000, 10, cut=2.0, endgame=True, estimate=20.0),
    ]
    rows = sorted(piece_rows(pieces, lambda p: p.endgame))
    assert rows == [(False, 1, 2.5, 0.5, 0), (True, 2, 10.4, pytest.approx(0.6), 1)]


def test_directory_requests_are_counted_by_level_and_outcome() -> None:
    res, trace, _ = run("uuid-projects", 300_000, seed=1, cfg=_cfg(), every=10.0)
    assert res.exact, res.exact_detail
    assert sum(trace.dirs.values()) == res.dir_requests > 0
    # levels below the root are asked from their start (fan-outs: <uuid>/ holds processed/ and raw/), the
    # bucket's root only from a position (it names the cut points past it)
    assert all(depth > 0 for depth, start, _ in trace.dirs if start)
    assert any(start for _, start, _ in trace.dirs)
    assert trace.dirs.get((0, False, True), 0) + trace.dirs.get((0, False, False), 0) > 0
    # tracing does not change the run: the simulator untraced makes the same one
    plain = Sim(make_any("uuid-projects", 300_000), _cfg(), 1, DEFAULT).run()
    assert _run_figures(plain) == _run_figures(res)


def test_the_command_prints_pieces_and_directory_requests(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--size", "1e5", "--shape", "users", "--listers", "10", "--per-lister", "2", "--pieces", "--dirs"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "| cut in second | ranges | pages held | LIST requests beyond keys / 1,000 | ranges under a page |"
        in out
    )
    assert "| donor's lister in its endgame | ranges |" in out
    assert "| donor's estimate (pages) | ranges |" in out
    assert "| level depth | asked from | requests, the attempt gave pieces | requests, it gave none |" in out
    assert "| the first range | 1 |" in out
    # the run with the simulator's exact estimates (the bound of better estimates) lists every key too
    assert main([*argv, "--oracle-estimates"]) == 0
    assert "exact True" in capsys.readouterr().out
