"""Parsing Slurm CLI output, and LocalSlurm driving the CLI with argv lists (a fake runner here;
the real Slurm is in test_jobs_local_slurm.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

import pytest
from hpcstage.jobs import JobLookupError, JobSpec, JobState, JobStatus, SlurmCommandError, build_script
from hpcstage.jobs.local import LocalSlurm
from hpcstage.jobs.slurmcli import (
    active_status,
    final_status,
    map_state,
    parse_sbatch_output,
    scancel_argv,
    squeue_argv,
)

HOSTILE_NAME = "x$(touch /tmp/c) 'q' JobState=COMPLETED ExitCode=0:0 UserId=evil `id`; && ü"


def scontrol_line(job_id: str, name: str, state: str, exit_code: str, reason: str = "None") -> str:
    """Shaped like `scontrol -o show job` from Slurm 22.05 (captured from the local Slurm)."""
    return (
        f"JobId={job_id} JobName={name} UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
        f"Nice=0 Account=(null) QOS=(null) JobState={state} Reason={reason} Dependency=(null) Requeue=1 "
        f"Restarts=0 BatchFlag=1 Reboot=0 ExitCode={exit_code} RunTime=00:00:06 TimeLimit=00:05:00 "
        "Partition=debug NodeList=localhost NumNodes=1 NumCPUs=1 Command=(null) "
        f"WorkDir=/tmp/w JobState=COMPLETED StdErr=/tmp/w/slurm-{job_id}.out StdOut=/tmp/w/slurm-{job_id}.out Power=\n"
    )


@pytest.mark.parametrize(
    ("slurm_state", "expected"),
    [
        ("PENDING", JobState.PENDING),
        ("CONFIGURING", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("COMPLETING", JobState.RUNNING),
        ("COMPLETED", JobState.COMPLETED),
        ("FAILED", JobState.FAILED),
        ("OUT_OF_MEMORY", JobState.FAILED),
        ("NODE_FAIL", JobState.FAILED),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("TIMEOUT", JobState.TIMEOUT),
        ("RUNNING+", JobState.RUNNING),
        ("SOMETHING_NEW", JobState.UNKNOWN),
    ],
)
def test_slurm_states_map_to_job_states(slurm_state: str, expected: JobState) -> None:
    assert map_state(slurm_state) is expected


def test_final_status_of_a_failed_job_with_a_hostile_name() -> None:
    status = final_status(
        scontrol_line("7", HOSTILE_NAME, "FAILED", "3:0", "NonZeroExitCode"), "7", HOSTILE_NAME
    )

    assert status == JobStatus(JobState.FAILED, exit_code=3, signal=None, reason="NonZeroExitCode")


def test_final_status_of_a_cancelled_job_reports_the_signal() -> None:
    status = final_status(scontrol_line("8", "stage", "CANCELLED", "0:15"), "8", "stage")

    assert status == JobStatus(JobState.CANCELLED, exit_code=0, signal=15, reason="")
    assert status.terminal and not status.succeeded


def test_without_the_name_fields_are_read_after_the_first_user_id() -> None:
    status = final_status(scontrol_line("9", "plain name", "COMPLETED", "0:0"), "9", None)

    assert status.succeeded


def test_a_reused_job_id_is_reported_not_mistaken_for_ours() -> None:
    with pytest.raises(JobLookupError, match="reused"):
        final_status(scontrol_line("7", "someone-else", "COMPLETED", "0:0"), "7", "stage")
    with pytest.raises(JobLookupError, match="reused"):
        active_status("RUNNING|None|someone-else\n", "7", "stage")


def test_a_purged_job_is_a_lookup_error_and_a_dead_controller_a_command_error() -> None:
    with pytest.raises(JobLookupError, match="no longer knows"):
        final_status("", "7", None, errors="slurm_load_jobs error: Invalid job id specified\n")
    with pytest.raises(SlurmCommandError, match="Unable to contact"):
        final_status("", "7", None, errors="slurm_load_jobs error: Unable to contact slurm controller\n")


def test_active_status_keeps_a_name_holding_the_separator() -> None:
    assert active_status(f"RUNNING|None|{HOSTILE_NAME}|x\n", "3", f"{HOSTILE_NAME}|x") == JobStatus(
        JobState.RUNNING
    )
    assert active_status("PENDING|Resources|n\n", "3", "n") == JobStatus(JobState.PENDING, reason="Resources")
    assert active_status("", "3", "n") is None


def test_sbatch_parsable_output() -> None:
    assert parse_sbatch_output("123\n") == "123"
    assert parse_sbatch_output("124;cluster\n") == "124"
    with pytest.raises(SlurmCommandError):
        parse_sbatch_output("Submitted batch job 5\n")
    # a login shell (runuser -l) may print before sbatch does: the id is the last line
    assert parse_sbatch_output("Last login: Mon Jan  1 on pts/0\n1234 files in /scratch\n\n125;pc\n") == "125"


@pytest.mark.parametrize("job_id", ["1; rm -rf /", "$(id)", "-1", "12_3", "", " 1"])
def test_job_ids_are_checked_before_they_reach_a_command(job_id: str) -> None:
    with pytest.raises(ValueError, match="job id"):
        squeue_argv(job_id)


def test_scancel_filters_by_name_so_a_reused_id_is_left_alone() -> None:
    assert scancel_argv("5", "it's mine") == ["scancel", "--name=it's mine", "5"]
    assert scancel_argv("5", None) == ["scancel", "5"]


class FakeRunner:
    """Records argv lists and answers from a script of (stdout, stderr, returncode) per command name."""

    def __init__(self, answers: dict[str, list[tuple[str, str, int]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((list(argv), kwargs))
        program = argv[0] if argv[0] != "runuser" else argv[argv.index("--") + 1]
        stdout, stderr, code = self.answers[program].pop(0)
        return subprocess.CompletedProcess(list(argv), code, stdout, stderr)


def job_spec(**overrides: Any) -> JobSpec:
    fields: dict[str, Any] = {"name": HOSTILE_NAME, "command": "true", "workdir": "/w", "output_dir": "/o"}
    return JobSpec(**{**fields, **overrides})


def test_local_submit_pipes_the_script_to_sbatch_without_a_shell() -> None:
    runner = FakeRunner({"sbatch": [("41\n", "", 0)]})
    job = job_spec()

    assert LocalSlurm(run=runner).submit(job) == "41"

    argv, kwargs = runner.calls[0]
    assert argv == ["sbatch", "--parsable"]
    assert kwargs["input"] == build_script(job)
    assert not kwargs.get("shell")


def test_local_submit_as_another_user_goes_through_runuser() -> None:
    runner = FakeRunner({"sbatch": [("41\n", "", 0)]})

    LocalSlurm(run=runner).submit(job_spec(user="svc_stage"))

    assert runner.calls[0][0] == ["runuser", "-u", "svc_stage", "--", "sbatch", "--parsable"]


def test_local_status_of_a_running_job_needs_only_squeue() -> None:
    runner = FakeRunner({"sbatch": [("41\n", "", 0)], "squeue": [(f"RUNNING|None|{HOSTILE_NAME}\n", "", 0)]})
    backend = LocalSlurm(run=runner)
    job_id = backend.submit(job_spec())

    assert backend.status(job_id) == JobStatus(JobState.RUNNING)
    assert [argv for argv, _ in runner.calls][1:] == [["squeue", "-h", "-j", "41", "-o", "%T|%r|%j"]]


def test_local_status_of_a_finished_job_asks_scontrol_and_checks_the_name() -> None:
    runner = FakeRunner(
        {
            "squeue": [("", "", 0), ("", "", 0)],
            "scontrol": [(scontrol_line("41", "mine", "FAILED", "3:0"), "", 0)] * 2,
        }
    )
    backend = LocalSlurm(run=runner)

    assert backend.status("41", name="mine") == JobStatus(JobState.FAILED, exit_code=3)
    with pytest.raises(JobLookupError):
        backend.status("41", name="not mine")
    assert runner.calls[1][0] == ["scontrol", "-o", "show", "job", "41"]


def test_local_errors_are_reported_with_slurms_message() -> None:
    runner = FakeRunner(
        {
            "sbatch": [
                ("", "sbatch: error: Batch job submission failed: Invalid partition name specified\n", 1)
            ],
            "squeue": [
                ("", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", 1)
            ],
            "scancel": [("", "scancel: error: Kill job error on job id 5: Access/permission denied\n", 1)],
        }
    )
    backend = LocalSlurm(run=runner)

    with pytest.raises(SlurmCommandError, match="Invalid partition"):
        backend.submit(job_spec())
    with pytest.raises(SlurmCommandError, match="Unable to contact"):
        backend.status("5")
    with pytest.raises(SlurmCommandError, match="permission denied"):
        backend.cancel("5")


def test_missing_slurm_client_and_hung_commands_are_command_errors() -> None:
    def missing(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(argv[0])

    def hung(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(list(argv), kwargs["timeout"])

    with pytest.raises(SlurmCommandError, match="not found"):
        LocalSlurm(run=missing).status("5")
    with pytest.raises(SlurmCommandError, match="did not answer within 3s"):
        LocalSlurm(run=hung, command_timeout_s=3).status("5")


def test_local_status_after_min_job_age_comes_from_sacct() -> None:
    """ParallelCluster's MinJobAge=300: once scontrol has forgotten the job, sacct still knows it."""
    gone = ("", "slurm_load_jobs error: Invalid job id specified\n", 1)
    runner = FakeRunner(
        {
            "squeue": [("", "slurm_load_jobs error: Invalid job id specified\n", 1)] * 2,
            "scontrol": [gone, gone],
            "sacct": [
                ("TIMEOUT|0:0|mine\n", "", 0),
                ("", "sacct: error: Slurm accounting storage is disabled\n", 1),
            ],
        }
    )
    backend = LocalSlurm(run=runner)

    assert backend.status("41", name="mine") == JobStatus(JobState.TIMEOUT, exit_code=0)
    assert runner.calls[2][0] == ["sacct", "-n", "-P", "-X", "-j", "41", "-o", "State,ExitCode,JobName"]
    with pytest.raises(
        JobLookupError,
        match=r"sacct has no record of it \(sacct: error: Slurm accounting storage is disabled\)",
    ):
        backend.status("41", name="mine")
