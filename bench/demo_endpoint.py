"""Listing the demo's bucket on the embedded endpoint: hpcstage's CLI runner against s5cmd du, in real time.

The demo (hpcstage demo) lists 100,000 objects through moto running in its own process; this seeds the same
bucket on the same kind of endpoint and times ``s5cmd du`` and ``hpcstage inventory --workers W`` for each W
given, one after another.

    python -m bench.demo_endpoint 4 16 64
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from hpcstage.local import LocalAws
from hpcstage.localcli import DEMO_BUCKET, QUIET_ENV, _s5cmd_du, demo_objects, seed_bucket


def main(argv: list[str]) -> int:
    os.environ.update(QUIET_ENV)
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    with LocalAws(server=True) as aws, tempfile.TemporaryDirectory() as tmp:
        aws.client("s3").create_bucket(Bucket=DEMO_BUCKET)
        seed_bucket(DEMO_BUCKET, demo_objects(100_000))
        t = time.monotonic()
        print(
            f"s5cmd du: {_s5cmd_du(aws.endpoint_url, DEMO_BUCKET)} in {time.monotonic() - t:.1f} s",
            flush=True,
        )
        for workers in argv or ["4"]:
            t = time.monotonic()
            cmd = [sys.executable, "-m", "hpcstage.cli", "inventory", f"s3://{DEMO_BUCKET}", "--json"]
            cmd += ["--endpoint-url", aws.endpoint_url, "--no-progress", "--workers", workers]
            cmd += ["--out", f"{tmp}/w{workers}"]
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            took = time.monotonic() - t
            if r.returncode != 0:
                print(f"hpcstage --workers {workers}: failed: {r.stderr.strip()[-300:]}")
                continue
            s = json.loads(r.stdout.strip().splitlines()[-1])
            print(
                f"hpcstage --workers {workers}: {s['objects']:,} objects in {took:.1f} s, "
                f"{s['list_requests']} LIST requests, {s['ranges_listed']} ranges",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
