"""wait(): polls a backend until the job is finished, within a hard bound."""

from __future__ import annotations

import pytest
from hpcstage.jobs import JobSpec, JobState, JobStatus, JobWaitTimeout, wait


class ScriptedBackend:
    def __init__(self, statuses: list[JobStatus]) -> None:
        self.statuses = statuses
        self.asked: list[tuple[str, str | None]] = []

    def submit(self, spec: JobSpec) -> str:
        raise AssertionError("not used")

    def status(self, job_id: str, *, name: str | None = None) -> JobStatus:
        self.asked.append((job_id, name))
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def cancel(self, job_id: str, *, name: str | None = None) -> None:
        raise AssertionError("not used")


PENDING = JobStatus(JobState.PENDING, reason="Priority")
RUNNING = JobStatus(JobState.RUNNING)
FAILED = JobStatus(JobState.FAILED, exit_code=3, reason="NonZeroExitCode")


def test_wait_returns_the_terminal_status_and_reports_each_change() -> None:
    backend = ScriptedBackend([PENDING, PENDING, RUNNING, RUNNING, FAILED])
    sleeps: list[float] = []
    updates: list[JobStatus] = []

    status = wait(
        backend, "7", poll_s=5, max_wait_s=600, sleep=sleeps.append, on_update=updates.append, name="n"
    )

    assert status == FAILED
    assert updates == [PENDING, RUNNING, FAILED]
    assert sleeps == [5, 5, 5, 5]
    assert backend.asked == [("7", "n")] * 5


def test_wait_gives_up_after_max_wait_even_when_sleep_returns_at_once() -> None:
    backend = ScriptedBackend([RUNNING])
    sleeps: list[float] = []

    with pytest.raises(JobWaitTimeout, match="job 7 still RUNNING after 12s") as caught:
        wait(backend, "7", poll_s=5, max_wait_s=12, sleep=sleeps.append)

    assert sleeps == [5, 5, 2]
    assert caught.value.last == RUNNING
    assert isinstance(caught.value, TimeoutError)


def test_wait_counts_the_clock_too() -> None:
    """Slow status calls use up the budget even if nothing is slept."""
    backend = ScriptedBackend([RUNNING])
    now = [0.0]

    def clock() -> float:
        now[0] += 10
        return now[0]

    with pytest.raises(JobWaitTimeout):
        wait(backend, "7", poll_s=1, max_wait_s=25, sleep=lambda s: None, clock=clock)
    assert len(backend.asked) == 3


def test_a_job_already_finished_is_returned_without_sleeping() -> None:
    done = JobStatus(JobState.COMPLETED, exit_code=0)

    def must_not_sleep(seconds: float) -> None:
        pytest.fail(f"slept {seconds}s for a finished job")

    assert wait(ScriptedBackend([done]), "7", poll_s=5, max_wait_s=10, sleep=must_not_sleep) == done


@pytest.mark.parametrize(("poll_s", "max_wait_s"), [(0, 10), (1, 0), (-1, 10)])
def test_wait_needs_positive_bounds(poll_s: float, max_wait_s: float) -> None:
    with pytest.raises(ValueError):
        wait(ScriptedBackend([RUNNING]), "7", poll_s=poll_s, max_wait_s=max_wait_s, sleep=lambda s: None)
