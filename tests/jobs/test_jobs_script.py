"""JobSpec validation and the batch script built from it."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hpcstage.jobs import JobSpec, build_script
from hpcstage.jobs.script import WORKDIR_MISSING_EXIT


def spec(**overrides: object) -> JobSpec:
    fields: dict[str, object] = {
        "name": "stage-42",
        "command": "python3 run.py",
        "workdir": "/fsx/work",
        "output_dir": "/fsx/logs",
    }
    fields.update(overrides)
    return JobSpec(**fields)  # type: ignore[arg-type]


def test_script_for_a_plain_spec() -> None:
    script = build_script(
        spec(
            environment={"STAGE": "2"},
            file_list="/fsx/lists/a.txt",
            cpus=4,
            time_limit_min=90,
            partition="q1",
        )
    )

    assert script == (
        "#!/bin/bash\n"
        "#SBATCH --job-name=stage-42\n"
        "#SBATCH --output=/fsx/logs/slurm-%j.out\n"
        "#SBATCH --nodes=1\n"
        "#SBATCH --ntasks=1\n"
        "#SBATCH --cpus-per-task=4\n"
        "#SBATCH --time=90\n"
        "#SBATCH --partition=q1\n"
        "\n"
        "export STAGE=2\n"
        "export HPCSTAGE_FILE_LIST=/fsx/lists/a.txt\n"
        "cd -- /fsx/work || exit 97\n"
        "\n"
        "python3 run.py\n"
    )


def test_hostile_name_and_paths_are_quoted_on_sbatch_lines() -> None:
    hostile = "x$(touch /tmp/p) 'q' `id`; && ü #h"
    script = build_script(spec(name=hostile, output_dir="/out dir/it's"))

    lines = script.splitlines()
    # sbatch reads #SBATCH lines with shell-like quoting (checked against Slurm 22.05 in the slurm tests).
    assert shlex.split(lines[1][len("#SBATCH ") :]) == [f"--job-name={hostile}"]
    assert shlex.split(lines[2][len("#SBATCH ") :]) == ["--output=/out dir/it's/slurm-%j.out"]


def test_script_exports_environment_and_enters_workdir_without_running_values(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    workdir = tmp_path / "work dir $(x) 'q'"
    workdir.mkdir()
    environment = {
        "PAYLOAD": f"$(touch {canary}) `touch {canary}`; && touch {canary}",
        "MULTI": "line1\nline2 'quoted' \"double\" \\ back",
        "EMPTY": "",
        "UNICODE": "ünï ☃",
    }
    command = f"{shlex.quote(sys.executable)} -c 'import json, os; print(json.dumps([os.getcwd(), dict(os.environ)]))'"
    job = spec(command=command, workdir=str(workdir), environment=environment, file_list="/lists/a b.txt")

    done = subprocess.run(
        ["/bin/bash", "-c", build_script(job)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={},
    )

    assert done.returncode == 0, done.stderr
    cwd, seen = json.loads(done.stdout)
    assert cwd == str(workdir)
    assert {name: seen[name] for name in environment} == environment
    assert seen["HPCSTAGE_FILE_LIST"] == "/lists/a b.txt"
    assert not canary.exists()


def test_missing_workdir_stops_the_script_before_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    job = spec(workdir=str(tmp_path / "absent"), command=f"touch {marker}")

    done = subprocess.run(
        ["/bin/bash", "-c", build_script(job)], capture_output=True, timeout=30, check=False
    )

    assert done.returncode == WORKDIR_MISSING_EXIT
    assert not marker.exists()


@pytest.mark.parametrize("name", ["", "a\nb", "a\rb", "a\\b", "a\0b", "tab\tname", "x" * 201])
def test_job_names_sbatch_cannot_carry_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="job name"):
        spec(name=name)


@pytest.mark.parametrize("env_name", ["A-B", "1X", "A B", "X;rm", "", "X=Y", "$(id)", "Ü"])
def test_invalid_environment_names_are_refused(env_name: str) -> None:
    with pytest.raises(ValueError, match="environment variable name"):
        spec(environment={env_name: "v"})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"workdir": "relative/dir"}, "workdir"),
        ({"output_dir": "logs"}, "output_dir"),
        ({"output_dir": "/logs/%u"}, "'%'"),
        ({"output_dir": "/logs\nx"}, "output_dir"),
        ({"file_list": "lists/a.txt"}, "file_list"),
        ({"command": "  \n"}, "command"),
        ({"command": "echo \0"}, "command"),
        ({"environment": {"A": "x\0y"}}, "NUL"),
        ({"cpus": 0}, "cpus"),
        ({"time_limit_min": 0}, "time_limit_min"),
        ({"partition": "q; id"}, "partition"),
        ({"user": "-c"}, "user name"),
    ],
)
def test_invalid_specs_are_refused(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spec(**overrides)


def test_environment_cannot_be_changed_after_validation() -> None:
    job = spec(environment={"A": "1"})

    with pytest.raises(TypeError):
        job.environment["B;rm -rf /"] = "x"  # type: ignore[index]


def test_output_path_uses_the_job_id_not_the_name() -> None:
    assert spec(name="../../etc/x", output_dir="/logs/").output_path == "/logs/slurm-%j.out"
