"""An example report: two inventories of the demo's research layout, and a screenshot of the second's report.

    .venv/bin/python scripts/report_example.py [--objects N] [--out DIR] [--screenshot docs/report.png]

A local S3 endpoint (moto) is seeded with the layout `hpcstage demo` uses; the real `hpcstage inventory`
command lists it twice into one --out (some objects added and deleted between the runs, the second run
given --previous), and Debian's chromium, headless, takes the screenshot (`make report-screenshot`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=30_000)
    ap.add_argument("--out", default="hpcstage-example")
    ap.add_argument("--screenshot", help="PNG to write with chromium (e.g. docs/report.png)")
    args = ap.parse_args()

    import logging
    import random

    from hpcstage.localcli import DEMO_BUCKET, demo_objects, seed_bucket
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "example", "AWS_SECRET_ACCESS_KEY": "example"}
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    hpcstage = str(Path(sys.executable).parent / "hpcstage")
    try:
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="example",
            aws_secret_access_key="example",  # noqa: S106 - the local endpoint's dummy key
        )
        s3.create_bucket(Bucket=DEMO_BUCKET)
        objects = demo_objects(args.objects)
        rng = random.Random(7)  # data written over the last few years, most of it recently
        seed_bucket(DEMO_BUCKET, objects, {k: rng.expovariate(1 / 200) for k in objects})
        base = [hpcstage, "inventory", f"s3://{DEMO_BUCKET}", "--endpoint-url", endpoint, "--out", args.out]
        base += ["--depth", "2", "--workers", "8", "--json"]
        first = json.loads(subprocess.run(base, env=env, check=True, capture_output=True, text=True).stdout)
        # a month of work: a new run of results, and some scratch deleted
        seed_bucket(
            DEMO_BUCKET,
            {f"results/user-007/job-9001/out-{i:05d}.h5": (3 << 26, "STANDARD") for i in range(400)},
        )
        gone = [k for k in objects if k.startswith("results/user-01")][:300]
        for i in range(0, len(gone), 1000):
            s3.delete_objects(
                Bucket=DEMO_BUCKET, Delete={"Objects": [{"Key": k} for k in gone[i : i + 1000]]}
            )
        time.sleep(1.1)  # run folders are named to the second
        previous = str(Path(first["output"]) / "summary.json")
        second = json.loads(
            subprocess.run(
                [*base, "--previous", previous], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
    finally:
        server.stop()
    report = Path(second["output"]) / "report.html"
    print(f"report: {report}")
    if args.screenshot:
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
            return 1
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1280,2300",
                f"--screenshot={Path(args.screenshot).absolute()}",
                report.as_uri(),
            ],
            check=True,
            capture_output=True,
        )
        print(f"screenshot: {args.screenshot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
