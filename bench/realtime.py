"""Real-time check on the local endpoint: hpcstage's local runner against aws s3 ls, s5cmd du, rclone size.

Every tool lists the same bucket (a keyspace model served by bench.localserver with a fixed latency per
page) in real time on this machine; the check is that all report the same object count and bytes,
and how long each took. Tools that are not installed are reported as skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import keyspace as K
from bench.localserver import serve

VENV_BIN = Path(sys.executable).parent


@dataclass
class ToolRun:
    tool: str
    command: str
    objects: int | None
    bytes: int | None
    seconds: float
    pages: int
    note: str = ""


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "RCLONE_CONFIG": "/dev/null",
            "RCLONE_CONFIG_BENCH_TYPE": "s3",
            "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
            "RCLONE_CONFIG_BENCH_ENDPOINT": url,
            "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": "bench",
            "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": "bench",
            "RCLONE_CONFIG_BENCH_REGION": "us-east-1",
            "RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE": "true",
            "RCLONE_CONFIG_BENCH_LIST_VERSION": "2",
        }
    )
    return env


def _run(cmd: list[str], env: dict[str, str], stdout_path: Path, timeout: float) -> tuple[float, str, int]:
    t = time.perf_counter()
    with open(stdout_path, "wb") as out:
        proc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.PIPE, timeout=timeout, check=False)
    return time.perf_counter() - t, proc.stderr.decode(errors="replace")[-2000:], proc.returncode


def _tail(path: Path, n: int = 4096) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - n))
        return f.read().decode(errors="replace")


def run_realtime(
    objects: int = 2_000_000,
    shape: str = "unicode",
    latency_s: float = 0.05,
    workdir: Path | None = None,
    timeout: float = 1800.0,
    workers: int = 32,
    precompute: bool = True,
    tools: tuple[str, ...] = ("hpcstage", "aws", "s5cmd", "rclone"),
) -> list[ToolRun]:
    def wanted(tool: str) -> bool:
        return tool in tools

    ks = K.make(shape, objects)
    workdir = Path(workdir or tempfile.mkdtemp(prefix="bench-rt-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runs: list[ToolRun] = []
    # pages rendered once up front (bench.localserver.KeyspaceBucket.precompute): what is timed is the
    # tools and the 50 ms a page, not the endpoint's XML rendering on the same two cores
    with serve({"bench-bucket": ks}, latency_s, precompute=precompute) as server:
        env = _env(server.url)

        def measure(tool: str, cmd: list[str], parse: object) -> None:
            before = server.pages
            out = workdir / f"{tool}.out"
            try:
                secs, err, rc = _run(cmd, env, out, timeout)
            except subprocess.TimeoutExpired:
                runs.append(
                    ToolRun(tool, " ".join(cmd), None, None, timeout, server.pages - before, "timed out")
                )
                return
            if rc != 0:
                runs.append(
                    ToolRun(
                        tool,
                        " ".join(cmd),
                        None,
                        None,
                        secs,
                        server.pages - before,
                        f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}",
                    )
                )
                return
            n, b = parse(out)  # type: ignore[operator]
            runs.append(ToolRun(tool, " ".join(cmd), n, b, secs, server.pages - before))

        hpc = VENV_BIN / "hpcstage"
        if hpc.exists() and wanted("hpcstage"):

            def parse_hpc(p: Path) -> tuple[int, int]:
                s = json.loads(p.read_text().strip().splitlines()[-1])
                return int(s["objects"]), int(s["bytes"])

            measure(
                "hpcstage",
                [
                    str(hpc),
                    "inventory",
                    "s3://bench-bucket",
                    "--endpoint-url",
                    server.url,
                    "--json",
                    "--no-progress",
                    "--workers",
                    str(workers),
                    "--out",
                    str(workdir / "hpcstage-out"),
                ],
                parse_hpc,
            )
        aws = shutil.which("aws")
        if aws and wanted("aws"):

            def parse_aws(p: Path) -> tuple[int | None, int | None]:
                t = _tail(p)
                n = re.search(r"Total Objects:\s*(\d+)", t)
                b = re.search(r"Total Size:\s*(\d+)", t)
                return (int(n.group(1)) if n else None), (int(b.group(1)) if b else None)

            measure(
                "aws s3 ls",
                [
                    aws,
                    "s3",
                    "ls",
                    "s3://bench-bucket",
                    "--recursive",
                    "--summarize",
                    "--endpoint-url",
                    server.url,
                ],
                parse_aws,
            )
        s5 = VENV_BIN / "s5cmd"
        if s5.exists() and wanted("s5cmd"):

            def parse_s5(p: Path) -> tuple[int | None, int | None]:
                m = re.search(r"(\d+) bytes in (\d+) objects", _tail(p))
                return (int(m.group(2)), int(m.group(1))) if m else (None, None)

            measure(
                "s5cmd du", [str(s5), "--endpoint-url", server.url, "du", "s3://bench-bucket/*"], parse_s5
            )
        rclone = shutil.which("rclone")
        if rclone and wanted("rclone"):

            def parse_rclone(p: Path) -> tuple[int, int]:
                d = json.loads(p.read_text())
                return int(d["count"]), int(d["bytes"])

            measure(
                "rclone size", [rclone, "size", "bench:bench-bucket", "--fast-list", "--json"], parse_rclone
            )
    truth = ToolRun(
        "model (truth)", f"bench.keyspace.make({shape!r}, {objects})", ks.n, ks.total_bytes, 0.0, 0
    )
    return [truth, *runs]


if __name__ == "__main__":
    from hpcstage.inventory.runner import default_workers

    # python -m bench.realtime [objects] [shape]: the check is 1,000,000 objects of a skewed shape
    # python -m bench.realtime 1000000 hot-prefix hpcstage,s5cmd: only the tools named (default: all four)
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 200_000
    shape = sys.argv[2] if len(sys.argv) > 2 else "hot-prefix"
    tools = tuple(sys.argv[3].split(",")) if len(sys.argv) > 3 else ("hpcstage", "aws", "s5cmd", "rclone")
    for r in run_realtime(n, shape, 0.05, workers=default_workers(), tools=tools):
        print(r)
