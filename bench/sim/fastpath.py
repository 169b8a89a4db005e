"""The page-level fast path: run the real list_range at 1e8-1e9 objects without per-object Python work.

What runs unchanged (hpcstage code, called as in Lambda): hpcstage.inventory.lister.list_range's loop (one
list_page call per page, the Cursor's end-of-range cut, stop checks) and hpcstage.s3util.list_page
(parameters, request counting).

What the fast path bypasses (and how):
  1. URL decoding: the simulated client does not echo EncodingType=url, so list_page's loop that
     unquote_plus-es every key is skipped; keys are returned already decoded (bench/sim/s3.py, fast mode).
  2. Parquet: the simulator passes CountingPartWriter as list_range's writer: it counts rows and closes a
     part where the real writer would, storing an empty object in its place (the upload request and its
     latency are kept; the Parquet encoding and the bytes are not).
  3. Statistics: PageStats is passed as list_range's stats: exact objects and bytes (page length and the
     keyspace's O(1) byte prefix sums); no histograms or top-N.
  4. Page contents: a LazyPage builds an entry only when it is indexed.
hpcstage.inventory.runner.diff_inventories is stood in by identical_inventories_diff (its cost is not
simulated). Full mode (tests, small N) uses the real PartWriter, InventoryStats and URL decoding.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any
from unittest import mock

import hpcstage.inventory.runner
from hpcstage.inventory.model import PartFile
from hpcstage.inventory.stats import InventoryStats

from bench.sim.s3 import LazyPage


class NullStore:
    """An OutputStore that keeps only small files (stats JSON) in memory and drops the rest."""

    def __init__(self) -> None:
        self.small: dict[str, bytes] = {}
        self.files = 0

    def put_bytes(self, key: str, data: bytes) -> None:
        self.files += 1

    def put_file(self, key: str, path: str) -> None:
        self.files += 1

    def get_bytes(self, key: str) -> bytes:
        return self.small[key]

    def exists(self, key: str) -> bool:
        return key in self.small

    def uri(self, key: str = "") -> str:
        return f"null://{key}"


class CountingPartWriter:
    """Stands in for hpcstage.inventory.output.PartWriter: same constructor and methods, counts rows only."""

    def __init__(
        self,
        store: Any,
        bucket: str,
        name: str,
        *,
        row_group_rows: int = 50_000,
        part_rows: int = 1_000_000,
        tmpdir: str | None = None,
    ) -> None:
        self.store = store
        self.name = name
        self.part_rows = part_rows
        self.rows = 0
        self.parts: list[PartFile] = []
        self._open = 0

    def add_page(self, contents: Sequence[dict[str, Any]]) -> None:
        n = len(contents)
        self.rows += n
        self._open += n
        while self._open >= self.part_rows:
            self._close_part(self.part_rows)
            self._open -= self.part_rows

    def _close_part(self, rows: int) -> None:
        key = f"data/{self.name}-{len(self.parts):04d}.parquet"
        self.store.put_bytes(key, b"")
        self.parts.append(PartFile(key=key, size=0, md5="", rows=rows))

    def close(self) -> list[PartFile]:
        if self._open:
            self._close_part(self._open)
            self._open = 0
        return self.parts

    def abort(self) -> None:
        self._open = 0


class PageStats(InventoryStats):
    """Stands in for InventoryStats: exact objects and bytes, O(1) per LazyPage."""

    def __init__(self, prefix: str = "", depth: int = 1, now: datetime | None = None, **kw: Any) -> None:
        super().__init__(prefix=prefix, depth=depth, now=now, **kw)

    def add_page(self, contents: Sequence[dict[str, Any]]) -> None:
        if isinstance(contents, LazyPage):
            self.objects += len(contents)
            self.bytes += contents.nbytes
        else:
            for o in contents:
                self.objects += 1
                self.bytes += o.get("Size") or 0


_REAL_DIFF: Callable[..., dict[str, Any]] | None = getattr(
    hpcstage.inventory.runner, "diff_inventories", None
)


def identical_inventories_diff(previous: Sequence[Any], current: Sequence[Any], **kw: Any) -> dict[str, Any]:
    """Stands in for hpcstage.inventory.runner.diff_inventories (audit mode's exact object-level diff).

    The simulator's "previous run" is the same bucket (only its ranges.json matters: the perfect
    hints), so the true answer is "nothing added, removed or changed": the real function is called
    with no parts on either side, which returns that answer in its real shape without reading Parquet
    (the fast path writes none). Its cost -- the reducer reading both inventories' parts, 2 x N rows --
    is therefore NOT in the simulated times.
    """
    assert _REAL_DIFF is not None
    keep = {k: v for k, v in kw.items() if k in ("prefix", "depth", "max_prefixes")}
    return _REAL_DIFF([], [], **keep)


@contextlib.contextmanager
def no_parquet_diff() -> Iterator[None]:
    """Audit mode's exact diff, without reading Parquet (see identical_inventories_diff)."""
    if _REAL_DIFF is None:  # a core without the exact diff
        yield
        return
    with mock.patch.object(hpcstage.inventory.runner, "diff_inventories", identical_inventories_diff):
        yield
