"""The README's commands, run as a user would: the real `hpcstage` executable in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hpcstage.inventory.runner import default_workers, seeds_from_hints

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


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return subprocess.run(
        [HPCSTAGE, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False
    )


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
    # the README's DuckDB query over the output
    import duckdb

    rows = duckdb.sql(
        f"select storage_class, count(*), sum(size) from read_parquet('{out}/data/*.parquet') "
        "group by 1 order by 1"
    ).fetchall()
    assert rows == [
        ("GLACIER", 250, sum(range(0, 2500, 10))),
        ("STANDARD", 2250, sum(range(2500)) - sum(range(0, 2500, 10))),
    ]
    assert (out / "manifest.json").exists() and (out / "report.txt").read_text().startswith(
        "hpcstage inventory"
    )


def test_hints_and_previous(endpoint: str, tmp_path: Path) -> None:
    seeded(endpoint, "cli-audit", {f"d{i % 5}/f{i:05d}": (2, "STANDARD") for i in range(3000)})
    first = cli(
        "inventory", "s3://cli-audit", "--endpoint-url", endpoint, "--out", str(tmp_path / "a"), "--json"
    )
    assert first.returncode == 0, first.stderr
    second = cli(
        "inventory",
        "s3://cli-audit",
        "--endpoint-url",
        endpoint,
        "--out",
        str(tmp_path / "b"),
        "--json",
        "--hints",
        str(tmp_path / "a" / "ranges.json"),
        "--previous",
        str(tmp_path / "a" / "summary.json"),
    )
    assert second.returncode == 0, second.stderr
    s = json.loads(second.stdout)
    hints = json.loads((tmp_path / "a" / "ranges.json").read_text())
    # the previous run's ranges seed the streams, merged to about one seed per stream
    seeds = seeds_from_hints(hints, default_workers())
    assert (s["objects"], s["ranges_planned"], s["diff"]["objects"]) == (3000, len(seeds), 0)
    assert 1 < len(seeds) <= default_workers()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["s3://no-such-bucket-cli"], "no such bucket: no-such-bucket-cli"),
        (["http://x/y"], "not an S3 URL"),
        (["s3://Bad_Name"], "invalid bucket name"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(endpoint: str, args: list[str], message: str) -> None:
    r = cli("inventory", *args, "--endpoint-url", endpoint)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcstage: error: ") and message in lines[0]


def test_run_inventory_state_machine_locally() -> None:
    r = cli("run", "inventory", "--input", "events/inventory-bucket.json", "--seed-objects", "3000")
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["status"] == "SUCCEEDED" and result["output"]["objects"] == 3000
