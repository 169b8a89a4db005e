"""Key shapes the stealing engine was never tuned on, for the discrete-event benchmark (bench/sim/des.py).

- ``deep-tree``: a directory tree four levels deep with Zipf fan-out at every level (a few projects hold
  most runs, a few runs most shards), mixed-case names with '-', '_' and '=' separators, and files named
  ``<base36>.tif`` -- a lab's instrument output.
- ``uuid-projects``: 2,000 projects named by UUID4 (36 characters, dashes at fixed positions), Zipf sizes,
  each with two subdirectories (``processed/`` 30 %, ``raw/`` 70 %) of daily folders ``YYYY-MM-DD/`` (1-30,
  by the project's size) holding ``<base36 counter>.h5``: hash-named tenants whose subdirectories are not
  one each (2026-11-26, added after the engine's cuts between hash-named directories changed: a shape it was
  not tuned on).
- ``nonascii``: 40 top-level folders with non-ASCII names, each file name a long (16-24 character)
  random segment drawn from CJK, Hangul, Cyrillic, Greek, accented Latin and emoji (UTF-8 of 2, 3 and 4
  bytes), then ``.bin``: the byte-value alphabet at every position is wide and sparse.
- ``hashed-prefix``: 65,536 top-level ``<4 hex>/`` prefixes (the layout AWS once advised for request
  rates), each with 1-5 daily folders ``2025-03-DD/`` of ``<base36>.parquet``: a flat, very wide first
  level whose directories each hold a page or two at 25M (2026-11-27, unseen-shape check).
- ``users``: ``home/<user>/proj_<k>/<base36>.dat``, 50,000 users of Zipf(1.0) sizes with 1-8 projects
  each: one directory holds tens of thousands of subdirectories of very different sizes (2026-11-27).
- ``logs-hourly``: ``logs/app=<app>/year=2025/month=MM/day=DD/hour=HH/<32 hex>.json.gz``, six apps of
  Zipf(1.5) sizes, a diurnal cycle over the hours: Hive-style partitions five levels deep (2026-11-27).

Checks added on 2026-11-29 (``CHECK_SHAPES``, ``--shapes checks``), layouts common in research data that no
shape above has:
- ``frames``: ``exp/<run>/frame_<6 digits>.tif``, 3,000 runs of Zipf(0.9) sizes, frames numbered from 0 in
  each: counters that fill the low end of their padded width.
- ``counter``: ``frames/<10 digits>.png`` numbered from 0: one counter for the whole bucket.
- ``sequential-ids``: ``scans/<12 digits>.dcm``, ids spread evenly over their space (``Codes``).
- ``dir-per-object``: ``results/<12 hex>/out.json``: every directory holds one object.
- ``giants-and-dust``: ``data/<name>/...``: 12 directories hold 99 % of the keys, 100,000 hold one each.
Checks added on 2026-11-29 (fourteenth session), AWS and sequencing layouts, also in ``CHECK_SHAPES``:
- ``cloudtrail``: ``AWSLogs/<account>/CloudTrail/<region>/2025/MM/DD/<account>_CloudTrail_<region>_<date>T<8
  alnum>.json.gz``: each file name repeats its directory's date before a random tail.
- ``access-logs``: ``logs/2025-MM-DD-HH-<16 HEX>``, S3 server access logs: a year of hours in one flat directory,
  the date and hour fields of the name.
- ``fastq-runs``: ``runs/<flowcell>/<sample>-<k>/<sample>_S<k>_L00<lane>_R<1|2>_<chunk>.fastq.gz``: eight numbered
  series in each sample's directory.
- ``access-logs-multi`` (fifteenth session): ``logs/<bucket>/2025-MM-DD-HH-<16 HEX>``, six buckets' access logs of
  Zipf(1.0) sizes, each flat under a target prefix of its own.
And, by name only (its keys are held in memory: about 4 GB at 25M), ``random-hex``: 32-hex names drawn at
random, so that the keys in a span vary as a random sample's do (``Codes`` places one a slot: its counts in a
span are exact to a key).

Like bench.keyspace's shapes, keys are computed from their rank; construction is O(blocks).
"""

from __future__ import annotations

import random

from bench.keyspace import (
    BASE36,
    HEX,
    SHAPES,
    Blocks,
    Codes,
    Counter,
    Keyspace,
    _apportion,
    _width_for,
    explicit,
)


def _zipf(k: int, s: float, rnd: random.Random) -> list[float]:
    w = [1.0 / (i + 1) ** s for i in range(k)]
    rnd.shuffle(w)
    return w


def _code_dirs(names: list[str], counts: list[int], min_width: int, suffix: str, salt: int) -> Blocks:
    """Directories ``names`` (those with keys) of ``counts[i]`` base-36 file names each, ending in ``suffix``;
    the i-th salted ``salt + i``."""
    pref, inner = [], []
    for i, (name, c) in enumerate(zip(names, counts, strict=True)):
        if c:
            pref.append(name)
            inner.append(Codes(c, BASE36, _width_for(c, 36, min_width), suffix, salt=salt + i))
    return Blocks(pref, inner)


def deep_tree(n: int, seed: int = 11) -> Keyspace:
    """projects/<name>/run-<NNNNNNN>/shard=<NNN>/<base36>.tif with Zipf fan-out at each level."""
    rnd = random.Random(seed)
    projects = [
        "Alpha",
        "BRAIN-scan",
        "climate_v2",
        "cryoEM",
        "genomics",
        "LIGO",
        "ocean-floats",
        "proteomics",
        "Solar_wind",
        "tomography",
        "weather-ens",
        "xray",
    ]
    p_counts = _apportion(n, _zipf(len(projects), 1.3, rnd))
    p_pref, p_inner = [], []
    leaf_budget = 4000  # leaf blocks in all, split over projects by their share
    for pi, (name, pc) in enumerate(zip(projects, p_counts, strict=True)):
        if pc == 0:
            continue
        runs = max(1, min(200, round(leaf_budget * pc / max(1, n) / 4)))
        r_counts = _apportion(pc, _zipf(runs, 1.1, rnd))
        r_pref, r_inner = [], []
        for ri, rc in enumerate(r_counts):
            if rc == 0:
                continue
            shards = max(1, min(64, round(8 * rc * runs / max(1, pc))))
            s_counts = _apportion(rc, _zipf(shards, 0.9, rnd))
            s_pref, s_inner = [], []
            for si, sc in enumerate(s_counts):
                if sc == 0:
                    continue
                s_pref.append(f"shard={si:03d}/")
                s_inner.append(
                    Codes(sc, BASE36, _width_for(sc, 36, 7), ".tif", salt=seed * 1_000_003 + pi * 10_007 + ri)
                )
            if s_pref:
                r_pref.append(f"run-{rnd.randrange(10_000):04d}{ri:03d}/")
                r_inner.append(Blocks(s_pref, s_inner))
        p_pref.append(f"projects/{name}/")
        p_inner.append(Blocks(r_pref, r_inner))
    return Keyspace("deep-tree", Blocks(p_pref, p_inner), seed=seed, size_median=2_000_000, size_sigma=1.5)


# Characters of the random segments, sorted by code point (S3 order); 2-, 3- and 4-byte UTF-8.
NONASCII_ALPHABET = "".join(
    sorted(
        set(
            "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿ"
            "αβγδεζηθικλμνξοπρστυφχψω"
            "абвгдежзийклмнопрстуфхцчшщэюя"
            "가나다라마바사아자차카타파하"
            "東京大阪名古屋札幌福岡神戸横浜"
            "数据文件图像日志"
            "😀😃😄😁🚀🌍🌟🔥💾📁"
        )
    )
)


def nonascii(n: int, seed: int = 12) -> Keyspace:
    """40 non-ASCII top-level folders; file names are 16-24 random non-ASCII characters + '.bin'."""
    rnd = random.Random(seed)
    names: set[str] = set()
    while len(names) < 40:
        names.add("".join(rnd.choice(NONASCII_ALPHABET) for _ in range(rnd.randint(2, 6))) + "/")
    folders = sorted(names)
    # prefix-free by construction: every folder ends in '/', which is not in the alphabet
    counts = _apportion(n, [rnd.uniform(0.1, 1.0) for _ in folders])
    keep = [i for i, c in enumerate(counts) if c > 0]
    base = len(NONASCII_ALPHABET)
    inners = [
        Codes(counts[i], NONASCII_ALPHABET, max(16, _width_for(counts[i], base, 16)), ".bin", salt=seed + i)
        for i in keep
    ]
    width_jitter = [rnd.randint(0, 8) for _ in keep]
    for inner, extra in zip(inners, width_jitter, strict=True):
        inner.width += extra
        inner.space = inner.base**inner.width
    return Keyspace("nonascii", Blocks([folders[i] for i in keep], inners), seed=seed, size_median=500_000)


def uuid_projects(n: int, seed: int = 13) -> Keyspace:
    """<uuid4>/{processed,raw}/<YYYY-MM-DD>/<base36>.h5 with Zipf(1.2) project sizes."""
    rnd = random.Random(seed)
    names: set[str] = set()
    while len(names) < 2000:
        h = f"{rnd.getrandbits(128):032x}"
        names.add(f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[rnd.randrange(4)]}{h[17:20]}-{h[20:32]}/")
    projects = sorted(names)
    counts = _apportion(n, _zipf(len(projects), 1.2, rnd))
    biggest = max(counts)
    p_pref, p_inner = [], []
    for pi, (name, pc) in enumerate(zip(projects, counts, strict=True)):
        if pc == 0:
            continue
        days = 1 + int(29 * pc / biggest)
        first = rnd.randrange(300)
        sub_pref, sub_inner = [], []
        for si, (sub, share) in enumerate((("processed/", 0.3), ("raw/", 0.7))):
            sc = round(pc * share) if si == 0 else pc - round(pc * 0.3)
            if sc == 0:
                continue
            d_counts = _apportion(sc, [rnd.uniform(0.5, 1.5) for _ in range(days)])
            d_names = [
                f"2025-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}/" for day in range(first, first + days)
            ]
            sub_pref.append(sub)
            sub_inner.append(_code_dirs(d_names, d_counts, 6, ".h5", seed * 7919 + pi * 31 + si * 7))
        p_pref.append(name)
        p_inner.append(Blocks(sub_pref, sub_inner))
    return Keyspace(
        "uuid-projects", Blocks(p_pref, p_inner), seed=seed, size_median=8_000_000, size_sigma=1.2
    )


def hashed_prefix(n: int, seed: int = 14) -> Keyspace:
    """<4 hex>/2025-03-<DD>/<base36>.parquet: 65,536 hashed tops, 1-5 days each, sizes uniform-ish."""
    rnd = random.Random(seed)
    tops = [f"{i:04x}/" for i in range(65_536)]
    counts = _apportion(n, [rnd.uniform(0.5, 1.5) for _ in tops])
    pref, inner = [], []
    for ti, (top, tc) in enumerate(zip(tops, counts, strict=True)):
        if tc == 0:
            continue
        days = sorted(rnd.sample(range(1, 29), rnd.randint(1, 5)))
        d_counts = _apportion(tc, [rnd.uniform(0.2, 1.0) for _ in days])
        d_names = [f"2025-03-{day:02d}/" for day in days]
        pref.append(top)
        inner.append(_code_dirs(d_names, d_counts, 8, ".parquet", seed * 65_537 + ti * 7))
    return Keyspace("hashed-prefix", Blocks(pref, inner), seed=seed, size_median=40_000_000, size_sigma=1.0)


USER_CHARS = "abcdefghijklmnopqrstuvwxyz"


def users(n: int, seed: int = 15) -> Keyspace:
    """home/<user>/proj_<k>/<base36>.dat: 50,000 users of Zipf(1.0) sizes, 1-8 projects each."""
    rnd = random.Random(seed)
    names: set[str] = set()
    while len(names) < 50_000:
        name = "".join(rnd.choice(USER_CHARS) for _ in range(rnd.randint(2, 8)))
        names.add(name + (str(rnd.randrange(100)) if rnd.random() < 0.3 else "") + "/")
    people = sorted(names)
    counts = _apportion(n, _zipf(len(people), 1.0, rnd))
    pref, inner = [], []
    for ui, (user, uc) in enumerate(zip(people, counts, strict=True)):
        if uc == 0:
            continue
        k = rnd.randint(1, 8)
        p_counts = _apportion(uc, _zipf(k, 1.0, rnd))
        p_names = [f"proj_{pi}/" for pi in range(k)]
        pref.append(user)
        inner.append(_code_dirs(p_names, p_counts, 5, ".dat", seed * 1_000_003 + ui * 11))
    return Keyspace(
        "users", Blocks(["home/"], [Blocks(pref, inner)]), seed=seed, size_median=300_000, size_sigma=2.0
    )


def logs_hourly(n: int, seed: int = 16) -> Keyspace:
    """logs/app=<app>/year=2025/month=MM/day=DD/hour=HH/<32 hex>.json.gz, Zipf(1.5) apps, diurnal hours."""
    rnd = random.Random(seed)
    apps = ["api-gateway", "auth", "billing", "ingest", "scheduler", "web"]
    a_counts = _apportion(n, _zipf(len(apps), 1.5, rnd))
    diurnal = [0.3 + (1.0 if 8 <= h <= 20 else 0.0) + rnd.uniform(0.0, 0.2) for h in range(24)]
    hours = [(m, d, h) for m in range(1, 13) for d in range(1, 29) for h in range(24)]
    pref, inner = [], []
    for ai, (app, ac) in enumerate(zip(apps, a_counts, strict=True)):
        if ac == 0:
            continue
        h_counts = _apportion(ac, [diurnal[h] * rnd.uniform(0.8, 1.2) for (_, _, h) in hours])
        months: dict[int, dict[int, tuple[list[str], list[Codes]]]] = {}
        for hi, ((m, d, h), hc) in enumerate(zip(hours, h_counts, strict=True)):
            if hc == 0:
                continue
            hp, hin = months.setdefault(m, {}).setdefault(d, ([], []))
            hp.append(f"hour={h:02d}/")
            hin.append(Codes(hc, HEX, 32, ".json.gz", salt=seed * 7_919 + ai * 100_003 + hi))
        m_pref, m_inner = [], []
        for m, days in months.items():
            m_pref.append(f"month={m:02d}/")
            m_inner.append(Blocks([f"day={d:02d}/" for d in days], [Blocks(*days[d]) for d in days]))
        pref.append(f"app={app}/")
        inner.append(Blocks(["year=2025/"], [Blocks(m_pref, m_inner)]))
    return Keyspace("logs-hourly", Blocks(["logs/"], [Blocks(pref, inner)]), seed=seed, size_median=200_000)


DIGITS = "0123456789"


def frames(n: int, seed: int = 36) -> Keyspace:
    """exp/<run>/frame_<6 digits>.tif: 3,000 runs of Zipf(0.9) sizes, frames numbered from 0 in each."""
    rnd = random.Random(seed)
    names: set[str] = set()
    while len(names) < 3000:
        names.add("".join(rnd.choice(USER_CHARS) for _ in range(6)) + f"-{rnd.randrange(1000):03d}/")
    runs = sorted(names)
    counts = _apportion(n, _zipf(len(runs), 0.9, rnd))
    pref, inner = [], []
    for run, c in zip(runs, counts, strict=True):
        if c:
            pref.append(run)
            inner.append(Blocks(["frame_"], [Counter(c, max(6, len(str(c))), ".tif")]))
    return Keyspace("frames", Blocks(["exp/"], [Blocks(pref, inner)]), seed=seed)


def counter(n: int, seed: int = 35) -> Keyspace:
    """frames/<10 digits>.png numbered from 0: one counter for the whole bucket."""
    return Keyspace("counter", Blocks(["frames/"], [Counter(n, max(10, len(str(n))), ".png")]), seed=seed)


def sequential_ids(n: int, seed: int = 32) -> Keyspace:
    """scans/<12 digits>.dcm: ids spread evenly over their space."""
    return Keyspace(
        "sequential-ids", Blocks(["scans/"], [Codes(n, DIGITS, 12, ".dcm", salt=seed)]), seed=seed
    )


def dir_per_object(n: int, seed: int = 31) -> Keyspace:
    """results/<12 hex>/out.json: every directory holds one object."""
    return Keyspace(
        "dir-per-object", Blocks(["results/"], [Codes(n, HEX, 12, "/out.json", salt=seed)]), seed=seed
    )


def giants_and_dust(n: int, seed: int = 33) -> Keyspace:
    """data/<name>/...: 12 directories hold 99 % of the keys (<base36>.nc), up to 100,000 hold one (.txt)."""
    rnd = random.Random(seed)
    dust = min(100_000, n // 100)
    drawn: set[str] = set()
    while len(drawn) < dust + 12:
        drawn.add("".join(rnd.choice(USER_CHARS) for _ in range(10)))
    names = sorted(drawn)
    giants = set(rnd.sample(range(len(names)), 12))
    counts = _apportion(n - dust, [rnd.uniform(0.5, 2.0) for _ in range(12)])
    pref: list[str] = []
    inner: list[Codes | Counter | Blocks] = []
    left = dust
    for i, name in enumerate(names):
        if i in giants:
            pref.append(name + "/")
            inner.append(
                Codes(counts[len([g for g in giants if g < i])], BASE36, 10, ".nc", salt=seed * 1000 + i)
            )
        elif left > 0:
            pref.append(name + "/")
            inner.append(Codes(1, BASE36, 6, ".txt", salt=seed * 1000 + i))
            left -= 1
    return Keyspace("giants-and-dust", Blocks(["data/"], [Blocks(pref, inner)]), seed=seed)


AWS_REGIONS = [
    "ap-northeast-1",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ca-central-1",
    "eu-central-1",
    "eu-north-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
]
ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def cloudtrail(n: int, seed: int = 41) -> Keyspace:
    """AWSLogs/<account>/CloudTrail/<region>/2025/MM/DD/<account>_CloudTrail_<region>_2025MMDDT<8 alnum>.json.gz:
    30 accounts of Zipf(1.0) sizes, two busy regions each, 336 days; every file name repeats its directory's
    date before a random tail."""
    rnd = random.Random(seed)
    accounts = sorted({f"{rnd.randrange(10**12):012d}" for _ in range(30)})
    a_counts = _apportion(n, _zipf(len(accounts), 1.0, rnd))
    days = [(m, d) for m in range(1, 13) for d in range(1, 29)]
    pref: list[str] = []
    inner: list[Codes | Counter | Blocks] = []
    for ai, (acct, ac) in enumerate(zip(accounts, a_counts, strict=True)):
        if not ac:
            continue
        weights = [10.0 if r in ("us-east-1", "eu-west-1") else rnd.uniform(0.01, 1.0) for r in AWS_REGIONS]
        r_pref: list[str] = []
        r_inner: list[Codes | Counter | Blocks] = []
        for ri, (region, rc) in enumerate(zip(AWS_REGIONS, _apportion(ac, weights), strict=True)):
            if not rc:
                continue
            d_counts = _apportion(rc, [rnd.uniform(0.5, 1.5) for _ in days])
            months: dict[int, tuple[list[str], list[Codes | Counter | Blocks]]] = {}
            for di, ((m, d), dc) in enumerate(zip(days, d_counts, strict=True)):
                if not dc:
                    continue
                names = Codes(
                    dc, ALNUM, _width_for(dc, 62, 8), ".json.gz", salt=seed + ai * 7919 + ri * 101 + di
                )
                mp, mi = months.setdefault(m, ([], []))
                mp.append(f"{d:02d}/")
                mi.append(Blocks([f"{acct}_CloudTrail_{region}_2025{m:02d}{d:02d}T"], [names]))
            year = Blocks([f"{m:02d}/" for m in months], [Blocks(*months[m]) for m in months])
            r_pref.append(f"{region}/")
            r_inner.append(Blocks(["2025/"], [year]))
        pref.append(f"{acct}/")
        inner.append(Blocks(["CloudTrail/"], [Blocks(r_pref, r_inner)]))
    return Keyspace("cloudtrail", Blocks(["AWSLogs/"], [Blocks(pref, inner)]), seed=seed, size_median=20_000)


def _log_hours(n: int, rnd: random.Random, salt: int) -> tuple[list[str], list[Codes | Counter | Blocks]]:
    """``n`` access logs over 8,064 hours of a working-day cycle (2025-MM-DD-HH-, 28 days a month), named
    ``<16 HEX>`` under each hour: the prefixes and blocks of a ``Blocks``."""
    hours = [(m, d, h) for m in range(1, 13) for d in range(1, 29) for h in range(24)]
    counts = _apportion(
        n, [(0.2 + (1.0 if 9 <= h <= 18 else 0.0)) * rnd.uniform(0.5, 1.5) for _, _, h in hours]
    )
    pref: list[str] = []
    inner: list[Codes | Counter | Blocks] = []
    for i, ((m, d, h), c) in enumerate(zip(hours, counts, strict=True)):
        if c:
            pref.append(f"2025-{m:02d}-{d:02d}-{h:02d}-")
            inner.append(Codes(c, "0123456789ABCDEF", 16, "", salt=salt + i))
    return pref, inner


def access_logs(n: int, seed: int = 42) -> Keyspace:
    """logs/2025-MM-DD-HH-<16 HEX>: S3 server access logs, flat (no "/" past logs/), 8,064 hours of a
    working-day cycle: the date and hour are fields of the name, not directories."""
    pref, inner = _log_hours(n, random.Random(seed), seed)
    return Keyspace("access-logs", Blocks(["logs/"], [Blocks(pref, inner)]), seed=seed, size_median=30_000)


def access_logs_multi(n: int, seed: int = 44) -> Keyspace:
    """logs/<bucket>/2025-MM-DD-HH-<16 HEX>: the S3 server access logs of six buckets, each under a target
    prefix of its own (Zipf(1.0) sizes), flat under it as in ``access_logs``."""
    rnd = random.Random(seed)
    buckets = sorted(
        {"".join(rnd.choice("abcdefghijklmnopqrstuvwxyz-") for _ in range(10)) for _ in range(6)}
    )
    pref: list[str] = []
    inner: list[Codes | Counter | Blocks] = []
    for b, (name, bn) in enumerate(zip(buckets, _apportion(n, _zipf(len(buckets), 1.0, rnd)), strict=True)):
        h_pref, h_inner = _log_hours(bn, rnd, seed + b * 10_000)
        if h_pref:
            pref.append(f"{name}/")
            inner.append(Blocks(h_pref, h_inner))
    return Keyspace(
        "access-logs-multi", Blocks(["logs/"], [Blocks(pref, inner)]), seed=seed, size_median=30_000
    )


def fastq_runs(n: int, seed: int = 43) -> Keyspace:
    """runs/<flowcell>/<sample>-<k>/<sample>_S<k>_L00<lane>_R<1|2>_<chunk>.fastq.gz: 400 sequencer runs of
    Zipf(0.8) sizes, 4-96 samples each, eight lane/read series of numbered chunks in each sample's directory."""
    rnd = random.Random(seed)
    cells = sorted(
        {"".join(rnd.choice("ABCDEFGHJKLMNPRSTUVWXY0123456789") for _ in range(9)) for _ in range(400)}
    )
    pref: list[str] = []
    inner: list[Codes | Counter | Blocks] = []
    for cell, cc in zip(cells, _apportion(n, _zipf(len(cells), 0.8, rnd)), strict=True):
        if not cc:
            continue
        k = rnd.randint(4, 96)
        s_pref: list[str] = []
        s_inner: list[Codes | Counter | Blocks] = []
        for si, sc in enumerate(_apportion(cc, _zipf(k, 0.7, rnd))):
            if not sc:
                continue
            name = f"SMP{rnd.randrange(10**6):06d}"
            series = [f"{name}_S{si + 1}_L00{lane}_R{r}_" for lane in range(1, 5) for r in (1, 2)]
            l_pref: list[str] = []
            l_inner: list[Codes | Counter | Blocks] = []
            for prefix, lc in zip(series, _apportion(sc, [1.0] * len(series)), strict=True):
                if lc:
                    l_pref.append(prefix)
                    l_inner.append(Counter(lc, max(3, len(str(lc + 1))), ".fastq.gz", start=1))
            s_pref.append(f"{name}-{si:02d}/")
            s_inner.append(Blocks(l_pref, l_inner))
        pref.append(f"{cell}/")
        inner.append(Blocks(s_pref, s_inner))
    return Keyspace(
        "fastq-runs", Blocks(["runs/"], [Blocks(pref, inner)]), seed=seed, size_median=500_000_000
    )


def random_hex(n: int, seed: int = 34) -> Keyspace:
    """32-hex names drawn at random (held in memory)."""
    rnd = random.Random(seed)
    return explicit([f"{rnd.getrandbits(128):032x}" for _ in range(n)], name="random-hex", seed=seed)


EXTRA_SHAPES = {
    "deep-tree": deep_tree,
    "nonascii": nonascii,
    "uuid-projects": uuid_projects,
    "hashed-prefix": hashed_prefix,
    "users": users,
    "logs-hourly": logs_hourly,
}
CHECK_SHAPES = {
    "frames": frames,
    "counter": counter,
    "sequential-ids": sequential_ids,
    "dir-per-object": dir_per_object,
    "giants-and-dust": giants_and_dust,
    "cloudtrail": cloudtrail,
    "access-logs": access_logs,
    "access-logs-multi": access_logs_multi,
    "fastq-runs": fastq_runs,
}
# the twelve shapes `--shapes all` runs (as before 2026-11-29), and every shape by name
DEFAULT_SHAPES = {**SHAPES, **EXTRA_SHAPES}
ALL_SHAPES = {**DEFAULT_SHAPES, **CHECK_SHAPES, "random-hex": random_hex}


def shape_names(arg: str) -> list[str]:
    """The shapes a ``--shapes`` argument names: "all" (the twelve of DEFAULT_SHAPES), "checks" (CHECK_SHAPES),
    or names separated by commas."""
    if arg == "all":
        return list(DEFAULT_SHAPES)
    if arg == "checks":
        return list(CHECK_SHAPES)
    return arg.split(",")


def make_any(shape: str, n: int) -> Keyspace:
    return ALL_SHAPES[shape](n)
