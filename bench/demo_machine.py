"""`make demo`'s inventory against `s5cmd du`, on the demo's endpoint, with the time each LIST took there.

Seeds the demo's 100,000 objects in moto served over HTTP from this process (as `hpcstage demo` does), deploys
template.yaml, then for each round runs the inventory state machine with each sizing given (listers x streams,
the demo's own by default) and `s5cmd du`, one after another. For each run it prints the wall time, the LIST
requests the endpoint served, the mean time the endpoint took per LIST (its request handling, as the client
waits for it) and, for the state machine, when its first LIST arrived.

    python -m bench.demo_machine --rounds 2 1x1 1x4
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Any

from hpcstage.local import LocalAws
from hpcstage.localcli import (
    DEMO_BUCKET,
    DEMO_FLEET,
    QUIET_ENV,
    _project_root,
    _s5cmd_du,
    demo_objects,
    local_parameters,
    run_inventory_machine,
    seed_bucket,
)


class ListTimes:
    """The endpoint's time for every ListObjectsV2 request on the demo bucket (werkzeug's handler, wrapped)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.times: list[tuple[float, float]] = []  # (arrival, seconds)

    def install(self) -> None:
        import werkzeug.serving

        original = werkzeug.serving.WSGIRequestHandler.run_wsgi
        times = self

        def run_wsgi(handler: Any) -> None:
            start = time.monotonic()
            try:
                original(handler)
            finally:
                if handler.path.startswith(f"/{DEMO_BUCKET}?") and "list-type=2" in handler.path:
                    with times.lock:
                        times.times.append((start, time.monotonic() - start))

        werkzeug.serving.WSGIRequestHandler.run_wsgi = run_wsgi  # type: ignore[method-assign]

    def since(self, t: float) -> list[tuple[float, float]]:
        with self.lock:
            return [(a, d) for a, d in self.times if a >= t]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizing", nargs="*", help="LxS: listers x streams (default: the demo's)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--objects", type=int, default=100_000)
    args = ap.parse_args(argv)
    sizings = [tuple(int(x) for x in s.lower().split("x")) for s in args.sizing] or [
        (DEMO_FLEET["max_listers"], DEMO_FLEET["streams"])
    ]
    os.environ.update(QUIET_ENV)
    lists = ListTimes()
    lists.install()
    root = _project_root()
    with LocalAws(server=True) as aws:
        aws.client("s3").create_bucket(Bucket=DEMO_BUCKET)
        objects = demo_objects(args.objects)
        seed_bucket(DEMO_BUCKET, objects)
        expected = (len(objects), sum(s for s, _ in objects.values()))
        deployed = aws.deploy(root / "template.yaml", local_parameters(DEMO_BUCKET), root)
        for r in range(args.rounds):
            for listers, streams in sizings:
                t = time.monotonic()
                event = {"bucket": DEMO_BUCKET, "max_listers": listers, "streams": streams, "stats_depth": 2}
                res = run_inventory_machine(aws, deployed, event)
                took = time.monotonic() - t
                got = lists.since(t)
                out = res.output or {}
                exact = (out.get("objects"), out.get("bytes")) == expected
                print(
                    f"round {r + 1} state machine {listers}x{streams}: {took:.1f} s, {res.status}, exact={exact}, "
                    f"{len(got)} LIST (summary: {out.get('list_requests')}), "
                    f"{statistics.mean(d for _, d in got):.3f} s per LIST at the endpoint, "
                    f"first LIST {got[0][0] - t:.1f} s after the start",
                    flush=True,
                )
            t = time.monotonic()
            counted = _s5cmd_du(aws.endpoint_url, DEMO_BUCKET)
            took = time.monotonic() - t
            got = lists.since(t)
            print(
                f"round {r + 1} s5cmd du: {took:.1f} s, exact={counted == expected}, {len(got)} LIST, "
                f"{statistics.mean(d for _, d in got):.3f} s per LIST at the endpoint",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
