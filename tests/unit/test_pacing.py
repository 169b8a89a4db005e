"""The listers' request pacing (hpcstage.inventory.pacing.Pacer): exact rates for given 503s and a fake clock."""

from __future__ import annotations

import pytest
from hpcstage.inventory.pacing import Pacer


def test_unpaced_until_the_first_throttled_window() -> None:
    p = Pacer(now=0.0)
    assert [p.slot(t) for t in (0.0, 0.0, 0.1)] == [0.0, 0.0, 0.1]  # no 503 yet: every attempt at once
    p.record(0.5, sent=40, throttled=0)
    assert p.slot(1.0) == 1.0 and p.rate is None  # a clean window leaves it unpaced


def test_the_first_throttled_window_paces_at_the_rate_sent_cut_by_half_the_throttled_fraction() -> None:
    p = Pacer(now=0.0)
    p.record(0.4, sent=30, throttled=10)
    p.record(0.9, sent=10, throttled=2)
    assert p.rate is None  # decided once per window, not per 503
    # 40 answered in the window [0, 1.0), 12 of them 503: 40/s x (1 - 0.3 / 2)
    assert p.slot(1.0) == 1.0
    assert p.rate == pytest.approx(34.0)
    # the next attempts go 1/34 s apart, whatever the time they ask
    assert p.slot(1.0) == pytest.approx(1.0 + 1 / 34)
    assert p.slot(1.01) == pytest.approx(1.0 + 2 / 34)
    assert p.slot(1.5) == 1.5  # an attempt asking after its slot goes at once
    assert p.throttles == 12


def test_the_cut_is_half_the_throttled_fraction_not_a_half() -> None:
    p = Pacer(now=0.0)
    p.record(0.5, sent=20, throttled=4)
    p.slot(1.0)
    assert p.rate == pytest.approx(18.0)  # 20/s x (1 - 0.2/2)
    # paced at 18/s, 2 attempts in 18 throttled: x (1 - 1/18) = 17 (AIMD would halve to 9)
    p.record(1.5, sent=18, throttled=2)
    p.slot(2.0)
    assert p.rate == pytest.approx(17.0)
    # every attempt throttled: at most halved
    p.record(2.5, sent=5, throttled=5)
    p.slot(3.0)
    assert p.rate == pytest.approx(8.5)


def test_a_throttled_window_cuts_the_paced_rate_whatever_was_sent() -> None:
    p = Pacer(now=0.0)
    p.record(0.2, sent=10, throttled=5)
    p.slot(1.0)
    assert p.rate == pytest.approx(7.5)
    # streams in backoff sent little: the cut applies to the pacing rate, not to the few attempts sent
    p.record(1.7, sent=2, throttled=1)
    p.slot(2.0)
    assert p.rate == pytest.approx(7.5 * 0.75)


def test_a_window_without_a_503_ends_the_pacing_and_the_next_503_starts_it_anew() -> None:
    p = Pacer(now=0.0)
    p.record(0.1, sent=16, throttled=8)
    assert p.slot(1.0) == 1.0 and p.rate == pytest.approx(12.0)
    assert p.slot(1.0) == pytest.approx(1.0 + 1 / 12)  # paced: the next attempt waits for its slot
    p.record(1.5, sent=12, throttled=0)  # S3 took all it was sent
    assert p.slot(2.0) == 2.0 and p.rate is None
    assert p.slot(2.0) == 2.0  # unpaced: every attempt at once
    # a 503 again: paced from the rate sent in that window, cut by half the throttled fraction
    p.record(2.5, sent=60, throttled=6)
    p.slot(3.0)
    assert p.rate == pytest.approx(60 * (1 - 0.1 / 2))


def test_the_rate_never_goes_below_one_request_per_window() -> None:
    p = Pacer(now=0.0)
    p.record(0.3, sent=1, throttled=1)
    assert p.slot(1.0) == 1.0
    assert p.rate == pytest.approx(1.0)  # 1/s halved would be 0.5/s
    assert (p.slot(1.0), p.slot(1.2)) == (2.0, None)  # 3.0 is more than a window ahead of 1.2


def test_no_slot_is_reserved_more_than_a_window_ahead_so_the_end_of_the_pacing_frees_every_waiter() -> None:
    p = Pacer(now=0.0)
    p.record(0.5, sent=4, throttled=2)
    assert p.slot(1.0) == 1.0 and p.rate == pytest.approx(3.0)  # 4/s x (1 - 0.5/2)
    # eight streams ask at once: the slots of the next window go, the rest hold no reservation
    slots = [p.slot(1.0) for _ in range(7)]
    assert slots == [pytest.approx(1.0 + i / 3) for i in (1, 2, 3)] + [None] * 4
    assert p.next_at == pytest.approx(2.0 + 1 / 3)  # the refused did not move it
    # the window [1, 2) answered without a 503: unpaced, and the four that asked again go at once
    p.record(1.5, sent=3, throttled=0)
    assert [p.slot(2.0) for _ in range(4)] == [2.0] * 4 and p.rate is None


def test_a_long_window_is_measured_over_its_length() -> None:
    p = Pacer(now=0.0)
    p.record(0.5, sent=30, throttled=6)
    p.slot(2.0)  # the window closes at 2.0: 30 answered over 2 s, 20 % throttled
    assert p.rate == pytest.approx(15.0 * 0.9)


def test_a_release_runs_unpaced_at_once_and_the_windows_503s_still_count() -> None:
    p = Pacer(now=0.0)
    p.record(0.1, sent=10, throttled=5)
    p.slot(1.0)
    assert p.rate == pytest.approx(7.5)
    p.slot(1.0)
    assert p.slot(1.0) == pytest.approx(1.0 + 2 / 7.5)  # paced: the third attempt waits for its slot
    p.release(1.2)  # the fleet is quiet (fleet.Lister.endgame)
    assert p.rate is None and [p.slot(1.2), p.slot(1.2)] == [1.2, 1.2]
    # a 503 in the window it was released in: paced again when that window ends, from the rate sent
    p.record(1.5, sent=20, throttled=2)
    p.slot(2.0)
    assert p.rate == pytest.approx(20 * (1 - 0.1 / 2))
