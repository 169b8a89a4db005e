"""`make demo`'s inventory against `s5cmd du`, on the demo's endpoint, with the time each LIST took there.

Seeds the demo's 100,000 objects in moto served over HTTP, from a process of its own as `hpcstage demo` does
(`--s3 process`, the default) or from this process as the demo did before (`--s3 embedded`), deploys
template.yaml, then for each round runs the inventory state machine with each sizing given (listers x streams,
the demo's own by default) and `s5cmd du`, one after another. For each run it prints the wall time, the LIST
requests the endpoint served, the mean time the endpoint took per LIST (its request handling, as the client
waits for it) and, for the state machine, when its first LIST arrived.

    python -m bench.demo_machine --rounds 2 1x1 1x4
    python -m bench.demo_machine --s3 embedded 1x1
    python -m bench.demo_machine --timeline 1x1

``--timeline`` also prints, for each state machine run, when each step of its start and end happened (seconds
after the execution was started; the same clock as the endpoint's LIST arrivals): the handlers' imports (a
Lambda cold start), their invocations, the clients made, the launcher's writes, the lister's first claim and
LIST, the last LIST's answer, the completion and reduce, and when the poll saw the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcstage.local import LocalAws
from hpcstage.localcli import (
    DEMO_BUCKET,
    QUIET_ENV,
    _project_root,
    _s5cmd_du,
    demo_fleet,
    demo_objects,
    demo_s3_readers,
    local_parameters,
    run_inventory_machine,
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

    def since(self, t: float, aws: Any) -> list[tuple[float, float]]:
        if aws.s3 is not None:  # S3 in its own process: it keeps the same record
            return [(a, d) for a, d, bucket, _ in aws.s3.lists(t) if bucket == DEMO_BUCKET]
        with self.lock:
            return [(a, d) for a, d in self.times if a >= t]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_note(aws: Any, before: tuple[float, float]) -> str:
    here = cpu_s(os.getpid()) - before[0]
    if aws.s3 is None:
        return f"CPU {here:.1f} s in this process (S3 included)"
    return f"CPU {here:.1f} s in this process, {s3_cpu_s(aws) - before[1]:.1f} s in the S3 processes (readers too)"


def s3_cpu_s(aws: Any) -> float:
    """CPU seconds of the S3 process and its readers."""
    return sum(cpu_s(p.pid) for p in (aws.s3, *aws.s3.readers))


def cpu_now(aws: Any) -> tuple[float, float]:
    return cpu_s(os.getpid()), s3_cpu_s(aws) if aws.s3 is not None else 0.0


class Timeline:
    """Marks (label, start, end, thread) around the calls that make up a run's start and end: the functions
    below are wrapped for the life of the process (a bench, never the product)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.marks: list[tuple[str, float, float, str]] = []

    def _wrap(self, owner: Any, attr: str, label: Callable[..., str] | str) -> None:
        original = getattr(owner, attr)
        marks = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                name = label(*args, **kwargs) if callable(label) else label
                with marks.lock:
                    marks.marks.append((name, start, time.monotonic(), threading.current_thread().name))

        setattr(owner, attr, timed)

    def install(self) -> None:
        """The handlers' imports and invocations now; the core's functions once a handler has imported them
        (importing them here would make the first handler's cold start look shorter than the demo's)."""
        from hpcstage.local import motopatch

        def step(fn: Any, code_dir: Any, event: Any) -> str:
            kind = "launch" if "task_token" in event else "validate" if "input" in event else "run"
            return f"invoke {fn.function_name.rsplit('-', 1)[-1]} ({kind})"

        load = motopatch._load_handler_module
        installed: list[bool] = []

        def load_then_wrap(key: Any) -> Any:
            module = load(key)
            if not installed:
                installed.append(True)
                self._install_core()
            return module

        motopatch._load_handler_module = load_then_wrap
        self._wrap(
            motopatch, "_load_handler_module", lambda key: f"import {key.function_name.rsplit('-', 1)[-1]}"
        )
        self._wrap(motopatch, "invoke_handler", step)
        # the interpreter's Lambda task: the boto3 client it makes for each call, then the request reaching
        # moto's Lambda backend (the patched invoke decodes the event first)
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

        self._wrap(
            lambda_eval_utils,
            "boto_client_for",
            lambda **kw: f"interpreter's boto3 client ({kw.get('service')})",
        )
        self._wrap(motopatch, "_decode_event", "moto's Lambda backend decodes an event")

    def _install_core(self) -> None:
        from hpcstage import clients
        from hpcstage.inventory import fleet

        self._wrap(clients, "s3", "clients.s3()")
        self._wrap(clients, "source_s3", "clients.source_s3()")
        self._wrap(clients, "client", lambda service: f"clients.client({service})")
        self._wrap(fleet, "launch", "fleet.launch")
        self._wrap(fleet, "list_range", "fleet.list_range")
        self._wrap(fleet, "notify_if_done", "fleet.notify_if_done")
        self._wrap(fleet, "reduce_run", "fleet.reduce_run")
        self._wrap(fleet, "send_result", "fleet.send_result")
        self._wrap(fleet.Lister, "run", "Lister.run")
        self._wrap(fleet.Lister, "__init__", "Lister.__init__")
        for method in ("create", "claim", "open_ranges", "add_meta", "add_hunger", "finish", "checkpoint"):
            self._wrap(fleet.FleetStore, method, f"FleetStore.{method}")

    def report(
        self, t0: float, lists: list[tuple[float, float]], end: float, history: list[dict[str, Any]]
    ) -> str:
        """One line per label (its first call; the count and total when called more than once), the LISTs at
        the endpoint, the execution's history events, in order of time after ``t0``."""
        with self.lock:
            marks = [m for m in self.marks if m[1] >= t0]
        rows: list[tuple[float, str]] = []
        seen: dict[str, list[tuple[float, float, str]]] = {}
        for label, start, stop, thread in marks:
            seen.setdefault(label, []).append((start, stop, thread))
        for label, calls in seen.items():
            start, stop, thread = calls[0]
            more = (
                f"; {len(calls)} calls, {sum(b - a for a, b, _ in calls):.3f} s in all"
                if len(calls) > 1
                else ""
            )
            rows.append((start - t0, f"{label}: {stop - start:.3f} s [{thread}]{more}"))
            if len(calls) > 1:
                last = calls[-1]
                rows.append((last[0] - t0, f"{label} (last): {last[1] - last[0]:.3f} s [{last[2]}]"))
        if lists:
            rows.append((lists[0][0] - t0, f"first LIST arrives at the endpoint ({lists[0][1]:.3f} s there)"))
            last_answer = max(a + d for a, d in lists)
            rows.append((last_answer - t0, f"last LIST answered ({len(lists)} LIST)"))
        # the history's timestamps are wall-clock: placed on this clock by the offset between the two now
        offset = time.time() - time.monotonic()
        for event in history:
            at = event["timestamp"].timestamp() - offset - t0
            details = next((v for k, v in event.items() if k.endswith("EventDetails")), {})
            name = details.get("name") or details.get("resourceType", "")
            rows.append((at, f"history: {event['type']} {name}".rstrip()))
        rows.append((end - t0, "run_execution returned (the poll saw the end)"))
        return "\n".join(f"  {at:7.3f} s  {text}" for at, text in sorted(rows))


def busy(lists: list[tuple[float, float]]) -> float:
    """The share of the time from the first LIST's arrival to the last one's answer in which the endpoint
    was answering at least one LIST."""
    spans = sorted((a, a + d) for a, d in lists)
    covered, reach = 0.0, spans[0][0]
    for start, end in spans:
        covered += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return covered / (reach - spans[0][0])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizing", nargs="*", help="LxS: listers x streams (default: the demo's)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--s3", choices=("process", "embedded"), default="process", help="where S3 is served")
    ap.add_argument(
        "--readers",
        type=int,
        default=None,
        help="reader processes of the S3 process (default: the demo's, localcli.demo_s3_readers)",
    )
    ap.add_argument(
        "--timeline", action="store_true", help="print when each step of a run's start and end happened"
    )
    args = ap.parse_args(argv)
    in_process = args.s3 == "process"
    readers = (demo_s3_readers() if args.readers is None else args.readers) if in_process else 0
    fleet = demo_fleet(readers)  # a stream per reader, as the demo sizes its fleet
    sizings = [tuple(int(x) for x in s.lower().split("x")) for s in args.sizing] or [
        (fleet["max_listers"], fleet["streams"])
    ]
    os.environ.update(QUIET_ENV)
    lists = ListTimes()
    lists.install()
    timeline = Timeline()
    if args.timeline:
        timeline.install()
    root = _project_root()
    print(f"S3: {'a process of its own' if in_process else 'this process'}, {readers} readers", flush=True)
    with LocalAws(server=True, s3_process=in_process, s3_readers=readers) as aws:
        aws.client("s3").create_bucket(Bucket=DEMO_BUCKET)
        objects = demo_objects(args.objects)
        aws.seed_objects(DEMO_BUCKET, objects)
        expected = (len(objects), sum(s for s, _ in objects.values()))
        deployed = aws.deploy(root / "template.yaml", local_parameters(DEMO_BUCKET), root)
        for r in range(args.rounds):
            for listers, streams in sizings:
                t, cpu = time.monotonic(), cpu_now(aws)
                event = {"bucket": DEMO_BUCKET, "max_listers": listers, "streams": streams, "stats_depth": 2}
                res = run_inventory_machine(aws, deployed, event)
                took = time.monotonic() - t
                got = lists.since(t, aws)
                out = res.output or {}
                exact = (out.get("objects"), out.get("bytes")) == expected
                print(
                    f"round {r + 1} state machine {listers}x{streams}: {took:.1f} s, {res.status}, exact={exact}, "
                    f"{len(got)} LIST (summary: {out.get('list_requests')}), "
                    f"{statistics.mean(d for _, d in got):.3f} s per LIST at the endpoint, "
                    f"first LIST {got[0][0] - t:.1f} s after the start, last LIST answered "
                    f"{t + took - max(a + d for a, d in got):.1f} s before the end, endpoint busy "
                    f"{busy(got):.0%} from first to last LIST; {cpu_note(aws, cpu)}",
                    flush=True,
                )
                if args.timeline:
                    print(timeline.report(t, sorted(got), t + took, res.history), flush=True)
            t, cpu = time.monotonic(), cpu_now(aws)
            counted = _s5cmd_du(aws.s3_endpoint_url, DEMO_BUCKET)
            took = time.monotonic() - t
            got = lists.since(t, aws)
            print(
                f"round {r + 1} s5cmd du: {took:.1f} s, exact={counted == expected}, {len(got)} LIST, "
                f"{statistics.mean(d for _, d in got):.3f} s per LIST at the endpoint, endpoint busy "
                f"{busy(got):.0%} from first to last LIST; {cpu_note(aws, cpu)}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
