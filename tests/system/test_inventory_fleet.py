"""statemachines/inventory.asl.json (the fleet) executed offline: the real ASL and handlers, moto S3 + DynamoDB.

The launcher invokes the listers with InvocationType=Event; the local runtime runs each asynchronous invoke
in its own thread (motopatch "lambda"), so the listers run concurrently and answer the Launch task's token
with SendTaskSuccess, which completes the `.waitForTaskToken` task in moto's interpreter.
"""

from __future__ import annotations

import random
import threading
import uuid
from typing import Any

import pytest
from hpcstage.inventory import fleet
from hpcstage.localcli import seed_bucket


@pytest.fixture
def fleet_stack(local_stack: tuple[Any, Any]) -> tuple[Any, Any]:
    return local_stack  # tests/system/conftest.py: the template deployed once per module


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet, "PAGE_SIZE", 100)  # many pages (splits, checkpoints) from a few thousand keys
    monkeypatch.setattr(fleet, "MIN_SPLIT_PAGES", 2)  # and ranges of 2 such pages worth splitting


def run(stack: Any, event: Any) -> Any:
    aws, deployed = stack
    return aws.run(deployed.arn("InventoryStateMachine"), event, timeout_s=120, poll_s=0.2)


def make_bucket(stack: Any, objects: dict[str, tuple[int, str]]) -> str:
    aws, _ = stack
    name = f"fl-{uuid.uuid4().hex[:12]}"
    aws.client("s3").create_bucket(Bucket=name)
    seed_bucket(name, objects)
    return name


def shapes(n: int) -> dict[str, dict[str, tuple[int, str]]]:
    rng = random.Random(5)
    return {
        "hex": {uuid.UUID(int=rng.getrandbits(128)).hex: (rng.randint(0, 999), "STANDARD") for _ in range(n)},
        "deep": {
            f"p{i % 3}/y=202{i % 5}/m={i % 12:02d}/f{i:06d}": (i, "GLACIER" if i % 9 == 0 else "STANDARD")
            for i in range(n)
        },
        "weird": {
            f"{rng.choice(['ü', '中', ' ', '+', '%', '&', '<', chr(10)])}{i}": (7, "STANDARD_IA")
            for i in range(n)
        },
    }


@pytest.mark.parametrize("shape", ["hex", "deep", "weird"])
def test_exact_totals(fleet_stack: Any, shape: str) -> None:
    objects = shapes(1000)[shape]
    bucket = make_bucket(fleet_stack, objects)
    res = run(fleet_stack, {"bucket": bucket, "max_listers": 3, "streams": 3, "checkpoint_pages": 3})
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    assert res.output["objects"] == len(objects)
    assert res.output["bytes"] == sum(s for s, _ in objects.values())
    assert res.output["ranges_listed"] > 1
    assert res.output["launches"] == 1


def test_a_lister_that_dies_does_not_fail_the_run(fleet_stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    objects = {f"k{i:05d}": (3, "STANDARD") for i in range(3000)}
    bucket = make_bucket(fleet_stack, objects)
    real = fleet._Stream.on_page  # noqa: SLF001 - fault injection
    victim: dict[str, Any] = {"owner": None}
    lock = threading.Lock()

    def dying(self: Any, objects_: int, bytes_: int) -> None:
        real(self, objects_, bytes_)
        with lock:
            if victim["owner"] is None and self.pages >= 3:
                victim["owner"] = self.lister.owner
            dies = victim["owner"] == self.lister.owner
        if dies:
            raise RuntimeError("lister killed")

    monkeypatch.setattr(fleet._Stream, "on_page", dying)  # noqa: SLF001
    res = run(
        fleet_stack,
        {"bucket": bucket, "max_listers": 3, "streams": 2, "checkpoint_pages": 2, "lease_seconds": 2},
    )
    assert res.status == "SUCCEEDED", (res.error, res.cause)
    assert victim["owner"] is not None  # one lister did die
    assert (res.output["objects"], res.output["bytes"]) == (3000, 9000)


def test_malformed_input_fails_in_the_first_state(fleet_stack: Any) -> None:
    res = run(fleet_stack, {"bucket": "Not A Bucket"})
    assert res.status == "FAILED"
    assert res.error == "InputError"
    assert "'bucket' must be an S3 bucket name" in (res.cause or "")
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in res.history if e["type"].endswith("StateEntered")
    ]
    assert entered[0] == "ValidateInput" and "Launch" not in entered
