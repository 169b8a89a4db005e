"""Request pacing under S3's per-partition request-rate cap: the rate that got through, not a halving.

S3 answers 503 SlowDown when a partitioned prefix receives more than its rate ("at least 5,500 GET/HEAD
requests per second per partitioned prefix"). A fleet of listers cannot see the cap or each other, only
its own 503s. Halving a stream count on a 503 (AIMD, as TCP does on loss) stalls a fleet of 1,000 listers
under one partition: they throttle together, all halve together and the partition idles until the
additive steps bring them back (measured in the simulator: a fifth of the rate lost at 100M objects), and a
count of streams cannot go below one stream's rate, which 1,000 listers already exceed.

``Pacer`` instead paces the lister's LIST requests at a rate (requests/s) and sets that rate, once per
window, from what S3 let through. Like DCTCP (RFC 8257), which cuts a window by the *fraction* of marked
packets rather than by half, the cut is proportional to the throttled fraction: after a window in which S
requests were sent and T of them answered 503 SlowDown, the rate becomes (S - T) / window, the rate the
partition admitted. When every lister does this, the fleet's next window asks for what the partition
served, so it stays at the cap rather than below it. A window without a 503 raises the rate by one
stream's share (rate / streams: the old "+1 stream per clean second", in requests/s); a clean window in
which no request had to wait for its slot means the pacing no longer binds, and the lister runs unpaced
again. Other failures (500, resets) are not rate signals: they count as sent, not as throttled.

Decisions are taken once per window (1 s: S3's rate is stated per second), so a burst of 503s caused by one
overshoot is answered once. The rate never goes below one request per window (the lister must send to
observe). botocore's standard retries (quota, full-jitter backoff) stay as they are: they pace the retries of
a throttled request, this paces the pages.

Pure and clock-driven: the fleet's listers call it under a lock with ``time.monotonic`` and the simulator
(bench/sim/des.py) calls the same class with its virtual time, so both run the same algorithm.
"""

from __future__ import annotations

WINDOW_S = 1.0


class Pacer:
    """The pacing of one lister's LIST requests (see the module docstring)."""

    __slots__ = (
        "streams",
        "window_s",
        "rate",
        "next_at",
        "start",
        "sent",
        "throttled",
        "waited",
        "throttles",
    )

    def __init__(self, streams: int, now: float, window_s: float = WINDOW_S) -> None:
        if streams < 1:
            raise ValueError(f"streams must be >= 1, got {streams}")
        self.streams = streams
        self.window_s = window_s
        self.rate: float | None = None  # requests/s; None: unpaced
        self.next_at = now  # the earliest time the next paced request may go
        self.start = now  # the current window's start
        self.sent = 0  # attempts answered in the current window
        self.throttled = 0  # of them, 503 SlowDown
        self.waited = False  # a request of the current window waited for its slot
        self.throttles = 0  # 503s seen in all (reported)

    def record(self, now: float, sent: int, throttled: int) -> None:
        """``sent`` attempts were answered, ``throttled`` of them with 503 SlowDown."""
        self._roll(now)
        self.sent += sent
        self.throttled += throttled
        self.throttles += throttled

    def slot(self, now: float) -> float:
        """Reserve the next request's slot: the time it may be sent (``now`` when unpaced or on time)."""
        self._roll(now)
        if self.rate is None:
            return now
        at = max(now, self.next_at)
        if at > now:
            self.waited = True
        self.next_at = at + 1.0 / self.rate
        return at

    def _roll(self, now: float) -> None:
        elapsed = now - self.start
        if elapsed < self.window_s:
            return
        if self.throttled:
            admitted = (self.sent - self.throttled) / elapsed
            rate = admitted if self.rate is None else min(self.rate, admitted)
            self.rate = max(1.0 / self.window_s, rate)
        elif self.rate is not None:
            if self.waited:
                self.rate += self.rate / self.streams
            else:
                self.rate = None
        self.start = now
        self.sent = self.throttled = 0
        self.waited = False
