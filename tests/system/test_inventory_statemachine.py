"""statemachines/inventory.asl.json executed offline: the real ASL and handlers, moto S3 + DynamoDB.

What the round-based machine's tests asserted and still means something for the fleet: the outputs exact
(counts, the artefacts of a run, the target's _latest pointer), an empty bucket and a prefix, the first state
refusing a bad input, a run that is not completely listed failing instead of reducing a partial count, and
an audit seeded from the previous run that reports the exact change. The protocol itself (splits, takeovers,
a lister that dies) is tested in test_inventory_fleet.py and tests/functional/test_fleet_moto.py.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hpcstage.inventory import fleet
from hpcstage.inventory.output import INVENTORY_SCHEMA, hive_root, latest_key
from hpcstage.inventory.runner import seeds_from_hints
from hpcstage.localcli import seed_bucket

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet, "PAGE_SIZE", 100)  # many pages (splits, checkpoints) from a few thousand keys
    monkeypatch.setattr(fleet, "MIN_SPLIT_PAGES", 2)


def run(stack: Any, event: Any) -> Any:
    aws, deployed = stack
    return aws.run(deployed.arn("InventoryStateMachine"), event, timeout_s=180, poll_s=0.2)


def make_bucket(stack: Any, objects: dict[str, tuple[int, str]], name: str | None = None) -> str:
    aws, _ = stack
    name = name or f"sm-{uuid.uuid4().hex[:12]}"
    aws.client("s3").create_bucket(Bucket=name)
    seed_bucket(name, objects)
    return name


def get(stack: Any, uri_or_bucket: str, key: str | None = None) -> bytes:
    aws, _ = stack
    if key is None:
        uri_or_bucket, key = uri_or_bucket[len("s3://") :].split("/", 1)
    body: bytes = aws.client("s3").get_object(Bucket=uri_or_bucket, Key=key)["Body"].read()
    return body


def entered(res: Any) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in res.history if e["type"].endswith("StateEntered")]


def scheduled_functions(res: Any, stack: Any) -> list[str]:
    """The logical ids of the functions the execution's Task states invoked, in order."""
    _, deployed = stack
    names = {
        deployed.arn(f): f.removeprefix("Fleet").removesuffix("Function")
        for f in ("FleetLaunchFunction", "FleetReduceFunction")
    }
    return [
        names[json.loads(e["taskScheduledEventDetails"]["parameters"])["FunctionName"]]
        for e in res.history
        if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resourceType"] == "lambda"
    ]


def test_a_run_writes_every_artefact_of_an_inventory(local_stack: Any) -> None:
    objects = {f"d{i % 3}/f{i:05d}": (i, "GLACIER" if i % 7 == 0 else "STANDARD") for i in range(1200)}
    bucket = make_bucket(local_stack, objects)
    res = run(local_stack, {"bucket": bucket, "max_listers": 2, "streams": 2, "stats_depth": 2})
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    # the lister that reported the run complete reduced it: the Reduce state (the only one that invokes the
    # reduce function) was skipped
    assert entered(res) == ["ValidateInput", "Launch", "AllListed", "NotifyCompleted", "Done"]
    assert scheduled_functions(res, local_stack) == ["Launch", "Launch"]  # ValidateInput, Launch
    out = res.output
    results_bucket = out["summary"][len("s3://") :].split("/", 1)[0]
    root = out["summary"][len("s3://") :].split("/", 1)[1].rsplit("/", 1)[0]
    assert root == f"inventory/{bucket}/{res.execution_arn.rsplit(':', 1)[1]}"
    assert (out["objects"], out["bytes"]) == (1200, sum(s for s, _ in objects.values()))
    assert (out["ranges_planned"], out["launches"]) == (1, 1)
    assert out["list_requests"] >= 12 and out["list_cost_usd"] == pytest.approx(
        out["list_requests"] * 0.005 / 1000
    )
    summary = json.loads(get(local_stack, out["summary"]))
    assert {k: summary[k] for k in ("bucket", "prefix", "objects", "bytes", "list_requests", "retries")} == {
        k: out[k] for k in ("bucket", "prefix", "objects", "bytes", "list_requests", "retries")
    }
    # manifest.json + Parquet parts in the S3 Inventory schema, every object once
    manifest = json.loads(get(local_stack, results_bucket, f"{root}/manifest.json"))
    assert (manifest["sourceBucket"], manifest["destinationBucket"], manifest["fileFormat"]) == (
        bucket,
        f"arn:aws:s3:::{results_bucket}",
        "Parquet",
    )
    keys: list[str] = []
    for f in manifest["files"]:
        assert f["key"].startswith(f"{root}/data/")
        table = pq.read_table(io.BytesIO(get(local_stack, results_bucket, f["key"])))
        assert table.schema.remove_metadata().equals(INVENTORY_SCHEMA.remove_metadata())
        keys += table.column("key").to_pylist()
    assert sorted(keys) == sorted(objects)
    # report, ranges (an audit's seeds), the Hive partition with its DDL, and the target's _latest pointer
    report = get(local_stack, results_bucket, f"{root}/report.txt").decode()
    assert report.startswith(f"hpcstage inventory of s3://{bucket}/\n")
    assert re.search(r"^  objects +1,200$", report, re.M), report
    assert '<p id="totals">1,200 objects' in get(local_stack, results_bucket, f"{root}/report.html").decode()
    ranges = json.loads(get(local_stack, results_bucket, f"{root}/ranges.json"))
    assert sum(r["objects"] for r in ranges) == 1200
    hive = hive_root("inventory", bucket, "")
    listed = local_stack[0].client("s3").list_objects_v2(Bucket=results_bucket, Prefix=hive + "/")["Contents"]
    assert sorted(re.sub(r"dt=[^/]+", "dt=*", o["Key"]) for o in listed) == [
        f"{hive}/athena.sql",
        f"{hive}/dt=*/symlink.txt",
    ]
    latest = json.loads(get(local_stack, results_bucket, latest_key("inventory", bucket, "")))
    assert latest == {"root": root, "finished": summary["finished"]}


def test_a_lister_short_of_time_leaves_the_reduce_to_the_reduce_state_with_the_same_output(
    local_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the same bucket twice, one lister of one stream (the same requests each time): reduced in the
    lister, then by the Reduce state because the winner has less than REDUCE_MARGIN_S left (the template's
    listers have 900 s). The two executions end with the same output (but where it is, and how long it took)."""
    objects = {f"d{i % 4}/f{i:05d}": (i, "STANDARD") for i in range(700)}
    bucket = make_bucket(local_stack, objects)
    event = {"bucket": bucket, "max_listers": 1, "streams": 1}
    fast = run(local_stack, event)
    assert fast.status == "SUCCEEDED", (fast.error, fast.cause)
    assert scheduled_functions(fast, local_stack) == ["Launch", "Launch"]
    monkeypatch.setattr(fleet, "REDUCE_MARGIN_S", 901.0)
    slow = run(local_stack, event)
    assert slow.status == "SUCCEEDED", (slow.error, slow.cause)
    assert entered(slow) == ["ValidateInput", "Launch", "AllListed", "Reduce", "NotifyCompleted", "Done"]
    assert scheduled_functions(slow, local_stack) == ["Launch", "Launch", "Reduce"]

    def where_and_when(out: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in out.items() if k not in ("summary", "seconds")}

    assert where_and_when(slow.output) == where_and_when(fast.output)
    assert (fast.output["objects"], fast.output["bytes"]) == (700, sum(range(700)))
    assert set(slow.output) == set(fast.output)


def test_a_run_the_listers_reduce_finds_incomplete_fails_as_before_in_the_reduce_state(
    local_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reduce_run raises IncompleteInventoryError in the winning lister and again in the Reduce state: the
    execution fails through NotifyFailed with that error and message, as it did before listers reduced."""
    from hpcstage.errors import IncompleteInventoryError

    bucket = make_bucket(local_stack, {f"k{i:04d}": (1, "STANDARD") for i in range(300)})
    calls: list[str] = []

    def incomplete(**kw: Any) -> dict[str, Any]:
        calls.append(kw["cfg"].bucket)
        raise IncompleteInventoryError("statistics count 299 objects, the leases 300")

    monkeypatch.setattr(fleet, "reduce_run", incomplete)
    res = run(local_stack, {"bucket": bucket, "max_listers": 1, "streams": 1})
    assert (res.status, res.error) == ("FAILED", "IncompleteInventoryError")
    assert json.loads(res.cause)["errorMessage"] == "statistics count 299 objects, the leases 300"
    assert calls == [bucket, bucket]  # the lister's attempt, then the Reduce state's
    assert entered(res)[-5:] == ["Launch", "AllListed", "Reduce", "NotifyFailed", "Failed"]


def test_empty_bucket_and_prefix(local_stack: Any) -> None:
    bucket = make_bucket(local_stack, {"a/1": (1, "STANDARD"), "b/2": (2, "STANDARD"), "b3": (4, "STANDARD")})
    res = run(local_stack, {"bucket": bucket, "prefix": "b/"})
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    assert (res.output["objects"], res.output["bytes"], res.output["prefix"]) == (1, 2, "b/")
    empty = make_bucket(local_stack, {})
    res = run(local_stack, {"bucket": empty})
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    assert (res.output["objects"], res.output["bytes"]) == (0, 0)


def test_malformed_input_fails_in_the_first_state_with_its_one_line(local_stack: Any) -> None:
    res = run(local_stack, {"bucket": "ok-bucket", "max_concurrency": 4})  # the round machine's field
    assert (res.status, res.error) == ("FAILED", "InputError")
    assert json.loads(res.cause)["errorMessage"] == (
        "unknown input field(s): max_concurrency; allowed: access, audit, bucket, checkpoint_pages, "
        "lease_seconds, max_launches, max_listers, prefix, stats_depth, streams, versions"
    )
    assert entered(res) == ["ValidateInput", "NotifyFailed", "Failed"]


def test_a_missing_bucket_fails_the_launch_once_instead_of_relaunching(local_stack: Any) -> None:
    res = run(local_stack, {"bucket": f"missing-{uuid.uuid4().hex[:8]}", "max_listers": 1})
    # moto 5.2.5's SendTaskFailure handler passes the error on and drops the cause (responses.py reads only
    # taskToken and error), so only the error name can be checked offline
    assert (res.status, res.error) == ("FAILED", "BucketError")
    assert entered(res).count("Launch") == 1 and "Reduce" not in entered(res)


def test_a_run_that_is_not_completely_listed_fails_and_is_never_reduced(
    local_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every lister stops at its "deadline" after two pages: each launch lists a little, the launches run out,
    and the execution fails in Launch -- a partial listing is never counted (the round machine's "a failed
    shard is never counted as zero")."""
    bucket = make_bucket(local_stack, {f"k{i:05d}": (3, "STANDARD") for i in range(3000)})
    monkeypatch.setattr(fleet.Lister, "near_deadline", lambda self: self._pages >= 2)  # noqa: SLF001
    res = run(local_stack, {"bucket": bucket, "max_listers": 1, "streams": 1, "max_launches": 2})
    assert (res.status, res.error) == ("FAILED", "IncompleteInventoryError")
    assert re.fullmatch(
        r"the fleet was launched 2 times and \d+ ranges are still not listed",
        json.loads(res.cause)["errorMessage"],
    ), res.cause
    assert entered(res).count("Launch") == 3  # two launches, and the third attempt that refuses to start
    assert "Reduce" not in entered(res) and entered(res)[-2:] == ["NotifyFailed", "Failed"]


def test_audit_seeds_from_the_previous_run_and_reports_the_exact_change(local_stack: Any) -> None:
    aws, _ = local_stack
    bucket = make_bucket(local_stack, {f"d{i % 4}/f{i:05d}": (10, "STANDARD") for i in range(3000)})
    event = {"bucket": bucket, "max_listers": 2, "streams": 2}
    first = run(local_stack, event)
    assert first.status == "SUCCEEDED", (first.error, first.cause)
    assert "diff" not in first.output
    seed_bucket(bucket, {"d9/new": (5, "STANDARD"), "d0/f00000": (12, "STANDARD")})  # one added, one changed
    aws.client("s3").delete_object(Bucket=bucket, Key="d1/f00001")  # one removed
    second = run(local_stack, {**event, "audit": True})
    assert second.status == "SUCCEEDED", (second.error, second.cause)
    assert second.output["objects"] == 3000
    assert second.output["diff"] == {
        "objects": 0,
        "bytes": 5 - 10 + 2,
        "added": {"objects": 1, "bytes": 5},
        "removed": {"objects": 1, "bytes": 10},
        "changed": {"objects": 1, "bytes": 2},
    }
    previous_ranges = json.loads(
        get(local_stack, first.output["summary"].replace("summary.json", "ranges.json"))
    )
    seeds = seeds_from_hints(previous_ranges, min(fleet.MAX_PIECES, 2 * 2))
    assert len(seeds) > 1 and second.output["ranges_planned"] == len(seeds)
    summary = json.loads(get(local_stack, second.output["summary"]))
    assert summary["ranges_planned"] == len(seeds) and summary["diff"]["exact"]["added"] == {
        "objects": 1,
        "bytes": 5,
    }


def test_the_documented_example_inputs_run(local_stack: Any) -> None:
    """events/inventory-{bucket,prefix,audit}.json, as an operator starts them (inventory-concurrency.json is
    the same input with 200 listers, which the schema test checks)."""
    make_bucket(
        local_stack,
        {"genomics/a": (1, "STANDARD"), "genomics/b": (2, "STANDARD"), "imaging/c": (4, "GLACIER")},
        name="demo-research-data",
    )
    got = {}
    for name in ("inventory-bucket.json", "inventory-prefix.json", "inventory-audit.json"):
        res = run(local_stack, json.loads((ROOT / "events" / name).read_text()))
        assert res.status == "SUCCEEDED", (name, res.error, res.cause)
        got[name] = (res.output["objects"], res.output["bytes"], res.output.get("diff", {}).get("objects"))
    assert got == {
        "inventory-bucket.json": (3, 7, None),
        "inventory-prefix.json": (2, 3, None),
        "inventory-audit.json": (3, 7, 0),
    }
