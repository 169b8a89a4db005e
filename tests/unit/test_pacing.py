"""The listers' request pacing (hpcstage.inventory.pacing.Pacer): exact rates for given 503s and a fake clock."""

from __future__ import annotations

import pytest
from hpcstage.inventory.pacing import Pacer


def test_unpaced_until_the_first_throttled_window() -> None:
    p = Pacer(streams=8, now=0.0)
    assert [p.slot(t) for t in (0.0, 0.0, 0.1)] == [0.0, 0.0, 0.1]  # no 503 yet: every page at once
    p.record(0.5, sent=40, throttled=0)
    assert p.slot(1.0) == 1.0 and p.rate is None  # a clean window leaves it unpaced


def test_a_throttled_window_sets_the_rate_that_got_through() -> None:
    p = Pacer(streams=8, now=0.0)
    p.record(0.4, sent=30, throttled=10)
    p.record(0.9, sent=10, throttled=2)
    assert p.rate is None  # decided once per window, not per 503
    # 40 sent, 12 throttled in the window [0, 1.0): the partition let 28 through
    assert p.slot(1.0) == 1.0
    assert p.rate == pytest.approx(28.0)
    # the next pages go 1/28 s apart, whatever the time they ask
    assert p.slot(1.0) == pytest.approx(1.0 + 1 / 28)
    assert p.slot(1.01) == pytest.approx(1.0 + 2 / 28)
    assert p.slot(1.5) == 1.5  # a page asking after its slot goes at once
    assert p.throttles == 12


def test_the_cut_is_proportional_to_the_throttled_fraction_not_a_half() -> None:
    p = Pacer(streams=8, now=0.0)
    p.record(0.5, sent=20, throttled=2)
    p.slot(1.0)
    assert p.rate == pytest.approx(18.0)
    # paced at 18/s, one 503 in 18: the rate becomes the 17 that got through (AIMD would halve to 9)
    p.record(1.5, sent=18, throttled=1)
    p.slot(2.0)
    assert p.rate == pytest.approx(17.0)


def test_a_throttled_window_never_raises_the_rate() -> None:
    p = Pacer(streams=4, now=0.0)
    p.record(0.2, sent=10, throttled=5)
    p.slot(1.0)
    assert p.rate == pytest.approx(5.0)
    # botocore's retries are not paced: 12 attempts answered, 1 throttled, in a window paced at 5/s
    p.record(1.7, sent=12, throttled=1)
    p.slot(2.0)
    assert p.rate == pytest.approx(5.0)


def test_clean_windows_add_one_streams_share_while_the_pacing_binds() -> None:
    p = Pacer(streams=4, now=0.0)
    p.record(0.1, sent=12, throttled=4)
    assert p.slot(1.0) == 1.0 and p.rate == pytest.approx(8.0)
    assert p.slot(1.0) == pytest.approx(1.125)  # this page waited for its slot: the pacing binds
    p.record(1.5, sent=8, throttled=0)
    p.slot(2.0)
    assert p.rate == pytest.approx(10.0)  # + 8 / 4 streams
    p.slot(2.0)  # waits again (2.1)
    p.record(2.5, sent=10, throttled=0)
    p.slot(3.0)
    assert p.rate == pytest.approx(12.5)


def test_a_clean_window_without_waiting_ends_the_pacing() -> None:
    p = Pacer(streams=4, now=0.0)
    p.record(0.1, sent=12, throttled=4)
    p.slot(1.0)
    assert p.rate == pytest.approx(8.0)
    # the streams asked slower than 8/s (no page waited) and S3 said no 503: pacing no longer binds
    p.record(1.9, sent=3, throttled=0)
    assert p.slot(2.0) == 2.0 and p.rate is None
    assert p.slot(2.0) == 2.0


def test_the_rate_never_goes_below_one_request_per_window() -> None:
    p = Pacer(streams=8, now=0.0)
    p.record(0.3, sent=6, throttled=6)  # every request of the window throttled
    assert p.slot(1.0) == 1.0
    assert p.rate == pytest.approx(1.0)
    assert (p.slot(1.0), p.slot(1.2)) == (2.0, 3.0)


def test_a_long_window_is_measured_over_its_length() -> None:
    p = Pacer(streams=8, now=0.0)
    p.record(0.5, sent=30, throttled=6)
    p.slot(2.0)  # the window closes at 2.0: 24 admitted over 2 s
    assert p.rate == pytest.approx(12.0)


def test_bad_stream_count() -> None:
    with pytest.raises(ValueError, match="streams must be >= 1, got 0"):
        Pacer(streams=0, now=0.0)
