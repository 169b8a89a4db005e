"""ParallelClusterSSM: the exact shell text sent to the head node, and its outputs parsed.

SSM is a real boto3 client under botocore's Stubber (requests checked against the service model).
The submit command is also run for real with /bin/sh (as the SSM agent does) against stand-in
`runuser` and `sbatch` programs, to show the batch script reaches sbatch byte for byte.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from hpcstage.jobs import JobLookupError, JobSpec, JobState, JobStatus, SlurmCommandError, build_script
from hpcstage.jobs.ssm import (
    SACCT_SEPARATOR,
    STATUS_SEPARATOR,
    HeadNodeNotFoundError,
    ParallelClusterSSM,
    find_head_node,
)
from moto import mock_aws

HEAD_NODE = "i-0aaaabbbbccccdddd"
COMMAND_ID = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber, list[dict[str, Any]]]]:
    client = boto3.client("ssm", region_name="us-east-1")
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.ssm.SendCommand", lambda params, **_: sent.append(dict(params))
    )
    with Stubber(client) as stubber:
        yield client, stubber, sent
        stubber.assert_no_pending_responses()


def backend(client: Any) -> ParallelClusterSSM:
    return ParallelClusterSSM(client, HEAD_NODE, user="ec2-user", sleep=lambda s: None)


def expect_command(
    stubber: Stubber,
    *,
    commands: Any = ANY,
    status: str = "Success",
    code: int = 0,
    stdout: str = "",
    stderr: str = "",
) -> None:
    stubber.add_response(
        "send_command",
        {"Command": {"CommandId": COMMAND_ID}},
        {
            "InstanceIds": [HEAD_NODE],
            "DocumentName": "AWS-RunShellScript",
            "Parameters": {"commands": commands, "executionTimeout": ["120"]},
            "TimeoutSeconds": 60,
            "Comment": ANY,
        },
    )
    stubber.add_response(
        "get_command_invocation",
        {
            "Status": status,
            "StatusDetails": status,
            "ResponseCode": code,
            "StandardOutputContent": stdout,
            "StandardErrorContent": stderr,
        },
        {"CommandId": COMMAND_ID, "InstanceId": HEAD_NODE},
    )


def hostile_spec(tmp_path: Path) -> JobSpec:
    canary = tmp_path / "canary"
    return JobSpec(
        name=f'stage $(touch {canary}) `touch {canary}`; && it\'s "q" EOF ü',
        command=f"echo 'EOF'\nprintf '%s\\n' \"$PAYLOAD\"\ncat <<'EOF'\n$(touch {canary})\nEOF\n",
        workdir="/fsx/work dir/'quoted'",
        output_dir=f"/fsx/logs/$(touch {canary})",
        environment={"PAYLOAD": f"$(touch {canary})\n; && |"},
        file_list="/fsx/lists/it's.txt",
    )


def install_stand_ins(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        # runuser -l USER -c CMD: record USER, run CMD with a shell, as the real one does.
        "runuser": '[ "$1" = -l ] && [ "$3" = -c ] && [ $# -eq 4 ] || exit 64\n'
        'printf %s "$2" > "$LOG/user"\nexec /bin/sh -c "$4"\n',
        "sbatch": 'cat > "$LOG/script"\nprintf %s "$*" > "$LOG/args"\necho "77;hpc"\n',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path)}


def test_submit_sends_one_runuser_command_that_delivers_the_script_intact(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]], tmp_path: Path
) -> None:
    client, stubber, sent = stubbed
    spec = hostile_spec(tmp_path)
    expect_command(stubber, stdout="77;hpc\n")

    assert backend(client).submit(spec) == "77"

    [sent_command] = sent[0]["Parameters"]["commands"]
    outer = shlex.split(sent_command)
    assert outer[:4] == ["runuser", "-l", "ec2-user", "-c"] and len(outer) == 5
    assert shlex.split(outer[4]) == ["printf", "%s", build_script(spec), "|", "sbatch", "--parsable"]

    done = subprocess.run(
        ["/bin/sh", "-c", sent_command],
        env=install_stand_ins(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "77;hpc\n"
    assert (tmp_path / "script").read_text() == build_script(spec)
    assert (tmp_path / "args").read_text() == "--parsable"
    assert (tmp_path / "user").read_text() == "ec2-user"
    assert not (tmp_path / "canary").exists()


def test_status_sends_squeue_then_scontrol_in_one_command(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, stubber, _ = stubbed
    scontrol = (
        "JobId=42 JobName=stage 'x' UserId=ec2-user(1000) GroupId=ec2-user(1000) JobState=FAILED "
        "Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0 WorkDir=/w StdOut=/o/slurm-42.out\n"
    )
    expect_command(
        stubber,
        commands=[
            "runuser -l ec2-user -c 'squeue -h -j 42 -o '\"'\"'%T|%r|%j'\"'\"' ; "
            "printf '\"'\"'%s\\n'\"'\"' @@hpcstage:scontrol@@ ; scontrol -o show job 42 || "
            "{ printf '\"'\"'%s\\n'\"'\"' @@hpcstage:sacct@@ ; sacct -n -P -X -j 42 -o State,ExitCode,JobName ; }'"
        ],
        stdout=f"{STATUS_SEPARATOR}\n{scontrol}",
    )

    status = backend(client).status("42", name="stage 'x'")

    assert status == JobStatus(JobState.FAILED, exit_code=3, reason="NonZeroExitCode")


def test_status_of_a_queued_job_comes_from_squeue(stubbed: tuple[Any, Stubber, list[dict[str, Any]]]) -> None:
    client, stubber, _ = stubbed
    name = f"odd {STATUS_SEPARATOR} name"
    expect_command(
        stubber, stdout=f"PENDING|Priority|{name}\n{STATUS_SEPARATOR}\nJobId=42 JobName={name} ...\n"
    )

    assert backend(client).status("42", name=name) == JobStatus(JobState.PENDING, reason="Priority")


def test_status_of_a_purged_job_is_a_lookup_error(stubbed: tuple[Any, Stubber, list[dict[str, Any]]]) -> None:
    client, stubber, _ = stubbed
    expect_command(
        stubber,
        status="Failed",
        code=1,
        stdout=f"{STATUS_SEPARATOR}\n",
        stderr="slurm_load_jobs error: Invalid job id specified\nslurm_load_jobs error: Invalid job id specified\n",
    )

    with pytest.raises(JobLookupError, match="no longer knows job 42"):
        backend(client).status("42")


def test_cancel_quotes_the_name_filter(stubbed: tuple[Any, Stubber, list[dict[str, Any]]]) -> None:
    client, stubber, _ = stubbed
    expect_command(
        stubber,
        commands=["runuser -l ec2-user -c 'scancel '\"'\"'--name=a$(id);b'\"'\"' 42'"],
    )

    backend(client).cancel("42", name="a$(id);b")


def test_a_submitting_user_is_used_for_that_jobs_later_commands(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]], tmp_path: Path
) -> None:
    client, stubber, sent = stubbed
    expect_command(stubber, stdout="43\n")
    expect_command(stubber, stdout=f"RUNNING|None|n\n{STATUS_SEPARATOR}\n")
    pcluster = backend(client)

    job_id = pcluster.submit(JobSpec(name="n", command="true", workdir="/w", output_dir="/o", user="alice"))
    assert pcluster.status(job_id) == JobStatus(JobState.RUNNING)

    assert [s["Parameters"]["commands"][0].split(" -c ")[0] for s in sent] == ["runuser -l alice"] * 2


@pytest.mark.parametrize(
    ("status", "code", "stderr"),
    [("Failed", 1, "sbatch: error: invalid partition specified: gpu\n"), ("Success", 0, "")],
)
def test_a_failed_or_silent_sbatch_is_an_error(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]], status: str, code: int, stderr: str
) -> None:
    client, stubber, _ = stubbed
    expect_command(stubber, status=status, code=code, stderr=stderr)

    with pytest.raises(SlurmCommandError, match="invalid partition|no job id"):
        backend(client).submit(
            JobSpec(name="n", command="true", workdir="/w", output_dir="/o", partition="gpu")
        )


def test_job_ids_from_callers_are_checked_before_any_call(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, _, sent = stubbed

    with pytest.raises(ValueError, match="job id"):
        backend(client).cancel("42; reboot")
    assert sent == []


# -- after MinJobAge, sbatch's chatter, long scripts, finding the head node -----------------------


def test_a_job_gone_from_the_controller_is_found_through_sacct(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    """ParallelCluster sets MinJobAge=300: a job that ended earlier is known only to accounting."""
    client, stubber, _ = stubbed
    expect_command(
        stubber,
        stdout=f"{STATUS_SEPARATOR}\n{SACCT_SEPARATOR}\nFAILED|3:0|stage 'x'|odd\n",
        stderr="slurm_load_jobs error: Invalid job id specified\n",
    )
    assert backend(client).status("42", name="stage 'x'|odd") == JobStatus(JobState.FAILED, exit_code=3)

    expect_command(stubber, stdout=f"{STATUS_SEPARATOR}\n{SACCT_SEPARATOR}\nCANCELLED by 1000|0:15|n\n")
    assert backend(client).status("42", name="n") == JobStatus(JobState.CANCELLED, exit_code=0, signal=15)


def test_a_job_neither_the_controller_nor_accounting_knows_is_a_lookup_error_naming_both(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, stubber, _ = stubbed
    expect_command(
        stubber,
        status="Failed",
        code=1,
        stdout=f"{STATUS_SEPARATOR}\n{SACCT_SEPARATOR}\n",
        stderr="slurm_load_jobs error: Invalid job id specified\nsacct: error: Slurm accounting storage is disabled\n",
    )
    with pytest.raises(JobLookupError) as caught:
        backend(client).status("42")
    assert str(caught.value) == (
        "Slurm no longer knows job 42: not in squeue, purged from the controller after MinJobAge (300 s on "
        "ParallelCluster), and sacct has no record of it (sacct: error: Slurm accounting storage is disabled); "
        "keep finished jobs with slurmdbd accounting (ParallelCluster: Scheduling/SlurmSettings/Database)"
    )


def test_the_status_command_runs_sacct_only_when_scontrol_fails(tmp_path: Path) -> None:
    """The real shell text, with stand-in squeue/scontrol/sacct: the || and the separators hold."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "runuser": 'exec /bin/sh -c "$4"\n',
        "squeue": "exit 0\n",
        "scontrol": 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1\n',
        "sacct": 'printf "%s\\n" "$*" > "$LOG/sacct-args"; echo "COMPLETED|0:0|n"\n',
    }.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    client = boto3.client("ssm", region_name="us-east-1")
    sent: list[str] = []
    client.meta.events.register(
        "provide-client-params.ssm.SendCommand",
        lambda params, **_: sent.extend(params["Parameters"]["commands"]),
    )
    with Stubber(client) as stubber:
        expect_command(stubber, stdout=f"{STATUS_SEPARATOR}\n{SACCT_SEPARATOR}\nCOMPLETED|0:0|n\n")
        assert backend(client).status("42", name="n") == JobStatus(JobState.COMPLETED, exit_code=0)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(tmp_path)}
    done = subprocess.run(["/bin/sh", "-c", sent[0]], env=env, capture_output=True, text=True, timeout=30)
    assert done.stdout == f"{STATUS_SEPARATOR}\n{SACCT_SEPARATOR}\nCOMPLETED|0:0|n\n"
    assert (tmp_path / "sacct-args").read_text() == "-n -P -X -j 42 -o State,ExitCode,JobName\n"


def test_sbatch_id_is_read_from_the_last_line_after_login_shell_output(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, stubber, _ = stubbed
    expect_command(stubber, stdout="Welcome to the cluster\n 12 updates available\n\n4711;parallelcluster\n")
    assert backend(client).submit(JobSpec(name="n", command="true", workdir="/w", output_dir="/o")) == "4711"


def test_a_200_kib_script_goes_through_s3_and_reaches_sbatch_intact(tmp_path: Path) -> None:
    """Inside runuser -c the whole command is one argument, capped at 128 KiB by Linux."""
    bucket = "work-bucket"
    big = JobSpec(
        name="big",
        command="".join(f"echo 'line {i} $(touch {tmp_path}/canary)'\n" for i in range(5000)),
        workdir="/w",
        output_dir="/o",
    )
    script = build_script(big)
    assert len(script.encode()) > 200 * 1024
    env = install_stand_ins(tmp_path)
    fake_s3 = tmp_path / "fake-s3"
    (tmp_path / "bin" / "aws").write_text(
        '#!/bin/sh\n[ "$1 $2 $3" = "s3 cp --only-show-errors" ] || exit 2\ncp -- "$FAKE_S3/${4#s3://}" "$5"\n'
    )
    (tmp_path / "bin" / "aws").chmod(0o755)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        client = boto3.client("ssm", region_name="us-east-1")
        sent: list[str] = []
        client.meta.events.register(
            "provide-client-params.ssm.SendCommand",
            lambda params, **_: sent.extend(params["Parameters"]["commands"]),
        )
        pcluster = ParallelClusterSSM(
            client,
            HEAD_NODE,
            user="ec2-user",
            sleep=lambda s: None,
            s3=s3,
            output_s3_bucket=bucket,
            output_s3_prefix="staging/run-1/ssm-output",
        )
        with Stubber(client) as stubber:
            stubber.add_response("send_command", {"Command": {"CommandId": COMMAND_ID}})
            stubber.add_response(
                "get_command_invocation",
                {"Status": "Success", "ResponseCode": 0, "StandardOutputContent": "77;hpc\n"},
            )
            s3.put_object(  # where SSM would have put the full stdout
                Bucket=bucket,
                Key=f"staging/run-1/ssm-output/{COMMAND_ID}/{HEAD_NODE}/awsrunShellScript/0.awsrunShellScript/stdout",
                Body=b"77;hpc\n",
            )
            assert pcluster.submit(big) == "77"
        [key] = [
            o["Key"]
            for o in s3.list_objects_v2(Bucket=bucket, Prefix="staging/run-1/ssm-output/scripts/")["Contents"]
        ]
        (fake_s3 / bucket / key).parent.mkdir(parents=True)
        (fake_s3 / bucket / key).write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert len(sent[0].encode()) < 1024
    done = subprocess.run(
        ["/bin/sh", "-c", sent[0]],
        env={**env, "FAKE_S3": str(fake_s3)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "77;hpc\n"), done.stderr
    assert (tmp_path / "script").read_text() == script
    assert (tmp_path / "user").read_text() == "ec2-user"
    assert not (tmp_path / "canary").exists()


def test_without_an_s3_location_a_large_script_is_refused_before_any_call(
    stubbed: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, _, sent = stubbed
    big = JobSpec(name="n", command="#" * 40_000, workdir="/w", output_dir="/o")
    with pytest.raises(SlurmCommandError, match="go through S3"):
        backend(client).submit(big)
    assert sent == []


def head_node_reservation(instance_id: str, attributes: str) -> dict[str, Any]:
    return {
        "Instances": [
            {
                "InstanceId": instance_id,
                "Tags": [
                    {"Key": "parallelcluster:cluster-name", "Value": "genomics"},
                    {"Key": "parallelcluster:node-type", "Value": "HeadNode"},
                    {"Key": "parallelcluster:attributes", "Value": attributes},
                ],
            }
        ]
    }


@pytest.mark.parametrize(
    ("attributes", "user"),
    [
        ("alinux2023, slurm, 3.13.0, x86_64", "ec2-user"),
        ("ubuntu2204, slurm, 3.13.0, arm64", "ubuntu"),
        ("rocky9, slurm, 3.13.0, x86_64", "rocky"),
        ("someos, slurm, 3.13.0, x86_64", None),
    ],
)
def test_the_head_node_is_found_by_parallelclusters_tags(attributes: str, user: str | None) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    with Stubber(ec2) as stubber:
        stubber.add_response(
            "describe_instances",
            {"Reservations": [head_node_reservation(HEAD_NODE, attributes)]},
            {
                "Filters": [
                    {"Name": "tag:parallelcluster:cluster-name", "Values": ["genomics"]},
                    {"Name": "tag:parallelcluster:node-type", "Values": ["HeadNode"]},
                    {"Name": "instance-state-name", "Values": ["running"]},
                ]
            },
        )
        assert find_head_node(ec2, "genomics") == (HEAD_NODE, user)


def test_no_running_head_node_is_a_clear_error() -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    with Stubber(ec2) as stubber:
        stubber.add_response("describe_instances", {"Reservations": []})
        with pytest.raises(
            HeadNodeNotFoundError,
            match="0 running instances are tagged parallelcluster:cluster-name=genomics",
        ):
            find_head_node(ec2, "genomics")
