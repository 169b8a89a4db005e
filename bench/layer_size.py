"""Build the SAM artifacts without a container and measure them against Lambda's 250 MB limit.

    .venv/bin/python -m bench.layer_size            # sam build (cached), measure, smoke-test the layer
    .venv/bin/python -m bench.layer_size --clean    # from scratch (no SAM build cache)
    .venv/bin/python -m bench.layer_size --no-build # measure an existing build

Runs ``.venv-sam/bin/sam build`` (BuildMethod python3.12 for CoreLayer, so a python3.12 must be on
PATH: found on PATH or under ~/.pyenv/versions/3.12.*) into bench/out/layer/build, then prints for the
layer and every function: the unzipped size (``du -sb``), the sum of the file sizes, and the size of
the zip SAM would upload (zipfile, ZIP_DEFLATED as ``sam package`` writes it); the budget of each
function (its artifact plus CoreLayer, against 262,144,000 bytes, the limit Lambda enforces); the
biggest contributors; and what stripping could still save. Then runs bench/layer_smoke.py with
python3.12 -B (writing no bytecode into the build) against the built layer alone. Exits 1 if a function is over budget or the smoke test
fails. Writes the figures to bench/out/layer/sizes.json. Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAM = ROOT / ".venv-sam" / "bin" / "sam"
OUT = ROOT / "bench" / "out" / "layer"
# Lambda: "Unzipped size must be smaller than 262144000 bytes" (function + all its layers).
LIMIT = 262_144_000
MB = 1_000_000


def find_python312() -> str:
    env = os.environ.get("PYTHON312")
    if env:
        return env
    candidates = [shutil.which("python3.12")] + sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.12.*/bin/python3.12")), reverse=True
    )
    for cand in candidates:
        if not cand:
            continue
        try:  # a pyenv shim exists even when 3.12 is not selected: ask for the real interpreter
            out = subprocess.run(
                [cand, "-c", "import sys; print(sys.executable)"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        return out.stdout.strip()
    raise SystemExit("no python3.12 found (set PYTHON312=/path/to/python3.12)")


def sam_build(build_dir: Path, python312: str, clean: bool) -> float:
    if not SAM.exists():
        raise SystemExit(
            f"{SAM} missing: python3 -m venv .venv-sam && .venv-sam/bin/pip install aws-sam-cli==1.170.0"
        )
    if clean and build_dir.exists():
        shutil.rmtree(build_dir)
    env = {
        **os.environ,
        "PATH": f"{Path(python312).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SAM_CLI_TELEMETRY": "0",
    }
    cmd = [
        str(SAM),
        "build",
        "--template",
        str(ROOT / "template.yaml"),
        "--build-dir",
        str(build_dir),
        "--cache-dir",
        str(build_dir.parent / "cache"),
        "--no-cached" if clean else "--cached",
        "--parallel",
    ]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return time.monotonic() - t0


def du_sb(path: Path) -> int:
    return int(
        subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]
    )


def files_of(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


def zipped_size(path: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        zpath = Path(tmp) / "artifact.zip"
        with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for f in files_of(path):
                zf.write(f, f.relative_to(path).as_posix())
        return zpath.stat().st_size


def measure(path: Path) -> dict[str, int]:
    files = files_of(path)
    return {
        "files": len(files),
        "du_sb": du_sb(path),
        "file_bytes": sum(f.stat().st_size for f in files),
        "zipped": zipped_size(path),
    }


def size_of(paths: list[Path]) -> int:
    return sum(f.stat().st_size for p in paths for f in ([p] if p.is_file() else files_of(p)))


def strippable(site: Path) -> dict[str, int]:
    """What the layer carries that hpcstage never loads (measured, not removed).

    pyarrow's Arrow Flight (RPC) is unused and nothing else links it; libarrow_substrait, by
    contrast, is a NEEDED library of pyarrow.lib itself and must stay.
    """
    pa = site / "pyarrow"
    return {
        "pyarrow Flight (libarrow_flight, _flight, libarrow_python_flight)": size_of(
            [
                *pa.glob("libarrow_flight.so*"),
                *pa.glob("_flight.*.so"),
                *pa.glob("libarrow_python_flight.so*"),
            ]
        ),
        "pyarrow include/ and src/ (C++ headers and sources)": size_of(
            [p for p in (pa / "include", pa / "src") if p.exists()]
        ),
        "tests/ directories": size_of(
            [p for p in site.rglob("tests") if p.is_dir() and "tests" not in p.relative_to(site).parts[:-1]]
        ),
        "Cython sources (*.pyx, *.pxd, *.pxi)": size_of(
            [p for ext in ("pyx", "pxd", "pxi") for p in site.rglob(f"*.{ext}")]
        ),
        "__pycache__": size_of([p for p in site.rglob("__pycache__") if p.is_dir()]),
    }


def smoke(build_dir: Path, python312: str) -> dict[str, object]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(build_dir / "CoreLayer" / "python"),
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONDONTWRITEBYTECODE": "1",  # leave the build as built (no __pycache__ in what is measured)
    }
    res = subprocess.run(
        [python312, "-B", "-s", "-S", str(ROOT / "bench" / "layer_smoke.py"), str(build_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=build_dir,
        timeout=300,
    )
    if res.returncode != 0:
        print(res.stdout + res.stderr, file=sys.stderr)
        raise SystemExit("layer smoke test FAILED")
    result: dict[str, object] = json.loads(res.stdout)
    return result


def fmt(n: int) -> str:
    return f"{n / MB:,.1f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", type=Path, default=OUT / "build")
    ap.add_argument("--no-build", action="store_true", help="measure an existing build")
    ap.add_argument("--clean", action="store_true", help="build from scratch (sam build --no-cached)")
    ap.add_argument("--json", type=Path, default=OUT / "sizes.json")
    args = ap.parse_args(argv)

    python312 = find_python312()
    build_dir = args.build_dir.resolve()
    build_s = None if args.no_build else sam_build(build_dir, python312, args.clean)
    layer = build_dir / "CoreLayer"
    site = layer / "python"
    if not site.is_dir():
        raise SystemExit(f"no built layer at {site}")

    artifacts = {p.name: measure(p) for p in sorted(build_dir.iterdir()) if p.is_dir()}
    functions = {k: v for k, v in artifacts.items() if k != "CoreLayer"}

    print(f"\nArtifacts under {build_dir} (MB = 10^6 bytes)\n")
    print(f"| {'artifact':<26} | {'files':>6} | {'du -sb':>13} | {'sum of files':>13} | {'zipped':>13} |")
    print(f"|{'-' * 28}|{'-' * 8}|{'-' * 15}|{'-' * 15}|{'-' * 15}|")
    for name, m in artifacts.items():
        print(
            f"| {name:<26} | {m['files']:>6} | {m['du_sb']:>13,} | {m['file_bytes']:>13,} | {m['zipped']:>13,} |"
        )

    budget = {}
    print(f"\nBudget per function: artifact + CoreLayer (du -sb) against {LIMIT:,} bytes\n")
    for name, m in functions.items():
        total = m["du_sb"] + artifacts["CoreLayer"]["du_sb"]
        budget[name] = {"total": total, "headroom": LIMIT - total, "ok": total < LIMIT}
        print(
            f"  {name:<26} {total:>13,}  headroom {LIMIT - total:>12,} ({fmt(LIMIT - total)})"
            f"  {'OK' if total < LIMIT else 'OVER'}"
        )

    top = sorted(((du_sb(p), p.name) for p in site.iterdir()), reverse=True)[:12]
    print("\nBiggest entries of the layer's python/\n")
    for n, name in top:
        print(f"  {n:>13,}  {fmt(n):>10}  {name}")
    big_files = sorted(
        ((f.stat().st_size, f.relative_to(site).as_posix()) for f in files_of(site)), reverse=True
    )[:10]
    print("\nBiggest files\n")
    for n, name in big_files:
        print(f"  {n:>13,}  {fmt(n):>10}  {name}")
    strip = strippable(site)
    print("\nNot needed by hpcstage, still in the layer (what a stripping build would save)\n")
    for what, n in strip.items():
        print(f"  {n:>13,}  {fmt(n):>10}  {what}")

    print(f"\nSmoke test of the built layer alone with {python312} -s -S (bench/layer_smoke.py)")
    result = smoke(build_dir, python312)
    print(json.dumps(result, indent=1))

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "build_dir": str(build_dir),
                "build_seconds": build_s,
                "python312": python312,
                "limit": LIMIT,
                "artifacts": artifacts,
                "budget": budget,
                "biggest": {name: n for n, name in top},
                "biggest_files": {name: n for n, name in big_files},
                "strippable": strip,
                "smoke": result,
            },
            indent=1,
        )
    )
    print(f"\nwritten {args.json}")
    return 0 if all(b["ok"] for b in budget.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
