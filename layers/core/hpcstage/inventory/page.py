"""One ListObjectsV2 page as columns: what the lister, the Parquet writer and the statistics consume.

The fast parser (s3util) fills it straight from the XML (Arrow kernels on the page's bytes, or regex
passes for the layouts those do not read), keys decoded; answers that arrive as boto3 dicts (moto, the
simulator, botocore's own parser) are converted here, so there is one code path from the page on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

TS = pa.timestamp("ms", tz="UTC")
_NO_BOOLS = pa.array([], pa.bool_())


def strip_quotes(etags: pa.Array) -> pa.Array:
    """One leading and one trailing quote off each ETag, raw or as ``&quot;`` (as S3 sends them).

    When every ETag starts and ends with the same quote, which is what S3 sends, that is a slice;
    otherwise a regex per ETag. (No ETag both starts and ends with ``&quot;`` unless it is that entity
    alone or 12 characters or longer, so the slice and the regex agree.)
    """
    for quote in ("&quot;", '"'):
        if pc.all(pc.starts_with(etags, quote)).as_py() and pc.all(pc.ends_with(etags, quote)).as_py():
            return pc.utf8_slice_codeunits(etags, len(quote), -len(quote))
    return pc.replace_substring_regex(etags, pattern=r'^(&quot;|")|(&quot;|")$', replacement="")


_S3_DATE = b"2024-03-01T12:00:00.000Z"  # S3's timestamps: always this many bytes


def _utf8(values: list[bytes], fixed: int | None = None) -> pa.Array:
    """A string array of ``values``. A page's storage classes are usually one value (a repeated scalar), its
    dates ``fixed`` bytes each (one buffer, no per-value conversion); other columns convert value by value."""
    n = len(values)
    if n and values.count(values[0]) == n:
        return pa.repeat(pa.scalar(values[0], pa.binary()), n).cast(pa.string())
    if fixed is not None and n:
        data = b"".join(values)
        if len(data) == fixed * n:
            return pa.Array.from_buffers(pa.binary(fixed), n, [None, pa.py_buffer(data)]).cast(pa.string())
    return pa.array(values, pa.binary()).cast(pa.string())


def _unquoted(etags: list[bytes]) -> pa.Array:
    """``strip_quotes`` of the raw ETags, done on the page's bytes when every ETag is quoted alike.

    Joined by newlines (no ETag holds one), the page's ETags are each quoted by ``q`` exactly when the
    page starts and ends with ``q`` and every newline is met by its own ``q + newline + q`` (n - 1 of
    them, not overlapping: no ETag is shorter than two quotes); one split then takes the quotes off."""
    n = len(etags)
    joined = b"\n".join(etags)
    if n and joined.count(b"\n") == n - 1:
        first, last = joined.find(b"\n"), joined.rfind(b"\n")
        for q in (b"&quot;", b'"'):
            sep = q + b"\n" + q
            if (
                joined.startswith(q)
                and joined.endswith(q)
                and joined.count(sep) == n - 1
                and (first if n > 1 else len(joined)) >= 2 * len(q)
                and (len(joined) - last - 1 if n > 1 else len(joined)) >= 2 * len(q)
            ):
                return pa.array(joined[len(q) : -len(q)].split(sep), pa.binary()).cast(pa.string())
    return strip_quotes(pa.array(etags, pa.binary()).cast(pa.string()))


@dataclass
class Page:
    keys: list[str]  # decoded
    sizes: pa.Array  # int64
    dates: pa.Array  # timestamp[ms, UTC]
    etags: pa.Array  # string, without quotes
    classes: pa.Array  # string
    checksums: pa.Array  # string (first algorithm) or null
    # Columns derived once per page for both the Parquet writer and the statistics (see key_array,
    # multipart); built on first use (or given by the parser: ``set_key_array``), so ``keys`` must not
    # change after that (the parser decodes them before the page leaves it).
    _key_array: pa.Array | None = field(default=None, init=False, repr=False, compare=False)
    _multipart: pa.Array | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.keys)

    def key_array(self) -> pa.Array:
        """The keys as an Arrow string array (converted from the Python list once)."""
        if self._key_array is None:
            self._key_array = pa.array(self.keys, pa.string())
        return self._key_array

    def set_key_array(self, keys: pa.Array) -> None:
        """``key_array`` when the parser already holds it (the same strings as ``keys``)."""
        self._key_array = keys

    def multipart(self) -> pa.Array:
        """is_multipart_uploaded: a multipart upload's ETag is "<md5>-<parts>". A page none of whose ETags
        holds a '-' (the common case) skips the substring search."""
        if self._multipart is None:
            values = self.etags.buffers()[2] if len(self.etags) else None
            if self.etags.null_count == 0 and (values is None or b"-" not in values.to_pybytes()):
                self._multipart = pa.repeat(False, len(self.etags)) if len(self.etags) else _NO_BOOLS
            else:
                self._multipart = pc.match_substring(self.etags, "-")
        return self._multipart

    def head(self, n: int) -> Page:
        if n >= len(self.keys):
            return self
        return Page(
            self.keys[:n],
            self.sizes.slice(0, n),
            self.dates.slice(0, n),
            self.etags.slice(0, n),
            self.classes.slice(0, n),
            self.checksums.slice(0, n),
        )

    @classmethod
    def concat(cls, pages: Sequence[Page]) -> Page:
        if len(pages) == 1:
            return pages[0]
        return cls(
            keys=[k for p in pages for k in p.keys],
            sizes=pa.concat_arrays([p.sizes for p in pages]),
            dates=pa.concat_arrays([p.dates for p in pages]),
            etags=pa.concat_arrays([p.etags for p in pages]),
            classes=pa.concat_arrays([p.classes for p in pages]),
            checksums=pa.concat_arrays([p.checksums for p in pages]),
        )

    @classmethod
    def from_xml_fields(
        cls,
        keys: list[str],
        sizes: list[bytes],
        dates: list[bytes],
        etags: list[bytes],
        classes: list[bytes],
        checksums: list[bytes] | None,
    ) -> Page:
        n = len(keys)
        return cls(
            keys=keys,
            sizes=pa.array(sizes, pa.binary()).cast(pa.string()).cast(pa.int64()),
            dates=_utf8(dates, fixed=len(_S3_DATE)).cast(TS),
            etags=_unquoted(etags),
            classes=_utf8(classes),
            checksums=(
                pa.array(checksums, pa.binary()).cast(pa.string())
                if checksums is not None
                else pa.nulls(n, pa.string())
            ),
        )

    @classmethod
    def from_contents(cls, contents: Sequence[dict[str, Any]]) -> Page:
        etags = []
        for o in contents:
            e = o.get("ETag")
            etags.append(e.strip('"') if e is not None else None)
        dates: list[datetime | None] = [o.get("LastModified") for o in contents]
        return cls(
            keys=[o["Key"] for o in contents],
            sizes=pa.array([o.get("Size") for o in contents], pa.int64()),
            dates=pa.array(dates, TS),
            etags=pa.array(etags, pa.string()),
            classes=pa.array([o.get("StorageClass", "STANDARD") for o in contents], pa.string()),
            checksums=pa.array([(o.get("ChecksumAlgorithm") or [None])[0] for o in contents], pa.string()),
        )

    def to_contents(self) -> list[dict[str, Any]]:
        """boto3-shaped dicts (for callers that want them; the hot path never does)."""
        out = []
        for k, s, d, e, c, ca in zip(
            self.keys,
            self.sizes.to_pylist(),
            self.dates.to_pylist(),
            self.etags.to_pylist(),
            self.classes.to_pylist(),
            self.checksums.to_pylist(),
            strict=True,
        ):
            row: dict[str, Any] = {
                "Key": k,
                "LastModified": d,
                "ETag": f'"{e}"',
                "Size": s,
                "StorageClass": c,
            }
            if ca is not None:
                row["ChecksumAlgorithm"] = [ca]
            out.append(row)
        return out


EMPTY = Page(
    [],
    pa.array([], pa.int64()),
    pa.array([], TS),
    pa.array([], pa.string()),
    pa.array([], pa.string()),
    pa.array([], pa.string()),
)
