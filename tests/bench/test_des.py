"""The discrete-event simulator of the stealing engine (bench/sim/des.py): exact, deterministic, fault-tolerant.

Small key spaces (1e4-2e5 objects) so the file runs in seconds; no timing assertions.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hpcstage.inventory import fleet
from hpcstage.inventory.model import KeyRange

from bench import keyspace as K
from bench.sim.des import (
    ORACLE_SCOPES,
    Config,
    DepthMeanCursor,
    OracleCursor,
    PageKeys,
    Sim,
    complement,
    depth_means,
    simulate,
    static_ranges,
)
from bench.sim.des_shapes import make_any
from bench.sim.params import DEFAULT
from bench.steal_trace import run as traced_run


def _explicit(shape: str, n: int) -> K.Keyspace:
    """The shape's keys, materialised: count_le is then a plain bisect (the brute-force reference)."""
    model = make_any(shape, n)
    return K.explicit([model.key(r) for r in range(n)], name=shape)


@pytest.mark.parametrize(
    "shape",
    ["unicode", "nonascii", "deep-tree", "dated", "uuid-projects", "hashed-prefix", "users", "logs-hourly"],
)
def test_host_run_lists_every_key_once_brute_force(shape: str) -> None:
    ks = _explicit(shape, 20_000)
    sim = Sim(ks, Config(mode="host", streams=16, min_split_pages=1), seed=3)
    res = sim.run()
    assert res.exact, res.exact_detail
    listed = [ks.key(r) for a, b in sorted(sim.committed) for r in range(a, b)]
    assert listed == sorted(ks.root.keys)  # every key, once, in order
    assert res.objects == ks.n and res.bytes == ks.bytes_between(0, ks.n)
    # the engine finds no cut point in an open remainder whose first varying byte is non-ASCII (report)
    assert res.splits > 0 or shape == "nonascii"
    assert res.list_requests >= 20


@pytest.mark.parametrize("shape", ["hashed-prefix", "users", "logs-hourly"])
def test_fleet_run_with_faults_and_killed_listers_is_exact_on_wide_directory_levels(shape: str) -> None:
    """The shapes with a level of thousands of directories (2026-11-27): 10 % of attempts failing and listers
    killed mid-range, every key still listed once (count, bytes and the set of keys: Result.exact)."""
    ks = make_any(shape, 200_000)
    cfg = Config(mode="fleet", listers=10, per_lister=4, faults=0.1, kill=0.2, pace=True)
    res = simulate(ks, cfg, seed=4)
    assert res.exact, res.exact_detail
    assert res.objects == ks.n and res.bytes == ks.bytes_between(0, ks.n)
    assert res.killed == 2 and sum(res.faults.values()) > 0
    assert res.splits > 0 and res.dir_requests > 0


def test_same_seed_same_numbers_other_seed_other_numbers() -> None:
    ks = make_any("multi-tenant", 200_000)
    cfg = Config(mode="fleet", listers=12, per_lister=4, faults=0.02, pace=True)
    a, b = simulate(ks, cfg, seed=5).to_dict(), simulate(ks, cfg, seed=5).to_dict()
    assert a == b
    c = simulate(ks, cfg, seed=6).to_dict()
    assert c["makespan"] != a["makespan"]
    assert a["exact"] and c["exact"]


def test_killed_listers_ranges_are_taken_over_from_their_checkpoint() -> None:
    ks = make_any("uniform", 200_000)
    # killed while every lister still lists (this run lists from ~1.8 s to 7 s and more)
    cfg = Config(mode="fleet", listers=10, per_lister=4, kill=0.3, kill_window=(2.5, 5.0), lease_s=3.0)
    res = simulate(ks, cfg, seed=2)
    assert res.killed == 3
    assert res.adoptions >= 1  # another lister took over a dead lister's lease
    assert res.relisted_objects > 0  # and re-listed what was listed after the last checkpoint
    assert res.exact, res.exact_detail
    assert res.objects == ks.n


@pytest.mark.parametrize("mode", ["host", "fleet"])
@pytest.mark.parametrize("pace", [False, True])
def test_fault_runs_stay_exact(mode: str, pace: bool) -> None:
    ks = make_any("hot-prefix", 100_000)
    cfg = Config(mode=mode, streams=16, listers=8, per_lister=4, faults=0.08, pace=pace)
    res = simulate(ks, cfg, seed=4)
    assert sum(res.faults.values()) > 0
    assert res.list_attempts > res.list_requests
    assert res.exact, res.exact_detail


def test_directory_requests_fail_like_pages_and_the_run_stays_exact() -> None:
    """Config.faults fails directory requests too (each failed attempt counted, then retried); without faults
    none fails and the run is the same as before."""
    ks = make_any("deep-tree", 300_000)
    cfg = Config(mode="fleet", listers=10, per_lister=4, faults=0.3, pace=True)
    res = simulate(ks, cfg, seed=2)
    assert res.exact, res.exact_detail
    assert res.dir_requests > 0 and res.dir_faults > 0
    assert sum(res.faults.values()) >= res.dir_faults
    # every failed attempt, of a page or a directory request, is an attempt beyond the answered requests
    assert res.list_attempts - res.list_requests == sum(res.faults.values()) + res.throttled
    calm = simulate(ks, replace(cfg, faults=0.0), seed=2)
    assert calm.dir_requests > 0 and calm.dir_faults == 0 and sum(calm.faults.values()) == 0


def test_throttling_is_counted_and_exact() -> None:
    ks = make_any("uniform", 100_000)
    # one pacer for the 64 streams (pace_per="lister"): its rate comes down to the partition's
    params_cfg = Config(mode="host", streams=64, pace=True, pace_per="lister")
    sim = Sim(ks, params_cfg, seed=1)
    sim.s3_limit = 20  # a tiny partition: 20 requests/s
    res = sim.run()
    assert res.throttled > 0
    # paced from the partition's rate down towards it from above (pacing.Pacer), so the 503s stay a few
    assert 20 <= res.min_pace_rate < 40
    assert res.throttled < res.list_requests / 2
    assert res.exact, res.exact_detail
    # the timeline counts each answered page, 503, split attempt and split in the second it happened
    pages, slow, attempts, splits, dirs = (sum(col) for col in zip(*res.timeline, strict=True))
    assert (pages + dirs, slow, attempts, splits) == (
        res.list_requests,
        res.throttled,
        res.split_attempts,
        res.splits,
    )


def test_static_peer_is_exact() -> None:
    ks = make_any("dated", 50_000)
    res = simulate(ks, Config(mode="static", static_ranges=50), seed=1)
    assert res.exact, res.exact_detail
    assert res.splits == 0


def test_static_ranges_tile_the_key_space() -> None:
    rs = static_ranges(1000)
    assert rs[0].start_after is None and rs[-1].end is None
    assert all(a.end == b.start_after for a, b in zip(rs, rs[1:], strict=False))
    assert all(a.end is not None and a.start_after is not None and a.start_after < a.end for a in rs[1:-1])


def test_complement() -> None:
    root = KeyRange("r", None, None)
    assert complement(root, [(None, "b"), ("b", None)]) == []
    gaps = complement(root, [("a", "c"), ("d", "e")])
    assert gaps == [((0, ""), (1, "a")), ((1, "c"), (1, "d")), ((1, "e"), (2, ""))]
    assert complement(KeyRange("r", "a", "z"), [("a", "m")]) == [((1, "m"), (1, "z"))]


def test_page_keys_is_lazy_and_exact() -> None:
    ks = make_any("unicode", 5_000)
    calls = []

    def key(r: int) -> str:
        calls.append(r)
        return ks.key(r)

    page = PageKeys(key, 100, 1000)
    assert len(page) == 1000 and page[-1] == ks.key(1099) and page[0] == ks.key(100)
    assert len(calls) == 2
    assert list(page)[:3] == [ks.key(r) for r in range(100, 103)]


def test_every_fleet_split_goes_through_the_store_local_ones_too() -> None:
    # fleet.Lister.give donates every piece (one transaction), a stream of the same lister claims it, and
    # finishing it is a transaction of its own: the simulator charges DynamoDB for each
    res = simulate(make_any("dated", 200_000), Config(mode="fleet", listers=4, per_lister=8), seed=1)
    calls = res.ddb_calls
    assert calls["donate_local"] > 0
    assert res.splits == calls["donate_local"] + calls["publish"]
    assert calls["claim_local"] == calls["finish_local"]
    assert res.exact, res.exact_detail


def test_the_reduce_reads_a_rollup_per_lister_and_the_sidecars_of_dead_listers() -> None:
    ks = make_any("uniform", 200_000)
    sim = Sim(ks, Config(mode="fleet", listers=6, per_lister=4), seed=1)
    res = sim.run()
    rolled = [n for n in sim.nodes if n.rolled]
    assert res.reduce_rollups == len(rolled) and 0 < len(rolled) <= 6 < res.parts and res.reduce_reads == 0
    assert res.rollups >= len(rolled) and all(n.unrolled == 0 for n in sim.nodes)
    # a killed lister writes no last roll-up: the sidecars it committed since are read one by one
    cfg = Config(mode="fleet", listers=10, per_lister=4, kill=0.3, kill_window=(2.5, 5.0), lease_s=3.0)
    sim = Sim(ks, cfg, seed=2)
    res = sim.run()
    dead = [n for n in sim.nodes if not n.alive]
    assert len(dead) == 3 and res.exact
    assert res.reduce_rollups == sum(1 for n in sim.nodes if n.rolled)
    assert res.reduce_reads == sum(n.unrolled for n in dead)


def test_the_reduce_reads_lease_items_only_when_a_dead_lister_held_records_no_rollup_has() -> None:
    """fleet._done_from_rollups: the roll-ups' lease records replace the lease Query unless a lister died with
    finished leases not yet in its roll-up; then the reduce waits ROLLUP_READS reads and reads every lease
    item, which takes longer and more CPU for the same listing."""
    ks = make_any("uniform", 200_000)
    sim = Sim(ks, Config(mode="fleet", listers=6, per_lister=4), seed=1)
    res = sim.run()
    leases = res.claims + res.local_claims + 1
    assert res.exact and res.reduce_leases == 0 and res.reduce_records == leases
    cfg = Config(mode="fleet", listers=10, per_lister=4, kill=0.3, kill_window=(2.5, 5.0), lease_s=3.0)
    for seed in range(1, 30):
        sim = Sim(ks, cfg, seed=seed)
        res = sim.run()
        missing = sum(n.unrolled_done for n in sim.nodes if not n.alive)
        leases = res.claims + res.local_claims + 1
        assert res.exact, res.exact_detail
        assert res.reduce_records == leases - missing
        assert res.reduce_leases == (leases if missing else 0)
        if missing:
            break
    else:
        raise AssertionError("no seed killed a lister holding records")
    # the same finished run had the dead listers' records reached the store: a shorter reduce, with less CPU
    slow_s, slow_cpu = sim.reduce_work_s(0.02, 0.03), res.reduce_cpu_s
    for node in sim.nodes:
        node.unrolled_done = 0
    fast_s, fast_cpu = sim.reduce_work_s(0.02, 0.03), res.reduce_cpu_s
    assert res.reduce_leases == 0 and res.reduce_records == leases
    assert slow_s - fast_s > (fleet.ROLLUP_READS - 1) * fleet.ROLLUP_WAIT_S and slow_cpu > fast_cpu


def test_listers_note_503s_once_a_window_and_enter_the_endgame_after_a_throttled_phase_or_none() -> None:
    """fleet.ENDGAME_QUIET_S as modelled: the t503 write into a lister's hunger item at most once a pacer
    window per lister; none without 503s, none in host mode; and the endgame's smaller pieces once the run was
    throttled and went quiet, or, in a run never throttled, once the pace is known (off: never)."""
    ks = make_any("uniform", 400_000)
    cfg = Config(mode="fleet", listers=8, per_lister=8, pace=True)
    sim = Sim(ks, cfg, seed=3)
    sim.s3_limit = 60  # a small partition: the 64 streams throttle it
    res = sim.run()
    assert res.exact, res.exact_detail
    assert res.throttled > 0
    windows = math.ceil(res.makespan / 1.0) + 1
    assert 0 < res.ddb_calls["t503"] <= len(sim.nodes) * windows
    assert res.ddb_calls["t503"] < res.throttled
    assert max(s.t503 for s in sim.shards) > 0
    # no partition cap in reach: no 503, no write; the endgame once the pace is known, or never
    calm = Sim(ks, Config(mode="fleet", listers=2, per_lister=2, pace=True), seed=3)
    calm_res = calm.run()
    assert calm_res.throttled == 0 and "t503" not in calm_res.ddb_calls
    assert all(n.endgame for n in calm.nodes)
    off = Sim(ks, Config(mode="fleet", listers=2, per_lister=2, pace=True, endgame_unthrottled=False), seed=3)
    off.run()
    assert not any(n.endgame for n in off.nodes)
    host = Sim(ks, Config(mode="host", streams=64, pace=True), seed=3)
    host.s3_limit = 60
    host_res = host.run()
    assert host_res.throttled > 0 and "t503" not in host_res.ddb_calls


def test_listers_tell_their_progress_and_the_endgame_floor_stays_between_its_bounds() -> None:
    """fleet.Lister.tell_progress / endgame_floor as modelled: every page a lister listed reaches the hunger
    items (told at its reads and when it has nothing listing), nothing is left there at the end, and each
    lister's endgame floor is between the endgame's minimum and the policy's floor; with the fixed endgame
    (``Config.endgame_pace`` off) nothing is told."""
    ks = make_any("uniform", 400_000)
    cfg = Config(mode="fleet", listers=8, per_lister=8, pace=True, min_split_pages=16)
    sim = Sim(ks, cfg, seed=3)
    sim.s3_limit = 60  # a small partition: the 64 streams throttle it
    res = sim.run()
    assert res.exact, res.exact_detail
    assert res.ddb_calls["progress"] > 0
    assert (
        sum(s.pages for s in sim.shards)
        == res.list_requests - res.dir_requests
        == sum(n.pages for n in sim.nodes)
    )
    assert sum(s.left for s in sim.shards) == 0
    lo, hi = cfg.endgame_min_split_pages, cfg.min_split_pages
    assert all(lo <= n.eg_floor <= hi for n in sim.nodes)
    # the fleet's pace and what its listers hold set floors between the bounds (this seed: 6-13 pages)
    assert any(lo < n.eg_floor < hi for n in sim.nodes) and any(n.endgame for n in sim.nodes)
    fixed = Sim(ks, replace(cfg, endgame_pace=False), seed=3)
    fixed.s3_limit = 60
    fixed_res = fixed.run()
    assert fixed_res.exact and "progress" not in fixed_res.ddb_calls
    assert all(s.pages == 0 and s.left == 0 for s in fixed.shards)


def test_the_counter_is_spread_as_in_the_fleet_and_read_after_each_finish() -> None:
    # fleet.py keeps the outstanding count in COUNTER_SHARDS items and reads them after a finish: the model's
    # counts are exact (every item back to 0), every finish reads its own item, and the run's end is seen
    # through a TransactGetItems of all items
    ks = make_any("dated", 200_000)
    sim = Sim(ks, Config(mode="fleet", listers=4, per_lister=8), seed=1)
    res = sim.run()
    assert Config().counter_shards == fleet.COUNTER_SHARDS
    assert res.exact, res.exact_detail
    calls = res.ddb_calls
    finishes = calls["finish_local"] + calls["lease_done"]
    assert calls["count_own"] == finishes
    assert 1 <= calls["count_all"] <= calls["count_own"]
    assert set(sim.item_counts) <= {f"counter:{i}" for i in range(fleet.COUNTER_SHARDS)}
    assert all(n == 0 for n in sim.item_counts.values())  # every range counted once, uncounted once
    one = simulate(ks, Config(mode="fleet", listers=4, per_lister=8, counter_shards=1), seed=1)
    assert "count_own" not in one.ddb_calls and "count_all" not in one.ddb_calls


def test_the_winning_lister_reduces_without_the_reduce_lambdas_hop_unless_told_not_to() -> None:
    """Config.reduce_in_lister (fleet.Lister.reduce_here): the same run, same seed, lists identically; with the
    flag the reduce's reads and writes follow the listing's end directly, without it (the old path, and the
    fallback) the Reduce Lambda's reduce_fixed_s comes on top; a winner with less than REDUCE_MARGIN_S of
    lister_timeout_s left takes the old path."""
    ks = make_any("uniform", 200_000)
    runs = {
        flag: Sim(ks, Config(mode="fleet", listers=6, per_lister=4, reduce_in_lister=flag), seed=1).run()
        for flag in (True, False)
    }
    new, old = runs[True], runs[False]
    assert new.exact and old.exact
    assert (new.reduce_in_lister, old.reduce_in_lister) == (True, False)
    assert new.phases["list_end"] == old.phases["list_end"] and new.reduce_reads == old.reduce_reads
    assert old.phases["reduce_s"] - new.phases["reduce_s"] == pytest.approx(Config().reduce_fixed_s)
    assert old.makespan - new.makespan == pytest.approx(Config().reduce_fixed_s)
    assert new.makespan == pytest.approx(
        new.phases["list_end"] + new.phases["reduce_s"] + Config().send_success_s
    )
    assert (new.cost["sfn"], old.cost["sfn"]) == pytest.approx((5 * 0.000025, 6 * 0.000025))
    # a lister timeout that leaves the winner less than REDUCE_MARGIN_S: the Reduce Lambda after all
    short = Config(mode="fleet", listers=6, per_lister=4, lister_timeout_s=fleet.REDUCE_MARGIN_S)
    late = Sim(ks, short, seed=1).run()
    assert not late.reduce_in_lister and late.makespan == pytest.approx(old.makespan)


def test_a_local_piece_queued_at_a_busy_donor_may_be_claimed_by_another_lister_and_the_run_stays_exact() -> (
    None
):
    # fleet.Lister.give donates every piece through the store, a local one too: until its donor's own stream
    # claims it, it is an open item any lister may claim (the model kept it hidden in the donor's queue: at 1B
    # objects, 56,600 pages waited there for 27 s). Stolen pieces become ranges of their own; with listers
    # killed and their leases adopted, every key is still listed once.
    ks = make_any("dated", 200_000)
    cfg = Config(mode="fleet", listers=20, per_lister=8, kill=0.2, kill_window=(2.5, 5.0), lease_s=3.0)
    sim = Sim(ks, cfg, seed=2)
    res = sim.run()
    assert res.local_stolen > 0 and res.adoptions > 0
    assert res.exact, res.exact_detail
    assert not sim.local_queued and sim.counter == 0


def test_hunger_items_and_open_ranges_are_partition_keys_of_their_own_and_one_lister_starts_at_the_seed() -> (
    None
):
    """As fleet.FleetStore keys them: the hunger items (fleet.HUNGER_SHARDS) and the shards of open ranges
    (fleet.OPEN_SHARDS) are separate partition keys, each with its own write and read units; the first lister
    scans the seed's shard first and the others their own (fleet.launch names a home to one lister a seed)."""
    ks = make_any("uniform", 400_000)
    cfg = Config(mode="fleet", listers=32, per_lister=4, pace=True)
    assert (cfg.shards, cfg.open_shards) == (fleet.HUNGER_SHARDS, fleet.OPEN_SHARDS)
    sim = Sim(ks, cfg, seed=2)
    sim.s3_limit = 100  # 503s: the t503 notes go to the hunger items
    res = sim.run()
    assert res.exact, res.exact_detail
    assert res.ddb_calls["t503"] > 0 and res.ddb_calls["hunger_inc"] > 0
    keys = {k for k, _ in sim.ddb_w} | {k for k, _ in sim.ddb_r}
    kinds = {k.split(":")[0] for k in keys}
    assert {"open", "hunger"} <= kinds <= {"open", "hunger", "lease", "counter", "rollup"}
    assert {k for k in keys if k.startswith("hunger:")} == {f"hunger:{i}" for i in range(fleet.HUNGER_SHARDS)}
    assert {int(k.split(":")[1]) for k in keys if k.startswith("open:")} <= set(range(fleet.OPEN_SHARDS))
    assert sim.nodes[0].scan_home == sim.open_shard("r0")
    assert [n.scan_home for n in sim.nodes[1:]] == [n.home % fleet.OPEN_SHARDS for n in sim.nodes[1:]]
    assert len({n.scan_home for n in sim.nodes}) > 1


def test_a_listers_hunger_count_is_taken_back_even_when_it_got_work_before_its_count_landed() -> None:
    """fleet.Lister._set_hungry adds +1 and later -1 one after the other, so the hunger items are exact. In the
    model the +1 lands a write's latency after the lister turned hungry; a lister that got a queued piece
    meanwhile must not leave a count behind (the model before kept one such count for the rest of a 1B run,
    and every busy lister served it a piece every poll)."""
    ks = make_any("uniform", 10_000)
    sim = Sim(ks, Config(mode="fleet", listers=2, per_lister=2, pace=True), seed=1)
    sim._start_fleet()
    node = sim.nodes[1]

    def items() -> int:
        return sum(sh.hunger for sh in sim.shards)

    node.hungry = True  # claim_poll found nothing: its ADD +1 is on its way (on_hunger_inc)
    sim.unhunger(node)  # a queued piece came first (dispatch)
    sim.on_hunger_inc(node)  # the +1 lands
    assert items() == 0 and not node.hungry
    # hungry twice before the first +1 lands: counted once, taken back once
    node.hungry = True
    sim.unhunger(node)
    node.hungry = True
    sim.on_hunger_inc(node)
    sim.on_hunger_inc(node)
    assert items() == 1
    sim.unhunger(node)
    assert items() == 0


def test_the_hunger_items_never_count_more_listers_than_are_hungry() -> None:
    for shape in ("uniform", "multi-tenant"):
        res, trace, _ = traced_run(
            shape, 400_000, seed=3, cfg=Config(mode="fleet", listers=40, per_lister=4, pace=True), every=0.1
        )
        assert res.exact, res.exact_detail
        assert trace.samples
        assert all(s.hunger_items <= s.hungry for s in trace.samples)


def test_stragglers_give_pieces_as_in_the_fleet_and_the_run_stays_exact() -> None:
    """fleet.straggler_share in the model: the listers tell their pages held unclipped and the ranges they hold
    (the hunger items' ``held`` and ``ranges``), and a busy lister's largest stream gives a straggler's pieces
    beside the hunger's; on a shape of Zipf-sized tenants some reads of the hunger items find one, with the
    rule off none; both runs exact, and at the end the items hold nothing. (Users of Zipf sizes: on 200,000
    keys of multi-tenant no read has found one since the space past a tenant's one subdirectory goes with the
    last piece; not traced further.)"""
    ks = make_any("users", 400_000)
    cfg = Config(mode="fleet", listers=10, per_lister=4, pace=True)
    sim = Sim(ks, cfg, seed=1)
    on = sim.run()
    off = simulate(ks, replace(cfg, straggler_ratio=0.0), seed=1)
    assert on.exact and off.exact, (on.exact_detail, off.exact_detail)
    assert on.straggler_shares > 0 and off.straggler_shares == 0
    assert on.to_dict() != off.to_dict()
    assert sum(s.held for s in sim.shards) == 0 and sum(s.ranges for s in sim.shards) == 0


def test_scans_claiming_by_weight_stay_exact() -> None:
    """Config.claim_weighted (a variant measured and not kept): a scan tries the ranges it found in random order
    weighted by their estimates; the runs with it and without it (uniformly, as the fleet) are both exact and
    claim otherwise."""
    ks = make_any("multi-tenant", 200_000)
    cfg = Config(mode="fleet", listers=10, per_lister=4, pace=True)
    on = simulate(ks, replace(cfg, claim_weighted=True), seed=1)
    off = simulate(ks, cfg, seed=1)
    assert on.exact and off.exact, (on.exact_detail, off.exact_detail)
    assert on.claims > 0 and off.claims > 0
    assert on.to_dict() != off.to_dict()


def test_paced_streams_giving_back_and_unpaced_ones_pushing_stay_exact() -> None:
    """Config.yield_util and Config.yield_push_ratio (variants measured and not kept): with four partitions of a
    cap (100 requests/s) that 160 streams exceed, paced streams give their remainders back and unpaced ones give
    pieces while the fleet is throttled; the runs with both and without (the fleet) are exact, and only the first
    does either."""
    params = replace(
        DEFAULT, s3=replace(DEFAULT.s3, partition_rate_limit=100.0, objects_per_partition=500_000)
    )
    ks = make_any("multi-tenant", 2_000_000)
    cfg = Config(mode="fleet", listers=20, per_lister=8, pace=True)
    on = simulate(ks, replace(cfg, yield_util=0.9, yield_push_ratio=2.0), seed=1, params=params)
    off = simulate(ks, cfg, seed=1, params=params)
    assert on.exact and off.exact, (on.exact_detail, off.exact_detail)
    assert on.throttled > 0 and off.throttled > 0
    assert on.yields > 0 and on.pushes > 0
    assert off.yields == 0 and off.pushes == 0
    # Config.yield_after_s: a stream paced for less than that gives nothing back (the pushes go on)
    late = simulate(
        ks, replace(cfg, yield_util=0.9, yield_push_ratio=2.0, yield_after_s=1e9), seed=1, params=params
    )
    assert late.exact and late.yields == 0 and late.pushes > 0


def test_oracle_estimates_are_the_true_counts_and_runs_stay_exact() -> None:
    """Config.oracle_estimates (a bound for estimators, not the fleet): a cursor's estimate of its remainder is
    the keys truly left, where the engine's own is not; a run with such cursors is exact and asks S3 about
    fewer directories than the engine's own estimates make it ask on this skewed layout."""
    ks = make_any("users", 300_000)
    end = ks.key(50_000)
    plain = OracleCursor(KeyRange(id="r", start_after=None, end=end))
    plain.ks = ks
    plain.take([ks.key(i) for i in range(1000)], True, "t")
    assert plain.remaining_pages(1000) == pytest.approx((50_001 - 1000) / 1000)
    engine = super(OracleCursor, plain)._estimate_now(1000)[0]
    assert engine is not None and abs(engine - 49.001) > 1.0  # the engine's own differs on these keys
    cfg = Config(mode="fleet", listers=40, per_lister=8, pace=True)
    oracle = simulate(ks, replace(cfg, oracle_estimates=True), seed=1)
    own = simulate(ks, cfg, seed=1)
    assert oracle.exact and own.exact, (oracle.exact_detail, own.exact_detail)
    assert oracle.dir_requests < own.dir_requests


def test_oracle_scopes_replace_only_their_estimates_and_runs_stay_exact() -> None:
    """Config.oracle_scope: "crossing" replaces the estimate of a remainder that reaches past pos's directory
    before its tree is known and leaves one inside it to the engine; "within" the other way round; "all" and
    "flat" replace both (neither remainder here has a tree)."""
    ks = make_any("users", 300_000)

    def cursor(scope: str, lo: int, end: int) -> OracleCursor:
        cur = OracleCursor(KeyRange(id="r", start_after=None if lo == 0 else ks.key(lo - 1), end=ks.key(end)))
        cur.ks, cur.scope = ks, scope
        cur.take([ks.key(i) for i in range(lo, lo + 1000)], True, "t")
        return cur

    # a directory holding 4,000 keys from lo on: a remainder ending inside it, and one ending 50,000 keys on
    lo = next(i for i in range(0, ks.n - 4000, 500) if _leaf(ks.key(i)) == _leaf(ks.key(i + 4000)))
    for end, crossing in ((lo + 4000, False), (lo + 50_000, True)):
        truth = (end - (lo + 999)) / 1000
        engine = super(OracleCursor, cursor("all", lo, end))._estimate_now(1000)[0]
        assert engine is not None and abs(engine - truth) > 1e-6, (engine, truth)  # told apart below
        assert (cursor("crossing", lo, end)._leaf_crossed() is not None) is crossing
        for scope, replaced in (
            ("all", True),
            ("flat", True),
            ("crossing", crossing),
            ("within", not crossing),
        ):
            got = cursor(scope, lo, end).remaining_pages(1000)
            assert got == pytest.approx(truth if replaced else engine, abs=1e-9), (
                scope,
                end,
                got,
                truth,
                engine,
            )
    cfg = Config(mode="fleet", listers=40, per_lister=8, pace=True, oracle_estimates=True)
    for scope in ORACLE_SCOPES:
        run = simulate(ks, replace(cfg, oracle_scope=scope), seed=1)
        assert run.exact, (scope, run.exact_detail)


def _leaf(key: str) -> str:
    return key[: key.rfind("/") + 1]


def test_depth_means_are_the_keys_per_directory_at_each_depth_by_brute_force() -> None:
    ks = make_any("users", 300_000)
    dirs: dict[int, set[str]] = {}
    for i in range(ks.n):
        key = ks.key(i)
        for depth in range(1, key.count("/") + 1):
            dirs.setdefault(depth, set()).add(
                key[: [j for j, ch in enumerate(key) if ch == "/"][depth - 1] + 1]
            )
    # every key of this layout is a file three directories deep (home/<user>/proj_<k>/): each depth holds all
    assert depth_means(ks) == {d: ks.n / len(names) for d, names in dirs.items()}
    assert sorted(dirs) == [1, 2, 3] and len(dirs[1]) == 1


def test_depth_mean_cursors_size_each_level_by_its_depth_and_runs_stay_exact() -> None:
    cur = DepthMeanCursor(KeyRange(id="r"), prefix="data/")
    cur.means = {1: 40.0, 2: 7.0}
    # "data/" is the prefix (depth 0: its subdirectories are depth 1); a depth without a mean keeps the engine's
    assert cur._level_units({"data/": 900.0, "data/a/": 300.0, "data/a/b/": 5.0}) == {
        "data/": 40.0,
        "data/a/": 7.0,
        "data/a/b/": 5.0,
    }
    ks = make_any("users", 300_000)
    cfg = Config(mode="fleet", listers=40, per_lister=8, pace=True)
    run = simulate(ks, replace(cfg, depth_means=True), seed=1)
    own = simulate(ks, cfg, seed=1)
    assert run.exact and own.exact, (run.exact_detail, own.exact_detail)
    assert run.list_requests != own.list_requests  # the sizes changed the splits


def test_shared_dir_answers_count_each_level_asked_once_and_runs_stay_exact() -> None:
    """Config.shared_dir_answers (a bound, not the fleet): a Delimiter answer about a level any stream asked
    before is not a request, so the run's directory requests are the levels asked; without it, the levels asked
    again are requests too."""
    ks = make_any("users", 300_000)
    cfg = Config(mode="fleet", listers=40, per_lister=8, pace=True)
    shared = Sim(ks, replace(cfg, shared_dir_answers=True), seed=1)
    run = shared.run()
    own = Sim(ks, cfg, seed=1)
    plain = own.run()
    assert run.exact and plain.exact, (run.exact_detail, plain.exact_detail)
    assert run.dir_requests == len(shared.levels_asked) and run.shared_dir_answers > 0
    assert plain.shared_dir_answers == 0 and plain.dir_requests > len(own.levels_asked)


def test_busy_listers_reading_the_hunger_items_sooner_in_the_ramp_stay_exact() -> None:
    """Config.hungry_poll (a variant measured and not kept): during the ramp, while more listers are hungry than
    busy, a busy lister's next read of the hunger items comes at that fraction of poll_s, so the same run reads
    them more often than the fleet (1.0); both runs are exact."""
    ks = make_any("uniform", 200_000)
    cfg = Config(mode="fleet", listers=40, per_lister=8, pace=True)
    assert cfg.hungry_poll == 1.0
    fast = simulate(ks, replace(cfg, hungry_poll=0.2), seed=3)
    plain = simulate(ks, cfg, seed=3)
    assert fast.exact and plain.exact, (fast.exact_detail, plain.exact_detail)
    assert fast.ddb_calls["poll_busy"] > plain.ddb_calls["poll_busy"]
