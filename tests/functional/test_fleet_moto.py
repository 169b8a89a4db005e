"""The Lambda fleet's core against moto DynamoDB + S3: several listers in threads, coordinating through the table.

Each test launches a run (meta + seed range), starts listers in threads as the launcher's asynchronous
invokes would, waits for the completion callback, then reduces, and compares with brute force: exact
totals and the exact key set of the Parquet parts named by the manifest.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from helpers import seed
from hpcstage.inventory import fleet
from hpcstage.inventory.lister import ListOptions
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import SplitPolicy
from hpcstage.s3util import count_requests
from moto import mock_aws

TABLE = "fleet"
RESULTS = "results"


@dataclass
class FakeSfn:
    """Records task callbacks (moto's SendTaskSuccess needs a real waiting task: the system test has one)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send_task_success(self, taskToken: str, output: str) -> None:  # noqa: N803 - boto3's names
        out = json.loads(output)
        with self.lock:
            self.calls.append((taskToken, out))
        if out.get("done"):
            self.done.set()

    def send_task_failure(self, taskToken: str, error: str, cause: str) -> None:  # noqa: N803
        with self.lock:
            self.calls.append((taskToken, {"error": error, "cause": cause}))
        self.done.set()


class FakeLambda:
    """Records the launcher's asynchronous Invokes, in lister order (fleet.launch sends them from threads)."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return sorted(self._events, key=lambda e: int(e.get("lister", 0)))

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> None:  # noqa: N803
        assert InvocationType == "Event"
        with self._lock:
            self._events.append(json.loads(Payload))


class BarrierLambda(FakeLambda):
    """Each Invoke waits until ``parties`` Invokes are in flight at once (a launcher that sends fewer at a time
    never gets there: BrokenBarrierError after the timeout)."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.barrier = threading.Barrier(parties, timeout=10)

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> None:  # noqa: N803
        self.barrier.wait()
        super().invoke(FunctionName, InvocationType, Payload)


class Clock:
    """Real time plus an offset the test can advance (lease expiry without sleeping)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    from hpcstage.local import motopatch

    # moto's DynamoDB is not thread-safe; the local runtime serialises its requests (motopatch "dynamodb")
    before = motopatch.use_patches(("dynamodb",))
    with mock_aws():
        s3 = count_requests(boto3.client("s3", region_name="us-east-1"))
        s3.create_bucket(Bucket="bkt")
        s3.create_bucket(Bucket=RESULTS)
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
        )
        yield s3, ddb
    motopatch.use_patches(before)


def config(prefix: str = "", **kw: Any) -> fleet.FleetConfig:
    base: dict[str, Any] = {"bucket": "bkt", "prefix": prefix, "streams": 3, "checkpoint_pages": 2}
    base.update(kw)
    return fleet.validate_input(
        base,
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        started=datetime.now(UTC).isoformat(),
        results_bucket=RESULTS,
        table=TABLE,
        lister_timeout_s=900,
    )


def fast_options(**kw: Any) -> fleet.ListerOptions:
    return fleet.ListerOptions(
        scan_interval_s=0.02,
        idle_wait_s=0.02,
        hunger_poll_s=0.05,
        # pages of 100 keys, and ranges of 2 pages worth splitting: 1,000 keys are shared among the streams
        listing=ListOptions(page_size=100, policy=SplitPolicy(min_split_pages=2, page_keys=100)),
        **kw,
    )


# the deployed listing (fleet.ListerOptions' default): the next page sent ahead, and gives while it is awaited
# (here every 5 ms); pages and the split floor as fast_options'
AS_DEPLOYED = ListOptions(
    page_size=100,
    policy=SplitPolicy(min_split_pages=2, page_keys=100),
    prefetch=True,
    give_while_waiting_s=0.005,
)
LISTINGS = pytest.mark.parametrize(
    "listing", [None, AS_DEPLOYED], ids=["after-pages", "prefetch-and-give-while-waiting"]
)


def with_listing(options: fleet.ListerOptions, listing: ListOptions | None) -> fleet.ListerOptions:
    return options if listing is None else replace(options, listing=listing)


def run_fleet(
    s3: Any,
    ddb: Any,
    cfg: fleet.FleetConfig,
    *,
    listers: int = 3,
    clock: Callable[[], float] = time.time,
    options: Callable[[int], fleet.ListerOptions] = lambda i: fast_options(),
    events: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lambda e: e,
    on_started: Callable[[list[threading.Thread], dict[int, BaseException]], None] | None = None,
    stagger: float = 0.0,
    sfn: FakeSfn | None = None,
) -> tuple[dict[str, Any], FakeSfn, dict[int, BaseException]]:
    sfn, lam = sfn or FakeSfn(), FakeLambda()
    cfg.max_listers = listers
    fleet.launch(
        s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-1", lister_function="lister", clock=clock
    )
    errors: dict[int, BaseException] = {}

    def one(i: int, event: dict[str, Any]) -> None:
        time.sleep(stagger * i)
        try:
            fleet.run_lister(
                s3=s3,
                ddb=ddb,
                sfn=sfn,
                event=event,
                remaining_ms=lambda: 900_000,
                clock=clock,
                options=options(i),
            )
        except BaseException as err:  # noqa: BLE001 - recorded for the test to inspect
            errors[i] = err

    threads = [
        threading.Thread(target=one, args=(i, e), daemon=True) for i, e in enumerate(events(lam.events))
    ]
    for t in threads:
        t.start()
    if on_started is not None:
        on_started(threads, errors)
    # the counter items, read atomically while the listers run: never negative, and 0 each at the end
    store = fleet.FleetStore(ddb, cfg.table, cfg.run_id, clock)
    seen: list[list[int]] = []
    while any(t.is_alive() for t in threads):
        seen.append(store.counts())
        time.sleep(0.05)
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "listers did not finish"
    assert sfn.done.is_set(), ("no completion callback", sfn.calls, errors)
    assert seen and min(min(c) for c in seen) >= 0, seen
    assert store.counts() == [0] * fleet.COUNTER_SHARDS
    assert (store.meta() or {}).get("complete") is True
    summary = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg, clock=clock)
    return summary, sfn, errors


def listed_keys(s3: Any, cfg: fleet.FleetConfig) -> list[str]:
    manifest = json.loads(s3.get_object(Bucket=RESULTS, Key=f"{cfg.root}/manifest.json")["Body"].read())
    keys: list[str] = []
    for f in manifest["files"]:
        body = s3.get_object(Bucket=RESULTS, Key=f["key"])["Body"].read()
        keys += pq.read_table(pa_buffer(body)).column("key").to_pylist()
    return keys


def pa_buffer(body: bytes) -> Any:
    import pyarrow as pa

    return pa.BufferReader(body)


def expected(objects: dict[str, tuple[int, str]], prefix: str = "") -> tuple[list[str], int]:
    keys = sorted((k for k in objects if k.startswith(prefix)), key=lambda k: k.encode())
    return keys, sum(objects[k][0] for k in keys)


def check_exact(s3: Any, cfg: fleet.FleetConfig, summary: dict[str, Any], objects: dict[str, Any]) -> None:
    keys, total = expected(objects, cfg.prefix)
    assert (summary["objects"], summary["bytes"]) == (len(keys), total)
    got = listed_keys(s3, cfg)
    assert len(got) == len(keys)  # no key twice
    assert sorted(got, key=lambda k: k.encode()) == keys


def timeless(out: dict[str, Any]) -> dict[str, Any]:
    """An execution's output less ``seconds`` (the run's duration up to its reduce's ``finished``)."""
    return {k: v for k, v in out.items() if k != "seconds"}


def answers(sfn: FakeSfn) -> list[dict[str, Any]]:
    """The completion answers ({done: true}), each ``reduced`` output without its ``seconds``."""
    return [
        {**out, "reduced": timeless(out["reduced"])} if "reduced" in out else out
        for _, out in sfn.calls
        if out.get("done")
    ]


def shape(name: str, n: int, rng: random.Random) -> dict[str, tuple[int, str]]:
    if name == "hex":
        keys = [uuid.UUID(int=rng.getrandbits(128)).hex for _ in range(n)]
    elif name == "hot":
        keys = [f"lab/hot/{i:06d}" if i % 10 else f"lab/p{rng.randint(0, 30)}/{i:06d}.gz" for i in range(n)]
    elif name == "hostile":
        # every ASCII character that XML 1.0 (and so moto's answer) can carry: tab, newline and 32..127
        chars = ["\t", "\n", *(chr(c) for c in range(32, 128))]
        keys = [f"{rng.choice(chars)}{i}{rng.choice(chars)}\n{rng.choice(chars)}" for i in range(n)]
        keys += ["a" * 1024, "k" * 1023 + "z", "é" * 512, "long/" * 150 + "tail"]
        keys += ["p" * 900 + f"{i:05d}" for i in range(300)]  # a long common prefix
    else:
        raise ValueError(name)
    return {k: (rng.randint(0, 5000), rng.choice(["STANDARD", "GLACIER", "STANDARD_IA"])) for k in keys}


@pytest.mark.parametrize("name", ["hex", "hot", "hostile"])
def test_exact_listing_of_key_shapes(aws: tuple[Any, Any], name: str) -> None:
    s3, ddb = aws
    objects = shape(name, 1000, random.Random(7))
    seed("bkt", objects)
    cfg = config()
    summary, sfn, errors = run_fleet(s3, ddb, cfg)
    assert not errors
    check_exact(s3, cfg, summary, objects)
    # exactly one completion, by the lister that reduced the run (reduce_run again gives the same output)
    assert answers(sfn) == [{"done": True, "reduced": timeless(summary)}]
    assert summary["ranges_listed"] > 1  # the root range was split among the streams


def test_one_key_empty_bucket_and_prefix(aws: tuple[Any, Any]) -> None:
    s3, ddb = aws
    cfg = config()
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=2)
    assert not errors and (summary["objects"], summary["bytes"]) == (0, 0)
    objects = {"only": (42, "STANDARD")}
    seed("bkt", objects)
    cfg = config()
    summary, _, _ = run_fleet(s3, ddb, cfg, listers=2)
    check_exact(s3, cfg, summary, objects)
    more = {f"a/{i:04d}": (i, "STANDARD") for i in range(700)} | {
        f"b/{i:04d}": (1, "STANDARD") for i in range(900)
    }
    seed("bkt", more)
    cfg = config(prefix="b/")
    summary, _, _ = run_fleet(s3, ddb, cfg, listers=2)
    check_exact(s3, cfg, summary, objects | more)


@LISTINGS
def test_a_lister_killed_mid_range_is_taken_over_from_its_checkpoint(
    aws: tuple[Any, Any], listing: ListOptions | None
) -> None:
    s3, ddb = aws
    objects = {f"k{i:06d}": (i % 97, "STANDARD") for i in range(3000)}
    seed("bkt", objects)
    clock = Clock()
    cfg = config(streams=2, checkpoint_pages=2, lease_seconds=5)
    killed: dict[str, int] = {}
    lock = threading.Lock()

    def dier(i: int) -> Callable[[str, int], None]:
        def die(owner: str, pages: int) -> None:
            # the first lister to list 3 pages dies there (mid-range: it holds leases); its heartbeat dies too
            if pages >= 3:
                with lock:
                    killed.setdefault("index", i)
                    if killed["index"] != i:
                        return
                raise RuntimeError("lister killed")

        return die

    def options(i: int) -> fleet.ListerOptions:
        return with_listing(fast_options(after_page=dier(i)), listing)

    def expire_after_death(threads: list[threading.Thread], errors: dict[int, BaseException]) -> None:
        deadline = time.monotonic() + 30
        while "index" not in killed and time.monotonic() < deadline:
            time.sleep(0.01)
        dead = killed["index"]
        threads[dead].join(timeout=30)
        assert isinstance(errors.get(dead), RuntimeError)
        clock.offset += 10  # past the dead lister's leases (and, briefly, the live ones': they are renewed)

    summary, _, errors = run_fleet(
        s3, ddb, cfg, listers=3, clock=clock, options=options, on_started=expire_after_death, stagger=0.5
    )
    assert set(errors) == {killed["index"]}
    check_exact(s3, cfg, summary, objects)
    # the dead lister's leases were taken over: counted, so the reduce looked for its orphan parts
    assert fleet.FleetStore(ddb, TABLE, cfg.run_id).meta()["takeovers"] >= 1


def test_duplicate_delivery_of_a_lister_event(aws: tuple[Any, Any]) -> None:
    s3, ddb = aws
    objects = shape("hex", 800, random.Random(3))
    seed("bkt", objects)
    cfg = config()
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=2, events=lambda e: e + e)  # every event twice
    assert not errors
    check_exact(s3, cfg, summary, objects)


@LISTINGS
def test_injected_503_and_500_are_exact_and_counted(
    aws: tuple[Any, Any], listing: ListOptions | None
) -> None:
    from botocore.awsrequest import AWSResponse

    s3, ddb = aws
    objects = shape("hot", 800, random.Random(11))
    seed("bkt", objects)
    calls = {"n": 0, "failed": 0}
    lock = threading.Lock()

    class _Raw:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b""

    last_failed = threading.local()  # a stream retries on its own thread: never fail its retry too

    def inject(request: Any, **_: Any) -> AWSResponse | None:
        if RESULTS in request.url:
            return None  # the reduce's listing of the results bucket, not the inventory's
        with lock:
            calls["n"] += 1
            n = calls["n"]
            if n % 4 != 2 or getattr(last_failed, "yes", False):
                last_failed.yes = False
                return None
            last_failed.yes = True
            calls["failed"] += 1
        code, status = ("SlowDown", 503) if n % 8 == 2 else ("InternalError", 500)
        resp = AWSResponse(request.url, status, {}, _Raw())
        resp._content = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()  # noqa: SLF001
        return resp

    s3.meta.events.register_first("before-send.s3.ListObjectsV2", inject)
    try:
        cfg = config()
        summary, _, errors = run_fleet(
            s3, ddb, cfg, listers=2, options=lambda i: with_listing(fast_options(), listing)
        )
    finally:
        s3.meta.events.unregister("before-send.s3.ListObjectsV2", inject)
    assert not errors
    check_exact(s3, cfg, summary, objects)
    assert calls["failed"] > 0
    # every attempt, failed ones included, is in the run's request count
    assert summary["list_requests"] == calls["n"]
    assert summary["retries"] == calls["failed"]


def test_a_directory_bucket_is_refused_with_the_cli_command_that_lists_it() -> None:
    from hpcstage.errors import InputError

    with pytest.raises(
        InputError, match=r"directory bucket.*hpcstage inventory s3://scratch--usw2-az1--x-s3/"
    ):
        config(bucket="scratch--usw2-az1--x-s3")


def a_takeover_attempt(
    ddb: Any, cfg: fleet.FleetConfig
) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """run_fleet's events hook: before the listers start, one tries to take over a lease (which no longer
    exists): the run's takeover count, added before each attempt, is then 1, as when a lister died."""

    def hook(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        store = fleet.FleetStore(ddb, cfg.table, cfg.run_id)
        gone = fleet.Lease(id="r-gone", start_after=None, end=None, owner="dead", lease_until=1)
        assert store.takeover(gone, "thief", 5) is None
        assert store.meta()["takeovers"] == 1
        return events

    return hook


def test_parts_of_lost_leases_are_removed_so_data_holds_each_key_once(aws: tuple[Any, Any]) -> None:
    """A part no lease names (a lister lost its lease after writing it) is deleted by the reduce: a query
    over data/*.parquet, as the README's DuckDB example runs, then counts each key once."""
    s3, ddb = aws
    objects = shape("hex", 600, random.Random(5))
    seed("bkt", objects)
    cfg = config()
    orphan = f"{cfg.root}/data/r-lost-0000.parquet"
    s3.put_object(Bucket=RESULTS, Key=orphan, Body=b"PAR1 left by a lister that lost its lease")
    summary, _, errors = run_fleet(s3, ddb, cfg, events=a_takeover_attempt(ddb, cfg))
    assert not errors
    check_exact(s3, cfg, summary, objects)
    manifest = json.loads(s3.get_object(Bucket=RESULTS, Key=f"{cfg.root}/manifest.json")["Body"].read())
    listed = s3.list_objects_v2(Bucket=RESULTS, Prefix=f"{cfg.root}/data/")
    assert sorted(o["Key"] for o in listed["Contents"]) == sorted(f["key"] for f in manifest["files"])
    full = json.loads(s3.get_object(Bucket=RESULTS, Key=f"{cfg.root}/summary.json")["Body"].read())
    assert full["orphan_parts_removed"] == 1


def test_a_run_without_takeovers_lists_no_data_prefix_in_its_reduce(aws: tuple[Any, Any]) -> None:
    """No lease was taken over, so no part can be an orphan: the reduce sends no LIST of data/."""
    s3, ddb = aws
    objects = shape("hex", 600, random.Random(5))
    seed("bkt", objects)
    cfg = config()
    listed: list[str] = []
    hook = lambda params, **_: listed.append(params.get("Prefix", ""))  # noqa: E731
    s3.meta.events.register("provide-client-params.s3.ListObjectsV2", hook)
    try:
        summary, _, errors = run_fleet(s3, ddb, cfg)
    finally:
        s3.meta.events.unregister("provide-client-params.s3.ListObjectsV2", hook)
    assert not errors
    check_exact(s3, cfg, summary, objects)
    assert "takeovers" not in fleet.FleetStore(ddb, TABLE, cfg.run_id).meta()
    assert listed and not [p for p in listed if p.startswith(f"{cfg.root}/data/")]
    full = json.loads(s3.get_object(Bucket=RESULTS, Key=f"{cfg.root}/summary.json")["Body"].read())
    assert full["orphan_parts_removed"] == 0


def test_the_first_lister_looks_for_the_seed_range_in_its_shard_first(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given a run with one seed range, the first launched lister claims it with its first scan: the launcher
    names the seed's shard to it. (A lister that looked in two random shards of 16 scanned for seconds before
    finding it.) The other listers scan from their own shards: a fleet that all started at the seed's shard
    would read that one partition key at every scan all run long."""
    s3, ddb = aws
    cfg = config()
    cfg.max_listers = 3
    sfn, lam = FakeSfn(), FakeLambda()
    fleet.launch(s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-1", lister_function="lister")
    seed_shard = fleet._shard("r0", fleet.OPEN_SHARDS)
    assert [e.get("home") for e in lam.events] == [seed_shard, None, None]
    # "random" shards that are never the seed's: only the launcher's hint can lead the lister there
    avoid = (seed_shard + 2) % fleet.OPEN_SHARDS
    monkeypatch.setattr(fleet.random, "randrange", lambda n: avoid % n)
    # the listers as the Lambda handler builds them from their events (run() returns the lister itself here)
    monkeypatch.setattr(fleet.Lister, "run", lambda self: self)
    listers = [
        fleet.run_lister(
            s3=s3, ddb=ddb, sfn=sfn, event=e, remaining_ms=lambda: 900_000, options=fast_options()
        )
        for e in lam.events
    ]
    assert [lister.scan_home for lister in listers] == [seed_shard, avoid, avoid]
    first = listers[0].acquire()
    assert first is not None and first.id == "r0"
    # the others find nothing (the seed is leased), and no lease is expired yet
    assert [lister.acquire() for lister in listers[1:]] == [None, None]


@pytest.mark.parametrize(
    ("alive", "per_scan", "scans_to_cover"), [(1, 16, 1), (2, 9, 2), (3, 6, 3), (1000, 2, 15)]
)
def test_a_scan_reads_enough_shards_that_the_listers_alive_cover_them_all(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch, alive: int, per_scan: int, scans_to_cover: int
) -> None:
    """Each scan reads the home shard and the next ⌈15 / listers alive⌉ others of the lister's rotation, so a
    lister alone reads every shard each scan and one of a thousand reads two; the rotation reaches every other
    shard in ⌈15 / k⌉ scans, and a scan that finds nothing reads ``live`` from the meta item."""
    s3, ddb = aws
    cfg = config()
    cfg.max_listers = alive
    sfn, lam = FakeSfn(), FakeLambda()
    fleet.launch(s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-1", lister_function="lister")
    monkeypatch.setattr(fleet.Lister, "run", lambda self: self)
    lister = fleet.run_lister(
        s3=s3, ddb=ddb, sfn=sfn, event=lam.events[0], remaining_ms=lambda: 900_000, options=fast_options()
    )
    scans = [lister.scan_shards() for _ in range(scans_to_cover)]
    assert all(len(s) == len(set(s)) == per_scan and s[0] == lister.scan_home for s in scans)
    seen = {shard for s in scans for shard in s}
    assert seen == set(range(fleet.OPEN_SHARDS))
    assert len({shard for s in scans[:-1] for shard in s}) < fleet.OPEN_SHARDS  # not in fewer scans
    # a scan that finds nothing learns how many listers are alive: the launcher wrote live = 0, so one
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
    store.claim(KeyRange(id="r0"), "other:1", 60)  # nothing open, no lease expired
    assert lister._scan() is None  # noqa: SLF001
    assert len(lister.scan_shards()) == fleet.OPEN_SHARDS


def test_lease_items_are_spread_over_partition_keys_by_a_hash_of_their_id(aws: tuple[Any, Any]) -> None:
    """Each lease item's partition key names a hash of its id modulo 64; ``leases`` reads them all, in id order, and
    ``shards=`` reads only the partitions named."""
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-ls")
    ids = [f"x{n}" for n in range(40)]
    assert store.create("tok", [KeyRange(id=i) for i in ids], "now")
    for i in ids:
        assert store.claim(KeyRange(id=i), "o:1", 60) is not None
    pks = {
        it["sk"]["S"]: it["pk"]["S"]
        for it in ddb.scan(TableName=TABLE)["Items"]
        if it["pk"]["S"].startswith("run#run-ls#lease#")
    }
    assert pks == {i: f"run#run-ls#lease#{fleet._shard(i, 64):02d}" for i in ids}
    assert len(set(pks.values())) > 20
    assert [lease.id for lease in store.leases()] == sorted(ids)
    some = {fleet._shard(i, 64) for i in ids[:3]}
    assert [lease.id for lease in store.leases(shards=some)] == sorted(
        i for i in ids if fleet._shard(i, 64) in some
    )


def test_each_hunger_shard_is_an_item_of_its_own_partition_key_and_hunger_sums_them(
    aws: tuple[Any, Any],
) -> None:
    """Hunger items are pk=run#<run>#hunger#<h>, sk=count (one partition key each: busy listers read all
    sixteen twice a second); ``hunger`` sums hungry and live listers over them, never below 0."""
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-hg")
    store.add_hunger(3, 1, "live")
    store.add_hunger(3, 1)
    store.add_hunger(15, 1, "live")
    store.add_hunger(15, 2)
    store.add_hunger(15, -1)
    items = {
        it["pk"]["S"]: (it["sk"]["S"], it.get("n", {}).get("N"), it.get("live", {}).get("N"))
        for it in ddb.scan(TableName=TABLE)["Items"]
        if it["pk"]["S"].startswith("run#run-hg#")
    }
    assert items == {"run#run-hg#hunger#3": ("count", "1", "1"), "run#run-hg#hunger#15": ("count", "1", "1")}
    assert store.hunger() == (2, 2, 0, 0, 0, 0, 0)
    store.add_hunger(0, -5)
    assert store.hunger() == (0, 2, 0, 0, 0, 0, 0)
    store.add_progress(3, 40, 7, 400, 4)
    store.add_progress(15, 20, 3, 20, 1)
    store.add_progress(3, -10, 5, -300, -2)
    read = store.hunger()
    assert (read.hungry, read.live, read.left, read.pages, read.held, read.ranges) == (0, 2, 50, 15, 120, 3)


def lister_of_a_new_run(
    aws: tuple[Any, Any], *, hunger_poll_s: float, clock: Callable[[], float] = time.time
) -> fleet.Lister:
    """A lister (not started) of a run just created with one seed range: for its hunger and pacing."""
    s3, ddb = aws
    cfg = config()
    fleet.FleetStore(ddb, TABLE, cfg.run_id, clock).create("tok", [KeyRange(id="r0")], "now")
    return fleet.Lister(
        s3=s3,
        ddb=ddb,
        sfn=FakeSfn(),
        cfg=cfg,
        generation=1,
        remaining_ms=lambda: 900_000,
        clock=clock,
        options=replace(fast_options(), hunger_poll_s=hunger_poll_s),
    )


def test_a_lister_notes_a_503_once_a_window_and_a_fleet_quiet_for_the_endgame_releases_its_pace(
    aws: tuple[Any, Any],
) -> None:
    """fleet.ENDGAME_QUIET_S: a 503 SlowDown is written into the lister's hunger item at most once a pacer
    window; a read of the hunger items whose newest 503 is ENDGAME_QUIET_S old sets the endgame (splits
    down to ENDGAME_MIN_SPLIT_PAGES, attempts unpaced); a fresh one, or none in the run, does not."""
    clock = Clock()
    lister = lister_of_a_new_run(aws, hunger_poll_s=0.0, clock=clock)
    store = lister.store

    def endgame_after_read() -> bool:
        lister.wanted()
        return lister.endgame

    assert not endgame_after_read()  # no 503 in the run yet: not an endgame (the ramp)
    throttle, other = lister.throttle_for(0), lister.throttle_for(1)
    assert lister.throttle_for(0) is throttle  # a stream keeps its pacer from range to range
    notes: list[int] = []
    real_note = store.note_slowdown
    store.note_slowdown = lambda shard: notes.append(shard) or real_note(shard)  # type: ignore[method-assign]
    for _ in range(3):
        throttle.answered(slowdown=True)
    t503 = store.hunger()[2]
    assert abs(t503 - store.now_ms()) < 5_000
    throttle.pacer.start -= 2 * throttle.pacer.window_s  # a window later
    lister._told -= 2 * throttle.pacer.window_s  # noqa: SLF001
    throttle.answered(slowdown=True)
    other.answered(slowdown=True)
    # once per window for the whole lister, into its own hunger item: the second window's first 503 wrote a
    # newer time, the other stream's in that window nothing
    assert notes == [lister.home, lister.home] and store.hunger()[2] >= t503
    assert lister.throttles == 5 and (throttle.throttles, other.throttles) == (4, 1)
    assert not endgame_after_read()  # the newest 503 is fresh
    clock.offset += fleet.ENDGAME_QUIET_S + 0.1
    assert endgame_after_read()
    assert throttle.pacer.rate is not None  # paced since the throttled window
    calm = lister.throttle_for(2)
    calm.pacer.start -= 2 * calm.pacer.window_s
    calm.answered(slowdown=False)
    assert calm.pacer.rate is None  # each stream its own pacer: one that saw no 503 is not paced by another's
    throttle.wait()  # the next attempt under the endgame: released at once
    assert throttle.pacer.rate is None
    throttle.answered(slowdown=True)  # its own 503 ends its endgame, told or not (here not: same window)
    assert not lister.endgame and len(notes) == 2
    assert fast_options().listing.endgame_min_split_pages is None  # the tests' listing options: none
    assert fleet.ListerOptions().listing.endgame_min_split_pages == fleet.ENDGAME_MIN_SPLIT_PAGES


def test_a_run_never_throttled_enters_the_endgame_once_the_pace_is_known_and_a_503_ends_it(
    aws: tuple[Any, Any],
) -> None:
    """fleet.ENDGAME_QUIET_S: with no 503 in the run, a lister's read of the hunger items sets the endgame once
    the fleet's pace is known (two reads PACE_MIN_S apart) and the lister has run ENDGAME_QUIET_S; not before
    either. Its own 503 ends it, and from then on the run's rule holds (the newest 503 ENDGAME_QUIET_S old)."""
    clock = Clock()
    lister = lister_of_a_new_run(aws, hunger_poll_s=0.0, clock=clock)

    def endgame_after_read() -> bool:
        lister.wanted()
        return lister.endgame

    assert not endgame_after_read()  # the pace is not known yet
    lister._pace.pace = 120.0  # noqa: SLF001 - as two reads PACE_MIN_S apart would set it
    assert not endgame_after_read()  # the lister has not run ENDGAME_QUIET_S
    lister._born -= fleet.ENDGAME_QUIET_S  # noqa: SLF001
    assert endgame_after_read()
    lister.throttle_for(0).answered(slowdown=True)  # its own 503: the endgame ends, and the run was throttled
    assert not lister.endgame
    assert not endgame_after_read()  # the newest 503 is fresh
    clock.offset += fleet.ENDGAME_QUIET_S + 0.1
    assert endgame_after_read()


def test_a_lister_tells_its_pages_left_and_listed_once_per_change_and_again_after_a_failed_write(
    aws: tuple[Any, Any],
) -> None:
    """fleet.Lister.tell_progress: the change of its pages left by estimate (streams listing, an unknown
    estimate not counted, each at most PROGRESS_CLIP_FLOORS split floors, and not clipped; pieces queued for
    its idle streams) and of its pages listed since it last told, added to its hunger item; nothing when
    nothing changed; a write that failed is in the next one."""
    lister = lister_of_a_new_run(aws, hunger_poll_s=3600.0)
    page = lister.options.listing.page_size
    clip = fleet.PROGRESS_CLIP_FLOORS * lister.options.listing.policy.min_split_pages  # pages
    writes: list[tuple[int, int, int, int, int]] = []
    real = lister.store.add_progress
    fail = [False]

    def add_progress(shard: int, left: int, pages: int, held: int, ranges: int) -> None:
        writes.append((shard, left, pages, held, ranges))
        if fail[0]:
            raise RuntimeError("throttled")
        real(shard, left, pages, held, ranges)

    lister.store.add_progress = add_progress  # type: ignore[method-assign]
    set_listing_streams(lister, Donor(0, 3 * page), Donor(1, math.inf), Donor(2, 100 * clip * page))
    with lister._cv:  # noqa: SLF001 - a piece queued for an idle stream, and pages listed
        lister._queue.append(KeyRange(id="q", start_after="a", end="b", estimate=2 * page))  # noqa: SLF001
        lister._pages = 9  # noqa: SLF001
    lister.tell_progress()
    home = lister.home
    held = 3 + round(100 * clip) + 2
    assert writes == [(home, 3 + clip + 2, 9, held, 3)]
    lister.tell_progress()
    assert len(writes) == 1  # nothing changed
    set_listing_streams(lister, Donor(0, page))
    with lister._cv:  # noqa: SLF001
        lister._queue.clear()  # noqa: SLF001
        lister._pages = 12  # noqa: SLF001
    fail[0] = True
    lister.tell_progress()
    assert writes[-1] == (home, 1 - (3 + clip + 2), 3, 1 - held, -2)
    fail[0] = False
    lister.tell_progress()  # the failed change again
    assert writes[-1] == (home, 1 - (3 + clip + 2), 3, 1 - held, -2)
    read = lister.store.hunger()
    assert (read.left, read.pages, read.held, read.ranges) == (1, 12, 1, 1)


def test_the_endgame_floor_is_what_a_stream_lists_while_the_fleet_lists_what_its_listers_hold(
    aws: tuple[Any, Any],
) -> None:
    """fleet.Lister.wanted in the endgame: the floor its streams split down to (``list_range``'s ``endgame``)
    is the pages one stream lists (the lister's page time) while the fleet, at its pace, lists the pages the
    hunger items hold, between ENDGAME_MIN_SPLIT_PAGES and the policy's floor; outside the endgame, none."""
    clock = Clock()
    lister = lister_of_a_new_run(aws, hunger_poll_s=0.0, clock=clock)
    listing = replace(
        lister.options.listing,
        policy=SplitPolicy(min_split_pages=16, page_keys=100),
        endgame_min_split_pages=4,
    )
    lister.options = replace(lister.options, listing=listing)
    lister.store.note_slowdown(0)
    set_listing_streams(lister, Donor(0, 3_000.0), Donor(1, 3_000.0), Donor(2, math.inf))
    lister._pace = fleet.FleetPace(min_s=3600.0)  # noqa: SLF001 - the fleet lists 1,000 pages a second
    lister._pace.pace = 1_000.0  # noqa: SLF001
    lister._page_s = 0.01  # noqa: SLF001 - a page every 10 ms
    lister.wanted()
    assert not lister.endgame and lister._endgame_floor == 16  # noqa: SLF001 - the 503 is fresh
    clock.offset += fleet.ENDGAME_QUIET_S + 0.1
    set_listing_streams(lister, Donor(0, 3_000.0), Donor(1, 3_000.0), Donor(2, math.inf))
    lister.wanted()
    # 60 pages held, 0.06 s at 1,000 a second, six pages of 10 ms
    assert lister.endgame and lister._endgame_floor == pytest.approx(6.0)  # noqa: SLF001
    set_listing_streams(lister, Donor(0, 1_000.0))
    lister.wanted()
    assert lister._endgame_floor == 4  # noqa: SLF001 - 10 pages: 1 page of 10 ms, below the minimum
    lister._page_s = None  # noqa: SLF001 - no attempt answered yet
    set_listing_streams(lister, Donor(0, 3_000.0), Donor(1, 3_000.0))
    lister.wanted()
    assert lister._endgame_floor == 4  # noqa: SLF001


def set_listing_streams(lister: fleet.Lister, *donors: Donor) -> None:
    """``donors`` are the lister's streams listing, and its next ``wanted`` reads the hunger items."""
    lister._listing = {d.index: d for d in donors}  # type: ignore[misc]  # noqa: SLF001
    lister._hunger_at = -math.inf  # noqa: SLF001


@dataclass
class Donor:
    """A stand-in for a listing stream (fleet._Stream): its index and its keys left by estimate."""

    index: int
    keys_left: float

    def left(self) -> float:
        return self.keys_left


def test_the_fleets_hunger_goes_to_the_stream_with_the_most_keys_left_then_to_the_next_when_it_refuses(
    aws: tuple[Any, Any],
) -> None:
    """fleet.Lister.wanted: the remote share read from the hunger items goes to the listing stream with the
    largest ``left()`` (an unknown estimate, inf, first); a stream whose split gave nothing (``refused``) is
    passed over until the next read of the hunger items. Local hunger goes to any stream, and first: while an
    idle stream of the lister is not fed, the donor too is asked for its piece alone, and for the remote share
    once the piece is queued."""
    lister = lister_of_a_new_run(aws, hunger_poll_s=3600.0)
    # another lister, hungry, and this one busy: one piece is wanted of this lister
    lister.store.add_hunger(0, 1, "live")
    lister.store.add_hunger(0, 1)
    lister.store.add_hunger(1, 1, "live")
    small, unknown, large = Donor(0, 5_000.0), Donor(1, math.inf), Donor(2, 90_000.0)
    set_listing_streams(lister, small, unknown, large)

    def wanted(d: Donor) -> int:
        return lister.wanted(d)  # type: ignore[arg-type]

    assert [wanted(small), wanted(large), wanted(unknown)] == [0, 0, 1]
    lister.refused(unknown)  # type: ignore[arg-type]
    assert [wanted(small), wanted(unknown), wanted(large)] == [0, 0, 1]
    lister.refused(large)  # type: ignore[arg-type]
    assert [wanted(unknown), wanted(small)] == [0, 1]
    lister.refused(small)  # type: ignore[arg-type]
    assert [wanted(d) for d in (small, unknown, large)] == [0, 0, 0]  # every stream refused
    lister._hunger_at = -math.inf  # noqa: SLF001 - a new read: every stream may give again
    assert [wanted(small), wanted(unknown)] == [0, 1]
    with lister._cv:  # noqa: SLF001 - an idle stream of its own: local hunger, for any stream, first
        lister._idle = 1  # noqa: SLF001
    assert [wanted(small), wanted(unknown)] == [1, 1]
    with lister._cv:  # noqa: SLF001 - the piece it gave, queued for the idle stream (as Lister.give queues it)
        lister._queue.append(KeyRange(id="local-1", start_after="k", end="m"))  # noqa: SLF001
    assert [wanted(small), wanted(unknown)] == [0, 1]  # fed: the donor's remote share comes next


@pytest.mark.parametrize(
    ("keys_left", "share"),
    [(math.inf, 1), (300.0, 1), (800.0, 2), (2_400.0, 6), (90_000.0, 10)],
)
def test_a_lister_whose_largest_stream_holds_more_serves_more_of_the_hunger(
    aws: tuple[Any, Any], keys_left: float, share: int
) -> None:
    """fleet.Lister.wanted: ten hungry listers, a hundred busy ones: the fair share is ceil(2 x 10 / 100) = 1
    piece, but a lister whose largest stream holds more by estimate serves one piece of twice the split floor
    (fast_options: 2 pages of 100 keys, so 400 keys) each, up to every hungry lister; an unknown estimate
    gets the fair share."""
    lister = lister_of_a_new_run(aws, hunger_poll_s=3600.0)
    lister.store.add_hunger(0, 110, "live")
    lister.store.add_hunger(0, 10)
    # the fleet holds far more a range than this lister's largest stream: no straggler (STRAGGLER_RATIO)
    lister.store.add_progress(5, 0, 0, 10**7, 1_000)
    donor = Donor(0, keys_left)
    set_listing_streams(lister, donor)
    assert lister.wanted(donor) == share  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("keys_left", "hungry", "share"),
    [(160_000.0, 0, 0), (160_100.0, 0, 1), (640_000.0, 0, 3), (640_000.0, 10, 13), (math.inf, 0, 0)],
)
def test_a_straggler_gives_pieces_whether_or_not_anyone_is_hungry(
    aws: tuple[Any, Any], keys_left: float, hungry: int, share: int
) -> None:
    """fleet.STRAGGLER_RATIO: the busy listers told 30,000 pages held (unclipped) in 300 ranges: a mean of
    100 pages a range. A lister whose largest stream holds more than 16 x 100 = 1,600 pages (of 100 keys:
    fast_options) gives pieces of about that size with nobody hungry (one for 160,100 keys, three for
    640,000); with ten listers hungry, those beside what it serves of the hunger (ten: one piece of twice the
    split floor per hungry lister, ``hunger_share``); an unknown estimate none."""
    lister = lister_of_a_new_run(aws, hunger_poll_s=3600.0)
    assert lister.cfg.streams == 3 and lister.options.listing.page_size == 100
    lister.store.add_hunger(0, 100 + hungry, "live")
    lister.store.add_hunger(0, hungry)
    # the fleet told 30,000 pages held in 300 ranges, this lister's own included (it tells them at the read:
    # its two streams' estimates, an unknown one not counted)
    known = math.isfinite(keys_left)
    own = (round(keys_left / 100) if known else 0) + 10
    lister.store.add_progress(5, 0, 0, 30_000 - own, 300 - (2 if known else 1))
    donor, other = Donor(0, keys_left), Donor(1, 1_000.0)
    set_listing_streams(lister, donor, other)
    assert lister.wanted(donor) == share  # type: ignore[arg-type]
    assert lister.wanted(other) == 0  # type: ignore[arg-type]  # the largest stream's only


@pytest.mark.parametrize("alive", [1, 64])
def test_an_expired_lease_in_any_partition_is_found_within_one_rotation(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch, alive: int
) -> None:
    """A lister looks for expired leases in the next ⌈64 / listers alive⌉ lease partitions of its rotation:
    alone, it reads all 64 at its first look; one of 64, one partition a look, so it finds a dead lister's
    lease at the look that reaches its partition, and at none before."""
    s3, ddb = aws
    cfg = config()
    cfg.max_listers = alive
    cfg.lease_seconds = 4
    clock = Clock()
    sfn, lam = FakeSfn(), FakeLambda()
    fleet.launch(s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-1", lister_function="lister")
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id, clock)
    dead = store.claim(KeyRange(id="r0"), "dead:1", 4)
    assert dead is not None
    clock.offset = 10  # past its lease
    monkeypatch.setattr(fleet.Lister, "run", lambda self: self)
    monkeypatch.setattr(fleet.FleetStore, "now_ms", lambda self: int(clock() * 1000))
    lister = fleet.run_lister(
        s3=s3, ddb=ddb, sfn=sfn, event=lam.events[0], remaining_ms=lambda: 900_000, options=fast_options()
    )
    store.add_meta("live", alive)  # what the listers' run() would have counted (read by an empty scan)
    target = fleet._shard("r0", fleet.LEASE_SHARDS)
    first = lister._lease_turn.at  # noqa: SLF001 - the rotation's random start
    looks = 0
    taken = None
    while taken is None:
        assert looks < fleet.LEASE_SHARDS
        lister._last_lease_scan = -1e9  # noqa: SLF001 - a look is due at every scan
        looks += 1
        taken = lister._scan()  # noqa: SLF001
    assert taken.id == "r0" and taken.owner.startswith(lister.owner)
    assert looks == (1 if alive == 1 else (target - first) % fleet.LEASE_SHARDS + 1)


def test_the_launcher_sends_its_invokes_at_once(aws: tuple[Any, Any]) -> None:
    """fleet.launch invokes LAUNCH_THREADS listers at a time (one after the other, a thousand ~20 ms Invokes
    start the last lister ~20 s after the first); every lister is invoked once, the seed's lister with its
    shard."""
    s3, ddb = aws
    cfg = config()
    cfg.max_listers = 2 * fleet.LAUNCH_THREADS
    sfn, lam = FakeSfn(), BarrierLambda(fleet.LAUNCH_THREADS)
    out = fleet.launch(s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-1", lister_function="lister")
    assert out["listers"] == 2 * fleet.LAUNCH_THREADS
    events = lam.events
    assert [e["lister"] for e in events] == list(range(2 * fleet.LAUNCH_THREADS))
    assert events[0]["home"] == fleet._shard("r0", fleet.OPEN_SHARDS)
    assert all("home" not in e for e in events[1:])


def test_a_scan_claims_one_open_range_and_leaves_the_others_open(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lister's scan claims one of the open ranges it found and queues none of the others: they stay open
    for the other hungry listers, and this lister's other idle streams scan again (or take its own splits)."""
    s3, ddb = aws
    cfg = config()
    cfg.max_listers = 1
    sfn, lam = FakeSfn(), FakeLambda()
    fleet.launch(s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-1", lister_function="lister")
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
    root = store.claim(KeyRange(id="r0"), "donor:1", 60)
    assert root is not None
    home = lam.events[0]["home"]
    ids = [i for i in (f"{c}{n}" for c in "abcdefghijklmnopq" for n in range(10)) if i != "r0"]
    pieces = [
        KeyRange(id=i, start_after=f"k/{i}", end=f"k/{i}~")
        for i in ids
        if fleet._shard(i, fleet.OPEN_SHARDS) == home
    ][:3]
    assert len(pieces) == 3
    store.donate(root, sorted(pieces, key=lambda p: p.start_after or ""))
    monkeypatch.setattr(fleet.Lister, "run", lambda self: self)
    lister = fleet.run_lister(
        s3=s3, ddb=ddb, sfn=sfn, event=lam.events[0], remaining_ms=lambda: 900_000, options=fast_options()
    )
    got = lister.acquire()
    assert got is not None and got.id in {p.id for p in pieces}
    assert not lister._queue  # noqa: SLF001
    left = store.open_ranges(home, 10)
    assert sorted(r.id for r in left) == sorted(p.id for p in pieces if p.id != got.id)


def test_the_lease_item_decides_who_claims_a_range_and_the_open_item_only_says_where_to_look(
    aws: tuple[Any, Any],
) -> None:
    """A claim Puts the lease item (no lease of that id) and then Deletes the open item: one lister wins, a
    loser gets None and leaves the winner's lease as it was; an open item left behind by a lister that died
    between its two writes is claimed by nobody; once the owner gives the range back, the next claim wins."""
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-claim")
    assert store.create("tok", [KeyRange(id="a0", end="m"), KeyRange(id="b0", start_after="m")], "now")
    shard = fleet._shard("a0", fleet.OPEN_SHARDS)
    open_ids = lambda: {r.id for r in store.open_ranges(shard, 10)}  # noqa: E731
    owners = lambda: {lz.id: lz.owner for lz in store.leases()}  # noqa: E731
    assert "a0" in open_ids()

    first = store.claim(KeyRange(id="a0", end="m"), "o1:x", 60)
    assert first is not None and first.owner == "o1:x"
    assert "a0" not in open_ids()
    assert store.claim(KeyRange(id="a0", end="m"), "o2:x", 60) is None
    assert owners() == {"a0": "o1:x"}

    # the winner died between its Put and its Delete: the open item is there again, and it claims nothing
    ddb.put_item(**store._open_put(KeyRange(id="a0", end="m"))["Put"])  # noqa: SLF001
    assert "a0" in open_ids()
    assert store.claim(KeyRange(id="a0", end="m"), "o3:x", 60) is None
    assert owners() == {"a0": "o1:x"}
    assert "a0" in open_ids()  # a loser writes nothing to the open shard

    # the owner gives the range back as it was (nothing listed): the next claim takes it
    store.release(first, 0)
    assert owners() == {}
    again = store.claim(KeyRange(id="a0", end="m"), "o4:x", 60)
    assert again is not None and owners() == {"a0": "o4:x"}
    assert "a0" not in open_ids()


def test_a_claim_refused_for_a_transaction_in_flight_on_the_lease_is_lost_not_an_error(
    aws: tuple[Any, Any],
) -> None:
    """DynamoDB refuses a Put on an item while a transaction on it is in flight (TransactionConflictException,
    which botocore does not retry): for a claim that is a lease someone holds, so it is lost, and the open
    item is left alone."""
    from botocore.exceptions import ClientError

    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-conflict")
    assert store.create("tok", [KeyRange(id="a0")], "now")
    shard = fleet._shard("a0", fleet.OPEN_SHARDS)

    class Refusing:
        """The table, but every Put refused with ``code``."""

        def __init__(self, real: Any, code: str) -> None:
            self.real, self.code, self.deletes = real, code, 0

        def put_item(self, **kw: Any) -> Any:
            raise ClientError({"Error": {"Code": self.code, "Message": "refused"}}, "PutItem")

        def delete_item(self, **kw: Any) -> Any:
            self.deletes += 1
            return self.real.delete_item(**kw)

    busy = Refusing(ddb, "TransactionConflictException")
    store.ddb = busy
    assert store.claim(KeyRange(id="a0"), "o1:x", 60) is None
    assert busy.deletes == 0
    store.ddb = ddb
    assert [r.id for r in store.open_ranges(shard, 10)] == ["a0"]
    # any other error is not a lost claim
    store.ddb = Refusing(ddb, "ValidationException")
    with pytest.raises(ClientError):
        store.claim(KeyRange(id="a0"), "o1:x", 60)


def test_open_ranges_from_a_start_id_wrap_to_the_shards_first_ids(aws: tuple[Any, Any]) -> None:
    """A scan starts at a random id of the shard (so hungry listers do not all try the same first items) and
    wraps to the first ids when fewer follow; no range is returned twice."""
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-scan")
    shard = fleet._shard("a0", fleet.OPEN_SHARDS)
    ids = sorted(
        i
        for i in (f"{c}{n}" for c in "abcdef" for n in range(40))
        if fleet._shard(i, fleet.OPEN_SHARDS) == shard
    )[:5]
    assert len(ids) == 5
    assert store.create("tok", [KeyRange(id=i) for i in ids], "now")
    got = lambda limit, start=None: [r.id for r in store.open_ranges(shard, limit, start=start)]  # noqa: E731
    assert got(2) == ids[:2]
    assert got(2, start=ids[1]) == ids[2:4]
    assert got(3, start=ids[3]) == [ids[4], ids[0], ids[1]]
    assert got(2, start=ids[1] + "~") == ids[2:4]  # a start that is no id: the ids after it
    assert got(10, start=ids[2]) == [*ids[3:], *ids[:3]]  # all five, once each
    assert got(3, start="zzz") == ids[:3]


def test_a_donated_piece_carries_its_estimate_to_the_stream_that_claims_it(aws: tuple[Any, Any]) -> None:
    """The donor's estimate of a piece travels through the store (open range, lease) to the thief's cursor, as
    the simulator models it; after a donation the donor's lease no longer claims its old estimate."""
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-est")
    assert store.create("tok", [KeyRange(id="r0", estimate=9000)], "now")
    seed = store.open_ranges(fleet._shard("r0", fleet.OPEN_SHARDS), 10)
    assert [(r.id, r.estimate) for r in seed] == [("r0", 9000)]
    donor = store.claim(seed[0], "lister-a", 60)
    assert donor is not None and donor.estimate == 9000
    store.donate(donor, [KeyRange(id="p1", start_after="m", end=None, estimate=4321)])
    assert donor.estimate == 0 and store.leases()[0].estimate == 0
    piece = store.open_ranges(fleet._shard("p1", fleet.OPEN_SHARDS), 10)
    assert [(r.id, r.start_after, r.estimate) for r in piece] == [("p1", "m", 4321)]
    thief = store.claim(piece[0], "lister-b", 60)
    assert thief is not None and thief.estimate == 4321
    assert {lease.id: lease.estimate for lease in store.leases()} == {"r0": 0, "p1": 4321}


def test_the_reduce_reads_each_listers_rollup_instead_of_its_sidecars(aws: tuple[Any, Any]) -> None:
    s3, ddb = aws
    objects = shape("hex", 1000, random.Random(11))
    seed("bkt", objects)
    cfg = config()
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=3)
    assert not errors
    check_exact(s3, cfg, summary, objects)
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
    sidecars = [k for lease in store.leases() for k in lease.stats]
    rollups = store.rollups()
    # small roll-ups travel in their items: no object under rollups/
    assert all(r.body is not None and r.key is None for r in rollups)
    assert "Contents" not in s3.list_objects_v2(Bucket=RESULTS, Prefix=f"{cfg.root}/rollups/")
    bodies = [r.read(None) for r in rollups]
    covers = [k for b in bodies for k in b["covers"]]
    # every lister exited normally: its last roll-up covers every sidecar it committed, each sidecar once
    assert sorted(covers) == sorted(sidecars) and len(sidecars) > len(bodies) > 0
    # so the reduce needs no sidecar: without them it counts the same
    for k in sidecars:
        s3.delete_object(Bucket=RESULTS, Key=f"{cfg.root}/{k}")
    again = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    assert (again["objects"], again["bytes"]) == (summary["objects"], summary["bytes"])


def lease_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of FleetStore.leases that read every lease item (not the idle listers' look for expired
    leases) from here on."""
    calls: list[int] = []
    real = fleet.FleetStore.leases

    def counted(self: fleet.FleetStore, **kw: Any) -> list[fleet.Lease]:
        if not kw.get("expired_only"):
            calls.append(1)
        return real(self, **kw)

    monkeypatch.setattr(fleet.FleetStore, "leases", counted)
    return calls


def reduce_outputs(s3: Any, cfg: fleet.FleetConfig) -> dict[str, Any]:
    """What a reduce wrote, less what depends on when it ran: the manifest's files, the ranges, the summary
    without its end time, duration and rate."""
    got = {
        k: json.loads(s3.get_object(Bucket=RESULTS, Key=f"{cfg.root}/{k}")["Body"].read())
        for k in ("manifest.json", "ranges.json", "summary.json")
    }
    return {
        "files": got["manifest.json"]["files"],
        "ranges": got["ranges.json"],
        "summary": {
            k: v
            for k, v in got["summary.json"].items()
            if k not in ("finished", "seconds", "objects_per_second")
        },
    }


def run_left_to_reduce(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch, objects: dict[str, Any], listers: int
) -> tuple[fleet.FleetConfig, dict[str, Any], fleet.FleetStore]:
    """A run listed by ``listers`` listers that leave the reduce to the test (the config, the summary of
    run_fleet's own reduce, the store)."""
    s3, ddb = aws
    seed("bkt", objects)
    monkeypatch.setattr(fleet, "REDUCE_MARGIN_S", 900.001)
    cfg = config()
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=listers)
    assert not errors
    return cfg, summary, fleet.FleetStore(ddb, TABLE, cfg.run_id)


def check_reduced_from_lease_items(
    aws: tuple[Any, Any],
    monkeypatch: pytest.MonkeyPatch,
    cfg: fleet.FleetConfig,
    summary: dict[str, Any],
    objects: dict[str, Any],
) -> None:
    """The reduce run again reads every lease item once and gives the same, exact output."""
    s3, ddb = aws
    reads = lease_reads(monkeypatch)
    again = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    assert reads == [1]
    assert timeless(again) == timeless(summary)
    check_exact(s3, cfg, again, objects)


def test_the_reduce_reads_no_lease_item_when_the_rollups_record_every_range_the_run_created(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s3, ddb = aws
    objects = shape("hot", 1500, random.Random(21))
    seed("bkt", objects)
    monkeypatch.setattr(fleet, "REDUCE_MARGIN_S", 900.001)  # the listers leave the reduce to this test
    cfg = config()
    reads = lease_reads(monkeypatch)
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=3)
    assert not errors and reads == []
    check_exact(s3, cfg, summary, objects)
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
    leases = store.leases()
    reads.clear()
    # the counters count every range created (the root and each piece split off), once each
    assert sum(c for _, c in store.tallies()) == len(leases) > 1
    # and the roll-ups hold one record of each done lease, equal to its item
    records = [fleet.Lease.from_record(rec) for r in store.rollups() for rec in r.read(None)["done"]]
    assert sorted(records, key=lambda lease: lease.id) == [
        fleet.Lease.from_record(lease.record()) for lease in leases
    ]
    fast = reduce_outputs(s3, cfg)
    # the same reduce from the lease items (no roll-up read is taken for complete): the same outputs
    monkeypatch.setattr(fleet, "ROLLUP_READS", 0)
    again = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    assert reads == [1]
    assert timeless(again) == timeless(summary)
    assert reduce_outputs(s3, cfg) == fast


def test_a_lister_that_died_before_its_rollup_leaves_the_reduce_to_the_lease_items(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ddb = aws
    objects = shape("hex", 1200, random.Random(4))
    monkeypatch.setattr(fleet, "ROLLUP_WAIT_S", 0.01)
    cfg, summary, store = run_left_to_reduce(aws, monkeypatch, objects, listers=3)
    # as if one lister had died after its last finish and before its roll-up: its item is gone
    lost = next(r for r in store.rollups() if r.read(None)["done"])
    ddb.delete_item(
        TableName=TABLE,
        Key={
            "pk": {"S": store.rollup_pk(fleet._shard(lost.owner, fleet.rollup_shards(cfg)))},
            "sk": {"S": lost.owner},
        },
    )
    rollup_reads: list[int] = []
    real_rollups = fleet.FleetStore.rollups
    monkeypatch.setattr(
        fleet.FleetStore,
        "rollups",
        lambda self, shards=fleet.ROLLUP_SHARDS: rollup_reads.append(1) or real_rollups(self, shards),
    )
    # the roll-ups are read ROLLUP_READS times waiting for the missing records, then the lease items once
    check_reduced_from_lease_items(aws, monkeypatch, cfg, summary, objects)
    assert len(rollup_reads) == fleet.ROLLUP_READS


def test_rollups_whose_records_name_a_range_twice_leave_the_reduce_to_the_lease_items(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = shape("hex", 900, random.Random(6))
    cfg, summary, store = run_left_to_reduce(aws, monkeypatch, objects, listers=2)
    # the roll-up with the most records (one lister may have listed everything alone) names its first range
    # twice and its second not at all: as many records as ranges, but not every range
    rollup = max(store.rollups(), key=lambda r: len(r.read(None)["done"]))
    body = rollup.read(None)
    assert len(body["done"]) >= 2
    body["done"][1] = body["done"][0]
    store.put_rollup(
        rollup.owner,
        len(body["covers"]),
        body=zlib.compress(json.dumps(body).encode()),
        shards=fleet.rollup_shards(cfg),
    )
    check_reduced_from_lease_items(aws, monkeypatch, cfg, summary, objects)


def test_a_rollup_larger_than_an_item_should_hold_goes_to_an_object_its_item_names(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s3, ddb = aws
    objects = shape("hex", 1000, random.Random(11))
    seed("bkt", objects)
    cfg = config()
    monkeypatch.setattr(fleet, "ROLLUP_INLINE_MAX", 10)  # every compressed roll-up is larger
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=2)
    assert not errors
    check_exact(s3, cfg, summary, objects)
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
    rollups = store.rollups()
    assert rollups and all(r.body is None and r.key is not None for r in rollups)
    listed = s3.list_objects_v2(Bucket=RESULTS, Prefix=f"{cfg.root}/rollups/")["Contents"]
    # the items name the last object of each lister; earlier roll-ups of a lister stay as objects
    assert {f"{cfg.root}/{r.key}" for r in rollups} <= {o["Key"] for o in listed}
    sidecars = [k for lease in store.leases() for k in lease.stats]
    assert sorted(k for r in rollups for k in r.read(cfg.store(s3))["covers"]) == sorted(sidecars)
    for k in sidecars:
        s3.delete_object(Bucket=RESULTS, Key=f"{cfg.root}/{k}")
    again = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    assert (again["objects"], again["bytes"]) == (summary["objects"], summary["bytes"])


def test_a_rollup_is_either_in_its_item_or_in_an_object(aws: tuple[Any, Any]) -> None:
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-r")
    with pytest.raises(ValueError, match="either in its item"):
        store.put_rollup("o", 1)
    with pytest.raises(ValueError, match="either in its item"):
        store.put_rollup("o", 1, body=b"x", key="k")


def test_a_rollup_that_names_a_sidecar_of_no_lease_or_one_already_covered_is_not_used(
    aws: tuple[Any, Any],
) -> None:
    s3, ddb = aws
    objects = shape("hot", 800, random.Random(5))
    seed("bkt", objects)
    cfg = config()
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=2)
    assert not errors
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
    body = store.rollups()[0].read(None)
    # a copy of a real roll-up under another owner (its sidecars would count twice) and one naming a sidecar
    # that no lease holds (a segment whose checkpoint never committed)
    bogus = {"covers": [*body["covers"][:1], "stats/never-committed.json"], "stats": body["stats"]}
    # one in its item, one in an object its item names
    shards = fleet.rollup_shards(cfg)
    store.put_rollup(
        "copy", len(body["covers"]), body=zlib.compress(json.dumps(body).encode()), shards=shards
    )
    s3.put_object(Bucket=RESULTS, Key=f"{cfg.root}/rollups/bogus.json", Body=json.dumps(bogus).encode())
    store.put_rollup("bogus", len(bogus["covers"]), key="rollups/bogus.json", shards=shards)
    again = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    keys, total = expected(objects)
    assert (again["objects"], again["bytes"]) == (summary["objects"], summary["bytes"]) == (len(keys), total)


def test_a_donated_piece_carries_its_donors_directory_knowledge_to_the_thief(aws: tuple[Any, Any]) -> None:
    """What the donor knew of the directories inside a piece travels as an attribute of the open item to the
    thief's lease and cursor (steal.Cursor.knowledge); a lease taken over restarts without it."""
    from hpcstage.inventory.model import DirKnowledge
    from hpcstage.inventory.steal import Cursor

    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-known")
    assert store.create("tok", [KeyRange(id="r0")], "now")
    donor = store.claim(store.open_ranges(fleet._shard("r0", fleet.OPEN_SHARDS), 10)[0], "lister-a", 60)
    assert donor is not None
    start = "ev/year=2022/month=02/"
    known = DirKnowledge(
        levels=("", "ev/", "ev/year=2022/"),
        fanout=(("ev/", 3), ("ev/year=2022/", 12)),
        dirs=("ev/year=2022/month=03/", "ev/year=2022/month=04/", 'ev/year=2022/month=05 "ü"\n/'),
    )
    store.donate(donor, [KeyRange(id="p1", start_after=start, end="ev/year=2023/", estimate=7, known=known)])
    raw = ddb.get_item(
        TableName=TABLE,
        Key={"pk": {"S": store.open_pk(fleet._shard("p1", fleet.OPEN_SHARDS))}, "sk": {"S": "p1"}},
    )
    assert len(raw["Item"]["known"]["S"].encode()) < 150  # front-coded: a fraction of a write unit
    piece = store.open_ranges(fleet._shard("p1", fleet.OPEN_SHARDS), 10)
    assert [(r.start_after, r.end, r.known) for r in piece] == [(start, "ev/year=2023/", known)]
    thief = store.claim(piece[0], "lister-b", 60)
    assert thief is not None and thief.known == known
    cur = Cursor(KeyRange(id="p1", start_after=start, end="ev/year=2023/", known=thief.known))
    assert cur.explored == {"", "ev/", "ev/year=2022/"} and cur.fanout == dict(known.fanout)
    assert cur.dir_cuts == sorted(known.dirs)
    # the lease item does not keep it: a takeover (from the item) starts with nothing, never wrong
    assert {lease.id: lease.known for lease in store.leases()} == {"r0": None, "p1": None}


# --------------------------------------------------------------------------------------------------
# The outstanding-range counter, spread over COUNTER_SHARDS items
# --------------------------------------------------------------------------------------------------


def ids_in_distinct_and_same_counter_items(n: int) -> tuple[list[str], str, str]:
    """``n`` range ids in ``n`` distinct counter items, and two more ids that share one item."""
    distinct: dict[int, str] = {}
    same: dict[int, list[str]] = {}
    for i in range(10_000):
        rid = f"id{i}"
        c = fleet.counter_shard(rid)
        distinct.setdefault(c, rid)
        same.setdefault(c, []).append(rid)
        if len(distinct) >= n and any(len(v) >= 2 for v in same.values()):
            break
    pair = next(v for v in same.values() if len(v) >= 2)
    return list(distinct.values())[:n], pair[0], pair[1]


def test_each_counter_item_counts_the_outstanding_ranges_whose_id_hashes_to_it(aws: tuple[Any, Any]) -> None:
    """Launch, donate, deadline (remainder in another item and in the same one) and finish each move the
    count of exactly the items of the ranges they create or end; the sum is the ranges open or leased."""
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-count")
    (a, b, c), d, e = ids_in_distinct_and_same_counter_items(3)
    assert len({fleet.counter_shard(x) for x in (a, b, c)}) == 3
    assert fleet.counter_shard(e) == fleet.counter_shard(d)

    def expect(**by_item: int) -> list[int]:
        want = [0] * fleet.COUNTER_SHARDS
        for rid, n in by_item.items():
            want[fleet.counter_shard(rid)] += n
        return want

    assert store.create("tok", [KeyRange(id=a, end="m"), KeyRange(id=b, start_after="m")], "now")
    assert store.counts() == expect(**{a: 1, b: 1}) and store.outstanding() == 2
    lease_a = store.claim(KeyRange(id=a, end="m"), "o1", 60)
    assert lease_a is not None and store.counts() == expect(**{a: 1, b: 1})  # a claim moves no count
    store.donate(
        lease_a, [KeyRange(id=c, start_after="f", end="m"), KeyRange(id=d, start_after="h", end="m")]
    )
    assert store.counts() == expect(**{a: 1, b: 1, c: 1, d: 1})
    assert store.claim_notify() is None  # 4 outstanding: nobody may report
    lease_d = store.claim(KeyRange(id=d, start_after="h", end="m"), "o2", 60)
    assert lease_d is not None
    # deadline: d is done up to "j", its remainder e is counted in the same item (its outstanding count
    # unchanged, its created count one more)
    store.stop_at(lease_d, fleet.Segment(checkpoint="j"), "j", KeyRange(id=e, start_after="j", end="m"))
    assert store.counts() == expect(**{a: 1, b: 1, c: 1, e: 1})
    lease_b = store.claim(KeyRange(id=b, start_after="m"), "o3", 60)
    assert lease_b is not None
    # deadline with the remainder in another item: one down, one up
    store.stop_at(lease_b, fleet.Segment(checkpoint="p"), "p", KeyRange(id=a + "x", start_after="p"))
    assert store.counts() == expect(**{a: 1, c: 1, e: 1, a + "x": 1})
    for rid, lo, hi in ((c, "f", "m"), (e, "j", "m"), (a + "x", "p", None)):
        lease = store.claim(KeyRange(id=rid, start_after=lo, end=hi), "o4", 60)
        assert lease is not None
        store.finish(lease, fleet.Segment(checkpoint=None))
        assert store.claim_notify() is None
    assert store.counts() == expect(**{a: 1})
    store.finish(lease_a, fleet.Segment(checkpoint="f"))
    assert store.counts() == [0] * fleet.COUNTER_SHARDS
    # every range created is counted once in its own item: a, b (launch), c, d (donate), e, ax (deadlines)
    created = expect(**{a: 1, b: 1, c: 1, d: 1, e: 1, a + "x": 1})
    assert store.tallies() == [(0, n) for n in created]
    assert store.claim_notify() == "tok"
    assert store.claim_notify() is None  # once per token
    assert (store.meta() or {}).get("complete") is True


def test_a_finish_on_a_lost_lease_moves_no_count(aws: tuple[Any, Any]) -> None:
    """The count of a range goes down in the transaction that makes its lease done: a stream that lost the
    lease (taken over) cannot finish it a second time, so no item goes below 0."""
    _, ddb = aws
    clock = Clock()
    store = fleet.FleetStore(ddb, TABLE, "run-lost", clock)
    assert store.create("tok", [KeyRange(id="r0")], "now")
    first = store.claim(KeyRange(id="r0"), "o1", 5)
    assert first is not None
    clock.offset += 10
    [expired] = store.leases(expired_only=True)
    second = store.takeover(expired, "o2", 5)
    assert second is not None
    with pytest.raises(fleet.LeaseLost):
        store.finish(first, fleet.Segment(checkpoint=None))
    assert store.outstanding() == 1
    store.finish(second, fleet.Segment(checkpoint=None))
    with pytest.raises(fleet.LeaseLost):
        store.finish(second, fleet.Segment(checkpoint=None))  # a duplicate finish
    assert store.counts() == [0] * fleet.COUNTER_SHARDS


def test_a_finisher_whose_item_still_counts_does_not_read_every_item(aws: tuple[Any, Any]) -> None:
    """After its finish a lister reads its own counter item; a count there proves work left, and the
    TransactGetItems of all items is skipped."""
    _, ddb = aws
    store = fleet.FleetStore(ddb, TABLE, "run-pre")
    (_, _, _), d, e = ids_in_distinct_and_same_counter_items(3)
    assert store.create("tok", [KeyRange(id=d, end="m"), KeyRange(id=e, start_after="m")], "now")
    lease = store.claim(KeyRange(id=d, end="m"), "o1", 60)
    assert lease is not None
    store.finish(lease, fleet.Segment(checkpoint=None))
    reads: list[str] = []
    real = ddb.transact_get_items

    def counting(**kw: Any) -> Any:
        reads.append("transact")
        return real(**kw)

    ddb.transact_get_items = counting
    sfn = FakeSfn()
    assert fleet.notify_if_done(store, sfn, finished=d) is False
    assert reads == [] and sfn.calls == []
    lease = store.claim(KeyRange(id=e, start_after="m"), "o1", 60)
    assert lease is not None
    store.finish(lease, fleet.Segment(checkpoint=None))
    assert fleet.notify_if_done(store, sfn, finished=e) is True
    assert reads == ["transact"] and sfn.calls == [("tok", {"done": True})]


class ConflictingDdb:
    """A DynamoDB client whose TransactGetItems is refused ``conflicts`` times (a write in flight)."""

    def __init__(self, ddb: Any, conflicts: int) -> None:
        self.ddb = ddb
        self.conflicts = conflicts
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ddb, name)

    def transact_get_items(self, **kw: Any) -> Any:
        from botocore.exceptions import ClientError

        self.calls += 1
        if self.calls <= self.conflicts:
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
                    "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
                },
                "TransactGetItems",
            )
        return self.ddb.transact_get_items(**kw)


def test_a_counter_read_refused_by_a_write_in_flight_is_retried_and_bounded(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ddb = aws
    monkeypatch.setattr(fleet, "COUNT_READ_BACKOFF_S", 0.0)
    fleet.FleetStore(ddb, TABLE, "run-busy").create("tok", [KeyRange(id="r0")], "now")
    flaky = ConflictingDdb(ddb, conflicts=fleet.COUNT_READ_TRIES - 1)
    assert fleet.FleetStore(flaky, TABLE, "run-busy").outstanding() == 1
    assert flaky.calls == fleet.COUNT_READ_TRIES
    busy = ConflictingDdb(ddb, conflicts=fleet.COUNT_READ_TRIES)
    store = fleet.FleetStore(busy, TABLE, "run-busy")
    with pytest.raises(fleet.CountersBusy, match="run-busy: the counter items were being written"):
        store.counts()
    assert busy.calls == fleet.COUNT_READ_TRIES
    busy.calls = 0
    assert store.claim_notify() is None  # not known complete: nobody reports (the fallbacks check again)


def test_the_last_lister_reports_a_run_whose_last_finisher_died_before_its_check(
    aws: tuple[Any, Any],
) -> None:
    """The finish is written but its finisher died before reading the counters: the last lister of the launch
    to exit finds them at 0 and reports {done: true} (before: only {done: false} with work left)."""
    s3, ddb = aws
    cfg = config()
    sfn, lam = FakeSfn(), FakeLambda()
    cfg.max_listers = 1
    fleet.launch(s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-1", lister_function="lister")
    store = fleet.FleetStore(ddb, cfg.table, cfg.run_id)
    lease = store.claim(KeyRange(id="r0"), "dead-lister:1", 60)
    assert lease is not None
    store.finish(lease, fleet.Segment(checkpoint=None))  # ... and no notify_if_done: it died
    assert sfn.calls == [] and not (store.meta() or {}).get("complete")
    fleet.run_lister(
        s3=s3, ddb=ddb, sfn=sfn, event=lam.events[0], remaining_ms=lambda: 0, options=fast_options()
    )
    assert sfn.calls == [("tok-1", {"done": True})]


def test_a_relaunch_of_a_complete_run_reports_it_without_listers(aws: tuple[Any, Any]) -> None:
    s3, ddb = aws
    objects = shape("hex", 300, random.Random(5))
    seed("bkt", objects)
    cfg = config()
    run_fleet(s3, ddb, cfg, listers=2)
    sfn, lam = FakeSfn(), FakeLambda()
    out = fleet.launch(s3=s3, ddb=ddb, sfn=sfn, lam=lam, cfg=cfg, token="tok-2", lister_function="lister")
    assert out["listers"] == 0 and lam.events == []
    assert sfn.calls == [("tok-2", {"done": True})]


# --------------------------------------------------------------------------------------------------
# The lister that reports the run complete reduces it (fleet.Lister.reduce_here); else the Reduce state
# --------------------------------------------------------------------------------------------------


def test_the_winning_lister_reduces_the_run_and_answers_with_its_output(aws: tuple[Any, Any]) -> None:
    """Given a run, the lister that wins the completion runs reduce_run before SendTaskSuccess: the answer
    carries the run's exact totals, and summary.json and the manifest are written by then."""
    s3, ddb = aws
    objects = shape("hot", 900, random.Random(3))
    seed("bkt", objects)
    cfg = config()

    @dataclass
    class Watching(FakeSfn):
        written: list[str] = field(default_factory=list)  # the run's top-level outputs when it answered

        def send_task_success(self, taskToken: str, output: str) -> None:  # noqa: N803 - boto3's names
            listed = s3.list_objects_v2(Bucket=RESULTS, Prefix=f"{cfg.root}/", Delimiter="/")
            self.written += [o["Key"].removeprefix(f"{cfg.root}/") for o in listed.get("Contents", ())]
            super().send_task_success(taskToken, output)

    watching = Watching()
    summary, sfn, errors = run_fleet(s3, ddb, cfg, listers=3, sfn=watching)
    assert not errors
    check_exact(s3, cfg, summary, objects)
    keys, total = expected(objects)
    [(token, answer)] = [(t, out) for t, out in sfn.calls if out.get("done")]
    assert token == "tok-1" and answer["reduced"]["objects"] == len(keys) == 900
    assert answer["reduced"]["bytes"] == total and timeless(answer["reduced"]) == timeless(summary)
    assert answer["reduced"]["summary"] == f"s3://{RESULTS}/{cfg.root}/summary.json"
    # the run's outputs were in place when the answer went out
    assert {"manifest.json", "summary.json", "report.txt", "report.html", "ranges.json"} <= set(
        watching.written
    )


def test_a_winner_short_of_time_leaves_the_reduce_to_the_state_machine(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given a lister with less than REDUCE_MARGIN_S left (run_fleet's listers have 900 s), the winner answers
    {done: true} alone and writes no output: the Reduce state reduces."""
    s3, ddb = aws
    objects = shape("hex", 400, random.Random(2))
    seed("bkt", objects)
    monkeypatch.setattr(fleet, "REDUCE_MARGIN_S", 900.001)
    cfg = config()
    calls: list[int] = []
    real = fleet.reduce_run
    monkeypatch.setattr(fleet, "reduce_run", lambda **kw: calls.append(1) or real(**kw))
    summary, sfn, errors = run_fleet(s3, ddb, cfg, listers=2)
    assert not errors and calls == [1]  # run_fleet's reduce (the Reduce state's) only
    assert answers(sfn) == [{"done": True}]
    check_exact(s3, cfg, summary, objects)


def test_an_audit_is_reduced_by_the_reduce_state(aws: tuple[Any, Any]) -> None:
    """An audit's object-level diff reads every part of two runs (minutes at 1B objects): never in a lister."""
    s3, ddb = aws
    objects = shape("hex", 300, random.Random(4))
    seed("bkt", objects)
    first, sfn, _ = run_fleet(s3, ddb, config())
    assert answers(sfn) == [{"done": True, "reduced": timeless(first)}]
    summary, sfn, errors = run_fleet(s3, ddb, config(audit=True))
    assert not errors and answers(sfn) == [{"done": True}]
    assert summary["diff"] == {
        "objects": 0,
        "bytes": 0,
        "added": {"objects": 0, "bytes": 0},
        "removed": {"objects": 0, "bytes": 0},
        "changed": {"objects": 0, "bytes": 0},
    }


def test_a_lister_whose_reduce_raises_logs_it_and_answers_done_alone(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The lister's reduce_run raises IncompleteInventoryError: the answer is {done: true} without ``reduced``,
    so the Reduce state runs reduce_run again and reports what it finds (here: the run, complete)."""
    from hpcstage.errors import IncompleteInventoryError

    s3, ddb = aws
    objects = shape("hex", 300, random.Random(6))
    seed("bkt", objects)
    real = fleet.reduce_run
    calls: list[int] = []

    def first_fails(**kw: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise IncompleteInventoryError("statistics count 299 objects, the leases 300")
        return real(**kw)

    monkeypatch.setattr(fleet, "reduce_run", first_fails)
    cfg = config()
    with caplog.at_level("ERROR", logger="hpcstage.inventory.fleet"):
        summary, sfn, errors = run_fleet(s3, ddb, cfg, listers=2)
    assert not errors and calls == [1, 1]
    assert answers(sfn) == [{"done": True}]
    [record] = [r for r in caplog.records if r.name == "hpcstage.inventory.fleet"]
    assert (
        record.getMessage() == f"run {cfg.run_id}: the lister's reduce failed; the Reduce state runs it again"
    )
    assert str(record.exc_info[1]) == "statistics count 299 objects, the leases 300"  # type: ignore[index]
    check_exact(s3, cfg, summary, objects)


def test_a_reduce_run_again_after_a_partial_attempt_gives_the_same_output(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """reduce_run is idempotent: after an attempt that removed an orphan part and then failed before the
    summary, the next attempt reports that orphan too; an audit reduced twice (its _latest pointer already
    names the run) returns the same diff, not a diff against itself."""
    s3, ddb = aws
    objects = shape("hex", 500, random.Random(8))
    seed("bkt", objects)
    monkeypatch.setattr(fleet, "REDUCE_MARGIN_S", 900.001)  # the listers leave the reduce to this test
    cfg = config()
    orphan = f"{cfg.root}/data/r-lost-0000.parquet"
    s3.put_object(Bucket=RESULTS, Key=orphan, Body=b"PAR1 left by a lister that lost its lease")
    real_finalize = fleet.finalize
    monkeypatch.setattr(fleet, "finalize", lambda *a, **kw: (_ for _ in ()).throw(OSError("S3 went away")))
    with pytest.raises(OSError, match="S3 went away"):
        run_fleet(s3, ddb, cfg, events=a_takeover_attempt(ddb, cfg))
    assert "Contents" not in s3.list_objects_v2(Bucket=RESULTS, Prefix=orphan)  # removed by that attempt
    monkeypatch.setattr(fleet, "finalize", real_finalize)
    summary = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    check_exact(s3, cfg, summary, objects)
    full = json.loads(s3.get_object(Bucket=RESULTS, Key=f"{cfg.root}/summary.json")["Body"].read())
    assert full["orphan_parts_removed"] == 1
    assert timeless(fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)) == timeless(summary)
    # an audit: one change since the first run, reduced twice
    seed("bkt", {"zz-new": (7, "STANDARD")})
    audit = config(audit=True)
    first, _, _ = run_fleet(s3, ddb, audit)
    assert first["diff"]["added"] == {"objects": 1, "bytes": 7}
    again = fleet.reduce_run(s3=s3, ddb=ddb, cfg=audit)
    assert again == first


def test_a_small_fleet_keeps_its_rollups_in_one_shard_a_lister(
    aws: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s3, ddb = aws
    objects = shape("hex", 700, random.Random(12))
    seed("bkt", objects)
    cfg = config()
    summary, _, errors = run_fleet(s3, ddb, cfg, listers=2)
    assert not errors and fleet.rollup_shards(cfg) == 2
    store = fleet.FleetStore(ddb, TABLE, cfg.run_id)
    written = {s for s in range(fleet.ROLLUP_SHARDS) if list(store._query_all(store.rollup_pk(s)))}
    assert written and written <= {0, 1}
    asked: list[str] = []
    real = fleet.FleetStore._query_all

    def spy(self: Any, pk: str, **kw: Any) -> Any:
        asked.append(pk)
        return real(self, pk, **kw)

    monkeypatch.setattr(fleet.FleetStore, "_query_all", spy)
    again = fleet.reduce_run(s3=s3, ddb=ddb, cfg=cfg)
    assert sorted(pk for pk in asked if "#rollup#" in pk) == [store.rollup_pk(0), store.rollup_pk(1)]
    assert (again["objects"], again["bytes"]) == (summary["objects"], summary["bytes"])
