"""The README's commands, run as a user would: the real `hpcstage` executable in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hpcstage.inventory.output import target_name
from hpcstage.inventory.runner import default_workers, seeds_from_hints
from hpcstage.s3util import Timeouts

ROOT = Path(__file__).resolve().parents[2]
HPCSTAGE = str(Path(sys.executable).parent / "hpcstage")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
CREDENTIALS_KW = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """The installed executable, as a user runs it: credentials from the environment, no terminal."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
    # no instance metadata lookups (they would only add seconds when credentials are missing)
    base.update(AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    base.update(CREDENTIALS if env is None else env)
    return subprocess.run(
        [HPCSTAGE, *args], capture_output=True, text=True, timeout=timeout, env=base, cwd=cwd, check=False
    )


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    """The single line a failing command prints: no traceback, nothing on stdout."""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcstage: error: "), r.stderr
    assert r.stdout == ""
    return lines[0]


def duckdb_totals(run: Path) -> tuple[int, int]:
    """The README's query over one run's folder."""
    import duckdb

    ((n, total),) = duckdb.sql(
        f"select count(*), coalesce(sum(size), 0) from read_parquet('{run}/data/*.parquet')"
    ).fetchall()
    return int(n), int(total)


def seeded(endpoint: str, name: str, objects: dict[str, tuple[int, str]]) -> None:
    import boto3
    from helpers import seed

    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_bucket(Bucket=name)
    seed(name, objects)


def test_inventory_json_and_out_dir(endpoint: str, tmp_path: Path) -> None:
    objects = {
        f"some/prefix/f{i:05d} +%&.dat": (i, "GLACIER" if i % 10 == 0 else "STANDARD") for i in range(2500)
    }
    objects.update({f"other/g{i}": (1, "STANDARD") for i in range(100)})
    seeded(endpoint, "cli-bucket", objects)
    out = tmp_path / "inv"
    r = cli(
        "inventory",
        "s3://cli-bucket/some/prefix",
        "--endpoint-url",
        endpoint,
        "--workers",
        "4",
        "--out",
        str(out),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    summary: dict[str, Any] = json.loads(r.stdout)
    assert summary["objects"] == 2500 and summary["bytes"] == sum(range(2500))
    assert summary["list_requests"] >= 3
    assert summary["by_storage_class"]["GLACIER"]["objects"] == 250
    # the run has a folder of its own beneath --out: OUT/BUCKET/TIME
    run = Path(summary["output"])
    assert run.parent == out.resolve() / "cli-bucket" and run.is_absolute()
    # the README's DuckDB query over the output
    import duckdb

    rows = duckdb.sql(
        f"select storage_class, count(*), sum(size) from read_parquet('{run}/data/*.parquet') "
        "group by 1 order by 1"
    ).fetchall()
    assert rows == [
        ("GLACIER", 250, sum(range(0, 2500, 10))),
        ("STANDARD", 2250, sum(range(2500)) - sum(range(0, 2500, 10))),
    ]
    assert (run / "manifest.json").exists() and (run / "report.txt").read_text().startswith(
        "hpcstage inventory"
    )
    assert (run / "report.html").read_text().startswith("<!DOCTYPE html>")
    # one Hive table per target, beside the runs; its partition lists this run's parts by absolute path
    hive = out / "cli-bucket" / "hive" / target_name("some/prefix")
    (partition,) = hive.glob("dt=*")
    manifest = json.loads((run / "manifest.json").read_text())
    assert (partition / "symlink.txt").read_text().splitlines() == [
        str(run / f["key"]) for f in manifest["files"]
    ]
    assert f"LOCATION '{hive.resolve()}/'" in (hive / "athena.sql").read_text()


def test_two_runs_into_one_out_never_mix(endpoint: str, tmp_path: Path) -> None:
    """The issue's 3,322-for-1,322 report: a second run into the same --out reads only its own parts."""
    seeded(endpoint, "cli-twice", {f"a/f{i:05d}": (3, "STANDARD") for i in range(2000)})
    out = tmp_path / "inv"
    first = cli("inventory", "s3://cli-twice", "--endpoint-url", endpoint, "--out", str(out), "--json")
    assert first.returncode == 0, first.stderr
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        **{"aws_access_key_id": "testing", "aws_secret_access_key": "testing"},
    )
    s3.delete_objects(
        Bucket="cli-twice", Delete={"Objects": [{"Key": f"a/f{i:05d}"} for i in range(1000)], "Quiet": True}
    )
    import time

    time.sleep(1.1)  # run folders are named to the second: the next run starts in a later one
    second = cli("inventory", "s3://cli-twice", "--endpoint-url", endpoint, "--out", str(out), "--json")
    assert second.returncode == 0, second.stderr
    runs = [json.loads(r.stdout) for r in (first, second)]
    assert [(s["objects"], s["bytes"]) for s in runs] == [(2000, 6000), (1000, 3000)]
    assert runs[0]["output"] != runs[1]["output"]
    for s in runs:
        assert duckdb_totals(Path(s["output"])) == (s["objects"], s["bytes"])
    # the trend across runs, from the runs' summaries (README)
    import duckdb

    trend = duckdb.sql(
        f"select objects, bytes from read_json_auto('{out}/cli-twice/*/summary.json') order by started"
    ).fetchall()
    assert trend == [(2000, 6000), (1000, 3000)]
    hive = out / "cli-twice" / "hive" / "all"
    partitions = sorted(hive.glob("dt=*/symlink.txt"))
    assert len(partitions) == 2
    for part, s in zip(partitions, runs, strict=True):
        assert all(line.startswith(s["output"] + "/data/") for line in part.read_text().splitlines())


def test_out_on_s3_keeps_runs_apart_with_absolute_symlinks(endpoint: str) -> None:
    seeded(endpoint, "cli-to-s3", {f"k/f{i:04d}": (4, "STANDARD") for i in range(1200)})
    seeded(endpoint, "cli-out-bucket", {})
    r = cli(
        "inventory",
        "s3://cli-to-s3/k/",
        "--endpoint-url",
        endpoint,
        "--out",
        "s3://cli-out-bucket/lake",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    run = summary["output"]
    assert run.startswith("s3://cli-out-bucket/lake/cli-to-s3/") and summary["objects"] == 1200
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **CREDENTIALS_KW)
    run_key = run[len("s3://cli-out-bucket/") :].rstrip("/")
    manifest = json.loads(
        s3.get_object(Bucket="cli-out-bucket", Key=f"{run_key}/manifest.json")["Body"].read()
    )
    hive = f"lake/cli-to-s3/hive/{target_name('k/')}"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="cli-out-bucket", Prefix=hive + "/")["Contents"]]
    (symlink,) = [k for k in keys if k.endswith("symlink.txt")]
    lines = s3.get_object(Bucket="cli-out-bucket", Key=symlink)["Body"].read().decode().splitlines()
    assert lines == [f"s3://cli-out-bucket/{f['key']}" for f in manifest["files"]]
    ddl = s3.get_object(Bucket="cli-out-bucket", Key=f"{hive}/athena.sql")["Body"].read().decode()
    assert f"LOCATION 's3://cli-out-bucket/{hive}/';" in ddl
    html = s3.get_object(Bucket="cli-out-bucket", Key=f"{run_key}/report.html")["Body"].read().decode()
    assert '<p id="totals">1,200 objects' in html


def test_hints_and_previous(endpoint: str, tmp_path: Path) -> None:
    seeded(endpoint, "cli-audit", {f"d{i % 5}/f{i:05d}": (2, "STANDARD") for i in range(3000)})
    first = cli(
        "inventory", "s3://cli-audit", "--endpoint-url", endpoint, "--out", str(tmp_path / "a"), "--json"
    )
    assert first.returncode == 0, first.stderr
    a = Path(json.loads(first.stdout)["output"])
    second = cli(
        "inventory",
        "s3://cli-audit",
        "--endpoint-url",
        endpoint,
        "--out",
        str(tmp_path / "b"),
        "--json",
        "--hints",
        str(a / "ranges.json"),
        "--previous",
        str(a / "summary.json"),
    )
    assert second.returncode == 0, second.stderr
    s = json.loads(second.stdout)
    hints = json.loads((a / "ranges.json").read_text())
    # the previous run's ranges seed the streams, merged to about one seed per stream
    seeds = seeds_from_hints(hints, default_workers())
    assert (s["objects"], s["ranges_planned"], s["diff"]["objects"]) == (3000, len(seeds), 0)
    assert 1 < len(seeds) <= default_workers()
    assert s["diff"]["exact"]["added"]["objects"] == 0


def test_progress_lines_when_stderr_is_not_a_terminal(endpoint: str, tmp_path: Path) -> None:
    seeded(endpoint, "cli-progress", {f"p/f{i:05d}": (1, "STANDARD") for i in range(1500)})
    r = cli("inventory", "s3://cli-progress", "--endpoint-url", endpoint, "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    # a plain line when the listing starts, and the totals when it is done (no carriage returns)
    assert lines[0].startswith("listing: ") and "\r" not in r.stderr
    assert lines[-1].startswith("done: 1,500 objects, 1.46 KiB, ")
    assert f"ranges {json.loads(r.stdout)['ranges_listed']}/" in lines[-1]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["s3://no-such-bucket-cli"], 254, "no such bucket: no-such-bucket-cli"),
        (["http://x/y"], 252, "not an S3 URL"),
        (["s3://Bad_Name"], 252, "invalid bucket name"),
        (
            ["s3://cli-empty/genomcs/"],
            1,
            "no object under s3://cli-empty/genomcs/; what exists beside it: "
            "s3://cli-empty/genomics/, s3://cli-empty/imaging/",
        ),
        (["s3://cli-empty/x/y/"], 1, "nothing exists under s3://cli-empty/x/ either"),
        (["s3://cli-empty", "--out", "/etc/hostname"], 252, "--out: /etc/hostname is a file"),
        (["s3://cli-empty", "--out", "/etc/hostname/sub"], 252, "--out: cannot write to /etc/hostname/sub"),
        (
            ["s3://cli-empty", "--out", "s3://no-such-out-bucket/x"],
            254,
            "--out s3://no-such-out-bucket/x: no such bucket: no-such-out-bucket",
        ),
    ],
)
def test_bad_input_is_one_line_with_its_exit_code(
    endpoint: str, args: list[str], code: int, message: str
) -> None:
    seeded(endpoint, "cli-empty", {"genomics/a": (1, "STANDARD"), "imaging/b": (1, "STANDARD")})
    r = cli("inventory", *args, "--endpoint-url", endpoint)
    assert message in one_error_line(r) and r.returncode == code


def test_usage_error_exits_2() -> None:
    r = cli("inventory", "s3://b", "--no-such-option")
    assert r.returncode == 2 and "unrecognized arguments: --no-such-option" in r.stderr


@pytest.mark.parametrize(
    ("option", "content", "message"),
    [
        ("--hints", "not json", "--hints: {path} is not valid JSON"),
        ("--hints", "{}", "--hints: {path} is not a ranges.json"),
        ("--hints", '[{"start_after": null, "end": "m", "objects": 1}]', "do not reach the end"),
        ("--hints", '[{"objects": "many"}]', "row 0 is not a ranges.json row"),
        ("--previous", "{}", "--previous: {path} is not a summary.json of hpcstage"),
        ("--previous", "[1, 2]", "--previous: {path} is not a summary.json of hpcstage"),
        (
            "--previous",
            '{"bucket": "other", "prefix": "", "objects": 1, "bytes": 1, "by_prefix": {}}',
            "is an inventory of s3://other/, not of s3://cli-bad-files/",
        ),
    ],
)
def test_malformed_hints_and_previous_are_refused_before_listing(
    endpoint: str, tmp_path: Path, option: str, content: str, message: str
) -> None:
    seeded(endpoint, "cli-bad-files", {"k": (1, "STANDARD")})
    path = tmp_path / "in.json"
    path.write_text(content)
    out = tmp_path / "out"
    r = cli(
        "inventory", "s3://cli-bad-files", "--endpoint-url", endpoint, option, str(path), "--out", str(out)
    )
    assert message.format(path=path) in one_error_line(r) and r.returncode == 252
    assert not out.exists()  # refused before anything was written


def test_configuration_errors_exit_253(endpoint: str, tmp_path: Path) -> None:
    no_files = {
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }
    r = cli("inventory", "s3://any-bucket", "--endpoint-url", endpoint, env=no_files)
    assert r.returncode == 253
    assert one_error_line(r) == (
        "hpcstage: error: unable to locate AWS credentials: set AWS_PROFILE or "
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run `aws configure`"
    )
    r = cli(
        "inventory", "s3://any-bucket", "--endpoint-url", endpoint, env={**no_files, "AWS_PROFILE": "nope"}
    )
    assert r.returncode == 253
    assert "The config profile (nope) could not be found" in one_error_line(r)


class FakeS3(ThreadingHTTPServer):
    """An endpoint that answers every request with one fixed status and body."""

    def __init__(self, status: int, body: bytes) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(outer.status)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.status, self.body = status, body
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (
            403,
            b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
            "access denied listing bucket locked-bucket (needs s3:ListBucket; a requester-pays bucket also needs "
            "--request-payer)",
        ),
        (500, b"boom", "S3 answered 500 (HTTP 500) to ListObjectsV2"),
    ],
)
def test_service_errors_exit_254(status: int, body: bytes, message: str) -> None:
    server = FakeS3(status, body)
    try:
        r = cli("inventory", "s3://locked-bucket", "--endpoint-url", server.url)
    finally:
        server.shutdown()
    assert message in one_error_line(r) and r.returncode == 254


def test_an_endpoint_that_never_answers_fails_within_the_timeouts() -> None:
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        r = cli(
            "inventory",
            "s3://slow-bucket",
            "--endpoint-url",
            f"http://127.0.0.1:{port}",
            "--read-timeout",
            "1",
        )
    assert r.returncode == 255
    assert f'Read timeout on endpoint URL: "http://127.0.0.1:{port}/slow-bucket' in one_error_line(r)
    assert "raise --connect-timeout/--read-timeout" in r.stderr


def test_default_timeouts_bound_an_unresponsive_endpoint_well_under_a_minute() -> None:
    """The checks before a listing make 2 attempts; botocore's standard backoff adds at most 1 s + 2 s."""
    probe = Timeouts().probe()
    assert probe.attempts == 2
    assert probe.attempts * (probe.connect + probe.read) + 3 <= 45


def test_version() -> None:
    from importlib.metadata import version

    r = cli("--version")
    assert (r.returncode, r.stdout) == (0, f"hpcstage {version('hpcstage')}\n")


def test_run_inventory_state_machine_locally(tmp_path: Path) -> None:
    # from another folder, with no Powertools settings in the environment: stdout is one JSON document
    event = tmp_path / "event.json"
    event.write_text((ROOT / "events" / "inventory-bucket.json").read_text())
    r = cli("run", "inventory", "--input", str(event), "--seed-objects", "3000", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["status"] == "SUCCEEDED" and result["output"]["objects"] == 3000
    # progress from the running state machine: the counts the fleet's leases hold, as the listers checkpoint
    counts = [line for line in r.stderr.splitlines() if line.startswith("  listing: ")]
    assert counts and counts[-1].startswith("  listing: 3,000 objects, ")


def test_run_refuses_a_bad_input_before_deploying(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"bucket": "ok-bucket", "streams": 0}))
    r = cli("run", "inventory", "--input", str(event))
    assert r.returncode == 252
    assert one_error_line(r).startswith(f"hpcstage: error: {event}: 'streams' must be")
