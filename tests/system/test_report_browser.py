"""report.html in a real browser (Debian's chromium, headless): it loads with no console message and shows
the run's totals; bucket keys cannot inject markup; nothing is fetched from the network.

Skipped, with the reason, where chromium is not installed (.ci/run installs it, so CI runs these).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# CI (.ci/run) installs chromium and sets this: there a missing browser fails the tests instead of skipping them
REQUIRED = os.environ.get("HPCSTAGE_REQUIRE_CHROMIUM") == "1"
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED,
    reason="chromium is not installed (apt-get install chromium; .ci/run does)",
)
HOSTILE = '<script>alert("x")</script>&amp;"\''


def load(page: Path) -> tuple[str, list[str]]:
    """The DOM after load, and every console message the page produced."""
    assert CHROMIUM is not None, "HPCSTAGE_REQUIRE_CHROMIUM=1 but chromium is not installed"
    r = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # tests run as root in CI
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return r.stdout, console


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Two runs of the real command line against moto (the second with --previous), hostile keys included."""
    from hpcstage.cli import main
    from hpcstage.localcli import seed_bucket as seed  # sizes recorded, bodies not stored
    from moto import mock_aws

    out = tmp_path_factory.mktemp("out")
    objects = {f"proj{i % 3}/run{i % 7}/f{i:05d}.dat": (i * 1000, "STANDARD") for i in range(1200)}
    objects[f"proj1/{HOSTILE}/big"] = (5 << 30, "GLACIER")
    with mock_aws():
        import boto3

        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="report-bucket")
        seed("report-bucket", objects)
        assert (
            main(["inventory", "s3://report-bucket", "--out", str(out), "--depth", "3", "--workers", "4"])
            == 0
        )
        (first,) = (out / "report-bucket").glob("2*/summary.json")
        seed("report-bucket", {f"proj2/new/g{i}": (10, "STANDARD") for i in range(50)})
        import time

        time.sleep(1.1)  # run folders are named to the second
        args = [
            "inventory",
            "s3://report-bucket",
            "--out",
            str(out),
            "--depth",
            "3",
            "--previous",
            str(first),
        ]
        assert main([*args, "--no-progress"]) == 0
    latest = max((out / "report-bucket").glob("2*/summary.json"))
    return latest.parent / "report.html", json.loads(latest.read_text())


def test_the_report_is_self_contained(report: tuple[Path, dict[str, Any]]) -> None:
    html = report[0].read_text()
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<script|<link""", html, re.I)


def test_bucket_keys_are_escaped(report: tuple[Path, dict[str, Any]]) -> None:
    html = report[0].read_text()
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;amp;&quot;&#x27;" in html


@needs_chromium
def test_the_console_check_sees_errors(tmp_path: Path) -> None:
    """The detector itself: a page that logs and throws is caught (else the next test proves nothing)."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><p>x</p><script>console.error("deliberate"); null.f();</script>')
    _, console = load(page)
    assert len(console) == 2 and '"deliberate"' in console[0] and "Uncaught TypeError" in console[1]


@needs_chromium
def test_the_report_loads_in_chromium_and_shows_the_totals(report: tuple[Path, dict[str, Any]]) -> None:
    page, summary = report
    dom, console = load(page)
    assert console == []
    assert summary["objects"] == 1251
    totals = re.search(r'<p id="totals">([^<]*)</p>', dom)
    assert totals is not None
    assert (
        totals.group(1).startswith(f"{summary['objects']:,} objects, 5.")
        and f"({summary['bytes']:,} bytes)" in dom
    )
    # the breakdowns and the run are there, as rendered by the browser
    for section in ("prefixes", "classes", "ages", "sizes", "largest", "diff", "run"):
        assert f'<section id="{section}">' in dom
    assert "+50</span> objects" in dom  # the change since the previous run
    assert dom.count("<polyline") == 4  # streams, objects, requests and bytes over time
    assert dom.count("<details") >= 3 + 1  # three projects, each opening onto its runs
