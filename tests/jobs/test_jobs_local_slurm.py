"""System tests: real jobs on the local Slurm started by `scripts/slurm-local.sh start`.

They skip when `scontrol ping` does not answer, so the rest of the suite runs without Slurm; set
HPCSTAGE_REQUIRE_SLURM=1 (as CI should) to make that a failure instead. Waits are bounded; no test
asserts how long anything took.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hpcstage.jobs import JobBackend, JobLookupError, JobSpec, JobState, wait
from hpcstage.jobs.local import LocalSlurm
from hpcstage.jobs.rest import SlurmRest

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("local_slurm")]

MAX_WAIT_S = 120.0
POLL_S = 0.3


class TrackedLocalSlurm(LocalSlurm):
    def __init__(self) -> None:
        super().__init__()
        self.submitted: list[str] = []

    def submit(self, spec: JobSpec) -> str:
        job_id = super().submit(spec)
        self.submitted.append(job_id)
        return job_id


@pytest.fixture
def backend() -> Iterator[LocalSlurm]:
    local = TrackedLocalSlurm()
    yield local
    # A failed test must not leave a sleeping job holding a CPU for the next one.
    for job_id in local.submitted:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30, check=False)


def job(tmp_path: Path, name: str, command: str, **extra: object) -> JobSpec:
    (tmp_path / "out").mkdir(exist_ok=True)
    fields: dict[str, object] = {
        "workdir": str(tmp_path),
        "output_dir": str(tmp_path / "out"),
        "time_limit_min": 5,
    }
    fields.update(extra)
    return JobSpec(name=name, command=command, **fields)  # type: ignore[arg-type]


def wait_until_running(backend: JobBackend, job_id: str, started: Path) -> None:
    deadline = time.monotonic() + MAX_WAIT_S
    while time.monotonic() < deadline:
        if backend.status(job_id).state is JobState.RUNNING and started.exists():
            return
        time.sleep(POLL_S)
    pytest.fail(f"job {job_id} did not start within {MAX_WAIT_S:g}s")


def test_a_job_that_succeeds_writes_its_file(backend: LocalSlurm, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    workdir = tmp_path / "work dir 'q' $(x)"
    workdir.mkdir()
    payload = f'$(touch {canary}) `touch {canary}`; && it\'s "q"\nü ☃\n'
    name = f"ok $(touch {canary}) 'q' JobState=FAILED ü"
    spec = job(
        tmp_path,
        name,
        "printf '%s' \"$PAYLOAD\" > result.txt",
        workdir=str(workdir),
        environment={"PAYLOAD": payload},
    )

    job_id = backend.submit(spec)
    status = wait(backend, job_id, poll_s=POLL_S, max_wait_s=MAX_WAIT_S)

    assert status.state is JobState.COMPLETED
    assert (status.exit_code, status.signal) == (0, None)
    assert (workdir / "result.txt").read_text() == payload
    assert (tmp_path / "out" / f"slurm-{job_id}.out").exists()
    assert not canary.exists()
    # A later process knows only the id and the name; its answer is the same.
    assert LocalSlurm().status(job_id, name=name) == status


def test_a_job_that_exits_3_is_failed_with_exit_code_3(backend: LocalSlurm, tmp_path: Path) -> None:
    job_id = backend.submit(job(tmp_path, "exit-three", "echo about to fail; exit 3"))

    status = wait(backend, job_id, poll_s=POLL_S, max_wait_s=MAX_WAIT_S)

    assert status.state is JobState.FAILED
    assert status.exit_code == 3
    assert status.reason == "NonZeroExitCode"
    assert (tmp_path / "out" / f"slurm-{job_id}.out").read_text() == "about to fail\n"


def test_a_job_cancelled_while_running_is_cancelled(backend: LocalSlurm, tmp_path: Path) -> None:
    started = tmp_path / "started"
    job_id = backend.submit(job(tmp_path, "sleeper", f"touch {started}; sleep 600"))
    wait_until_running(backend, job_id, started)

    backend.cancel(job_id)
    status = wait(backend, job_id, poll_s=POLL_S, max_wait_s=MAX_WAIT_S)

    assert status.state is JobState.CANCELLED
    assert not status.succeeded


def test_a_job_id_is_not_taken_for_a_job_of_another_name(backend: LocalSlurm, tmp_path: Path) -> None:
    started = tmp_path / "started"
    job_id = backend.submit(job(tmp_path, "mine", f"touch {started}; sleep 600"))
    wait_until_running(backend, job_id, started)

    with pytest.raises(JobLookupError, match="reused"):
        LocalSlurm().status(job_id, name="not mine")
    LocalSlurm().cancel(job_id, name="not mine")  # scancel --name leaves it alone

    assert backend.status(job_id).state is JobState.RUNNING


def slurmrestd_url() -> str:
    return os.environ.get("HPCSTAGE_SLURMRESTD_URL", "http://127.0.0.1:6820")


def slurmrestd_listening() -> bool:
    host_port = slurmrestd_url().split("//", 1)[1].rstrip("/")
    host, _, port = host_port.partition(":")
    try:
        with socket.create_connection((host, int(port or 80)), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture
def rest() -> SlurmRest:
    if not slurmrestd_listening():
        pytest.skip(f"slurmrestd not listening at {slurmrestd_url()} (HPCSTAGE_SLURM_REST=0?)")
    user = getpass.getuser()
    done = subprocess.run(
        ["scontrol", "token", f"username={user}", "lifespan=600"], capture_output=True, text=True, timeout=30
    )
    if done.returncode != 0:
        pytest.skip(f"no JWT from scontrol token: {done.stderr.strip()}")
    token = done.stdout.strip().removeprefix("SLURM_JWT=")
    return SlurmRest(slurmrestd_url(), user_name=user, token=lambda: token)


def test_slurmrestd_runs_a_job_to_its_exit_code(rest: SlurmRest, tmp_path: Path) -> None:
    name = "rest $(id) 'q' ü"
    job_id = rest.submit(
        job(tmp_path, name, 'echo "$GREETING"; exit 3', environment={"GREETING": "hi 'there'"})
    )

    status = wait(rest, job_id, poll_s=POLL_S, max_wait_s=MAX_WAIT_S)

    assert (status.state, status.exit_code) == (JobState.FAILED, 3)
    assert (tmp_path / "out" / f"slurm-{job_id}.out").read_text() == "hi 'there'\n"
    assert LocalSlurm().status(job_id, name=name) == status  # the CLI agrees


def test_slurmrestd_cancels_a_running_job(rest: SlurmRest, tmp_path: Path) -> None:
    started = tmp_path / "started"
    job_id = rest.submit(job(tmp_path, "rest-sleeper", f"touch {started}; sleep 600"))
    try:
        wait_until_running(rest, job_id, started)
        rest.cancel(job_id)
        status = wait(rest, job_id, poll_s=POLL_S, max_wait_s=MAX_WAIT_S)
    finally:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30, check=False)

    assert status.state is JobState.CANCELLED
