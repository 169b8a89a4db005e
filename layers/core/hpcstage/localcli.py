"""`hpcstage run` and `hpcstage demo`: the state machines of template.yaml, executed offline.

Local only (needs the [local] extra): moto plays S3, Lambda and Step Functions; the Lambda tasks
call the real handlers in functions/ in this process (see hpcstage.local).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .errors import EXIT_FAILED, EXIT_OK, ConfigError, HpcstageError, InputError
from .inventory.report import human_bytes
from .s3util import BUCKET_NAME

# A checkout: the repository around this package. An installed wheel: the copy under _project/ (setup.py).
CHECKOUT = Path(__file__).resolve().parents[3]
PACKAGED = Path(__file__).resolve().parent / "_project"
QUIET_ENV = {
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_DEV": "false",
}
DEMO_BUCKET = "demo-research-data"
# The fleet's size for the demo's endpoint: moto renders a 1,000-key page in ~0.13 s of CPU under one
# interpreter lock, so a process of it serves one page at a time. The demo's S3 has a reader process a core
# (``demo_s3_readers``), each rendering the seeded bucket's pages, and the fleet one stream a reader: more
# streams only add requests (the splits' partial pages) and wait for the same cores. Measured on the demo's
# 100,000 objects with 2 readers on 2 cores (`python -m bench.demo_machine 1x1 1x2 1x4`, bench/RESULTS.md):
# 1 x 1 stream 16.4 s and 100 LIST requests, 1 x 2 streams 9.1 s and 123, 1 x 4 streams 11.0 s and 138, against
# `s5cmd du` 14.2 s; with the S3 process alone (`--readers 0 1x1`), 13.9 s against 13.5 s.


def demo_s3_readers() -> int:
    """The demo S3's reader processes: one a core (at most 4: each holds a copy of the bucket), none on one
    core, where a reader would only add the relay."""
    cores = os.cpu_count() or 1
    return min(4, cores) if cores > 1 else 0


def demo_fleet(readers: int | None = None) -> dict[str, int]:
    """The inventory's fleet on the demo's endpoint: one lister, a stream per S3 reader (one without);
    ``readers``: those the endpoint has (default: the demo's, ``demo_s3_readers``)."""
    return {"max_listers": 1, "streams": max(1, demo_s3_readers() if readers is None else readers)}


CLASSES = [
    ("STANDARD", 70),
    ("INTELLIGENT_TIERING", 12),
    ("STANDARD_IA", 10),
    ("GLACIER_IR", 4),
    ("GLACIER", 3),
    ("DEEP_ARCHIVE", 1),
]


def local_parameters(bucket: Any) -> dict[str, str]:
    """Template parameters without a default, for a local deployment that inventories ``bucket``.

    SourceBucketArns must name the buckets the inventory may list (template.yaml has no default, so no
    deployment grants every bucket); the emulator does not enforce IAM, but the policies are built from it.
    """
    name = bucket if isinstance(bucket, str) and BUCKET_NAME.match(bucket) else "replace-me-source-bucket"
    return {"SourceBucketArns": f"arn:aws:s3:::{name}"}


def _project_root() -> Path:
    """Where template.yaml, statemachines/, functions/ and events/ are: the wheel's copy, or a checkout."""
    for root in (PACKAGED, CHECKOUT):
        if (root / "template.yaml").is_file() and (root / "statemachines").is_dir():
            return root
    raise ConfigError(
        f"template.yaml is neither in the package ({PACKAGED}) nor in a checkout ({CHECKOUT}): "
        "reinstall hpcstage from a wheel or run from a checkout"
    )


def demo_objects(n: int, seed: int = 2026) -> dict[str, tuple[int, str]]:
    """A research-data layout: projects / instruments / runs / lanes, with reference data and results."""
    rng = random.Random(seed)
    weights = [w for _, w in CLASSES]
    names = [c for c, _ in CLASSES]
    out: dict[str, tuple[int, str]] = {}
    i = 0
    while len(out) < n:
        kind = rng.random()
        if kind < 0.7:
            proj = rng.choice(["genomics", "imaging", "climate", "proteomics"])
            key = (
                f"{proj}/instrument={rng.choice(['novaseq', 'krios', 'cesm', 'orbitrap'])}/"
                f"run={rng.randint(1, 400):04d}/lane{rng.randint(1, 8)}/sample_{rng.getrandbits(40):010x}.dat"
            )
        elif kind < 0.85:
            key = f"reference/{rng.choice(['GRCh38', 'GRCm39', 'ERA5'])}/chunk-{i:07d}.bin"
        else:
            key = f"results/user-{rng.randint(1, 60):03d}/job-{rng.randint(1, 5000)}/out-{i:07d}.h5"
        size = int(rng.lognormvariate(13, 2.5)) % (8 << 30)
        out[key] = (size, rng.choices(names, weights)[0])
        i += 1
    return out


def seed_bucket(
    bucket: str, objects: dict[str, tuple[int, str]], ages_days: dict[str, float] | None = None
) -> None:
    """Objects straight into this process's moto S3 backend (sizes are recorded, bodies are not stored).

    ``ages_days``: how long ago some keys were last modified (the rest: now). With ``LocalAws(s3_process=True)``
    S3 is in another process: use ``LocalAws.seed_objects`` there.
    """
    from .local.s3process import put_sized_objects

    ages = ages_days or {}
    put_sized_objects(bucket, [(key, size, cls, ages.get(key)) for key, (size, cls) in objects.items()])


class _RunWatch:
    """`hpcstage run`'s progress: the states as they are entered, and while the listers run, the counts
    their leases hold in the fleet's DynamoDB table (objects, bytes, LIST requests, ranges done: what each
    lease recorded at its last checkpoint), as a line every ``interval`` seconds."""

    def __init__(self, aws: Any, stream: Any, interval: float = 5.0) -> None:
        self.aws = aws
        self.stream = stream
        self.interval = interval
        self.run: tuple[str, str] | None = None  # (fleet table, run id) once validated
        self._store: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._last = ""

    def _say(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def on_event(self, ev: dict[str, Any]) -> None:
        t = ev.get("type", "")
        if t == "TaskStateEntered":
            self._say(f"  -> {ev.get('stateEnteredEventDetails', {}).get('name')}")
        elif t == "TaskStateExited":
            details = ev.get("stateExitedEventDetails", {})
            if details.get("name") == "ValidateInput" and self.run is None:
                cfg = json.loads(details.get("output") or "{}").get("config", {})
                if cfg:
                    self.run = (cfg["table"], cfg["run_id"])
                    self._thread = threading.Thread(target=self._poll, name="run-watch", daemon=True)
                    self._thread.start()
            elif details.get("name") == "Launch":
                self._say_counts(_reduced(details.get("output")))
        elif t == "ExecutionFailed":
            self._say(f"  !! {ev.get('executionFailedEventDetails', {})}")

    def counts(self) -> str:
        """Totals over the run's leases so far (one Query of each lease partition)."""
        if self.run is None:
            return "  listing: not started"
        from .inventory.fleet import FleetStore

        if self._store is None:
            # one client for the whole run: making one (a boto3 Session loading its models) costs ~0.1-0.5 s
            # of CPU, which every 5 s took a visible share of the core the listers and the state machine share
            table, run_id = self.run
            self._store = FleetStore(self.aws.client("dynamodb"), table, run_id)
        leases = self._store.leases()
        objects = sum(lease.objects for lease in leases)
        nbytes = sum(lease.bytes for lease in leases)
        requests = sum(lease.requests for lease in leases)
        done = sum(1 for lease in leases if lease.state == "done")
        return self._line(objects, nbytes, done, len(leases), requests)

    def _line(self, objects: int, nbytes: int, done: int, ranges: int, requests: int) -> str:
        el = int(time.monotonic() - self._start)
        return (
            f"  listing: {objects:,} objects, {human_bytes(nbytes)}, {done:,} of {ranges:,} ranges listed, "
            f"{requests:,} LIST, {el // 60}:{el % 60:02d}"
        )

    def final_counts(self, reduced: dict[str, Any]) -> str:
        """The counts line from the reduce's summary (``$.fleet.reduced``), which the lister that reduced the
        run returned: the run's totals, with no read of the fleet's table (64 Queries, ~0.3 s of the embedded
        endpoint, spent after the execution ended)."""
        ranges = int(reduced["ranges_listed"])
        return self._line(
            int(reduced["objects"]), int(reduced["bytes"]), ranges, ranges, int(reduced["list_requests"])
        )

    def _say_counts(self, reduced: dict[str, Any] | None = None) -> None:
        """The counts (from ``reduced`` when given), unless they are the ones last printed (the clock at the end
        aside)."""
        with self._lock:  # the poller and the event callback both come here
            line = self.final_counts(reduced) if reduced is not None else self.counts()
            same = line.rsplit(", ", 1)[0]
            if same == self._last:
                return
            self._last = same
        self._say(line)

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._say_counts()
            except Exception as err:  # noqa: BLE001 - progress must never end the run; say why it stopped
                self._say(f"  (progress unavailable: {type(err).__name__}: {err})")
                return

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _reduced(output: str | None) -> dict[str, Any] | None:
    """The reduce's summary in the Launch state's output (``$.fleet.reduced``) when the lister that completed
    the run reduced it, with the figures the counts line shows; else None."""
    try:
        reduced = json.loads(output or "{}").get("fleet", {}).get("reduced")
    except (ValueError, AttributeError):
        return None
    keys = ("objects", "bytes", "list_requests", "ranges_listed")
    if not isinstance(reduced, dict) or not all(isinstance(reduced.get(k), int) for k in keys):
        return None
    return reduced


def run_inventory_machine(aws: Any, deployed: Any, event: dict[str, Any], timeout_s: float = 1800) -> Any:
    watch = _RunWatch(aws, sys.stderr)
    try:
        return aws.run(
            deployed.arn("InventoryStateMachine"),
            event,
            timeout_s=timeout_s,
            # the end is seen within 0.05 s of it (LocalAws.run reads the status from moto's backend between two
            # DescribeExecution calls, 7 ms of CPU each in this process: 0.2 s apart, they took 3.5 % of a core)
            poll_s=0.5,
            # the state changes shown as they happen, within 2 s. (The history, read every 0.5 s, took ~7 % of
            # the one core the embedded endpoint and the listers share.)
            history_every_s=2.0,
            on_event=watch.on_event,
        )
    finally:
        watch.close()


def read_execution_input(path: str) -> Any:
    """The execution input file, checked against the state machine's schema before anything is deployed."""
    from .inventory.fleet import validate_input

    try:
        event = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON: {err}") from None
    try:
        validate_input(event, run_id="check", started="", results_bucket="check", table="check")
    except InputError as err:
        raise InputError(f"{path}: {err}") from None
    return event


def cmd_run(args: argparse.Namespace) -> int:
    from .local import LocalAws

    root = _project_root()
    event = read_execution_input(args.input)
    os.environ.update(QUIET_ENV)
    bucket = event.get("bucket") if isinstance(event, dict) else None
    with LocalAws() as aws:
        deployed = aws.deploy(root / "template.yaml", local_parameters(bucket), root)
        bucket = event["bucket"]
        # The embedded default starts empty: seed the named bucket with the demo's research layout.
        aws.client("s3").create_bucket(Bucket=bucket)
        aws.seed_objects(bucket, demo_objects(args.seed_objects))
        print(f"seeded s3://{bucket} with {args.seed_objects:,} demo objects", file=sys.stderr)
        res = run_inventory_machine(aws, deployed, event)
    print(json.dumps({"status": res.status, "output": res.output, "error": res.error, "cause": res.cause}))
    return EXIT_OK if res.succeeded else EXIT_FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    from .local import LocalAws

    root = _project_root()
    work = Path(args.workdir)
    os.environ.update(QUIET_ENV)
    print(
        f"hpcstage demo: {args.objects:,} objects in a local S3 bucket, the inventory state machine "
        "of template.yaml run offline",
        flush=True,
    )
    # S3 in a process of its own (s5cmd and the listers reach it at the same endpoint): it renders pages on
    # a core of its own instead of under this process's interpreter lock (bench/RESULTS.md, "make demo"),
    # and its readers render the seeded bucket's pages side by side, a process a core, as S3 serves
    # parallel listers (hpcstage.local.s3process, readers)
    readers = demo_s3_readers()
    with LocalAws(server=True, s3_process=True, s3_readers=readers) as aws:
        s3 = aws.client("s3")
        s3.create_bucket(Bucket=DEMO_BUCKET)
        t = time.monotonic()
        objects = demo_objects(args.objects)
        aws.seed_objects(DEMO_BUCKET, objects)
        print(
            f"1. seeded s3://{DEMO_BUCKET} at {aws.s3_endpoint_url} in {time.monotonic() - t:.1f} s",
            flush=True,
        )
        deployed = aws.deploy(root / "template.yaml", local_parameters(DEMO_BUCKET), root)
        print(
            "2. deployed template.yaml locally: "
            + ", ".join(sorted(r for r, res in deployed.resources.items() if res.created)),
            flush=True,
        )
        print("3. running the inventory state machine (events/inventory-bucket.json):", flush=True)
        event = json.loads((root / "events" / "inventory-bucket.json").read_text())
        event.update({**demo_fleet(readers), "stats_depth": 2})  # two levels to drill into
        t = time.monotonic()
        res = run_inventory_machine(aws, deployed, event)
        if not res.succeeded:
            raise HpcstageError(f"inventory failed: {res.error}: {res.cause}")
        out = res.output
        inventory_s = time.monotonic() - t
        print(f"   done in {inventory_s:.1f} s", flush=True)
        results_bucket = deployed.name("ResultsBucket")
        root_key = out["summary"].split(f"s3://{results_bucket}/", 1)[1].rsplit("/", 1)[0]
        local_out = work / "inventory"
        if local_out.exists():
            shutil.rmtree(local_out)
        _download(s3, results_bucket, root_key, local_out)
        print("\n4. the report (report.txt):\n", flush=True)
        print((local_out / "report.txt").read_text())
        print("5. DuckDB over the Parquet output (S3 Inventory schema):", flush=True)
        import duckdb

        parts = f"{local_out}/data/*.parquet"
        q = f"select storage_class, count(*) as objects, sum(size) as bytes from read_parquet('{parts}') group by 1 order by 3 desc"  # noqa: S608 - our own path
        print(f"   {q}")
        print(duckdb.sql(q))
        print("6. an independent count with s5cmd against the same endpoint:", flush=True)
        t = time.monotonic()
        independent = _s5cmd_du(aws.s3_endpoint_url, DEMO_BUCKET)
        s5cmd_s = time.monotonic() - t
        expected = (len(objects), sum(s for s, _ in objects.values()))
        ours = (out["objects"], out["bytes"])
        print(
            f"   hpcstage: {ours[0]:,} objects, {ours[1]:,} bytes in {inventory_s:.1f} s "
            "(the whole state machine: validate, listing, Parquet, reduce)"
        )
        print(
            f"   s5cmd du: {independent[0]:,} objects, {independent[1]:,} bytes in {s5cmd_s:.1f} s (counting only)"
            if independent
            else "   s5cmd not available; compared with the seeded totals instead"
        )
        print(f"   seeded:   {expected[0]:,} objects, {expected[1]:,} bytes")
        if ours != expected or (independent and independent != ours):
            raise HpcstageError("totals disagree")
        print("   totals agree.")
        print(
            "7. staging: select from the inventory -> stage into a local cache -> real Slurm job -> export -> "
            "verify -> release (statemachines/staging.asl.json):",
            flush=True,
        )
        from .localstaging import demo_staging, slurm_problem

        problem = slurm_problem()
        if problem is not None:
            print(
                f"   skipped: the local Slurm is not running ({problem}). As root, `make demo` starts it "
                "(scripts/slurm-local.sh start); the inventory part above is complete."
            )
        else:
            inventory_root = out["summary"].rsplit("/", 1)[0]
            demo_staging(aws, deployed, inventory_root, work)
    print(f"\nOutput kept in {local_out}/ (manifest.json, data/*.parquet, summary.json, report.txt)")
    print(f"The report to open in a browser: {(local_out / 'report.html').absolute()}")
    return 0


def _download(s3: Any, bucket: str, prefix: str, dest: Path) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for o in page.get("Contents", ()):
            rel = o["Key"][len(prefix) + 1 :]
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, o["Key"], str(target))


def _s5cmd_du(endpoint: str | None, bucket: str) -> tuple[int, int] | None:
    exe = shutil.which("s5cmd") or str(Path(sys.executable).parent / "s5cmd")
    if not endpoint or not Path(exe).exists():
        return None
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    r = subprocess.run(
        [exe, "--endpoint-url", endpoint, "--json", "du", f"s3://{bucket}/*"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if r.returncode != 0:
        raise HpcstageError(f"s5cmd du failed: {r.stderr.strip()[:300]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return int(d["count"]), int(d["size"])


def main(args: argparse.Namespace) -> int:
    if args.command == "run":
        return cmd_run(args)
    return cmd_demo(args)
