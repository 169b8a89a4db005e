"""FileCacheTarget: hsm_state parsing, the exact (quoted) SSM commands, output past GetCommandInvocation's
24,000 characters read from S3, and release only of verified files. SSM is a real boto3 client under
Stubber; the work bucket is moto S3."""

from __future__ import annotations

import base64
import hashlib
import shlex
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hpcstage import shell
from hpcstage.ssm import STDOUT_INLINE_LIMIT
from hpcstage.staging import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    FileCacheTarget,
    ManifestEntry,
    ReleaseRefusedError,
    StagingError,
    StagingManifest,
    make_target,
)
from hpcstage.staging.hsm import (
    ARCHIVE_SCRIPT,
    COUNT_SCRIPT,
    RELEASE_SCRIPT,
    RESTORE_SCRIPT,
    STATE_SCRIPT,
    HsmState,
    bash_command,
    encode_path_list,
    parse_hsm_state,
    parse_state_report,
)
from moto import mock_aws
from test_staging_support import (
    INSTANCE_ID,
    WORK_BUCKET,
    WORK_URL,
    command_id,
    counts_stdout,
    expect_command,
    ssm_output_key,
)

SRC = "cache-source"
RUN = "fc run #7"  # spaces and # make the list URL need quoting
ARCHIVED = "\t(0x00000009) exists archived, archive_id:1"
DIRTY = "\t(0x0000000b) exists dirty archived, archive_id:1"


@pytest.fixture
def clients() -> Iterator[dict[str, Any]]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=WORK_BUCKET)
        ssm = boto3.client("ssm", region_name="us-east-1")
        with Stubber(ssm) as stub:
            yield {"s3": s3, "ssm": ssm, "stub": stub}
            stub.assert_no_pending_responses()


def make(clients: dict[str, Any], **overrides: Any) -> FileCacheTarget:
    config = {
        "type": "filecache",
        "mount_point": "/cache",
        "cache_path": "/ns1",
        "data_repository_path": f"s3://{SRC}/data",
        "head_node_instance_id": INSTANCE_ID,
        "work_url": WORK_URL,
        "run_id": RUN,
        **overrides,
    }
    target = make_target(config, clients, sleep=lambda s: None)
    assert isinstance(target, FileCacheTarget)
    return target


def read_list(s3: Any, url: str) -> list[str]:
    bucket, key = url.removeprefix("s3://").split("/", 1)
    raw = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return [p.decode() for p in raw.split(b"\0")[:-1]]


def list_url(purpose: str, paths: list[str]) -> str:
    """Where HeadNode puts a path list: named by the SHA-256 of its contents."""
    digest = hashlib.sha256(encode_path_list(paths)).hexdigest()[:20]
    return f"s3://{WORK_BUCKET}/staging/{RUN}/lists/{purpose}-{digest}.nul"


def report(states: dict[str, str]) -> str:
    return "".join(f"{base64.b64encode(p.encode()).decode()}\t{s.strip()}\n" for p, s in states.items())


@pytest.mark.parametrize(
    ("text", "flags", "exported", "released"),
    [
        ("\t(0x00000009) exists archived, archive_id:1", {"exists", "archived"}, True, False),
        (" (0x0000000b) exists dirty archived, archive_id:1", {"exists", "dirty", "archived"}, False, False),
        (
            "\t(0x0000000d) released exists archived, archive_id:1",
            {"released", "exists", "archived"},
            True,
            True,
        ),
        ("\t(0x00000000)", set(), False, False),
        (
            "\t(0x00000049) exists archived lost_from_hsm, archive_id:1",
            {"exists", "archived", "lost"},
            False,
            False,
        ),
        (
            "\t(0x00000019) exists archived never_release, archive_id:2",
            {"exists", "archived", "norelease"},
            True,
            False,
        ),
        ("exists archived", {"exists", "archived"}, True, False),  # words only, no mask
        ("released exists dirty", {"released", "exists", "dirty"}, False, True),
    ],
)
def test_hsm_state_parsing(text: str, flags: set[str], exported: bool, released: bool) -> None:
    state = parse_hsm_state(text)
    assert (state.flags, state.exported, state.released) == (frozenset(flags), exported, released)


def test_hsm_state_parsing_refuses_what_it_cannot_read() -> None:
    with pytest.raises(StagingError, match="cannot read lfs hsm_state output"):
        parse_hsm_state("lfs: permission denied")
    assert parse_hsm_state("\t(0x00000009) exists archived, archive_id:3").archive_id == 3


def test_state_report_decodes_any_file_name() -> None:
    names = [
        "/c/ns1/plain",
        "/c/ns1/new\nline: (0x00000009) exists archived",
        "/c/ns1/tab\there",
        "/c/ns1/gone",
    ]
    text = report(
        {names[0]: ARCHIVED, names[1]: DIRTY, names[2]: "ERROR lfs: No data available", names[3]: "MISSING"}
    )
    states = parse_state_report(text)
    assert list(states) == names
    assert states[names[0]] == HsmState(frozenset({"exists", "archived"}), 1)
    assert isinstance(states[names[1]], HsmState) and not states[names[1]].exported  # type: ignore[union-attr]
    assert states[names[2]] == "ERROR lfs: No data available"
    assert states[names[3]] == "MISSING"
    with pytest.raises(StagingError, match="unexpected line"):
        parse_state_report("no tab here\n")


def test_stage_sends_exactly_the_quoted_restore_and_count_commands(clients: dict[str, Any]) -> None:
    target = make(clients)
    keys = ["data/in/a.nc", "data/in/it's $(x).nc", "data/in/"]
    handle = target.stage(StagingManifest.from_entries([ManifestEntry(SRC, k, 1) for k in keys]))
    url = handle.data["restore_list"]
    assert url == list_url("restore", ["/cache/ns1/in/a.nc", "/cache/ns1/in/it's $(x).nc"])
    assert read_list(clients["s3"], url) == ["/cache/ns1/in/a.nc", "/cache/ns1/in/it's $(x).nc"]

    restore = f"bash -c {shlex.quote(RESTORE_SCRIPT)} hsm-restore '{url}' 16"
    assert restore == bash_command("hsm-restore", RESTORE_SCRIPT, url, "16")
    assert shlex.split(restore) == ["bash", "-c", RESTORE_SCRIPT, "hsm-restore", url, "16"]
    expect_command(clients["stub"], commands=[restore])
    progress = target.stage_progress(handle)
    assert (progress.state, progress.phase, progress.total) == (RUNNING, "restore", 2)

    count = shell.command(["bash", "-c", COUNT_SCRIPT, "hsm-count", url, "16"])
    expect_command(clients["stub"], commands=[count], stdout=counts_stdout(2, pending=0))
    progress = target.stage_progress(handle)
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, 2, 2)


def test_selected_files_missing_from_the_cache_fail_the_stage(clients: dict[str, Any]) -> None:
    target = make(clients)
    keys = ["data/a", "data/b", "data/c"]
    handle = target.stage(StagingManifest.from_entries([ManifestEntry(SRC, k, 1) for k in keys]))
    expect_command(clients["stub"])
    target.stage_progress(handle)
    expect_command(clients["stub"], stdout=counts_stdout(2, pending=0))
    progress = target.stage_progress(handle)
    assert (progress.state, progress.failed, progress.total) == (FAILED, 1, 3)
    assert progress.message == "1 of 3 selected file(s) are not on the file system"
    again = target.stage_progress(handle)  # no further SSM command: the Stubber has none queued
    assert (again.state, again.message) == (FAILED, progress.message)


def test_without_prefetch_staging_is_lazy(clients: dict[str, Any]) -> None:
    target = make(clients, prefetch=False)
    manifest = StagingManifest.from_entries([ManifestEntry(SRC, "data/x", 1)])
    progress = target.stage_progress(target.stage(manifest))
    assert (progress.state, progress.done) == (SUCCEEDED, 1)
    assert target.job_paths(manifest).files == ["/cache/ns1/x"]


def test_export_archives_and_waits_until_no_action_is_pending(clients: dict[str, Any]) -> None:
    target = make(clients, restore_parallelism=4)
    stub = clients["stub"]
    cid = command_id()
    expect_command(stub, cid=cid)
    sent = []
    clients["ssm"].meta.events.register(
        "provide-client-params.ssm.SendCommand",
        lambda params, **_: sent.append(params["Parameters"]["commands"]),
    )
    handle = target.export(["results/run 1", "logs"])
    url = handle.data["archive_list"]
    assert read_list(clients["s3"], url) == ["/cache/ns1/results/run 1", "/cache/ns1/logs"]
    assert sent == [[bash_command("hsm-archive", ARCHIVE_SCRIPT, url, "4")]]
    count = [bash_command("hsm-count", COUNT_SCRIPT, url, "4")]
    expect_command(stub, commands=count, stdout=counts_stdout(40, pending=28))
    progress = target.export_progress(handle)
    assert (progress.state, progress.done, progress.total) == (RUNNING, 12, 40)
    expect_command(stub, commands=count, stdout=counts_stdout(40, pending=0))
    progress = target.export_progress(handle)
    assert (progress.state, progress.done, progress.total) == (SUCCEEDED, 40, 40)


def test_state_output_past_24000_characters_is_read_from_s3(clients: dict[str, Any]) -> None:
    target = make(clients)
    files = {f"/cache/ns1/out/file-{i:05d}.dat": ARCHIVED for i in range(400)}
    files["/cache/ns1/out/file-00399.dat"] = DIRTY  # its line lies beyond the inline cut
    full = report(files)
    assert len(full) > STDOUT_INLINE_LIMIT + 1000
    cid = command_id()
    clients["s3"].put_object(Bucket=WORK_BUCKET, Key=ssm_output_key(RUN, cid), Body=full.encode())
    expect_command(clients["stub"], cid=cid, stdout=full[:STDOUT_INLINE_LIMIT])
    result = target.verify_exported(["out"])
    assert result.checked == 400
    assert result.missing == ["out/file-00399.dat"]
    assert result.reasons["out/file-00399.dat"] == "hsm_state: archived dirty exists"
    assert len(result.verified) == 399


def test_release_refuses_unverified_files_and_releases_exactly_the_verified_ones(
    clients: dict[str, Any],
) -> None:
    target = make(clients)
    stub, s3 = clients["stub"], clients["s3"]
    expect_command(
        stub,
        commands=[bash_command("hsm-state", STATE_SCRIPT, list_url("verify", ["/cache/ns1/r"]), "16")],
        stdout=report({"/cache/ns1/r/a": ARCHIVED, "/cache/ns1/r/b": DIRTY, "/cache/ns1/r/c": "MISSING"}),
    )
    with pytest.raises(ReleaseRefusedError) as raised:
        target.release(["r"])
    assert raised.value.unverified == ["r/b", "r/c"] and raised.value.total == 2
    # Only the hsm-state command was sent: no hsm_release reached the head node.

    expect_command(stub, stdout=report({"/cache/ns1/r/a": ARCHIVED, "/cache/ns1/r/sub/d": ARCHIVED}))
    sent: list[list[str]] = []
    clients["ssm"].meta.events.register(
        "provide-client-params.ssm.SendCommand",
        lambda params, **_: sent.append(params["Parameters"]["commands"]),
    )
    expect_command(stub)
    handle = target.release(["r"])
    release_cmd = shlex.split(sent[-1][0])
    assert release_cmd[:4] == ["bash", "-c", RELEASE_SCRIPT, "hsm-release"]
    assert read_list(s3, release_cmd[4]) == ["/cache/ns1/r/a", "/cache/ns1/r/sub/d"]
    progress = target.release_progress(handle)
    assert (progress.state, progress.done) == (SUCCEEDED, 2)


def test_encode_path_list_refuses_nul() -> None:
    assert encode_path_list(["/a b", "/c\nd"]) == b"/a b\0/c\nd\0"
    with pytest.raises(StagingError, match="NUL"):
        encode_path_list(["/a\0b"])
