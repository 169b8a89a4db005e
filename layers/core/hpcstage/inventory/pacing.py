"""Request pacing under S3's per-partition request-rate cap: cut by the throttled fraction, not by half.

S3 answers 503 SlowDown when a partitioned prefix receives more than its rate ("at least 5,500 GET/HEAD
requests per second per partitioned prefix"). A fleet of listers cannot see the cap or each other, only
its own 503s. Halving a stream count on a 503 (AIMD, as TCP does on loss) stalls a fleet of 1,000 listers
under one partition: they throttle together, all halve together and the partition idles until the
additive steps bring them back (measured in the simulator: a fifth of the rate lost at 100M objects), and a
count of streams cannot go below one stream's rate, which 1,000 listers already exceed.

``Pacer`` instead paces a stream's LIST attempts (each stream of a fleet lister has its own:
fleet.Lister.throttle_for; "the lister" below is that sender), botocore's retries included, at a rate
(requests/s) and sets that rate once per window from the 503s it saw. Like DCTCP (RFC 8257), which cuts its window by
half the *fraction* of marked packets (cwnd x (1 - alpha/2)) rather than by half, a window in which S
attempts were answered and T of them with 503 SlowDown cuts the rate by T / 2S. Summed over a fleet that
sees the partition's throttled fraction f = 1 - cap/demand, the next demand is (demand + cap) / 2: the
excess halves each window and the demand approaches the cap from above instead of falling below it. The
first throttled window starts the pacing at the rate the lister was sending, cut the same way. A window
without a 503 ends the pacing: the lister runs unpaced again, and its next 503 starts the pacing anew from
the rate it sends then. While a fleet's demand is above the cap every window holds 503s and the cut keeps
bringing the demand down to it; a clean window means the demand is at or below it. (Measured: raising a
paced rate by one stream's share per clean window, doubled for each clean window in a row, cost 1.3-6.0 s
of 13-21 s at 25M objects with 1,000 listers: a lister that saw a few 503s while the fleet ramped up was
paced at the low rate it was sending then and climbed back for seconds. Unpaced after a clean window:
unicode 19.8 -> 16.5 s, dated 21.2 -> 18.3 s; bench/RESULTS.md.) Other failures
(500, resets) are not rate signals: they count as answered, not as throttled.

Retries are paced too: a retried attempt otherwise lands on the partition outside the rate (measured in the
simulator: the backlog of full-jitter retries from the first overshoot kept the partition throttled for
seconds while the paced rate was cut below the cap). botocore's standard retry mode stays for 500s and
resets (quota, full-jitter backoff); a 503 SlowDown waits rand x min(2^(n-1) s, one window) instead of up to
20 s (fleet._Throttle.retry_delay), since the pace already holds the rate: a retry waits for that delay and
then for its slot.

A slot is reserved at most one window ahead. A slot further ahead would be kept even after the next window's
decision ends the pacing or raises the rate: a lister paced down to a few requests a second with eight
streams and their retries queued reservations six seconds ahead, and in the simulator its ranges were the
last of a 100M listing, idle for those seconds while the partition had long stopped throttling (the
tail of a run is the ranges such a lister holds). A request that finds the window's slots taken asks again
one window later, under the rate of that window.

Decisions are taken once per window (1 s: S3's rate is stated per second), so a burst of 503s caused by one
overshoot is answered once, and the rate never goes below one request per window (the lister must send to
observe). Attempts are reported when they are answered (botocore's needs-retry hook), not when their page
is: a throttle reported seconds late, after its backoff, cuts the rate of a window that did not cause it.

Pure and clock-driven: the fleet's listers call it under a lock with ``time.monotonic`` (fleet._Throttle)
and the simulator (bench/sim/des.py) calls the same class with its virtual time, so both run the same
algorithm.
"""

from __future__ import annotations

WINDOW_S = 1.0


class Pacer:
    """The pacing of one sender's LIST requests (a fleet stream's; see the module docstring)."""

    __slots__ = ("window_s", "rate", "next_at", "start", "sent", "throttled", "throttles")

    def __init__(self, now: float, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self.rate: float | None = None  # requests/s; None: unpaced
        self.next_at = now  # the earliest time the next paced request may go
        self.start = now  # the current window's start
        self.sent = 0  # attempts answered in the current window
        self.throttled = 0  # of them, 503 SlowDown
        self.throttles = 0  # 503s seen in all (reported)

    def record(self, now: float, sent: int, throttled: int) -> None:
        """``sent`` attempts were answered, ``throttled`` of them with 503 SlowDown."""
        self._roll(now)
        self.sent += sent
        self.throttled += throttled
        self.throttles += throttled

    def slot(self, now: float) -> float | None:
        """Reserve the next request's slot: the time it may be sent (``now`` when unpaced or on time); or
        None when every slot up to one window ahead is taken: ask again ``window_s`` later, without a
        reservation (see the module docstring)."""
        self._roll(now)
        if self.rate is None:
            return now
        at = max(now, self.next_at)
        if at > now + self.window_s:
            return None
        self.next_at = at + 1.0 / self.rate
        return at

    def release(self, now: float) -> None:
        """Run unpaced from ``now``: the fleet reports the partition below its cap (no 503 SlowDown anywhere
        for a while; fleet.Lister.endgame). The window's counts stay, so a 503 in it still sets a pace at the
        window's end, and the next 503 starts the pacing anew."""
        self._roll(now)
        self.rate = None
        self.next_at = now

    def _roll(self, now: float) -> None:
        elapsed = now - self.start
        if elapsed < self.window_s:
            return
        if self.throttled:
            rate = self.sent / elapsed if self.rate is None else self.rate
            cut = 1.0 - min(1.0, self.throttled / self.sent) / 2
            self.rate = max(1.0 / self.window_s, rate * cut)
        else:
            self.rate = None  # no 503 in the window: unpaced
        self.start = now
        self.sent = self.throttled = 0
