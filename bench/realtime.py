"""Real-time check on the local endpoint: hpcstage's local runner against aws s3 ls, s5cmd du, rclone size.

Every tool lists the same bucket (a keyspace model served by bench.localserver with a fixed latency per
page) in real time on this machine; the check is that all report the same object count and bytes,
and how long each took. Tools that are not installed are reported as skipped.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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
    cpu_s: float | None = None  # the tool's user + system CPU, its child processes included
    endpoint_cpu_s: float | None = None  # the endpoint's (this process's) CPU while the tool ran


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


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _run(
    cmd: list[str], env: dict[str, str], stdout_path: Path, timeout: float
) -> tuple[float, str, int, float, float]:
    """(seconds, stderr's tail, exit code, the tool's CPU-s, this process's CPU-s: the endpoint's).

    The tool's CPU is that of every process it waited for (RUSAGE_CHILDREN counts grandchildren once
    reaped), so a runner's worker processes are in it."""
    t = time.perf_counter()
    mine, theirs = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    with open(stdout_path, "wb") as out:
        proc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.PIPE, timeout=timeout, check=False)
    return (
        time.perf_counter() - t,
        proc.stderr.decode(errors="replace")[-2000:],
        proc.returncode,
        _cpu(resource.RUSAGE_CHILDREN) - theirs,
        _cpu(resource.RUSAGE_SELF) - mine,
    )


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
    workers: int | Sequence[int] = 32,
    procs: Sequence[int] = (),
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
                secs, err, rc, cpu, endpoint_cpu = _run(cmd, env, out, timeout)
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
                        cpu,
                        endpoint_cpu,
                    )
                )
                return
            n, b = parse(out)  # type: ignore[operator]
            runs.append(
                ToolRun(tool, " ".join(cmd), n, b, secs, server.pages - before, "", cpu, endpoint_cpu)
            )

        hpc = VENV_BIN / "hpcstage"
        if hpc.exists() and wanted("hpcstage"):

            def parse_hpc(p: Path) -> tuple[int, int]:
                s = json.loads(p.read_text().strip().splitlines()[-1])
                return int(s["objects"]), int(s["bytes"])

            for w, p in [
                (w, p)
                for w in (workers if isinstance(workers, Sequence) else [workers])
                for p in procs or (None,)
            ]:
                measure(
                    f"hpcstage --workers {w}" + ("" if p is None else f" --procs {p}"),
                    [
                        str(hpc),
                        "inventory",
                        "s3://bench-bucket",
                        "--endpoint-url",
                        server.url,
                        "--json",
                        "--no-progress",
                        "--workers",
                        str(w),
                        *(["--procs", str(p)] if p is not None else []),
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


def main(argv: list[str] | None = None) -> None:
    import argparse

    from hpcstage.inventory.procs import default_processes
    from hpcstage.inventory.runner import default_workers

    ap = argparse.ArgumentParser(description="real time of hpcstage and other listers on the local endpoint")
    ap.add_argument("objects", nargs="?", type=lambda v: int(float(v)), default=200_000)
    ap.add_argument("shape", nargs="?", default="hot-prefix", choices=sorted(K.SHAPES))
    ap.add_argument("tools", nargs="?", default="hpcstage,aws,s5cmd,rclone", help="comma-separated")
    ap.add_argument(
        "--workers",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[default_workers()],
        help="hpcstage's streams in all, one run each (with each --procs), comma-separated",
    )
    ap.add_argument(
        "--procs",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[],
        help=f"hpcstage's processes, one run each, comma-separated (default its own: {default_processes()})",
    )
    ap.add_argument("--latency", type=float, default=0.05, help="seconds a page")
    args = ap.parse_args(argv)
    # the check: python -m bench.realtime 1000000 hot-prefix hpcstage,s5cmd
    for r in run_realtime(
        args.objects,
        args.shape,
        args.latency,
        workers=args.workers,
        procs=args.procs,
        tools=tuple(args.tools.split(",")),
    ):
        cpu = (
            ""
            if r.cpu_s is None
            else f" cpu {r.cpu_s:.2f} s ({r.cpu_s / max(1, r.objects or 1) * 1e6:.2f} s/M)"
        )
        ep = "" if r.endpoint_cpu_s is None else f" endpoint cpu {r.endpoint_cpu_s:.2f} s"
        print(
            f"{r.tool}: {r.seconds:.2f} s, {r.objects} objects, {r.bytes} bytes, {r.pages} pages{cpu}{ep} {r.note}"
        )


if __name__ == "__main__":
    main()
