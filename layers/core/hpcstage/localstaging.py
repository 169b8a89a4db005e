"""The staging part of `hpcstage demo`: after the inventory, stage a small subset of the demo bucket
into a Local target, run a REAL Slurm job over it on this machine's Slurm, export, verify, release.

Local only (needs the [local] extra and a running local Slurm: scripts/slurm-local.sh start). The
staging state machine of template.yaml runs in moto's interpreter and its Lambda tasks call the
real handlers in this process, exactly as in the system tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from .errors import HpcstageError
from .s3util import parse_s3_url
from .staging import ManifestEntry, select_objects

DEMO_OBJECTS = 200
DEMO_MAX_SIZE = 64 * 1024
# Tried in order until one holds small readable objects (the demo's layout: see localcli.demo_objects).
DEMO_PREFIXES = ("reference/GRCh38/", "reference/", "")
READABLE_CLASSES = ["STANDARD", "INTELLIGENT_TIERING", "STANDARD_IA", "GLACIER_IR"]
RUN_TIMEOUT_S = 900.0

# The job: bytes and lines of every staged file, then totals. Paths are read line by line and
# always quoted, so no file name is ever parsed by the shell.
DEMO_JOB = r"""
total_bytes=0; total_lines=0; files=0
while IFS= read -r f; do
  b=$(wc -c < "$f"); l=$(wc -l < "$f")
  printf '%s\t%s\t%s\n' "$b" "$l" "${f#"$HPCSTAGE_STAGED_ROOT"/}"
  total_bytes=$((total_bytes + b)); total_lines=$((total_lines + l)); files=$((files + 1))
done < "$HPCSTAGE_FILE_LIST" > "$HPCSTAGE_OUTPUT_DIR/counts.tsv"
printf 'files=%s\nbytes=%s\nlines=%s\nhost=%s\njob=%s\n' "$files" "$total_bytes" "$total_lines" \
  "$(hostname)" "$SLURM_JOB_ID" > "$HPCSTAGE_OUTPUT_DIR/summary.txt"
"""


def slurm_problem() -> str | None:
    """None when the local Slurm controller answers, else why not."""
    try:
        done = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15, check=False)
    except FileNotFoundError:
        return "the Slurm client (scontrol) is not installed"
    except subprocess.TimeoutExpired:
        return "scontrol ping did not answer within 15 s"
    if "is UP" in done.stdout:
        return None
    return f"scontrol ping says: {(done.stdout + done.stderr).strip() or 'nothing'}"


def require_slurm() -> None:
    problem = slurm_problem()
    if problem is not None:
        raise HpcstageError(
            f"the staging demo runs a real Slurm job, but the local Slurm is not running ({problem}): "
            "start it with `sudo scripts/slurm-local.sh start`"
        )


def demo_body(key: str, size: int) -> bytes:
    """Deterministic text of exactly ``size`` bytes, so the inventory's sizes stay true."""
    line = f"{key}\tdemo data for hpcstage staging\n".encode()
    repeats = size // len(line) + 1
    return (line * repeats)[:size]


def pick_subset(
    s3: Any, inventory_root_uri: str, limit: int = DEMO_OBJECTS
) -> tuple[str, list[ManifestEntry]]:
    """Up to ``limit`` small, readable objects under the first demo prefix that has any."""
    for prefix in DEMO_PREFIXES:
        found: list[ManifestEntry] = []
        selection: dict[str, Any] = {"max_size": DEMO_MAX_SIZE, "storage_classes": READABLE_CLASSES}
        if prefix:
            selection["prefixes"] = [prefix]
        select_objects(inventory_root_uri, selection, s3=s3, write=found.append)
        if found:
            return prefix, sorted(found, key=lambda e: e.key)[:limit]
    raise HpcstageError(
        f"the inventory at {inventory_root_uri} lists no object of at most {DEMO_MAX_SIZE} bytes"
    )


def _say(stream: IO[str], text: str) -> None:
    print(text, file=stream, flush=True)


def _progress(stream: IO[str]) -> Any:
    """Print each state as it is entered, and what the interesting ones produced."""

    def on_event(event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        if kind.endswith("StateEntered"):
            _say(stream, f"     -> {event['stateEnteredEventDetails']['name']}")
        elif kind.endswith("StateExited"):
            details = event["stateExitedEventDetails"]
            name = details["name"]
            state = json.loads(details.get("output") or "{}")
            if name == "Select":
                sel = state["selection"]
                _say(stream, f"        selected {sel['objects']} objects, {sel['bytes']:,} bytes")
            elif name in ("StagePoll", "ExportPoll", "ReleasePoll"):
                key = name[: -len("Poll")].lower()
                prog = state[key]
                _say(stream, f"        {key}: {prog['done']}/{prog['total']} {prog['state']}")
            elif name == "SubmitJob":
                _say(stream, f"        Slurm job {state['job']['job_id']} submitted")
            elif name == "JobPoll":
                job = state["job"]
                code = "" if job.get("exit_code") is None else f", exit code {job['exit_code']}"
                _say(stream, f"        Slurm job {job['job_id']}: {job['state']}{code}")
            elif name == "Verify":
                _say(stream, f"        {state['verify']['verified']} output file(s) verified in S3")
        elif kind == "ExecutionFailed":
            failed = event.get("executionFailedEventDetails", {})
            _say(stream, f"     !! {failed.get('error')}: {str(failed.get('cause', ''))[:500]}")

    return on_event


def demo_staging(
    aws: Any,
    deployed: Any,
    inventory_root_uri: str,
    workdir: str | os.PathLike[str],
    *,
    limit: int = DEMO_OBJECTS,
    stream: IO[str] | None = None,
) -> dict[str, Any]:
    """Stage ~``limit`` objects of the demo bucket into a Local target under ``workdir``, run a real
    Slurm job that counts bytes and lines of every staged file, export, verify and release.

    Returns the run's report plus what was checked. Raises HpcstageError if Slurm is not running,
    the execution fails, or the job's counts disagree with what was staged.
    """
    out = stream or sys.stdout
    require_slurm()
    s3 = aws.client("s3")
    results_bucket = deployed.name("ResultsBucket")
    prefix, subset = pick_subset(s3, inventory_root_uri, limit)
    data_bucket = subset[0].bucket
    _say(
        out,
        f"   staging {len(subset)} objects of at most {DEMO_MAX_SIZE // 1024} KiB under "
        f"s3://{data_bucket}/{prefix} into a Local target, then a real Slurm job over them",
    )
    # The demo seeds objects with sizes but no bodies; give the chosen ones bodies of those sizes.
    for entry in subset:
        s3.put_object(
            Bucket=entry.bucket,
            Key=entry.key,
            Body=demo_body(entry.key, entry.size),
            StorageClass=entry.storage_class,
        )
    run_name = f"demo-staging-{time.strftime('%Y%m%d-%H%M%S')}"
    keys_key = f"staging/demo-selections/{run_name}.txt"
    s3.put_object(Bucket=results_bucket, Key=keys_key, Body="".join(e.key + "\n" for e in subset).encode())
    root = Path(workdir).absolute() / "staging"
    event = {
        "inventory": inventory_root_uri,
        "selection": {"manifest": f"s3://{results_bucket}/{keys_key}"},
        "target": {"type": "local", "root": f"{root}/{{run_id}}"},
        "job": {"backend": "local", "command": DEMO_JOB.strip(), "time_limit_min": 10},
        "output": f"s3://{results_bucket}/staging-output/{{run_id}}/",
        "waits": {"poll_seconds": 1, "job_poll_seconds": 1, "job_max_polls": 900},
    }
    _say(out, f"   running the staging state machine ({run_name}):")
    started = time.monotonic()
    res = aws.run(
        deployed.arn("StagingStateMachine"),
        event,
        name=run_name,
        timeout_s=RUN_TIMEOUT_S,
        poll_s=0.5,
        on_event=_progress(out),
    )
    if not res.succeeded:
        raise HpcstageError(f"staging failed: {res.error}: {res.cause}")
    report: dict[str, Any] = dict(res.output)
    _say(out, f"   done in {time.monotonic() - started:.1f} s")

    output = parse_s3_url(report["output"])
    listing = s3.list_objects_v2(Bucket=output.bucket, Prefix=output.prefix)
    keys = sorted(o["Key"] for o in listing.get("Contents", []))
    counts = s3.get_object(Bucket=output.bucket, Key=f"{output.prefix}counts.tsv")["Body"].read().decode()
    summary = s3.get_object(Bucket=output.bucket, Key=f"{output.prefix}summary.txt")["Body"].read().decode()
    rows = [line.split("\t", 2) for line in counts.splitlines()]
    counted = {rel: int(size) for size, _lines, rel in rows}
    expected = {e.key: e.size for e in subset}
    _say(out, f"   job {report['job_id']} exit code {report['exit_code']}; exported: {', '.join(keys)}")
    _say(out, "   summary.txt: " + " ".join(summary.split()))
    for size, lines, rel in rows[:3]:
        _say(out, f"   counts.tsv: {rel}  {int(size):,} bytes  {lines} lines")
    if counted != expected:
        raise HpcstageError(
            f"the job counted {len(counted)} files / {sum(counted.values()):,} bytes, but "
            f"{len(expected)} files / {sum(expected.values()):,} bytes were staged"
        )
    _say(
        out,
        f"   counts agree: {len(counted)} files, {sum(counted.values()):,} bytes; "
        f"{report['inputs_released']} inputs and {report['outputs']} outputs released from {root / run_name}",
    )
    report.update(
        {
            "prefix": prefix,
            "output_keys": keys,
            "files_counted": len(counted),
            "bytes_counted": sum(counted.values()),
            "cache": str(root / run_name),
        }
    )
    return report
