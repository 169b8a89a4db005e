"""S3 served from a process of its own (LocalAws(server=True, s3_process=True), as `hpcstage demo` runs it):
what it serves, how it is seeded, and that it never outlives its parent — error, Ctrl-C, or SIGKILL."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hpcstage.local import LocalAws
from hpcstage.local.s3process import S3ProcessError

BUCKET = "s3process-tests"
# A bounded wait for a process to end (the tests assert that it ends, not how fast).
END_WAIT_S = 60.0


def ended(pid: int) -> bool:
    """The process is gone or a zombie (exited, not yet reaped by whoever adopted it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_ended(pid: int) -> bool:
    deadline = time.monotonic() + END_WAIT_S
    while not ended(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_s3_is_served_by_another_process_with_the_listing_patch_and_seeded_objects() -> None:
    from moto.s3.models import s3_backends

    objects = {f"d{i % 7}/k{i:05d}": (i * 3, "GLACIER" if i % 5 == 0 else "STANDARD") for i in range(2500)}
    with LocalAws(server=True, s3_process=True) as aws:
        assert aws.s3 is not None
        assert aws.s3_endpoint_url == os.environ["AWS_ENDPOINT_URL_S3"] == aws.s3.endpoint_url
        assert aws.s3_endpoint_url != aws.endpoint_url
        assert aws.s3.patches == ["s3_listing"]
        s3 = aws.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        assert aws.seed_objects(BUCKET, objects, {"d0/k00000": 10.0}) == 2500
        started = time.monotonic()
        listed = {
            o["Key"]: (o["Size"], o["StorageClass"])
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page["Contents"]
        }
        head_old = s3.head_object(Bucket=BUCKET, Key="d0/k00000")["LastModified"]
        head_new = s3.head_object(Bucket=BUCKET, Key="d5/k00005")["LastModified"]
        lists = aws.s3.lists(started)
        # this process's own moto S3 never saw the bucket: S3 is the other process's
        in_process = s3_backends["123456789012"]["aws"].buckets
    assert listed == objects
    assert 9.9 * 86400 < (head_new - head_old).total_seconds() < 10.1 * 86400
    # 2,500 keys: three pages of 1,000, rendered by the S3 process itself (it has no readers)
    assert [(bucket, reader) for _, _, bucket, reader in lists] == [(BUCKET, -1)] * 3
    assert BUCKET not in in_process
    assert "AWS_ENDPOINT_URL_S3" not in os.environ


def listed(s3: Any, bucket: str) -> dict[str, tuple[int, str, Any]]:
    return {
        o["Key"]: (o["Size"], o["StorageClass"], o["LastModified"])
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", ())
    }


def test_readers_render_a_seeded_buckets_pages_until_a_request_may_change_it() -> None:
    """With readers, the ListObjectsV2 pages of a bucket seeded and not changed since are rendered by the
    readers in turn (a continuation token goes back to the reader that issued it), with the same keys, sizes,
    classes and LastModified as the front holds; the first request that may change the bucket thaws it, and
    from then on the front answers, with the change."""
    objects = {f"d{i % 7}/k{i:05d}": (i * 3, "GLACIER" if i % 5 == 0 else "STANDARD") for i in range(2500)}
    with LocalAws(server=True, s3_process=True, s3_readers=2) as aws:
        assert aws.s3 is not None
        s3 = aws.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.create_bucket(Bucket="other-bucket")
        aws.seed_objects(BUCKET, objects, {"d0/k00000": 10.0})
        assert aws.s3.frozen() == [BUCKET]
        started = time.monotonic()
        first, second = listed(s3, BUCKET), listed(s3, BUCKET)
        relayed = aws.s3.lists(started)
        head = s3.head_object(Bucket=BUCKET, Key="d0/k00000")["LastModified"]
        s3.put_object(Bucket="other-bucket", Key="x", Body=b"1")  # another bucket: this one stays frozen
        assert aws.s3.frozen() == [BUCKET]
        s3.put_object(Bucket=BUCKET, Key="d0/new", Body=b"12")
        assert aws.s3.frozen() == []
        changed_at = time.monotonic()
        after = listed(s3, BUCKET)
        served = aws.s3.lists(changed_at)
        readers = list(aws.s3.readers)
        aws.seed_objects(BUCKET, {"d9/late": (5, "STANDARD")})  # changed over HTTP: never frozen again
        assert aws.s3.frozen() == []
    assert {k: v[:2] for k, v in first.items()} == objects
    assert second == first
    assert first["d0/k00000"][2] == head
    # two listings of three pages: each listing's pages from one reader, the two listings from both
    assert [(b, r) for _, _, b, r in relayed] == [(BUCKET, 0)] * 3 + [(BUCKET, 1)] * 3
    assert after == {**first, "d0/new": (2, "STANDARD", after["d0/new"][2])}
    assert [(b, r) for _, _, b, r in served] == [(BUCKET, -1)] * 3
    assert all(r.proc.poll() == 0 for r in readers)  # stopped with the front


def test_a_bucket_holding_more_than_was_seeded_is_not_handed_to_readers() -> None:
    with LocalAws(server=True, s3_process=True, s3_readers=1) as aws:
        assert aws.s3 is not None
        s3 = aws.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="put-before", Body=b"")
        aws.seed_objects(BUCKET, {"k": (1, "STANDARD")})
        assert aws.s3.frozen() == []
        assert sorted(listed(s3, BUCKET)) == ["k", "put-before"]


@pytest.mark.parametrize(
    ("host", "path_style"),
    [
        ("127.0.0.1:5000", True),
        ("localhost:5000", True),
        ("[::1]:5000", True),
        ("10.1.2.3", True),
        ("bucket.localhost:5000", False),
        ("bucket.s3.us-east-1.amazonaws.com", False),
        ("", False),
    ],
)
def test_only_a_request_to_an_address_names_its_bucket_in_the_path(host: str, path_style: bool) -> None:
    from hpcstage.local.s3process import _path_style

    assert _path_style(host) is path_style


def test_a_new_listing_goes_to_the_least_busy_reader_and_a_token_to_its_own() -> None:
    from hpcstage.local.s3process import _Router

    router = _Router(app=None)
    assert router.pick(None) is None  # no readers: the front answers
    router.readers = [("127.0.0.1", 1), ("127.0.0.1", 2), ("127.0.0.1", 3)]
    router.inflight = [0, 0, 0]
    assert [router.pick(None) for _ in range(4)] == [0, 1, 2, 0]  # in turn among equals
    router.inflight = [2, 1, 1]
    assert [router.pick(None) for _ in range(2)] == [1, 2]  # the least busy, in turn among those
    router.inflight = [0, 3, 3]
    router.tokens["t-1"] = 2
    assert router.pick("t-1") == 2  # busy, but the token is its
    assert router.pick("t-unknown") is None
    assert router.pick(None) == 0


def test_readers_need_the_s3_process() -> None:
    with pytest.raises(ValueError, match=r"s3_readers=\.\.\.\) needs s3_process=True"):
        LocalAws(server=True, s3_readers=2)


def test_seeding_a_missing_bucket_is_a_one_line_error() -> None:
    with LocalAws(server=True, s3_process=True) as aws:
        with pytest.raises(S3ProcessError, match=r"^the S3 process failed seed: MissingBucket: "):
            aws.seed_objects("no-such-bucket", {"k": (1, "STANDARD")})
        assert aws.s3 is not None
        assert aws.s3.proc.poll() is None  # a bad command does not end the server


def test_s3_process_needs_the_server_mode() -> None:
    with pytest.raises(ValueError, match=r"s3_process=True\) needs server=True"):
        LocalAws(s3_process=True)


@pytest.mark.parametrize("interrupt", [RuntimeError("boom"), KeyboardInterrupt()])
def test_the_s3_process_is_stopped_when_the_block_fails(interrupt: BaseException) -> None:
    procs: list[subprocess.Popen[str]] = []
    with pytest.raises(type(interrupt)), LocalAws(server=True, s3_process=True) as aws:
        assert aws.s3 is not None
        procs.append(aws.s3.proc)
        raise interrupt
    assert procs[0].poll() == 0  # stopped by closing its stdin, not killed
    assert aws.s3 is None
    assert "AWS_ENDPOINT_URL_S3" not in os.environ


@pytest.mark.parametrize("interrupt", [RuntimeError("inventory failed"), KeyboardInterrupt()])
def test_the_demo_stops_its_s3_process_after_a_failure(
    interrupt: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpcstage import localcli

    seen: list[Any] = []

    def failing_run(aws: Any, deployed: Any, event: Any, timeout_s: float = 0) -> Any:
        seen.append(
            (
                [aws.s3.proc, *(r.proc for r in aws.s3.readers)],
                aws.client("s3").list_objects_v2(Bucket=localcli.DEMO_BUCKET)["KeyCount"],
            )
        )
        raise interrupt

    monkeypatch.setattr(localcli, "run_inventory_machine", failing_run)
    for name, value in localcli.QUIET_ENV.items():  # the demo sets them; restored after the test
        monkeypatch.setenv(name, value)
    with pytest.raises(type(interrupt)):
        localcli.cmd_demo(argparse.Namespace(objects=120, workdir=str(tmp_path)))
    procs, seeded = seen[0]
    assert seeded == 120
    assert len(procs) == 1 + localcli.demo_s3_readers()  # a reader a core: 2 here (none on one core)
    assert [p.poll() for p in procs] == [0] * len(procs)


def test_the_s3_process_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from hpcstage.local import LocalAws\n"
        "with LocalAws(server=True, s3_process=True, s3_readers=1) as aws:\n"
        "    print(aws.s3.pid, aws.s3.readers[0].pid, flush=True)\n"
        "    time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child, reader = map(int, parent.stdout.readline().split())
        assert not ended(child)
        assert not ended(reader)
    finally:
        parent.send_signal(signal.SIGKILL)  # no cleanup runs in the parent
        parent.wait(END_WAIT_S)
        if parent.stdout is not None:
            parent.stdout.close()
    assert wait_ended(child)  # it saw its stdin close when the parent died
    assert wait_ended(reader)  # and so did the reader
