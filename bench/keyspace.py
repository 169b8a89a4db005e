"""Key-space models: N objects in S3 order, represented without storing them.

Every model answers, in O(log blocks) time and O(1) memory per query:
  key(r)            the r-th key (0-based) in UTF-8 binary order (= Python code-point order)
  count_le(x)       how many keys are <= x, i.e. the rank of the first key > x (any string x)
  count_lt(x)       how many keys are < x
  size(r), bytes_between(a, b), last_modified(r), storage_class(r), etag(r)

Construction costs O(blocks) (a block is a top-level folder, a day, a tenant): at most a few
thousand, whatever N is, so N can be 1e9. Keys inside a block are "slotted codes": the block's
code space (alphabet**width) is cut into n equal slots and key i sits at a pseudo-random offset
inside slot i, so keys look random but stay strictly increasing and invertible by arithmetic.

Sizes come from a shuffled table of 65,536 values with prefix sums, so the bytes of any rank
range are exact in O(1); that lets the simulator count bytes of a 1,000-key page without
materialising it.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HEX = "0123456789abcdef"
BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
SEED_ALPHABET = BASE36  # the 2014 seed's assumed key alphabet [0-9a-z]

_MASK64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64 finaliser: a cheap, good 64-bit integer hash."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def succ_prefix(p: str) -> str | None:
    """The smallest string greater than every string that starts with ``p`` (None: no such string)."""
    while p:
        c = ord(p[-1])
        if c < 0x10FFFF:
            nc = c + 1
            if 0xD800 <= nc <= 0xDFFF:
                nc = 0xE000
            return p[:-1] + chr(nc)
        p = p[:-1]
    return None


class Codes:
    """n strictly increasing fixed-width codes over ``alphabet`` (sorted), each followed by ``suffix``."""

    __slots__ = ("alphabet", "base", "width", "n", "suffix", "salt", "space", "_index", "_jitter", "_hex")

    def __init__(
        self,
        n: int,
        alphabet: str = HEX,
        width: int = 16,
        suffix: str = "",
        salt: int = 0,
        jitter: float = 0.9,
    ) -> None:
        if list(alphabet) != sorted(set(alphabet)):
            raise ValueError("alphabet must be sorted and distinct")
        self.alphabet = alphabet
        self.base = len(alphabet)
        self.width = width
        self.n = n
        self.suffix = suffix
        self.salt = salt
        self.space = self.base**width
        if self.space < 2 * max(1, n):
            raise ValueError(f"code space {self.base}**{width} too small for {n} keys")
        self._index = {c: i for i, c in enumerate(alphabet)}
        self._jitter = jitter
        self._hex = alphabet == HEX

    def _slot(self, i: int) -> int:
        return (i * self.space) // self.n

    def code(self, i: int) -> int:
        lo = self._slot(i)
        span = self._slot(i + 1) - lo
        off = (_mix(i ^ self.salt) * max(1, int(span * self._jitter))) >> 64 if span > 1 else 0
        return lo + off

    def encode(self, c: int) -> str:
        if self._hex:
            return format(c, f"0{self.width}x")
        out = []
        a, b = self.alphabet, self.base
        for _ in range(self.width):
            c, d = divmod(c, b)
            out.append(a[d])
        return "".join(reversed(out))

    def key(self, i: int) -> str:
        return self.encode(self.code(i)) + self.suffix

    def _floor_code(self, y: str) -> int:
        """The largest code c with encode(c) + suffix <= y (-1 if none)."""
        val = 0
        b = self.base
        idx = self._index
        for j in range(self.width):
            if j == len(y):
                return val * b ** (self.width - j) - 1
            d = idx.get(y[j])
            if d is None:
                k = bisect.bisect_left(self.alphabet, y[j])
                return (val * b + k) * b ** (self.width - j - 1) - 1
            val = val * b + d
        return val if self.suffix <= y[self.width :] else val - 1

    def count_le(self, y: str) -> int:
        c = self._floor_code(y)
        if c < 0:
            return 0
        if c >= self.space - 1:
            return self.n
        i = min(self.n - 1, (c * self.n) // self.space)
        while i + 1 < self.n and self._slot(i + 1) <= c:
            i += 1
        while i > 0 and self._slot(i) > c:
            i -= 1
        return i + 1 if self.code(i) <= c else i


class Counter:
    """Zero-padded decimal counters ``start``, ``start + step``, ... (``n`` of them), each followed by
    ``suffix``: the low end of their code space only, as frame and step numbers fill it (``Codes`` spreads
    its codes over the whole space, as hashes and ids are)."""

    __slots__ = ("n", "width", "suffix", "start", "step")

    def __init__(self, n: int, width: int, suffix: str = "", start: int = 0, step: int = 1) -> None:
        if n < 0 or step < 1 or start + step * n > 10**width:
            raise ValueError(f"{n} counters from {start} by {step} do not fit {width} digits")
        self.n, self.width, self.suffix, self.start, self.step = n, width, suffix, start, step

    def key(self, i: int) -> str:
        return f"{self.start + i * self.step:0{self.width}d}{self.suffix}"

    def count_le(self, y: str) -> int:
        lo, hi = 0, self.n  # the keys before lo are <= y, those from hi on are not
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid) <= y:
                lo = mid + 1
            else:
                hi = mid
        return lo


class Blocks:
    """Keys of several inner models, each under its own prefix; prefixes must be prefix-free."""

    def __init__(self, prefixes: Sequence[str], inners: Sequence[Codes | Counter | Blocks]) -> None:
        order = sorted(range(len(prefixes)), key=lambda i: prefixes[i])
        self.prefixes = [prefixes[i] for i in order]
        self.inners = [inners[i] for i in order]
        for a, b in zip(self.prefixes, self.prefixes[1:], strict=False):
            if b.startswith(a) or a == b:
                raise ValueError(f"block prefixes are not prefix-free: {a!r}, {b!r}")
        self.cum = [0]
        for inner in self.inners:
            self.cum.append(self.cum[-1] + inner.n)
        self.n = self.cum[-1]

    def block_of(self, r: int) -> int:
        return bisect.bisect_right(self.cum, r) - 1

    def key(self, r: int) -> str:
        j = bisect.bisect_right(self.cum, r) - 1
        return self.prefixes[j] + self.inners[j].key(r - self.cum[j])

    def count_le(self, x: str) -> int:
        j = bisect.bisect_right(self.prefixes, x) - 1
        if j < 0:
            return 0
        p = self.prefixes[j]
        if x.startswith(p):
            return self.cum[j] + self.inners[j].count_le(x[len(p) :])
        return self.cum[j + 1]


class SizeTable:
    """Per-rank object sizes with O(1) range sums: a shuffled table of quantiles, repeated."""

    PERIOD = 1 << 16

    def __init__(self, seed: int, median: float, sigma: float, max_size: int = 5 * 2**40) -> None:
        rnd = random.Random(seed)
        m = self.PERIOD
        vals = [
            min(max_size, max(0, int(median * math.exp(sigma * _norm_ppf((i + 0.5) / m))))) for i in range(m)
        ]
        rnd.shuffle(vals)
        self.values = vals
        self.prefix = [0]
        for v in vals:
            self.prefix.append(self.prefix[-1] + v)
        self.total = self.prefix[-1]

    def size(self, r: int) -> int:
        return self.values[r % self.PERIOD]

    def cumulative(self, r: int) -> int:
        """Bytes of ranks [0, r)."""
        q, m = divmod(r, self.PERIOD)
        return q * self.total + self.prefix[m]


def _norm_ppf(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9)."""
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    if p > 1 - 0.02425:
        return -_norm_ppf(1 - p)
    q = p - 0.5
    r = q * q
    return (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )


STORAGE_CLASS_MIX = (
    ("STANDARD", 0.80),
    ("STANDARD_IA", 0.08),
    ("INTELLIGENT_TIERING", 0.06),
    ("GLACIER_IR", 0.03),
    ("GLACIER", 0.02),
    ("DEEP_ARCHIVE", 0.01),
)
_EPOCH = datetime(2015, 1, 1, tzinfo=UTC)
_SPAN_S = 10 * 365 * 86400
MULTIPART_THRESHOLD = 16 * 2**20
MULTIPART_CHUNK = 8 * 2**20


class Keyspace:
    """A named key-space model over ``root`` (Blocks or Codes) with per-rank object attributes."""

    def __init__(
        self,
        name: str,
        root: Blocks | Codes,
        *,
        seed: int = 1,
        size_median: float = 64_000,
        size_sigma: float = 2.0,
        day_of_block: Sequence[int] | None = None,
    ) -> None:
        self.name = name
        self.root = root
        self.n = root.n
        self.seed = seed
        self.sizes = SizeTable(seed, size_median, size_sigma)
        rnd = random.Random(seed + 7)
        table: list[str] = []
        for cls, share in STORAGE_CLASS_MIX:
            table += [cls] * round(share * 1000)
        rnd.shuffle(table)
        self._classes = table
        self._day_of_block = list(day_of_block) if day_of_block is not None else None
        self.total_bytes = self.sizes.cumulative(self.n)

    def __len__(self) -> int:
        return self.n

    def key(self, r: int) -> str:
        if not 0 <= r < self.n:
            raise IndexError(r)
        return self.root.key(r)

    def count_le(self, x: str) -> int:
        return self.root.count_le(x)

    def count_lt(self, x: str) -> int:
        c = self.root.count_le(x)
        return c - 1 if c > 0 and self.root.key(c - 1) == x else c

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        """Ranks [a, b) of the keys that start with ``prefix``."""
        if not prefix:
            return 0, self.n
        a = self.count_lt(prefix)
        s = succ_prefix(prefix)
        b = self.n if s is None else self.count_lt(s)
        return a, max(a, b)

    def delimited(
        self,
        prefix: str,
        r0: int,
        b: int,
        max_keys: int,
        delimiter: str,
        prefix_range: Callable[[str], tuple[int, int]] | None = None,
    ) -> tuple[list[int], list[str], int]:
        """One ListObjectsV2 page with a Delimiter, from rank ``r0`` up to ``b`` (the end of ``prefix``'s keys):
        the ranks of the keys it lists, its CommonPrefixes (each counted in ``max_keys`` like a key; the next
        entry is the first key past that prefix's keys) and the rank after the page."""
        range_of = prefix_range or self.prefix_range
        ranks: list[int] = []
        common: list[str] = []
        r1 = r0
        while r1 < b and len(ranks) + len(common) < max_keys:
            key = self.key(r1)
            i = key.find(delimiter, len(prefix))
            if i >= 0:
                cp = key[: i + len(delimiter)]
                common.append(cp)
                r1 = max(r1 + 1, range_of(cp)[1])
            else:
                ranks.append(r1)
                r1 += 1
        return ranks, common, r1

    def count_prefix(self, prefix: str) -> int:
        a, b = self.prefix_range(prefix)
        return b - a

    def size(self, r: int) -> int:
        return self.sizes.size(r)

    def bytes_between(self, a: int, b: int) -> int:
        """Total size of ranks [a, b)."""
        return self.sizes.cumulative(b) - self.sizes.cumulative(a)

    def last_modified(self, r: int) -> datetime:
        h = _mix(r ^ (self.seed << 40))
        if self._day_of_block is not None and isinstance(self.root, Blocks):
            day = self._day_of_block[self.root.block_of(r)]
            return _EPOCH + timedelta(days=day, seconds=h % 86400)
        return _EPOCH + timedelta(seconds=h % _SPAN_S)

    def storage_class(self, r: int) -> str:
        return self._classes[_mix(r + self.seed) % len(self._classes)]

    def etag(self, r: int) -> str:
        h = (_mix(r) << 64) | _mix(r ^ 0x5BD1E995)
        size = self.sizes.size(r)
        if size > MULTIPART_THRESHOLD:
            return f'"{h:032x}-{-(-size // MULTIPART_CHUNK)}"'
        return f'"{h:032x}"'

    def obj(self, r: int) -> dict[str, object]:
        """The ListObjectsV2 Contents entry of rank r (boto3 shape, key not URL-encoded)."""
        return {
            "Key": self.root.key(r),
            "LastModified": self.last_modified(r),
            "ETag": self.etag(r),
            "Size": self.sizes.size(r),
            "StorageClass": self.storage_class(r),
        }


# ---------------------------------------------------------------------------------------------
# The shapes
# ---------------------------------------------------------------------------------------------


def _apportion(n: int, weights: Sequence[float]) -> list[int]:
    """Integer counts proportional to ``weights`` summing exactly to n (largest remainder)."""
    total = sum(weights)
    raw = [n * w / total for w in weights]
    counts = [int(x) for x in raw]
    rest = n - sum(counts)
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - counts[i], reverse=True)[:rest]:
        counts[i] += 1
    return counts


def _width_for(n: int, base: int, minimum: int) -> int:
    w = minimum
    while base**w < 64 * max(1, n):
        w += 1
    return w


def uniform_hex(n: int, seed: int = 1) -> Keyspace:
    """32 hex characters, spread uniformly (content-addressed / UUID-named objects)."""
    return Keyspace("uniform", Codes(n, HEX, 32, "", salt=seed), seed=seed)


def date_partitioned(n: int, seed: int = 2, first_year: int = 2015, years: int = 10) -> Keyspace:
    """events/year=YYYY/month=MM/day=DD/part-<hex>.json.gz with growth, seasonality and weekends."""
    start = datetime(first_year, 1, 1, tzinfo=UTC)
    days = (datetime(first_year + years, 1, 1, tzinfo=UTC) - start).days
    weights = []
    for d in range(days):
        t = start + timedelta(days=d)
        growth = 1.45 ** (t.year - first_year)
        season = 1 + 0.6 * math.cos(2 * math.pi * (t.timetuple().tm_yday - 340) / 365.25)
        weekend = 0.55 if t.weekday() >= 5 else 1.0
        weights.append(growth * season * weekend)
    counts = _apportion(n, weights)
    prefixes, inners, day_idx = [], [], []
    for d, c in enumerate(counts):
        if c == 0:
            continue
        t = start + timedelta(days=d)
        prefixes.append(f"events/year={t.year}/month={t.month:02d}/day={t.day:02d}/part-")
        inners.append(Codes(c, HEX, _width_for(c, 16, 8), ".json.gz", salt=seed * 100_003 + d, jitter=0.5))
        day_idx.append(d + (start - _EPOCH).days)
    return Keyspace(
        "dated", Blocks(prefixes, inners), seed=seed, size_median=20_000, size_sigma=1.2, day_of_block=day_idx
    )


_FOLDERS = (
    "assets",
    "backups",
    "builds",
    "cache",
    "config",
    "datasets",
    "docs",
    "exports",
    "images",
    "imports",
    "lib",
    "media",
    "models",
    "notebooks",
    "public",
    "raw",
    "reports",
    "scratch",
    "snapshots",
    "staging",
    "static",
    "thumbnails",
    "uploads",
    "users",
    "videos",
    "web",
)


def hot_prefix(n: int, seed: int = 3, hot_share: float = 0.9) -> Keyspace:
    """One prefix (logs/hot/) holds 90% of the keys; the rest is spread over 26 folders."""
    rnd = random.Random(seed)
    cold_w = [rnd.uniform(0.2, 1.0) for _ in _FOLDERS]
    hot = round(n * hot_share)
    counts = _apportion(n - hot, cold_w)
    prefixes = [f"{f}/" for f in _FOLDERS] + ["logs/hot/"]
    counts.append(hot)
    inners = [
        Codes(c, BASE36, _width_for(c, 36, 10), ".dat", salt=seed * 7919 + i) for i, c in enumerate(counts)
    ]
    keep = [i for i, c in enumerate(counts) if c > 0]
    return Keyspace("hot-prefix", Blocks([prefixes[i] for i in keep], [inners[i] for i in keep]), seed=seed)


LONG_PREFIX = (
    "datalake/prod/warehouse/customer_events_v2/ingest/region=eu-west-1/"
    "account=123456789012/source=kinesis-firehose/"
)


def long_prefix(n: int, seed: int = 4) -> Keyspace:
    """Every key shares a 112-byte prefix; the distinguishing part comes after it."""
    inner = Codes(n, BASE36, _width_for(n, 36, 12), ".parquet", salt=seed)
    return Keyspace(
        "long-prefix", Blocks([LONG_PREFIX], [inner]), seed=seed, size_median=1_000_000, size_sigma=0.8
    )


def multi_tenant(n: int, seed: int = 5, tenants: int = 5000, zipf_s: float = 1.1) -> Keyspace:
    """<tenant-id 8 hex>/files/<hex>: tenant sizes follow Zipf(s), big tenants at random places."""
    rnd = random.Random(seed)
    weights = [1.0 / (k + 1) ** zipf_s for k in range(tenants)]
    rnd.shuffle(weights)
    ids = sorted({f"{rnd.getrandbits(32):08x}" for _ in range(tenants * 2)})
    ids = sorted(rnd.sample(ids, tenants))
    counts = _apportion(n, weights)
    keep = [i for i, c in enumerate(counts) if c > 0]
    prefixes = [f"{ids[i]}/files/" for i in keep]
    inners = [Codes(counts[i], HEX, _width_for(counts[i], 16, 10), "", salt=seed * 31 + i) for i in keep]
    return Keyspace("multi-tenant", Blocks(prefixes, inners), seed=seed)


# Top-level folders of a user-facing drive: upper case, symbols, spaces, accents, CJK, emoji.
UNICODE_FOLDERS = (
    (" leading space", 1),
    ("#drafts", 1),
    ("+plus+signs", 1),
    ("%25 literal percent", 1),
    ("&co", 1),
    ("2019", 3),
    ("2024 Q1", 2),
    ("Archive", 4),
    ("Documents", 6),
    ("Photos (old)", 3),
    ("Zürich", 2),
    ("backup", 4),
    ("data", 10),
    ("données", 3),
    ("logs", 8),
    ("tmp", 2),
    ("x", 2),
    ("~home", 1),
    ("ñandú", 1),
    ("Ελληνικά", 1),
    ("Москва", 1),
    ("日本語のファイル", 2),
    ("中文目录", 2),
    ("😀 emoji", 1),
    ("\U0001f680rocket", 1),
    ("zz_top", 2),
)
# Characters of the names inside the folders (sorted by code point = S3 order).
UNICODE_ALPHABET = "".join(
    sorted(
        set(
            " !#$&'()+,-.0123456789=@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"
            "ÀÉßàáâäçèéêëíñóöúüœαβγЖжя中文日本語한글€😀🚀"
        )
    )
)


def unicode_mixed(n: int, seed: int = 6) -> Keyspace:
    """Folders and names with upper case, symbols, spaces, accents, CJK and emoji (UTF-8 up to 4 bytes)."""
    names = [f for f, _ in UNICODE_FOLDERS]
    counts = _apportion(n, [w for _, w in UNICODE_FOLDERS])
    keep = [i for i, c in enumerate(counts) if c > 0]
    base = len(UNICODE_ALPHABET)
    inners = [
        Codes(counts[i], UNICODE_ALPHABET, _width_for(counts[i], base, 6), ".txt", salt=seed * 13 + i)
        for i in keep
    ]
    return Keyspace("unicode", Blocks([names[i] + "/" for i in keep], inners), seed=seed, size_median=30_000)


SHAPES = {
    "uniform": uniform_hex,
    "dated": date_partitioned,
    "hot-prefix": hot_prefix,
    "long-prefix": long_prefix,
    "multi-tenant": multi_tenant,
    "unicode": unicode_mixed,
}


def make(shape: str, n: int) -> Keyspace:
    return SHAPES[shape](n)


@dataclass(frozen=True)
class ExplicitKeys:
    """A small key set given in full (tests, and the moto comparison)."""

    keys: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.keys)

    def key(self, r: int) -> str:
        return self.keys[r]

    def count_le(self, x: str) -> int:
        return bisect.bisect_right(self.keys, x)


def explicit(keys: Sequence[str], name: str = "explicit", seed: int = 9) -> Keyspace:
    """A Keyspace over an explicit list of keys (sorted and de-duplicated here)."""
    root = ExplicitKeys(tuple(sorted(set(keys))))
    return Keyspace(name, root, seed=seed, size_median=2_000, size_sigma=1.0)  # type: ignore[arg-type]


def seed_covered(key: str) -> bool:
    """Whether the 2014 seed's prefixes ([0-9a-z]{2}) can ever list this key."""
    return len(key) >= 2 and key[0] in SEED_ALPHABET and key[1] in SEED_ALPHABET
