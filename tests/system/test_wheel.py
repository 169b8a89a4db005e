"""The wheel, installed outside the checkout, runs the local state machine (template.yaml travels inside it).

The wheel is built from a copy of the tracked sources (so the build leaves nothing in the checkout) with
the dev venv's setuptools, offline, and installed with --no-deps into a fresh venv. The fresh venv reaches
the third-party dependencies (boto3, pyarrow, moto, ...) through a .pth line to the dev venv's
site-packages, which holds no hpcstage of its own (the dev install is editable: a finder hook that a
.pth line does not run), so `hpcstage` there can only be the wheel's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["pyproject.toml", "setup.py", "README.md", "template.yaml", "statemachines", "functions", "events"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    files = subprocess.run(
        ["git", "ls-files", "-z", *SOURCES, "layers/core/hpcstage"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        target = src / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name.decode()).read_bytes())
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            ".",
        ],
        cwd=src,
        check=True,
        capture_output=True,
        timeout=600,
    )
    (whl,) = dist.glob("hpcstage-*.whl")
    return whl


def test_the_wheel_carries_the_template_state_machines_and_handlers(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "hpcstage/_project/template.yaml",
        "hpcstage/_project/events/inventory-bucket.json",
        "hpcstage/schemas/inventory-input.schema.json",
    }
    expected |= {f"hpcstage/_project/{p.relative_to(ROOT)}" for p in ROOT.glob("statemachines/*.asl.json")}
    expected |= {f"hpcstage/_project/{p.relative_to(ROOT)}" for p in ROOT.glob("functions/*/app.py")}
    assert expected <= names


def test_installed_wheel_runs_inventory_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    where = subprocess.run(
        [py, "-c", "import hpcstage; print(hpcstage.__file__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert where == str(site / "hpcstage" / "__init__.py")

    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "event.json").write_text(json.dumps({"bucket": "wheel-test-data"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
    r = subprocess.run(
        [env_dir / "bin" / "hpcstage", "run", "inventory", "--input", "event.json", "--seed-objects", "1500"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)  # stdout is exactly one JSON document
    assert (result["status"], result["output"]["objects"]) == ("SUCCEEDED", 1500)
    version = subprocess.run(
        [env_dir / "bin" / "hpcstage", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version == "hpcstage 0.1.0\n"
