"""statemachines/staging.asl.json executed offline: the real ASL and handlers, moto S3, the Local
target in a temporary directory and jobs on the REAL local Slurm (scripts/slurm-local.sh).

Tests that run jobs skip when `scontrol ping` does not answer (HPCSTAGE_REQUIRE_SLURM=1 makes that
a failure). Waits are bounded; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hpcstage.staging import steps
from hpcstage.staging.config import job_name

DATA = "staging-data"
OUT = "staging-out"
RUN_TIMEOUT_S = 180


def body(i: int) -> bytes:
    return "".join(f"sample {i} line {n}\n" for n in range(i % 5 + 1)).encode()


# Staged under proj/: ordinary names and names a shell would misread if they ever reached one.
SELECTED = {f"proj/run{i % 3}/sample-{i:03d}.txt": body(i) for i in range(30)} | {
    "proj/odd/it's $(touch pwned) `id`; x.txt": b"odd one\n",
    "proj/odd/-n --help.txt": b"dash\n",
    "proj/odd/ünïcödé 中 *.txt": b"unicode\nname\n",
}
NOT_SELECTED = {"other/a.txt": b"not me\n", "proj-old/b.txt": b"nor me\n"}
ARCHIVED = {f"cold/archive-{i}.txt": body(100 + i) for i in range(3)}  # GLACIER


@pytest.fixture(scope="module")
def inventory(local_stack: Any) -> str:
    """A data bucket with real bodies, inventoried by the inventory state machine."""
    aws, deployed = local_stack
    s3 = aws.client("s3")
    s3.create_bucket(Bucket=DATA)
    s3.create_bucket(Bucket=OUT)
    for key, data in {**SELECTED, **NOT_SELECTED}.items():
        s3.put_object(Bucket=DATA, Key=key, Body=data)
    for key, data in ARCHIVED.items():
        s3.put_object(Bucket=DATA, Key=key, Body=data, StorageClass="GLACIER")
    res = aws.run(deployed.arn("InventoryStateMachine"), {"bucket": DATA}, timeout_s=120, poll_s=0.2)
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    return str(res.output["summary"]).rsplit("/", 1)[0]


COUNT = (
    'while IFS= read -r f; do printf "%s\\t%s\\n" "$(wc -c < "$f")" "${f#"$HPCSTAGE_STAGED_ROOT"/}"; '
    'done < "$HPCSTAGE_FILE_LIST" > "$HPCSTAGE_OUTPUT_DIR/counts.tsv"\n'
    'echo "files=$(grep -c . "$HPCSTAGE_FILE_LIST")" > "$HPCSTAGE_OUTPUT_DIR/summary.txt"'
)


def request(inventory: str, root: Path, command: str, **waits: int) -> dict[str, Any]:
    return {
        "inventory": inventory,
        "selection": {"prefixes": ["proj/"]},
        "target": {"type": "local", "root": str(root)},
        "job": {"backend": "local", "command": command, "time_limit_min": 2},
        "output": f"s3://{OUT}/results/{{run_id}}/",
        "waits": {"poll_seconds": 1, "job_poll_seconds": 1, "job_max_polls": 300, **waits},
    }


@pytest.fixture
def run_name(request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:12]}"
    yield name
    # A failed test must not leave its job holding a CPU for the next one. Only the Slurm tests run
    # jobs, and their local_slurm fixture comes first: when it skips, this fixture never starts.
    if request.node.get_closest_marker("slurm") is None:
        return
    try:
        subprocess.run(
            ["scancel", f"--name={job_name(name)}"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        warnings.warn(f"could not cancel the jobs of {name}: {err}", stacklevel=1)


def run(local_stack: Any, event: dict[str, Any], name: str) -> Any:
    aws, deployed = local_stack
    return aws.run(deployed.arn("StagingStateMachine"), event, name=name, timeout_s=RUN_TIMEOUT_S, poll_s=0.2)


def entered(res: Any) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in res.history if e["type"].endswith("StateEntered")]


def work_json(local_stack: Any, name: str, what: str) -> Any:
    aws, deployed = local_stack
    results = deployed.name("ResultsBucket")
    return json.loads(
        aws.client("s3").get_object(Bucket=results, Key=f"staging/{name}/{what}")["Body"].read()
    )


def output_keys(local_stack: Any, name: str) -> list[str]:
    listing = local_stack[0].client("s3").list_objects_v2(Bucket=OUT, Prefix=f"results/{name}/")
    return sorted(o["Key"] for o in listing.get("Contents", []))


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


@pytest.mark.slurm
@pytest.mark.usefixtures("local_slurm")
def test_a_successful_job_is_exported_verified_and_released(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str
) -> None:
    res = run(local_stack, request(inventory, tmp_path / "cache", COUNT), run_name)
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    out = res.output
    assert (out["objects"], out["bytes"]) == (len(SELECTED), sum(map(len, SELECTED.values())))
    assert (out["job_state"], out["exit_code"], out["outputs"]) == ("COMPLETED", 0, 2)
    assert (out["inputs_released"], out["inputs_kept"]) == (len(SELECTED), 0)
    assert output_keys(local_stack, run_name) == [
        f"results/{run_name}/counts.tsv",
        f"results/{run_name}/summary.txt",
    ]
    s3 = local_stack[0].client("s3")
    counts = s3.get_object(Bucket=OUT, Key=f"results/{run_name}/counts.tsv")["Body"].read().decode()
    rows = {tuple(line.split("\t", 1)[::-1]) for line in counts.splitlines()}
    assert rows == {(key, str(len(data))) for key, data in SELECTED.items()}  # every file, exactly, once
    summary = s3.get_object(Bucket=OUT, Key=f"results/{run_name}/summary.txt")["Body"].read()
    assert summary == f"files={len(SELECTED)}\n".encode()
    # Inputs and outputs were released: the cache holds nothing of the run's data any more.
    assert files_under(tmp_path / "cache" / "data") == set()
    # The job ran in its workdir under the cache: had a key reached a shell, "pwned" would be there.
    assert [p for p in tmp_path.rglob("pwned")] == [] and not Path("pwned").exists()
    assert "Cleanup" not in entered(res)
    assert entered(res)[-3:] == ["NotifyCompleted", "PublishCompleted", "Done"]


@pytest.mark.slurm
@pytest.mark.usefixtures("local_slurm")
def test_a_failing_job_fails_the_run_with_its_exit_code(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str
) -> None:
    command = 'echo partial > "$HPCSTAGE_OUTPUT_DIR/partial.txt"\necho "it broke" >&2\nexit 3'
    res = run(local_stack, request(inventory, tmp_path / "cache", command), run_name)
    assert res.status == "FAILED"
    assert res.error == "JobFailedError"
    message = json.loads(res.cause)["errorMessage"]
    assert "ended FAILED with exit code 3" in message and "it broke" in message
    states = entered(res)
    assert "ExportStart" not in states and "ReleaseStart" not in states
    assert states[-5:] == ["Cleanup", "FailureNotice", "NotifyFailed", "PublishFailed", "Failed"]
    cleanup = work_json(local_stack, run_name, "cleanup.json")
    assert (cleanup["inputs_released"], cleanup["inputs_kept"]) == (len(SELECTED), 0)
    assert cleanup["job"]["state"] == "FAILED" and cleanup["job"]["cancelled"] is False
    # The unexported output is kept where the job wrote it; the staged inputs are gone.
    assert files_under(tmp_path / "cache" / "data") == {f"results/{run_name}/partial.txt"}
    assert output_keys(local_stack, run_name) == []


@pytest.mark.slurm
@pytest.mark.usefixtures("local_slurm")
def test_a_job_cancelled_midway_fails_the_run_and_cleans_up(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str
) -> None:
    command = 'echo begun > "$HPCSTAGE_OUTPUT_DIR/started"\nsleep 120'
    event = request(inventory, tmp_path / "cache", command)
    outcome: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: outcome.update(res=run(local_stack, event, run_name)))
    runner.start()
    started = tmp_path / "cache" / "data" / "results" / run_name / "started"
    name_of_job = job_name(run_name)
    job_id = ""
    for _ in range(600):  # bounded: 60 s
        if started.exists():
            listed = subprocess.run(
                ["squeue", "-h", f"--name={name_of_job}", "-o", "%i"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            job_id = listed.stdout.strip()
            if job_id:
                break
        time.sleep(0.1)
    assert job_id, "the job never started"
    subprocess.run(["scancel", job_id], check=True, timeout=30)
    runner.join(timeout=RUN_TIMEOUT_S + 30)
    res = outcome["res"]
    assert res.status == "FAILED"
    assert res.error == "JobCancelledError"
    assert f"job {job_id} ({name_of_job}) ended CANCELLED" in json.loads(res.cause)["errorMessage"]
    cleanup = work_json(local_stack, run_name, "cleanup.json")
    assert cleanup["inputs_released"] == len(SELECTED) and cleanup["job"]["cancelled"] is False
    assert files_under(tmp_path / "cache" / "data") == {f"results/{run_name}/started"}
    assert output_keys(local_stack, run_name) == []


@pytest.mark.slurm
@pytest.mark.usefixtures("local_slurm")
def test_cleanup_cancels_a_job_still_running(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_poll(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("injected: the scheduler stopped answering")

    monkeypatch.setattr(steps, "job_poll_task", broken_poll)
    res = run(local_stack, request(inventory, tmp_path / "cache", "sleep 120"), run_name)
    assert (res.status, res.error) == ("FAILED", "ConnectionError")
    cleanup = work_json(local_stack, run_name, "cleanup.json")
    job_id = cleanup["job"]["job_id"]
    assert cleanup["job"]["cancelled"] is True and cleanup["job"]["state"] == "CANCELLED"
    shown = subprocess.run(
        ["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30
    )
    assert "JobState=CANCELLED" in shown.stdout
    assert cleanup["inputs_released"] == len(SELECTED)


def test_a_stage_that_takes_too_many_polls_releases_only_what_was_staged(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str
) -> None:
    event = request(inventory, tmp_path / "cache", COUNT, max_polls=2)
    event["target"]["max_objects_per_call"] = 5  # two polls stage 10 of the 33 objects
    res = run(local_stack, event, run_name)
    assert (res.status, res.error) == ("FAILED", "PollLimitExceeded")
    assert "staging still running after 2 polls" in (res.cause or "")
    assert "SubmitJob" not in entered(res)
    cleanup = work_json(local_stack, run_name, "cleanup.json")
    assert "job" not in cleanup
    assert (cleanup["inputs_released"], cleanup["inputs_kept"]) == (10, len(SELECTED) - 10)
    assert files_under(tmp_path / "cache" / "data") == set()


def test_archived_objects_fail_the_run_before_anything_is_staged(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str
) -> None:
    event = request(inventory, tmp_path / "cache", COUNT)
    event["selection"] = {"prefixes": ["cold/", "proj/run0/"]}
    res = run(local_stack, event, run_name)
    assert (res.status, res.error) == ("FAILED", "ArchivedObjectsError")
    message = json.loads(res.cause)["errorMessage"]
    assert "3 selected object(s)" in message and "'cold/archive-0.txt'" in message
    assert "StageStart" not in entered(res)
    assert work_json(local_stack, run_name, "cleanup.json")["inputs"] == "nothing was staged"
    assert files_under(tmp_path / "cache" / "data") == set()


@pytest.mark.slurm
@pytest.mark.usefixtures("local_slurm")
def test_archived_objects_are_restored_then_staged(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str
) -> None:
    event = request(inventory, tmp_path / "cache", COUNT, restore_poll_seconds=1)
    event.update(selection={"prefixes": ["cold/"]}, archived_policy="restore", restore_tier="Bulk")
    res = run(local_stack, event, run_name)
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    states = entered(res)
    assert states.index("RestorePoll") < states.index("StageStart")  # moto restores at once
    counts = local_stack[0].client("s3").get_object(Bucket=OUT, Key=f"results/{run_name}/counts.tsv")
    rows = {tuple(line.split("\t", 1)[::-1]) for line in counts["Body"].read().decode().splitlines()}
    assert rows == {(key, str(len(data))) for key, data in ARCHIVED.items()}


def test_the_latest_inventory_of_a_bucket_is_the_one_selected_from(
    local_stack: Any, inventory: str, tmp_path: Path, run_name: str
) -> None:
    event = request(inventory, tmp_path / "cache", COUNT)
    # The archived objects fail the run right after selection: no job is needed to see what was read.
    event.update(inventory={"latest": f"s3://{DATA}"}, selection={"prefixes": ["cold/"]})
    res = run(local_stack, event, run_name)
    assert (res.status, res.error) == ("FAILED", "ArchivedObjectsError")
    message = json.loads(res.cause)["errorMessage"]
    assert "3 selected object(s)" in message and "'cold/archive-0.txt'" in message
    config = work_json(local_stack, run_name, "config.json")
    assert (config["inventory"], config["latest_inventory_of"]) == (inventory, f"s3://{DATA}")


def test_no_inventory_of_the_named_bucket_fails_first_and_says_how_to_make_one(
    local_stack: Any, tmp_path: Path, run_name: str
) -> None:
    results = local_stack[1].name("ResultsBucket")
    event = request("s3://unused/x", tmp_path / "cache", COUNT)
    event["inventory"] = {"latest": f"s3://{DATA}/never/"}
    res = run(local_stack, event, run_name)
    assert (res.status, res.error) == ("FAILED", "NoInventoryError")
    assert json.loads(res.cause)["errorMessage"] == (
        f"there is no inventory of s3://{DATA}/never/ yet (no s3://{results}/inventory/{DATA}/_latest/never%2F.json): "
        "make one with the stack's inventory state machine, e.g. `sam remote invoke InventoryStateMachine "
        f'--stack-name STACK --event \'{{"bucket": "{DATA}", "prefix": "never/"}}\'`, or name an '
        "inventory run's s3:// URL in 'inventory'"
    )
    assert entered(res)[:2] == ["ValidateInput", "NothingToClean"]


def test_a_malformed_request_fails_first_with_nothing_to_clean(local_stack: Any, run_name: str) -> None:
    res = run(local_stack, {"inventory": "s3://x/y", "selection": {}}, run_name)
    assert (res.status, res.error) == ("FAILED", "InputError")
    assert json.loads(res.cause)["errorMessage"] == (
        "'target' must be a JSON object; it is missing; 'job' must be a JSON object; it is missing; "
        "'output' must be an s3:// URL of a key prefix (not a whole bucket) "
        '(e.g. "s3://my-results/outputs/{run_id}/"); it is missing'
    )
    assert entered(res) == [
        "ValidateInput",
        "NothingToClean",
        "FailureNotice",
        "NotifyFailed",
        "PublishFailed",
        "Failed",
    ]


@pytest.mark.slurm
@pytest.mark.usefixtures("local_slurm")
def test_the_demo_stages_runs_a_job_and_releases(local_stack: Any, tmp_path: Path) -> None:
    import io

    from hpcstage.localcli import DEMO_BUCKET, demo_objects, seed_bucket
    from hpcstage.localstaging import demo_staging

    aws, deployed = local_stack
    aws.client("s3").create_bucket(Bucket=DEMO_BUCKET)
    seed_bucket(DEMO_BUCKET, demo_objects(3000))  # sizes only, no bodies: the demo writes those
    event = {"bucket": DEMO_BUCKET, "max_listers": 2, "streams": 2}
    inv = aws.run(deployed.arn("InventoryStateMachine"), event, timeout_s=120, poll_s=0.2)
    assert inv.status == "SUCCEEDED", (inv.error, inv.cause)
    printed = io.StringIO()
    report = demo_staging(
        aws, deployed, str(inv.output["summary"]).rsplit("/", 1)[0], tmp_path, stream=printed
    )
    assert report["prefix"] == "reference/GRCh38/"
    assert report["files_counted"] == report["objects"] == report["inputs_released"] > 0
    assert report["bytes_counted"] == report["bytes"]
    assert (report["exit_code"], report["outputs"]) == (0, 2)
    assert f"Slurm job {report['job_id']} submitted" in printed.getvalue()
    assert files_under(Path(report["cache"]) / "data") == set()


def test_the_demo_says_how_to_start_slurm_when_it_is_not_running(
    local_stack: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpcstage.errors import HpcstageError
    from hpcstage.localstaging import demo_staging

    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol here
    with pytest.raises(HpcstageError, match=r"start it with `sudo scripts/slurm-local.sh start`"):
        demo_staging(*local_stack, "s3://nowhere/inventory", tmp_path)
