"""moto's S3 served over HTTP from a process of its own (``LocalAws(server=True, s3_process=True)``).

Why: moto renders a 1,000-key ListObjectsV2 page in ~0.3-0.45 s of Python CPU. Served from the process that
also runs the state machine interpreter, the Lambda handlers and the listers, every page waits for their share
of one interpreter lock; served from here it has a core of its own (bench/RESULTS.md, "make demo").

The parent (``S3Process``) starts a Python running this module's ``main``, which binds a free port, applies
hpcstage's ``s3_listing`` patch (the sorted key index) and writes one JSON line on its stdout:
``{"port": N, "patches": [...]}``. Then it answers commands, one JSON line each way:

- ``{"op": "seed", "bucket": B, "objects": [[key, size, storage_class, age_days or null], ...]}``: put the
  objects straight into the backend (sizes recorded, no bodies stored; ~25k objects a second, where PUTs over
  HTTP manage a few hundred): ``{"ok": true, "objects": n}``.
- ``{"op": "lists", "since": t}``: the ListObjectsV2 requests served since ``t`` (``time.monotonic()``, one
  clock for every process of the machine) as ``[arrival, seconds, bucket]``: ``{"ok": true, "lists": [...]}``.

End of file on its stdin stops the server and ends the process: the parent closing the pipe, exiting or
dying (even by SIGKILL) all end it. It ignores SIGINT, so a Ctrl-C in the terminal reaches the parent, which
still has its S3 while it cleans up and then closes the pipe.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import IO, Any

# How long the parent waits for the child to bind its port (importing moto takes 1-3 s on a busy machine)
# and for it to exit once its stdin is closed, before killing it.
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
ACCOUNT_ID = "123456789012"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


# The child's command line: this module's main() (``-m`` would run a second copy of a module the package
# has already imported).
_CHILD = "import sys; from hpcstage.local.s3process import main; sys.exit(main(sys.argv[1:]))"


class S3ProcessError(RuntimeError):
    """The S3 process did not start, or answered a command with an error."""


# A seeded object: key, size in bytes, storage class, days since it was last modified (None: now).
SeedRow = tuple[str, int, str, float | None]


def put_sized_objects(bucket: str, rows: list[SeedRow]) -> int:
    """Objects straight into this process's moto S3 backend: sizes recorded, bodies not stored."""
    from moto.core.utils import utcnow
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT_ID]["aws"]
    now = utcnow()
    for key, size, storage_class, age_days in rows:
        fake = backend.put_object(bucket, key, b"", storage=storage_class)
        fake.contentsize = size  # moto reports Size from this; no need to hold the bytes in memory
        if age_days is not None:
            fake.last_modified = now - timedelta(days=age_days)
    return len(rows)


class S3Process:
    """The parent's handle on the child: its endpoint, its commands, and its end."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        env = {**os.environ, **FAKE_CREDENTIALS, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(  # noqa: S603 - our own module, no shell
            [sys.executable, "-c", _CHILD, host],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lock = threading.Lock()
        self.endpoint_url = ""
        self.patches: list[str] = []
        try:
            hello = self._read_line(START_TIMEOUT_S, "start")
            self.endpoint_url = f"http://{host}:{int(hello['port'])}"
            self.patches = list(hello.get("patches", []))
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_line(self, timeout_s: float, what: str) -> dict[str, Any]:
        """One JSON line from the child; waits at most ``timeout_s`` (a reader thread, as pipes cannot time out)."""
        assert self.proc.stdout is not None
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            raise S3ProcessError(f"the S3 process did not answer {what} within {timeout_s:.0f} s")
        if not got or not got[0]:
            code = self.proc.poll()
            raise S3ProcessError(
                f"the S3 process ended during {what} (exit code {code}); its errors are above"
            )
        answer: dict[str, Any] = json.loads(got[0])
        if "error" in answer:
            raise S3ProcessError(f"the S3 process failed {what}: {answer['error']}")
        return answer

    def command(self, op: str, timeout_s: float = 600.0, **fields: Any) -> dict[str, Any]:
        with self._lock:
            if self.proc.stdin is None or self.proc.poll() is not None:
                raise S3ProcessError(f"the S3 process is not running (exit code {self.proc.poll()})")
            self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.proc.stdin.flush()
            return self._read_line(timeout_s, op)

    def seed(self, bucket: str, rows: list[SeedRow]) -> int:
        return int(self.command("seed", bucket=bucket, objects=rows)["objects"])

    def lists(self, since: float = 0.0) -> list[tuple[float, float, str]]:
        return [(a, s, b) for a, s, b in self.command("lists", since=since)["lists"]]

    def stop(self) -> None:
        """Close the child's stdin (it stops serving and exits); kill it if it has not exited in time."""
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass  # a broken pipe: the child is already gone, wait() below reaps it
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


# --------------------------------------------------------------------------------------------------
# The child
# --------------------------------------------------------------------------------------------------


class _ListTimes:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lists: list[tuple[float, float, str]] = []

    def since(self, t: float) -> list[tuple[float, float, str]]:
        with self.lock:
            return [entry for entry in self.lists if entry[0] >= t]


def _serve(host: str, protocol: IO[str]) -> None:
    import logging

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from . import motopatch

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    patches = sorted(motopatch.apply_patches(("s3_listing",)))
    times = _ListTimes()

    class Handler(MotoRequestHandler):  # type: ignore[misc]
        def run_wsgi(self) -> None:
            start = time.monotonic()
            try:
                super().run_wsgi()
            finally:
                path, _, query = self.path.partition("?")
                if self.command == "GET" and "list-type=2" in query:
                    with times.lock:
                        times.lists.append((start, time.monotonic() - start, path.strip("/").split("/")[0]))

    server = make_server(
        host, 0, DomainDispatcherApplication(create_backend_app), True, request_handler=Handler
    )
    thread = threading.Thread(target=server.serve_forever, name="s3-server", daemon=True)
    thread.start()
    protocol.write(json.dumps({"port": server.server_address[1], "patches": patches}) + "\n")
    protocol.flush()
    try:
        for line in sys.stdin:  # until the parent closes the pipe
            try:
                request = json.loads(line)
                op = request.get("op")
                if op == "seed":
                    rows = [
                        (str(k), int(s), str(c), None if a is None else float(a))
                        for k, s, c, a in request["objects"]
                    ]
                    answer: dict[str, Any] = {
                        "ok": True,
                        "objects": put_sized_objects(request["bucket"], rows),
                    }
                elif op == "lists":
                    answer = {"ok": True, "lists": times.since(float(request.get("since", 0.0)))}
                else:
                    answer = {"error": f"unknown op {op!r}"}
            except Exception as err:  # noqa: BLE001 - answered to the parent, which raises it
                answer = {"error": f"{type(err).__name__}: {err}"}
            protocol.write(json.dumps(answer) + "\n")
            protocol.flush()
    finally:
        server.shutdown()
        thread.join()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this ends (see the module doc)
    # The protocol has stdout to itself: anything else printed goes to stderr.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _serve(argv[0] if argv else "127.0.0.1", protocol)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
