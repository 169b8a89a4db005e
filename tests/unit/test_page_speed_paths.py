"""The page-wise shortcuts of the listing hot path give exactly what the plain per-key code gives.

URL decoding (``unquote_plus_keys``), the one-pass parse of an S3-style page, the ETag quote slice
(``strip_quotes``), ``Page.multipart`` and the batch shortcuts of ``InventoryStats`` (one class, one prefix, one age
bucket, the top-N threshold) are each checked against a straightforward reference on hostile input.
"""

from __future__ import annotations

import heapq
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote_plus

import boto3
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from botocore.parsers import create_parser
from hpcstage import s3util
from hpcstage.inventory.page import Page, strip_quotes
from hpcstage.inventory.stats import AGE_BUCKETS_DAYS, InventoryStats, bit_length
from hpcstage.s3util import PAGE_KEY, _fast_list_parse, unquote_plus_keys
from hypothesis import given, settings
from hypothesis import strategies as st

# Every code point S3 accepts in a key that XML can carry once URL-encoded, and the traps of decoding a
# page in one string: '%' and '+' literal, %25 followed by hex digits, escapes of newlines, non-ASCII.
HOSTILE = [
    "".join(chr(c) for c in range(1, 128)),
    "a b+c%d&e<f>g",
    "100%25 literal %2541",
    "line\nbreak\r\ttab",
    "ü中😀 é",
    "%",
    "+",
    "x" * 1024,
    "&amp;literal",
    "test_file(3).png",
]


def s3_encode(key: str) -> str:
    """EncodingType=url as S3 answers it: UTF-8 percent-encoding, a space as '+'."""
    return quote(key, safe="/").replace("%20", "+")


@pytest.mark.parametrize(
    "keys",
    [
        [s3_encode(k) for k in HOSTILE],
        ["%41", "%%41A"],  # a stray '%' before an escape that decodes to a hex digit
        ["%2541", "%41"],  # %25 yields '%': never the start of another escape
        ["%4", "%G1", "tail%"],  # invalid escapes stay as they are
        ["%e4%b8%ad%E4%B8%AD", "%2b%2B+"],  # lower- and upper-case hex
        ["%FF%FE", "%C3"],  # invalid UTF-8 after decoding: urllib's replacement characters
        ["raw\nnewline", "x"],
        ["a%0Ab", "c"],
        ["ü%41", "b"],  # raw non-ASCII: urllib decodes the ASCII runs
        ["".join(f"%{b:02X}" for b in range(128, 256))],  # more distinct escapes than are replaced
        ["plain", "keys/only"],
        ["spaces+only"],
        # quoted-printable's traps (the ASCII path decodes with binascii.a2b_qp): a literal '=' or "=3D",
        # '=' next to an escape, a soft line break after a stray '%' ("%\r", "%" before the joining
        # newline), the "==" case
        ["a=b%3Dc", "=3D", "==", "%3D%3d="],
        ["%=41", "%%3D", "x=%41="],
        ["a%\rb%41", "c"],
        ["ends%", "%41starts"],
        ["a%0A", "%0Ab"],  # escaped newlines only: the joined page cannot be split back
    ],
)
def test_unquote_plus_keys_equals_urllib_key_by_key(keys: list[str]) -> None:
    assert unquote_plus_keys(keys) == [unquote_plus(k) for k in keys]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.sampled_from(
                ["%", "+", "2", "5", "4", "1", "A", "a", "f", "G", "0", "3", "D", "=", " ", "ü", "\n", "\r"]
            )
        ),
        min_size=1,
        max_size=6,
    )
)
def test_unquote_plus_keys_on_any_escape_soup(keys: list[str]) -> None:
    assert unquote_plus_keys(keys) == [unquote_plus(k) for k in keys]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=8))
def test_unquote_plus_keys_inverts_s3_encoding(keys: list[str]) -> None:
    keys = [k.encode("utf-8", "replace").decode("utf-8", "replace") for k in keys]  # no lone surrogates
    assert unquote_plus_keys([s3_encode(k) for k in keys]) == keys


def s3_body(objects: list[dict[str, Any]]) -> bytes:
    """A ListObjectsV2 answer as S3 writes it (EncodingType=url, ETags quoted as &quot;)."""
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>bkt</Name><Prefix></Prefix><KeyCount>{len(objects)}</KeyCount><MaxKeys>1000</MaxKeys>"
        "<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
    ]
    for o in objects:
        checksum = f"<ChecksumAlgorithm>{o['checksum']}</ChecksumAlgorithm>" if o.get("checksum") else ""
        parts.append(
            f"<Contents><Key>{s3_encode(o['key'])}</Key><LastModified>{o['date']}</LastModified>"
            f"<ETag>&quot;{o['etag']}&quot;</ETag>{checksum}<Size>{o['size']}</Size>"
            f"<StorageClass>{o['class']}</StorageClass></Contents>"
        )
    parts.append("</ListBucketResult>")
    return "".join(parts).encode()


def test_an_s3_page_of_hostile_keys_reads_as_botocore_reads_it() -> None:
    rng = random.Random(3)
    objects = [
        {
            "key": k + str(i),
            "date": f"2024-0{1 + i % 9}-0{1 + i % 9}T0{i % 10}:00:00.{i % 1000:03d}Z",
            "etag": "9b2cf535f27731c974343645a3985328" + ("-3" if i % 4 == 0 else ""),
            "size": rng.randrange(0, 1 << 40),
            "class": ["STANDARD", "GLACIER", "STANDARD_IA"][i % 3],
            "checksum": "CRC32" if i % 2 else "CRC64NVME",
        }
        for i, k in enumerate(sorted(HOSTILE * 3))
    ]
    body = s3_body(objects)
    first, last = body.find(b"<Contents>"), body.rfind(b"</Contents>") + len(b"</Contents>")
    assert len(s3util._ONE_PASS.findall(body[first:last])) == len(objects)  # the one-pass path reads it

    s3util._WANT_PAGE.on = True
    try:
        resp: dict[str, Any] = {"status_code": 200, "headers": {}, "body": body}
        custom: dict[str, Any] = {}
        _fast_list_parse(resp, custom)
    finally:
        s3util._WANT_PAGE.on = False
    page: Page = custom[PAGE_KEY]  # keys decoded: the body says EncodingType url

    model = boto3.client("s3", region_name="us-east-1").meta.service_model.operation_model("ListObjectsV2")
    expected = create_parser("rest-xml").parse(
        {"status_code": 200, "headers": {}, "body": body}, model.output_shape
    )["Contents"]
    for row in expected:
        row["Key"] = unquote_plus(row["Key"])
    assert [o["key"] for o in objects] == [row["Key"] for row in expected]
    assert page.to_contents() == expected
    assert page.multipart().to_pylist() == [i % 4 == 0 for i in range(len(objects))]


@pytest.mark.parametrize(
    "etags",
    [
        ["&quot;9b2c&quot;", "&quot;ü中-2&quot;"],
        ['"9b2c"', '"x"', '"'],
        ["&quot;", "&quot;&quot;&quot;", "&quot;&quot;"],  # the entity alone, and quotes inside
        ['&quot;abc"', "&quot;abc&quot;"],  # not all alike: the regex decides
        ["plain", "&quot;abc&quot;"],
        ['"abc"', None, '"d"'],
        [],
    ],
)
def test_strip_quotes_equals_the_per_etag_regex(etags: list[str | None]) -> None:
    arr = pa.array(etags, pa.string())
    expected = pc.replace_substring_regex(arr, pattern=r'^(&quot;|")|(&quot;|")$', replacement="")
    assert strip_quotes(arr).to_pylist() == expected.to_pylist()


def test_multipart_flags_with_and_without_dashes_nulls_and_slices() -> None:
    def page(etags: list[str | None]) -> Page:
        n = len(etags)
        return Page(
            [str(i) for i in range(n)],
            pa.array([0] * n, pa.int64()),
            pa.nulls(n, pa.timestamp("ms", tz="UTC")),
            pa.array(etags, pa.string()),
            pa.array(["STANDARD"] * n, pa.string()),
            pa.nulls(n, pa.string()),
        )

    assert page(["a", "b"]).multipart().to_pylist() == [False, False]
    assert page(["a-2", "b"]).multipart().to_pylist() == [True, False]
    assert page(["a", None]).multipart().to_pylist() == [False, None]
    assert page([]).multipart().to_pylist() == []
    sliced = page(["a", "b-1", "c"]).head(1)  # the values buffer still holds "b-1"
    assert sliced.multipart().to_pylist() == [False]


def reference_stats(
    rows: list[tuple[str, int, datetime | None, str, str]], prefix: str, depth: int, now: datetime
) -> dict[str, Any]:
    """What InventoryStats must count, computed row by row."""
    pattern = re.compile("^(" + re.escape(prefix) + "(?:[^/]*/){0," + str(depth) + "})")
    by_class: dict[str, list[int]] = {}
    by_prefix: dict[str, list[int]] = {}
    size_hist: dict[int, list[int]] = {}
    age_hist = [[0, 0] for _ in range(len(AGE_BUCKETS_DAYS) + 1)]
    dates = []
    for key, size, date, _etag, cls in rows:
        for table, group in ((by_class, cls), (size_hist, size.bit_length())):
            e = table.setdefault(group, [0, 0])  # type: ignore[attr-defined]
            e[0] += 1
            e[1] += size
        m = pattern.match(key)
        e = by_prefix.setdefault(m.group(1) if m else prefix, [0, 0])
        e[0] += 1
        e[1] += size
        if date is not None:
            dates.append(date.timestamp())
            age_ms = int(now.timestamp() * 1000) - int(date.timestamp() * 1000)
            b = sum(age_ms >= d * 86_400_000 for d in AGE_BUCKETS_DAYS)
            age_hist[b][0] += 1
            age_hist[b][1] += size
    return {
        "objects": len(rows),
        "bytes": sum(r[1] for r in rows),
        "multipart": sum("-" in r[3] for r in rows),
        "by_class": by_class,
        "by_prefix": by_prefix,
        "size_hist": {str(k): v for k, v in size_hist.items()},
        "age_hist": age_hist,
        "top": sorted(heapq.nlargest(5, [(r[1], r[0]) for r in rows])),
        "oldest": min(dates) if dates else None,
        "newest": max(dates) if dates else None,
    }


def rows_of(
    shape: str, rng: random.Random, now: datetime
) -> list[tuple[str, int, datetime | None, str, str]]:
    n = 3000
    if shape == "one-prefix":  # every batch takes the one-group shortcuts
        keys = [f"data/run/{i:06d}" for i in range(n)]
        dates: list[datetime | None] = [now - timedelta(days=40, seconds=i) for i in range(n)]
        sizes = [7] * n  # ties everywhere: the top five are decided by key
        classes = ["GLACIER"] * n
    else:  # mixed: shallow keys between directories, keys outside the prefix, every age, nulls
        keys = sorted(
            [f"data/{rng.choice('abc')}/{i:05d}" for i in range(n // 2)]
            + [f"data/file{i:05d}" for i in range(n // 4)]
            + [f"other/{i}" for i in range(n // 4)]
        )
        dates = [
            None if i % 97 == 0 else now - timedelta(days=rng.choice([0, 3, 20, 60, 200, 900, 2000]))
            for i in range(n)
        ]
        sizes = [rng.choice([0, 1, 2, 3, 1 << 20, (1 << 40) - 1, rng.randrange(1 << 30)]) for _ in range(n)]
        classes = [rng.choice(["STANDARD", "GLACIER", "DEEP_ARCHIVE"]) for _ in range(n)]
    dates = [d.replace(microsecond=d.microsecond // 1000 * 1000) if d else None for d in dates]
    etags = [("abc-2" if i % 13 == 0 else "abc") if shape != "one-prefix" else "abc" for i in range(n)]
    return list(zip(keys, sizes, dates, etags, classes, strict=True))


@pytest.mark.parametrize("shape", ["one-prefix", "mixed"])
@pytest.mark.parametrize(("prefix", "depth"), [("", 1), ("data/", 1), ("data/", 2), ("", 3)])
def test_stats_shortcuts_count_what_a_row_by_row_count_gives(shape: str, prefix: str, depth: int) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rows = rows_of(shape, random.Random(11), now)
    stats = InventoryStats(prefix=prefix, depth=depth, now=now, top_n=5)
    stats.batch_rows = 1000  # several batches, each of several pages
    for at in range(0, len(rows), 250):
        chunk = rows[at : at + 250]
        stats.add_page(
            Page(
                [r[0] for r in chunk],
                pa.array([r[1] for r in chunk], pa.int64()),
                pa.array([r[2] for r in chunk], pa.timestamp("ms", tz="UTC")),
                pa.array([r[3] for r in chunk], pa.string()),
                pa.array([r[4] for r in chunk], pa.string()),
                pa.nulls(len(chunk), pa.string()),
            )
        )
    got = stats.to_dict()
    got["top"] = sorted(tuple(t) for t in got["top"])
    expected = reference_stats(rows, prefix, depth, now)
    assert {k: got[k] for k in expected} == expected


def test_bit_length_matches_python() -> None:
    values = [0, 1, 2, 3, 4, 7, 8, (1 << 48) - 1, 1 << 48, (1 << 53) + 1, (1 << 62), (1 << 63) - 1]
    assert bit_length(pa.array(values, pa.int64())).to_pylist() == [v.bit_length() for v in values]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(['"', "&quot;", "&quot", "a", "-", "9", "&", "\n"]), max_size=5).map(
            "".join
        ),
        min_size=1,
        max_size=6,
    )
)
def test_etags_unquoted_on_the_page_bytes_equal_strip_quotes(etags: list[str]) -> None:
    _assert_unquoted_as_strip_quotes(etags)


@pytest.mark.parametrize(
    "etags",
    [
        ['"9b2c"', '"9b2c-3"', '""'],
        ["&quot;9b2c&quot;", "&quot;&quot;"],
        ['"', '"a"'],  # a lone quote: starts and ends with the same character
        ['"a"', '"', '"b"'],
        ['"a"b"', '"c"'],  # a quote inside: sliced, as strip_quotes slices it
        ['"a"', "b"],
        ["&quot;a&quot;", '"b"'],  # quoted, but not alike
    ],
)
def test_etags_unquoted_on_hand_picked_pages(etags: list[str]) -> None:
    _assert_unquoted_as_strip_quotes(etags)


def _assert_unquoted_as_strip_quotes(etags: list[str]) -> None:
    """page._unquoted on the page's bytes gives what strip_quotes gives on the same ETags."""
    from hpcstage.inventory.page import _unquoted

    raw = [e.encode() for e in etags]
    assert (
        _unquoted(raw).to_pylist() == strip_quotes(pa.array(raw, pa.binary()).cast(pa.string())).to_pylist()
    )


@pytest.mark.parametrize(
    "values",
    [
        [b"STANDARD"] * 5,
        [b"STANDARD", b"GLACIER", b"STANDARD"],
        [b"2024-03-01T12:00:00.000Z", b"2025-12-31T23:59:59.999Z"],
        [b"2024-03-01T12:00:00.000Z", b"2024-03-01T12:00:00Z"],  # not all of one width
        ["ü中😀".encode(), b"abcdefghijk"],  # equal byte lengths, non-ASCII
    ],
)
def test_string_columns_equal_a_value_by_value_conversion(values: list[bytes]) -> None:
    from hpcstage.inventory.page import _utf8

    expected = pa.array(values, pa.binary()).cast(pa.string())
    assert _utf8(values).equals(expected)
    width = len(values[0])
    assert _utf8(values, fixed=width).equals(expected)
