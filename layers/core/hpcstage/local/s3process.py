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
  clock for every process of the machine) as ``[arrival, seconds, bucket, reader]`` (``reader``: the index of
  the reader that rendered it, -1 for this process): ``{"ok": true, "lists": [...]}``.
- ``{"op": "route", "readers": [url, ...]}`` and ``{"op": "freeze", "bucket": B}``: see readers, below.

**Readers** (``S3Process(readers=n)``, ``LocalAws(s3_readers=n)``): moto renders a page in ~0.13 s of one
interpreter, so a process serves ListObjectsV2 one page at a time however many clients ask at once, unlike S3.
With readers, ``n`` more such processes are seeded with the same objects (and the same LastModified), and the
first process (the front, at ``endpoint_url``) hands each ListObjectsV2 of a *frozen* bucket to the reader
least busy (the next in turn among equals; a continuation token to the reader that issued it) and relays its
answer: pages of one bucket are then rendered on as many cores. A bucket is frozen when
it is seeded and everything it holds came from seeding; any other request that may change it (every method but
GET and HEAD, on that bucket) thaws it for good before it is served, so a reader never answers for a bucket the
front has changed. Everything else is served by the front as before.

End of file on its stdin stops the server and ends the process: the parent closing the pipe, exiting or
dying (even by SIGKILL) all end it. It ignores SIGINT, so a Ctrl-C in the terminal reaches the parent, which
still has its S3 while it cleans up and then closes the pipe.
"""

from __future__ import annotations

import http.client
import ipaddress
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

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


def put_sized_objects(bucket: str, rows: list[SeedRow], now: float | None = None) -> int:
    """Objects straight into this process's moto S3 backend: sizes recorded, bodies not stored. ``now``
    (seconds since the epoch): the LastModified of the rows without an age (default: the time of the call),
    so that processes seeded alike report the same times."""
    from moto.core.utils import utcnow
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT_ID]["aws"]
    at = utcnow() if now is None else datetime.fromtimestamp(now, UTC).replace(tzinfo=None)
    for key, size, storage_class, age_days in rows:
        fake = backend.put_object(bucket, key, b"", storage=storage_class)
        fake.contentsize = size  # moto reports Size from this; no need to hold the bytes in memory
        fake.last_modified = at if age_days is None else at - timedelta(days=age_days)
    return len(rows)


class S3Process:
    """The parent's handle on the child (and on its readers, if any): its endpoint, its commands, and its end."""

    def __init__(self, host: str = "127.0.0.1", readers: int = 0) -> None:
        if readers < 0:
            raise ValueError(f"readers must be 0 or more, not {readers}")
        self.readers: list[S3Process] = []
        self._start(host)
        if readers:
            try:
                with ThreadPoolExecutor(readers) as pool:  # each imports moto: 1-3 s, side by side
                    futures = [pool.submit(S3Process, host) for _ in range(readers)]
                errors = [err for f in futures if (err := f.exception()) is not None]
                self.readers = [f.result() for f in futures if f.exception() is None]
                if errors:
                    raise errors[0]  # the readers that started are stopped below
                self.command("route", readers=[r.endpoint_url for r in self.readers])
            except BaseException:
                self.stop()
                raise

    def _start(self, host: str) -> None:
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
        """Put the rows into ``bucket`` (which must exist at the front); with readers, into theirs too (the
        bucket made there in the front's region), then freeze it at the front (see the module doc)."""
        now = time.time()
        answer = self.command("seed", bucket=bucket, objects=rows, now=now)
        if self.readers:
            region = str(answer["region"])
            with ThreadPoolExecutor(len(self.readers)) as pool:
                list(
                    pool.map(
                        lambda r: r.command("seed", bucket=bucket, objects=rows, now=now, region=region),
                        self.readers,
                    )
                )
            self.command("freeze", bucket=bucket)
        return int(answer["objects"])

    def lists(self, since: float = 0.0) -> list[tuple[float, float, str, int]]:
        return [(a, s, b, int(r)) for a, s, b, r in self.command("lists", since=since)["lists"]]

    def frozen(self) -> list[str]:
        """The buckets whose ListObjectsV2 the readers serve now."""
        return [str(b) for b in self.command("frozen")["buckets"]]

    def stop(self) -> None:
        """Stop the front, then the readers."""
        try:
            self._stop()
        finally:
            for r in self.readers:
                r.stop()

    def _stop(self) -> None:
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
        self.lists: list[tuple[float, float, str, int]] = []

    def since(self, t: float) -> list[tuple[float, float, str, int]]:
        with self.lock:
            return [entry for entry in self.lists if entry[0] >= t]


# Headers of a relayed answer that describe the connection, not the answer (the front's own server sets them).
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server", "proxy-connection"}
)


_NEXT_TOKEN = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")


def _bucket_of(path: str) -> str:
    """The bucket a path-style request names ("/bucket/key" -> "bucket"; "" for the service)."""
    return path.lstrip("/").split("/", 1)[0]


def _path_style(host: str) -> bool:
    """Whether a request to ``host`` (its Host header) names its bucket in the path: the host is an IP
    address or ``localhost``, not ``<bucket>.<endpoint>``."""
    name = urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class _Router:
    """The front's WSGI application: a ListObjectsV2 of a frozen bucket goes to a reader, the rest to moto."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.readers: list[tuple[str, int]] = []
        self.frozen: set[str] = set()
        # bucket -> objects seeded into it; a request that may change a bucket once its seeding began thaws
        # it for good (before, CreateBucket or a PUT: the count at ``freeze`` shows anything not seeded)
        self.seeded: dict[str, int] = {}
        self.thawed: set[str] = set()
        self._turn = itertools.count()
        self.inflight: list[int] = []  # requests each reader is answering now
        # continuation token -> the reader that issued it (a token names a position in that process's memory)
        self.tokens: dict[str, int] = {}
        self._local = threading.local()  # this server thread's connection to each reader
        self.served_by = threading.local()  # the reader of this thread's last request (-1: none)

    def freeze(self, bucket: str) -> bool:
        """Frozen when readers exist and the front's bucket holds exactly what was seeded into it."""
        from moto.s3.models import s3_backends

        held = len(s3_backends[ACCOUNT_ID]["aws"].get_bucket(bucket).keys)
        with self.lock:
            if self.readers and bucket not in self.thawed and held == self.seeded.get(bucket, 0):
                self.frozen.add(bucket)
                return True
            return False

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.served_by.index = -1
        method = environ.get("REQUEST_METHOD", "GET")
        if not _path_style(environ.get("HTTP_HOST", "")):
            # the bucket is in the host name (virtual-hosted style): not relayed, and a change thaws them all
            if method not in ("GET", "HEAD"):
                with self.lock:
                    self.thawed.update(self.seeded)
                    self.frozen.clear()
            return self.app(environ, start_response)
        bucket = _bucket_of(environ.get("PATH_INFO", ""))
        if bucket and method not in ("GET", "HEAD"):
            with self.lock:
                self.frozen.discard(bucket)
                if bucket in self.seeded:
                    self.thawed.add(bucket)
        elif (
            method == "GET"
            and bucket
            and "list-type=2" in environ.get("QUERY_STRING", "")
            and bucket in self.frozen  # a set lookup: a stale read only sends a frozen bucket's list to moto
        ):
            answer = self._relay(environ)
            if answer is not None:
                status, headers, body = answer
                start_response(status, headers)
                return [body]
        return self.app(environ, start_response)

    def pick(self, token: str | None) -> int | None:
        """The reader for a ListObjectsV2 (under ``lock``): a token's, or for a new listing (no token) the
        least busy, the next in turn among equals (a token's pages stay with the reader that issued it, so two
        streams whose chains met on one reader would otherwise wait for each other while another idles);
        None: no reader, or a token no reader issued (the front's own or unknown: moto answers either)."""
        if not self.readers:
            return None
        if token is not None:
            return self.tokens.get(token)
        turn = next(self._turn)
        n = len(self.readers)
        return min(range(n), key=lambda i: (self.inflight[i], (i - turn) % n))

    def _relay(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes] | None:
        """The request, sent to the reader ``pick`` names; None when there is none or it cannot be reached
        (moto answers)."""
        token = parse_qs(environ.get("QUERY_STRING", "")).get("continuation-token", [None])[0]
        with self.lock:
            index = self.pick(token)
            if index is None:
                return None
            self.inflight[index] += 1
            host, port = self.readers[index]
        headers = {
            key[5:].replace("_", "-").title(): value
            for key, value in environ.items()
            if key.startswith("HTTP_") and key[5:].replace("_", "-").lower() not in _HOP_HEADERS
        }
        target = environ.get("RAW_URI") or environ.get("REQUEST_URI")
        if not target:
            query = environ.get("QUERY_STRING", "")
            target = environ.get("PATH_INFO", "/") + (f"?{query}" if query else "")
        try:
            return self._send(index, host, port, target, headers)
        finally:
            with self.lock:
                self.inflight[index] -= 1

    def _send(
        self, index: int, host: str, port: int, target: str, headers: dict[str, str]
    ) -> tuple[str, list[tuple[str, str]], bytes] | None:
        conns: dict[int, http.client.HTTPConnection] = self._local.__dict__.setdefault("conns", {})
        for _ in range(2):  # a kept connection the reader closed meanwhile: once more on a new one
            conn = conns.get(index)
            if conn is None:
                conn = conns[index] = http.client.HTTPConnection(host, port, timeout=START_TIMEOUT_S)
            try:
                conn.request("GET", target, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                del conns[index]
                continue
            self.served_by.index = index
            following = _NEXT_TOKEN.search(body)
            if following is not None:
                with self.lock:
                    self.tokens[following.group(1).decode()] = index
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_HEADERS]
            return f"{resp.status} {resp.reason}", [*kept, ("Content-Length", str(len(body)))], body
        return None


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
    router = _Router(DomainDispatcherApplication(create_backend_app))

    class Handler(MotoRequestHandler):  # type: ignore[misc]
        def run_wsgi(self) -> None:
            start = time.monotonic()
            try:
                super().run_wsgi()
            finally:
                path, _, query = self.path.partition("?")
                if self.command == "GET" and "list-type=2" in query:
                    reader = getattr(router.served_by, "index", -1)
                    with times.lock:
                        times.lists.append((start, time.monotonic() - start, _bucket_of(path), reader))

    server = make_server(host, 0, router, True, request_handler=Handler)
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
                    answer = _seed(request, router)
                elif op == "lists":
                    answer = {"ok": True, "lists": times.since(float(request.get("since", 0.0)))}
                elif op == "route":
                    with router.lock:
                        router.readers = [
                            (str(u.hostname), int(u.port or 80)) for u in map(urlsplit, request["readers"])
                        ]
                        router.inflight = [0] * len(router.readers)
                    answer = {"ok": True}
                elif op == "freeze":
                    answer = {"ok": True, "frozen": router.freeze(str(request["bucket"]))}
                elif op == "frozen":
                    with router.lock:
                        answer = {"ok": True, "buckets": sorted(router.frozen)}
                else:
                    answer = {"error": f"unknown op {op!r}"}
            except Exception as err:  # noqa: BLE001 - answered to the parent, which raises it
                answer = {"error": f"{type(err).__name__}: {err}"}
            protocol.write(json.dumps(answer) + "\n")
            protocol.flush()
    finally:
        server.shutdown()
        thread.join()


def _seed(request: dict[str, Any], router: _Router) -> dict[str, Any]:
    """The ``seed`` command: the rows into the bucket (made first, in ``region``, when the command names one
    and the bucket is missing: a reader's copy of the front's bucket); answers the bucket's region."""
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT_ID]["aws"]
    bucket = str(request["bucket"])
    region = request.get("region")
    if region is not None and bucket not in backend.buckets:
        backend.create_bucket(bucket, str(region))
    rows = [(str(k), int(s), str(c), None if a is None else float(a)) for k, s, c, a in request["objects"]]
    region_name = backend.get_bucket(bucket).region_name  # MissingBucket before anything is counted
    with router.lock:
        router.frozen.discard(bucket)  # frozen again by ``freeze`` once the readers have these rows too
        router.seeded[bucket] = router.seeded.get(bucket, 0) + len(rows)
    now = request.get("now")
    n = put_sized_objects(bucket, rows, None if now is None else float(now))
    return {"ok": True, "objects": n, "region": region_name}


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
