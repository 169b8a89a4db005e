"""A piece carries what its donor knew of the directories inside it (steal.Cursor.knowledge), so its thief
asks S3 about fewer directories; every carried fact is true of the piece (checked against brute force)."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import pickle
import random
from collections import deque
from typing import Any

import pytest
from fakes import FakeS3
from hpcstage.inventory.model import DirKnowledge, KeyRange
from hpcstage.inventory.steal import (
    MAX_KNOWN_BYTES,
    MAX_KNOWN_DIRS,
    SINGLE_CHILD_PROOF,
    SMALL_DIR_KEYS,
    TEMPLATE_PROOF,
    Cursor,
    SplitPolicy,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

POLICY = SplitPolicy(min_split_pages=2, page_keys=100)


def dated_keys() -> list[str]:
    """events/year=Y/month=MM/day=DD/part-<hex>.gz: 3 years x 12 months x 28 days x 20 keys."""
    rng = random.Random(7)
    return sorted(
        f"events/year={y}/month={m:02d}/day={d:02d}/part-{rng.getrandbits(32):08x}.gz"
        for y in (2022, 2023, 2024)
        for m in range(1, 13)
        for d in range(1, 29)
        for _ in range(20)
    )


def explore_and_split(cur: Cursor, s3: FakeS3, ways: int, ids: Any) -> tuple[list[KeyRange], int]:
    """One split attempt as lister.list_range makes it: directory requests first; (pieces, requests sent)."""
    sent = 0
    for _ in range(3):
        q = cur.explore(ways, POLICY)
        if q is None:
            break
        resp = s3.list_objects_v2(Bucket="bkt", **q)
        cur.take_dirs(q, [p["Prefix"] for p in resp.get("CommonPrefixes", [])], resp["IsTruncated"])
        sent += 1
    return cur.split(ways, POLICY, ids), sent


def list_all(s3: FakeS3, seeds: list[KeyRange], *, carry: bool, ways: int = 4) -> tuple[list[str], int, int]:
    """Streams one after another: each lists a range a page at a time and, after its first page, splits once
    (a thief arriving); its pieces are queued for later streams. ``carry=False`` strips the donor's knowledge
    from every piece (as before pieces carried it). Returns (keys listed, directory requests, pieces)."""
    queue = deque(seeds)
    listed: list[str] = []
    dir_requests = pieces = 0
    ids = (f"p{i}" for i in itertools.count()).__next__
    while queue:
        cur = Cursor(queue.popleft())
        split_done = False
        while not cur.done:
            resp = s3.list_objects_v2(Bucket="bkt", **cur.request(100))
            keys = [o["Key"] for o in resp.get("Contents", [])]
            n = cur.take(keys, resp["IsTruncated"], resp.get("NextContinuationToken"))
            listed += keys[:n]
            if not split_done and not cur.done:
                split_done = True
                given_, sent = explore_and_split(cur, s3, ways, ids)
                dir_requests += sent
                pieces += len(given_)
                queue.extend(given_ if carry else [dataclasses.replace(g, known=None) for g in given_])
    return listed, dir_requests, pieces


def test_a_thief_with_its_donors_knowledge_asks_fewer_directories_and_lists_the_same_keys() -> None:
    keys = dated_keys()
    s3 = FakeS3(keys)
    with_k, dirs_with, _ = list_all(s3, [KeyRange(id="r0")], carry=True)
    without, dirs_without, _ = list_all(s3, [KeyRange(id="r0")], carry=False)
    assert sorted(with_k) == sorted(without) == keys  # every key, both ways
    assert len(with_k) == len(without) == len(keys)  # and once
    # the thieves knew the years and months their donors asked about, and how many keys a month holds: the
    # seed asks its three levels; of the thieves, three ask for the days of the month they start in and two,
    # starting in a year of their own, for its months and the days of its first; the rest take the months as
    # too small to cut inside (steal.SMALL_DIR_KEYS) and ask nothing (the splits differ too: a thief that
    # knows every level cuts by the tree estimate at once, where one that asks is held to MAX_EXPLORE
    # requests per split)
    assert (dirs_with, dirs_without) == (10, 125)


def test_a_piece_knows_the_levels_its_donor_asked_about_that_hold_it() -> None:
    keys = dated_keys()
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r"))
    cur.take(keys[:100], True, "t")  # 2022/01/01 .. 2022/01/05
    given_, sent = explore_and_split(cur, s3, 8, iter(f"p{i}" for i in range(8)).__next__)
    assert sent == 3  # "" from pos, then events/ and events/year=2022/ from their start (MAX_EXPLORE)
    assert [g.start_after for g in given_] == [
        *(f"events/year=2022/month={m:02d}/" for m in (2, 3, 5, 7, 9, 11)),
        "events/year=2023/",
    ]
    # the levels that hold each piece's start; their fan-outs; the directories strictly inside it
    # and, for each parent of a level asked from its start, that its subdirectories do not all hold one
    # directory each (events/ holds 3 years, a year 12 months)
    # and the names each depth's directory asked from its start held, once (steal.TEMPLATE_PROOF)
    months = tuple(f"month={m:02d}/" for m in range(1, 13))
    children = ((1, ("year=2022/", "year=2023/", "year=2024/"), 1), (2, months, 1))
    year = DirKnowledge(
        levels=("", "events/", "events/year=2022/"),
        fanout=(("events/", 3), ("events/year=2022/", 12)),
        dirs=(),
        single=(("", -1), ("events/", -1)),
        children=children,
    )
    assert given_[0].known == year
    assert given_[1].known == dataclasses.replace(year, dirs=("events/year=2022/month=04/",))
    assert given_[-1].known == DirKnowledge(
        levels=("", "events/"),
        fanout=(("events/", 3),),
        dirs=("events/year=2024/",),
        single=(("", -1), ("events/", -1)),
        children=children,
    )
    # the thief of (month=02/, month=03/] starts as if it had asked those levels: after its first page only
    # the month it is in is new to it (asked from its start, for its fan-out); without them it would first
    # ask about the months again
    start = next(i for i, k in enumerate(keys) if k > "events/year=2022/month=02/")
    month = {
        "Delimiter": "/",
        "MaxKeys": 1000,
        "StartAfter": "events/year=2022/month=02/",
        "Prefix": "events/year=2022/month=02/",
    }
    thief = Cursor(given_[0])
    thief.take(keys[start : start + 100], True, "t")
    assert thief.explore(4, POLICY) == month
    bare = Cursor(dataclasses.replace(given_[0], known=None))
    bare.take(keys[start : start + 100], True, "t")
    assert bare.explore(4, POLICY) == {
        "Delimiter": "/",
        "MaxKeys": 1000,
        "StartAfter": keys[start + 99],
        "Prefix": "events/year=2022/",
    }


def brute_dirs(keys: list[str], level: str) -> set[str]:
    """The directories directly under ``level``, from the keys."""
    out = set()
    for k in keys:
        if k.startswith(level) and (j := k.find("/", len(level))) >= 0:
            out.add(k[: j + 1])
    return out


tree_key = st.builds(
    lambda a, b, c: f"{a}/{b}/{c}",
    st.sampled_from(["a", "b=1", "ü", "中", "z z", "y"]),
    st.integers(0, 30).map(lambda i: f"m{i:02d}"),
    st.integers(0, 10**6).map(lambda i: f"{i:06x}"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(tree_key, min_size=20, max_size=400, unique=True),
    taken=st.integers(2, 40),
    ways=st.integers(2, 16),
    end_at=st.one_of(st.none(), st.integers(0, 399)),
)
def test_carried_facts_are_true_of_the_piece(
    keys: list[str], taken: int, ways: int, end_at: int | None
) -> None:
    keys = sorted(keys)
    s3 = FakeS3(keys)
    end = None if end_at is None or end_at <= taken else keys[min(end_at, len(keys) - 1)]
    cur = Cursor(KeyRange(id="r", end=end))
    cur.take(keys[:taken], True, "t")
    policy = SplitPolicy(min_split_pages=0.01, page_keys=100)
    for _ in range(3):
        q = cur.explore(ways, policy)
        if q is None:
            break
        resp = s3.list_objects_v2(Bucket="bkt", **{**q, "MaxKeys": 3})  # small answers: truncation too
        cur.take_dirs(
            {**q, "MaxKeys": 3}, [p["Prefix"] for p in resp.get("CommonPrefixes", [])], resp["IsTruncated"]
        )
    for piece in cur.split(ways, policy, iter(f"p{i}" for i in range(16)).__next__):
        known = piece.known
        if known is None:
            continue
        a, b = piece.start_after, piece.end
        assert a is not None
        assert len(known.dirs) <= MAX_KNOWN_DIRS
        assert list(known.dirs) == sorted(set(known.dirs))
        # every carried directory lies strictly inside the piece and is a real directory
        real = {d for level in {"", *brute_dirs(keys, "")} for d in brute_dirs(keys, level)}
        for d in known.dirs:
            assert a < d and (b is None or d < b)
            assert d in real
        # a carried level holds the piece's start, and all its directories inside the piece are carried
        for level in known.levels:
            assert a.startswith(level)
            inside = {d for d in brute_dirs(keys, level) if a < d and (b is None or d < b)}
            assert inside <= set(known.dirs)
        for level, n in known.fanout:
            assert a.startswith(level) and n == len(brute_dirs(keys, level))


def test_a_truncated_answer_is_carried_only_where_it_covers_the_piece() -> None:
    """5,000 top-level directories: S3 names 1,000 after pos. A piece that ends before the last one named
    knows the level; one past it does not (its thief asks itself)."""
    tenants = sorted(f"{random.Random(i).getrandbits(32):08x}/" for i in range(5000))
    keys = [f"{t}f{j}" for t in tenants for j in range(3)]
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r"))
    cur.take(keys[:100], True, "t")
    resp = s3.list_objects_v2(
        Bucket="bkt", **(q := cur.explore(16, SplitPolicy(min_split_pages=1, page_keys=100)))
    )
    assert q is not None and resp["IsTruncated"]
    cur.take_dirs(q, [p["Prefix"] for p in resp["CommonPrefixes"]], True)
    upto = tenants[1032]
    assert cur.level_upto == {"": upto}
    inside = cur.knowledge(tenants[100], tenants[140])
    assert inside == DirKnowledge(levels=("",), fanout=(), dirs=tuple(tenants[101:140]))
    assert cur.knowledge(tenants[1000], tenants[1040]) is None  # the level is not known up to its end
    assert len(cur.knowledge(tenants[100], tenants[1000]).dirs) == 899  # type: ignore[union-attr]


def test_a_piece_carries_at_most_max_known_dirs_names_of_at_most_max_known_bytes() -> None:
    """Directory names known inside a piece travel up to MAX_KNOWN_DIRS of them and MAX_KNOWN_BYTES in all
    (a DynamoDB item holds at most 400 KB, names up to 1,024 bytes); past either bound the piece carries no
    names and no level (its thief asks itself)."""
    assert (MAX_KNOWN_DIRS, MAX_KNOWN_BYTES) == (1000, 16 * 1024)
    for width, fits in ((8, MAX_KNOWN_DIRS), (199, MAX_KNOWN_BYTES // 200)):
        names = sorted(f"{i:0{width}d}/" for i in range(1100))  # each name width + 1 bytes
        cur = Cursor(KeyRange(id="r"))
        cur.take([names[0] + "f"], True, "t")
        cur.take_dirs({"Delimiter": "/", "MaxKeys": 1000, "StartAfter": cur.pos}, names[1:], False)
        carried = cur.knowledge(names[0] + "f", names[fits + 1])
        assert carried is not None and carried.levels == ("",) and len(carried.dirs) == fits
        too_many = cur.knowledge(names[0] + "f", names[fits + 2])
        assert too_many is None or (too_many.levels, too_many.dirs) == ((), ())


hostile = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x10FFFF), min_size=0, max_size=12
)


@settings(max_examples=100, deadline=None)
@given(
    start=st.lists(hostile, min_size=1, max_size=4),
    dirs=st.lists(hostile, max_size=10),
    counts=st.lists(st.integers(0, 10**6), max_size=4),
)
def test_knowledge_round_trips_through_its_encoding_and_pickling(
    start: list[str], dirs: list[str], counts: list[int]
) -> None:
    start_after = "/".join(start) + "/k\n\"'"
    levels = tuple(start_after[: i + 1] for i, c in enumerate(start_after) if c == "/")
    known = DirKnowledge(
        levels=("", *levels),
        fanout=tuple(zip(levels, counts, strict=False)),
        dirs=tuple(sorted({start_after + d + "/" for d in dirs})),
        single=tuple(zip(("", *levels), (-1, *counts), strict=False)),
        sizes=tuple(zip(levels, reversed(counts), strict=False)),
        children=((1, tuple(sorted({d + "/" for d in dirs})), len(counts)), (3, (), -1)),
    )
    text = known.encode(start_after)
    assert DirKnowledge.decode(text, start_after) == known
    piece = KeyRange(id="p", start_after=start_after, end=None, estimate=5, known=known)
    assert pickle.loads(pickle.dumps(piece)) == piece  # procs.py sends pieces pickled
    assert piece.known_text() == text


def test_a_level_that_is_not_a_prefix_of_the_start_is_refused() -> None:
    with pytest.raises(ValueError, match="not a prefix"):
        DirKnowledge(levels=("b/",)).encode("a/x")
    with pytest.raises(ValueError, match="not a prefix"):
        DirKnowledge(single=(("b/", 2),)).encode("a/x")
    with pytest.raises(ValueError, match="not a prefix"):
        DirKnowledge(sizes=(("b/", 2),)).encode("a/x")


@pytest.fixture
def one_child_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests of the one-child pattern see it alone: their tenants are small, and the rule that a small
    directory is not asked about (steal.SMALL_DIR_KEYS, tested below) would take their place."""
    import hpcstage.inventory.steal as steal

    monkeypatch.setattr(steal, "SMALL_DIR_KEYS", 0)


def tenant_keys(odd: bool = False) -> list[str]:
    """<tenant 8 hex>/files/<hex>: 300 tenants of 1-60 keys; ``odd``: the tenant of the 100th key (where a
    cursor is after its first page) holds a second subdirectory, logs/, after its files."""
    rng = random.Random(11)
    tenants = sorted({f"{rng.getrandbits(32):08x}" for _ in range(300)})
    keys = [f"{t}/files/{rng.getrandbits(24):06x}" for t in tenants for _ in range(rng.randint(1, 60))]
    keys = sorted(set(keys))
    if odd:
        keys = sorted([*keys, *(f"{keys[99][:9]}logs/{i:03d}" for i in range(5))])
    return keys


def walk_asking(keys: list[str]) -> tuple[Cursor, list[str]]:
    """One cursor over the whole key space, a page of 100 at a time, sending its directory requests after
    every page (as a donor asked to split would); returns it and the levels it asked about."""
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r"))
    asked: list[str] = []
    policy = SplitPolicy(min_split_pages=1, page_keys=100)
    while not cur.done:
        resp = s3.list_objects_v2(Bucket="bkt", **cur.request(100))
        cur.take([o["Key"] for o in resp["Contents"]], resp["IsTruncated"], resp.get("NextContinuationToken"))
        while not cur.done and (q := cur.explore(4, policy)) is not None:
            asked.append(q.get("Prefix", ""))
            answer = s3.list_objects_v2(Bucket="bkt", **q)
            cur.take_dirs(q, [p["Prefix"] for p in answer.get("CommonPrefixes", [])], answer["IsTruncated"])
    return cur, asked


def test_subdirectories_that_hold_one_directory_each_are_asked_twice_then_taken_as_the_pattern(
    one_child_only: None,
) -> None:
    """<tenant>/files/: the top level is asked once (from pos); a tenant's own level from its start only for
    the first SINGLE_CHILD_PROOF tenants a remainder crossed from, each naming files/ alone. After that no
    tenant is asked about, and the remainder is still estimated from the tree (fan-out 1)."""
    keys = tenant_keys()
    cur, asked = walk_asking(keys)
    tenants = sorted({k[:9] for k in keys})
    assert asked[0] == "" and asked.count("") == 1
    assert asked[1:] == [k[:9] for k in (keys[99], keys[199])]  # the tenants of pos after pages 1 and 2
    assert SINGLE_CHILD_PROOF == 2 and cur.single == {"": 2}
    assert len(tenants) == 300 and asked[1] != asked[2]
    # pos's tenant is taken to hold files/ only: the tree estimate exists and sizes each tenant as one leaf
    mid = Cursor(KeyRange(id="m"))
    mid.single = {"": 2}
    mid.explored = {""}
    mid.take(keys[:100], True, "t")
    assert mid.explore(4, SplitPolicy(min_split_pages=1, page_keys=100)) is None
    mid.dir_cuts = [t for t in tenants if t > keys[99]]
    assert mid.remaining_pages(100) is not None


def test_a_parent_with_one_subdirectory_of_another_fan_out_is_asked_about_everywhere(
    one_child_only: None,
) -> None:
    """One tenant among the first with files/ and logs/: the pattern is refused (-1) and every tenant a
    remainder crosses from is asked about from its start, as before the pattern existed."""
    keys = tenant_keys(odd=True)
    cur, asked = walk_asking(keys)
    assert cur.single == {"": -1}
    # after a page, the tenant pos is in, each once, in order (none where the remainder is too small to ask)
    tenants_of_pos = list(dict.fromkeys(keys[i][:9] for i in range(99, len(keys) - 1, 100)))
    in_order = iter(tenants_of_pos)
    assert asked[0] == "" and all(t in in_order for t in asked[1:])
    assert len(asked) == 86 and len(tenants_of_pos) == 90


def test_keys_listed_in_two_subdirectories_of_one_directory_refute_the_one_child_pattern() -> None:
    """A page (or the step from the last page's pos to it) with keys in two subdirectories of one directory
    shows that directory holds more than one: the pattern of its parent is refused (-1), so the levels it
    would have skipped are asked again. Keys in two sibling directories say nothing of their own fan-out."""
    cur = Cursor(KeyRange(id="r"))
    cur.single = {"": 2}
    cur.take(["a/files/1", "a/files/2"], True, "t")
    assert cur.single == {"": 2}
    cur.take(["a/files/3", "b/files/1"], True, "t")  # two tenants, each in files/: the pattern holds
    assert cur.single == {"": 2}
    cur.take(["b/logs/1", "b/logs/2"], True, "t")  # from b/files/1 (pos) to b/logs/: b holds two
    assert cur.single == {"": -1}
    deep = Cursor(KeyRange(id="d"), prefix="p/")
    deep.single = {"p/x/": 2, "p/": 2}
    deep.take(["p/x/run-1/s0/a", "p/x/run-1/s1/b"], True, "t")  # run-1 holds two shards: x's runs refuted
    assert deep.single == {"p/x/": -1, "p/": 2}


def test_a_tenant_past_the_pattern_with_a_second_subdirectory_is_asked_about_after_its_listing_shows_it(
    one_child_only: None,
) -> None:
    """<tenant>/files/ for 300 tenants, but the tenant of the 350th key also holds logs/ (150 keys): once a
    page crosses from its files/ into its logs/, tenants are asked about again (the pattern is refuted)."""
    keys = tenant_keys()
    odd = keys[349][:9]
    keys = sorted([*keys, *(f"{odd}logs/{i:03d}" for i in range(150))])
    cur, asked = walk_asking(keys)
    assert cur.single == {"": -1}
    assert sorted(set(asked[1:3])) == sorted({keys[99][:9], keys[199][:9]})  # the pattern's two proofs
    later = [t for t in asked[3:] if t > odd]
    assert later and asked.index(later[0]) >= 3  # asked about again after the odd tenant's listing


def test_the_pattern_travels_with_a_piece_and_the_listing_is_the_same(
    monkeypatch: pytest.MonkeyPatch, one_child_only: None
) -> None:
    """Pieces carry the parent's count (``DirKnowledge.single``), so their thieves ask about no tenant
    either; every key is listed once both ways."""
    import hpcstage.inventory.steal as steal

    keys = tenant_keys()
    s3 = FakeS3(keys)
    listed, dirs, pieces = list_all(s3, [KeyRange(id="r0")], carry=True)
    assert sorted(listed) == keys and len(listed) == len(keys)
    # never a pattern (neither one child nor the same names): every tenant crossed from is asked
    monkeypatch.setattr(steal, "SINGLE_CHILD_PROOF", 10**9)
    monkeypatch.setattr(steal, "TEMPLATE_PROOF", 10**9)
    asked_listed, asked_dirs, asked_pieces = list_all(s3, [KeyRange(id="r0")], carry=True)
    assert sorted(asked_listed) == keys and len(asked_listed) == len(keys)
    # the seed asks the top level and its own tenant; its first three pieces carry the top level's names
    # (under MAX_KNOWN_DIRS: with 64, pieces of about 75 tenants carried none and asked the top level again,
    # 8 and 12) and ask their own tenant (r0 learns one tenant, each piece inherits that count and learns a
    # second); their pieces inherit the pattern and ask nothing; the four further tenant requests of the
    # listing without the pattern are the difference
    assert (dirs, asked_dirs) == (5, 9)
    # one piece apart: the answers size one remainder differently (before a remainder had to use up its
    # estimate to be halved by count, steal.BISECT_DIRS, both listings made 27)
    assert (pieces, asked_pieces) == (21, 20)


def hashed_keys(big: int | None = None) -> list[str]:
    """<4 hex>/2025-03-0D/<hex>.parquet: 300 hashed tops of two days of 10-15 keys each (a page of 100 keys
    spans four tops); ``big``: the index of a top whose days hold 3,000 keys each."""
    rng = random.Random(5)
    keys = []
    for t in range(300):
        top = f"{t * 211 % 65536:04x}/"
        for d in (1, 2):
            n = 3000 if t == big else rng.randint(10, 15)
            keys += [f"{top}2025-03-{d:02d}/{rng.getrandbits(40):010x}.parquet" for _ in range(n)]
    return sorted(set(keys))


def test_where_a_directorys_siblings_were_small_it_is_not_asked_about() -> None:
    """The top level is asked once (from pos), the top pos is in after the first page from its start (no
    sibling listed yet); after that every top holds less than twice the keys listed per top entered
    (steal.SMALL_DIR_KEYS), so none is asked about, and the remainder is still estimated from the tree."""
    keys = hashed_keys()
    cur, asked = walk_asking(keys)
    assert asked == ["", keys[99][:5]]
    tops = sorted({k[:5] for k in keys})
    # the keys listed since the top level was asked, over the tops entered since: about 25 per top
    mean = cur._sibling_mean("")
    assert mean is not None and 20 <= mean <= 30
    # what it learnt of the 300 tops it left is forgotten: only the levels holding its last key are kept
    assert cur.pos is not None and set(cur.dir_ref) == {""}
    assert cur.units and all(cur.pos.startswith(level) for level in cur.units)
    mid = Cursor(KeyRange(id="m"))
    for i in range(0, 400, 100):
        mid.take(keys[i : i + 100], True, "t")
    mid.dir_ref = {"": (keys[99], 100)}
    mid.explored = {""}
    mid.dir_cuts = [t for t in tops if t > keys[99]]
    assert mid._small_child(keys[399][:5])
    assert mid.explore(4, SplitPolicy(min_split_pages=1, page_keys=100)) is None
    est = mid.remaining_pages(100)
    assert est is not None and 0.8 * (len(keys) - 400) / 100 <= est <= 1.2 * (len(keys) - 400) / 100


def test_a_large_directory_among_small_ones_is_asked_about_once_its_listing_shows_it() -> None:
    """The 151st top holds 6,000 keys: the first page in it shows a day of more than twice the keys listed
    per top, and it is asked about from its start (to be cut inside); no other top is."""
    keys = hashed_keys(big=150)
    tops = sorted({k[:5] for k in keys})
    cur, asked = walk_asking(keys)
    assert asked == ["", keys[99][:5], tops[150]]


def test_the_size_of_small_directories_travels_with_a_piece_and_the_listing_is_the_same() -> None:
    """Pieces carry the keys per top their donor listed (``DirKnowledge.sizes``), so their thieves take the
    tops they enter as small at once; every key is listed once, with and without."""
    keys = hashed_keys()
    s3 = FakeS3(keys)
    listed, dirs, _ = list_all(s3, [KeyRange(id="r0")], carry=True)
    bare, bare_dirs, _ = list_all(s3, [KeyRange(id="r0")], carry=False)
    assert sorted(listed) == sorted(bare) == keys and len(listed) == len(bare) == len(keys)
    # the seed asks the top level and its top; its pieces carry the tops inside them and their size, and ask
    # nothing (with MAX_KNOWN_DIRS 64, three of the four held more tops and asked about the top they start
    # in: 5)
    assert (dirs, bare_dirs) == (2, 14)
    donor = Cursor(KeyRange(id="d"))
    for i in range(0, 300, 100):
        donor.take(keys[i : i + 100], True, "t")
    q = donor.explore(4, POLICY)
    assert q is not None and q["StartAfter"] == keys[299]
    donor.take_dirs(q, [t for t in sorted({k[:5] for k in keys}) if t > keys[299]])
    for i in range(300, 600, 100):
        donor.take(keys[i : i + 100], True, "t")
    pieces = donor.split(4, POLICY, iter(["a", "b", "c"]).__next__)
    mean = donor._sibling_mean("")
    assert pieces and mean is not None
    assert all(p.known is not None and p.known.sizes == (("", round(mean)),) for p in pieces)
    start = bisect.bisect_right(keys, pieces[0].start_after or "")

    def asked_by(piece: KeyRange) -> list[dict[str, Any]]:
        """The directory requests the thief of ``piece`` sends after its first page."""
        thief = Cursor(piece)
        thief.take(keys[start : start + 100], True, "t")
        out = []
        while (q := thief.explore(4, POLICY)) is not None:
            out.append(q)
            thief.take_dirs(
                q, [p["Prefix"] for p in s3.list_objects_v2(Bucket="b", **q).get("CommonPrefixes", [])]
            )
        return out

    assert Cursor(pieces[0]).carried_mean == {"": round(mean)}
    # the piece carries the tops inside it (the top level answered): its thief asks nothing
    assert pieces[0].known is not None and pieces[0].known.levels == ("",)
    assert asked_by(pieces[0]) == []
    # without the names (a piece with more than MAX_KNOWN_DIRS) the thief asks the top level from its position,
    # and without the size too, also the top it is in, from its start
    unnamed = dataclasses.replace(pieces[0].known, levels=(), fanout=(), dirs=())
    top_level = {"Delimiter": "/", "MaxKeys": 1000, "StartAfter": keys[start + 99]}
    assert asked_by(dataclasses.replace(pieces[0], known=unnamed)) == [top_level]
    bare_piece = dataclasses.replace(pieces[0], known=dataclasses.replace(unnamed, sizes=()))
    top = keys[start + 99][:5]
    assert asked_by(bare_piece) == [
        top_level,
        {"Delimiter": "/", "MaxKeys": 1000, "StartAfter": top, "Prefix": top},
    ]


def test_a_cursor_notes_where_each_directory_on_its_path_began() -> None:
    """``Cursor.entered``: the keys taken before each directory on pos's path (a range that starts inside
    one counts from its start), so that ``_listed_in`` tells how many keys of it were listed."""
    cur = Cursor(KeyRange(id="r"))
    cur.take(["a/1", "a/2", "b/1"], True, "t")
    assert cur.entered == {"b/": 2} and cur._listed_in("b/") == 1
    cur.take(["b/2", "c/x/1", "c/x/2"], True, "t")
    assert cur.entered == {"c/": 4, "c/x/": 4} and cur._listed_in("c/x/") == 2
    cur.take(["c/x/3", "c/y/1"], True, "t")
    assert cur.entered == {"c/": 4, "c/y/": 7} and cur._listed_in("c/") == 4
    cur.take(["d"], False, None)
    assert cur.entered == {}  # a file at the top: no directory holds it
    inside = Cursor(KeyRange(id="i", start_after="b/0"))
    inside.take(["b/1", "b/2"], True, "t")
    assert inside.entered == {"b/": 0} and inside._listed_in("b/") == 2


def users_keys() -> list[str]:
    """home/u<NNN>/proj_<k>/<hex>.dat: 260 users of two projects of 10 keys each, but the 201st (u200), whose
    projects hold 2,500 keys each."""
    rng = random.Random(3)
    keys = []
    for u in range(260):
        n = 2500 if u == 200 else 10
        keys += [f"home/u{u:03d}/proj_{p}/{rng.getrandbits(32):08x}.dat" for p in range(2) for _ in range(n)]
    return sorted(set(keys))


def test_a_large_directorys_siblings_are_sized_by_the_keys_listed_per_sibling() -> None:
    """A cursor deep in the one large user sizes the 59 users after it by the keys it listed per user (about
    40: the 200 users of 20 keys before it and what it listed of u200), not like the user it is in (5,000): the remainder is estimated within a factor 1.6 of its keys, where
    sizing them like u200 made it hundreds of times too large. The levels asked from their start count the
    users entered after them, so the small users between are not asked about either; u200 is asked about once
    its listing showed SMALL_DIR_KEYS keys of it."""
    keys = users_keys()
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r"))
    policy = SplitPolicy(min_split_pages=1, page_keys=100)
    asked: list[str] = []
    shown: int | None = None
    while shown is None:
        resp = s3.list_objects_v2(Bucket="bkt", **cur.request(100))
        cur.take([o["Key"] for o in resp["Contents"]], resp["IsTruncated"], resp.get("NextContinuationToken"))
        while (q := cur.explore(4, policy)) is not None:
            asked.append(q.get("Prefix", ""))
            if q.get("Prefix") == "home/u200/":
                shown = cur._listed_in("home/u200/")
            answer = s3.list_objects_v2(Bucket="bkt", **q)
            cur.take_dirs(q, [p["Prefix"] for p in answer.get("CommonPrefixes", [])], answer["IsTruncated"])
    assert asked == ["", "home/", "home/u004/", "home/u200/"]
    # not at twice the keys per user (about 40), as before: a directory among small ones is cut only once it
    # has shown a few pages (SMALL_DIR_KEYS)
    assert SMALL_DIR_KEYS == 4000 and shown is not None and 4000 <= shown < 4100
    assert cur.pos is not None and cur.pos.startswith("home/u200/proj_1/")
    mean = cur._sibling_mean("home/")
    assert mean is not None and 35 <= mean <= 50  # (200 users x 20 keys + about 4,000 of u200) / 201
    left = len(keys) - bisect.bisect_right(keys, cur.pos)
    tree = cur._tree_estimate()
    assert tree is not None and len(tree[2]) == 59  # the users after u200
    # the rest of u200 (its proj_1, by the keys listed there since the listing entered it) and 59 users of the
    # mean, which counts u200's 4,000 keys: about 1,000 + 59 x 40 against 1,000 + 59 x 20 left
    rest = len(keys) - bisect.bisect_right(keys, cur.pos) - 59 * 20
    assert rest / 1.2 <= tree[1] <= 1.2 * rest
    assert tree[0] == pytest.approx(tree[1] + 59 * mean)
    assert left / 1.6 <= tree[0] <= 1.6 * left
    est = cur.remaining_pages(100)
    assert est is not None and left / 160 <= est <= 1.6 * left / 100


def hourly_keys(extra_hour_on: int | None = None) -> list[str]:
    """logs/day=DD/hour=HH/<hex>.json: 40 days of 24 hours of 3-8 keys; ``extra_hour_on``: that day also holds
    hour=24/."""
    rng = random.Random(9)
    keys = []
    for d in range(40):
        hours = range(25 if d == extra_hour_on else 24)
        keys += [
            f"logs/day={d:02d}/hour={h:02d}/{rng.getrandbits(32):08x}.json"
            for h in hours
            for _ in range(rng.randint(3, 8))
        ]
    return sorted(set(keys))


def test_directories_whose_subdirectories_have_the_same_names_are_asked_twice_then_taken_as_the_template(
    monkeypatch: pytest.MonkeyPatch, one_child_only: None
) -> None:
    """Every day=DD/ holds hour=00/ ... hour=23/: the first TEMPLATE_PROOF days a remainder crossed from are
    asked from their start, each naming the same 24 hours; after that no day is asked, the template names
    the hours of the day pos is in (its cut points and fan-out), and the remainder is estimated from the tree.
    (The rule that a small directory is not asked about, steal.SMALL_DIR_KEYS, is off: these days are small.)"""
    keys = hourly_keys()
    cur, asked = walk_asking(keys)
    hours = tuple(f"hour={h:02d}/" for h in range(24))
    assert TEMPLATE_PROOF == 2 and cur.children[2] == (hours, 2)
    assert asked == ["", "logs/", keys[99][:12], keys[199][:12]]  # the days of pos after pages 1 and 2
    # a day the listing enters later is known from the template, as if asked from its start
    mid = Cursor(KeyRange(id="m"))
    mid.children = {2: (hours, 2)}
    mid.explored = {"", "logs/"}
    i = bisect.bisect_left(keys, "logs/day=30/")
    mid.take(keys[i : i + 20], True, "t")
    day = "logs/day=30/"
    assert mid.explore(4, SplitPolicy(min_split_pages=1, page_keys=100)) is None
    assert day in mid.templated and mid.fanout[day] == 24
    assert [d for d in mid.dir_cuts if d.startswith(day)] == [
        day + h for h in hours if day + h > (mid.pos or "")
    ]
    assert mid.remaining_pages(100) is not None
    # pieces carry the template; every key is listed once, with fewer directory requests than without it
    s3 = FakeS3(keys)
    listed, dirs, _ = list_all(s3, [KeyRange(id="r0")], carry=True)
    import hpcstage.inventory.steal as steal

    monkeypatch.setattr(steal, "TEMPLATE_PROOF", 10**9)
    bare, bare_dirs, _ = list_all(s3, [KeyRange(id="r0")], carry=True)
    assert sorted(listed) == sorted(bare) == keys and len(listed) == len(bare) == len(keys)
    assert (dirs, bare_dirs) == (6, 14)


def test_a_template_is_refuted_by_a_key_in_a_subdirectory_it_does_not_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Day 25 also holds hour=24/: the cursor listing it took the day's hours from the template; the first
    page with a key in hour=24/ refutes the template for that depth (-1), the day is forgotten as asked and
    asked from its start at the next split; the listing is exact with and without templates."""
    keys = hourly_keys(extra_hour_on=25)
    hours = tuple(f"hour={h:02d}/" for h in range(24))
    day = "logs/day=25/"
    cur = Cursor(KeyRange(id="m", start_after="logs/day=25/"))
    cur.children = {2: (hours, 2)}
    cur.explored = {"", "logs/"}
    s3 = FakeS3(keys)
    policy = SplitPolicy(min_split_pages=1, page_keys=20)
    resp = s3.list_objects_v2(Bucket="bkt", **cur.request(20))
    cur.take([o["Key"] for o in resp["Contents"]], True, resp.get("NextContinuationToken"))
    assert cur.explore(4, policy) is None and day in cur.templated
    while cur.pos is not None and not cur.pos.startswith(day + "hour=24/"):
        resp = s3.list_objects_v2(Bucket="bkt", **cur.request(20))
        cur.take([o["Key"] for o in resp["Contents"]], True, resp.get("NextContinuationToken"))
    assert cur.children[2] == ((), -1) and day not in cur.templated and day not in cur.explored
    q = cur.explore(4, policy)
    assert q is not None and q["Prefix"] == day and q["StartAfter"] == day
    listed, _, _ = list_all(s3, [KeyRange(id="r0")], carry=True)
    import hpcstage.inventory.steal as steal

    monkeypatch.setattr(steal, "TEMPLATE_PROOF", 10**9)
    bare, _, _ = list_all(s3, [KeyRange(id="r0")], carry=True)
    assert sorted(listed) == sorted(bare) == keys and len(listed) == len(bare) == len(keys)


def test_a_templated_directory_that_outgrows_its_siblings_is_asked_about(one_child_only: None) -> None:
    """A day the template named is asked from its start once the keys listed in it reach twice the keys per
    day its siblings held (``Cursor._outgrew``): a large directory is worth its own answer. (The rule that a
    small directory is not asked about at all, steal.SMALL_DIR_KEYS, is off here.)"""
    keys = hourly_keys()
    hours = tuple(f"hour={h:02d}/" for h in range(24))
    day = "logs/day=30/"
    cur = Cursor(KeyRange(id="m", start_after=day))
    cur.children = {2: (hours, 2)}
    cur.explored = {"", "logs/"}
    cur.carried_mean = {"logs/": 60.0}
    i = bisect.bisect_left(keys, day)
    policy = SplitPolicy(min_split_pages=1, page_keys=20)
    cur.take(keys[i : i + 20], True, "t")
    assert cur.explore(4, policy) is None and day in cur.templated
    cur.take(keys[i + 20 : i + 120], True, "t")
    assert (cur._listed_in(day) or 0) >= 120
    q = cur.explore(4, policy)
    assert q is not None and q["Prefix"] == day and day not in cur.templated


def test_the_space_past_a_directory_taken_to_hold_one_subdirectory_goes_with_the_last_piece(
    one_child_only: None,
) -> None:
    """Tenants each hold files/ alone and the run has proved it (SINGLE_CHILD_PROOF); the top level was
    answered in full: a stream in the last tenant cuts that tenant's files/ and gives no piece of its own to
    the space past files/, which holds no key (before, that piece cost its thief a request to find it
    empty)."""
    rng = random.Random(3)
    keys = sorted({f"t{t}/files/{rng.getrandbits(32):08x}" for t in range(3) for _ in range(1000)})
    s3 = FakeS3(keys)
    cur = Cursor(KeyRange(id="r", start_after="t1/files/g"))
    cur.single = {"": SINGLE_CHILD_PROOF}
    cur.explored = {""}
    resp = s3.list_objects_v2(Bucket="bkt", **cur.request(100))
    cur.take([o["Key"] for o in resp["Contents"]], resp["IsTruncated"], resp.get("NextContinuationToken"))
    ids = (f"p{i}" for i in itertools.count()).__next__
    policy = SplitPolicy(min_split_pages=1, page_keys=100)
    assert cur.explore(4, policy) is None  # t2/ is taken to hold files/ only: nothing to ask
    pieces = cur.split(4, policy, ids)
    assert cur.cut_path == "leaf" and len(pieces) >= 2
    assert pieces[-1].end is None and all(p.start_after.startswith("t2/files/") for p in pieces)
    # the donor keeps the first part; the pieces tile the rest of t2/files/ and each holds keys
    assert cur.range.end == pieces[0].start_after
    assert all(a.end == b.start_after for a, b in itertools.pairwise(pieces))
    assert all(any(p.contains(k) for k in keys) for p in pieces)
