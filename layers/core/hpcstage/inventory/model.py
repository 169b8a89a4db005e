"""Plain data passed between planner, listers, reducer and orchestrators (JSON-able)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .keys import common_prefix


@dataclass(frozen=True)
class DirKnowledge:
    """What a donor knew of the directories inside a range it gave away (``steal.Cursor.knowledge``).

    Every fact holds inside the range ``(start_after, end]`` it travels with:
    - ``levels``: directories (each a prefix of ``start_after``) whose subdirectories inside the range are
      all in ``dirs`` (a Delimiter request answered for them, not truncated inside the range);
    - ``fanout``: (level, how many subdirectories it holds in all), for levels asked from their start;
    - ``dirs``: directories (common prefixes S3 named) strictly inside the range, sorted;
    - ``single``: (parent, n) for parents (prefixes of ``start_after``) n of whose subdirectories asked from
      their start held exactly one directory each, or -1 when one held another number
      (``steal.SINGLE_CHILD_PROOF``);
    - ``sizes``: (parent, keys) for parents (prefixes of ``start_after``) whose subdirectories the donor
      listed held about that many keys each (``steal.Cursor._sibling_mean``);
    - ``children``: (depth, names, n) for depths below the run's prefix n of whose directories asked from
      their start held exactly the subdirectories ``names`` (relative), or ((), -1) once one held others
      (``steal.TEMPLATE_PROOF``): a pattern of the key space, true wherever it was not refuted.
    """

    levels: tuple[str, ...] = ()
    fanout: tuple[tuple[str, int], ...] = ()
    dirs: tuple[str, ...] = ()
    single: tuple[tuple[str, int], ...] = ()
    sizes: tuple[tuple[str, int], ...] = ()
    children: tuple[tuple[int, tuple[str, ...], int], ...] = ()

    def encode(self, start_after: str) -> str:
        """A compact JSON string: levels and fan-outs as lengths of prefixes of ``start_after`` (they are
        its prefixes), directories front-coded (each as the length it shares with the one before, and the
        rest), so that a DynamoDB item carrying it stays about as small as the directory names' tails."""
        prev = ""
        dirs = []
        for d in self.dirs:
            n = len(common_prefix(prev, d))
            dirs.append([n, d[n:]])
            prev = d
        out = {
            "l": [len(level) for level in self.levels],
            "f": [[len(level), n] for level, n in self.fanout],
            "d": dirs,
        }
        if self.single:
            out["s"] = [[len(parent), n] for parent, n in self.single]
        if self.sizes:
            out["z"] = [[len(parent), n] for parent, n in self.sizes]
        if self.children:
            out["c"] = [[depth, list(names), n] for depth, names, n in self.children]
        for level in (
            *self.levels,
            *(level for level, _ in self.fanout),
            *(p for p, _ in self.single),
            *(p for p, _ in self.sizes),
        ):
            if not start_after.startswith(level):
                raise ValueError(
                    f"directory level {level!r} is not a prefix of the range start {start_after!r}"
                )
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, text: str, start_after: str) -> DirKnowledge:
        d = json.loads(text)
        dirs: list[str] = []
        prev = ""
        for n, rest in d.get("d", []):
            prev = prev[: int(n)] + rest
            dirs.append(prev)
        return cls(
            levels=tuple(start_after[: int(n)] for n in d.get("l", [])),
            fanout=tuple((start_after[: int(n)], int(c)) for n, c in d.get("f", [])),
            dirs=tuple(dirs),
            single=tuple((start_after[: int(n)], int(c)) for n, c in d.get("s", [])),
            sizes=tuple((start_after[: int(n)], int(c)) for n, c in d.get("z", [])),
            children=tuple((int(depth), tuple(names), int(n)) for depth, names, n in d.get("c", [])),
        )


@dataclass(frozen=True)
class KeyRange:
    """Keys k with start_after < k <= end, within the run's prefix (S3 UTF-8 binary order).

    ``start_after=None`` means from the first key of the prefix; ``end=None`` means to its last.
    """

    id: str
    start_after: str | None = None
    end: str | None = None
    estimate: int = 0
    # what the donor knew of the directories inside the range (None: nothing; a range with no start has none)
    known: DirKnowledge | None = None

    def contains(self, key: str) -> bool:
        return (self.start_after is None or key > self.start_after) and (self.end is None or key <= self.end)

    def known_text(self) -> str | None:
        """``known`` encoded (``DirKnowledge.encode``), or None."""
        if self.known is None or self.start_after is None:
            return None
        return self.known.encode(self.start_after)

    def to_dict(self) -> dict[str, Any]:
        """The range without ``known``: results and Step Functions payloads name ranges, they do not hand
        them to a thief (pieces travel in memory, pickled, or as fleet items: fleet.FleetStore._open_put)."""
        return {"id": self.id, "start_after": self.start_after, "end": self.end, "estimate": self.estimate}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyRange:
        return cls(
            id=str(d["id"]),
            start_after=d.get("start_after"),
            end=d.get("end"),
            estimate=int(d.get("estimate") or 0),
        )


@dataclass
class PartFile:
    key: str  # object key (S3 output) or path relative to the output root (local output)
    size: int
    md5: str
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ShardResult:
    """What one lister invocation reports. Small by design: it travels through Step Functions."""

    range: KeyRange
    objects: int
    bytes: int
    list_requests: int
    retries: int
    done: bool
    checkpoint: str | None = None
    subranges: list[KeyRange] = field(default_factory=list)
    parts: list[PartFile] = field(default_factory=list)
    stats_key: str | None = None
    given: int = 0  # ranges this stream split off and handed to others while it listed

    def to_dict(self) -> dict[str, Any]:
        return {
            "range": self.range.to_dict(),
            "objects": self.objects,
            "bytes": self.bytes,
            "list_requests": self.list_requests,
            "retries": self.retries,
            "done": self.done,
            "checkpoint": self.checkpoint,
            "subranges": [r.to_dict() for r in self.subranges],
            "parts": [p.to_dict() for p in self.parts],
            "stats_key": self.stats_key,
            "given": self.given,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShardResult:
        return cls(
            range=KeyRange.from_dict(d["range"]),
            objects=int(d["objects"]),
            bytes=int(d["bytes"]),
            list_requests=int(d["list_requests"]),
            retries=int(d.get("retries", 0)),
            done=bool(d["done"]),
            checkpoint=d.get("checkpoint"),
            subranges=[KeyRange.from_dict(r) for r in d.get("subranges", [])],
            parts=[PartFile(**p) for p in d.get("parts", [])],
            stats_key=d.get("stats_key"),
            given=int(d.get("given", 0)),
        )
