"""Plain data passed between planner, listers, reducer and orchestrators (JSON-able)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class KeyRange:
    """Keys k with start_after < k <= end, within the run's prefix (S3 UTF-8 binary order).

    ``start_after=None`` means from the first key of the prefix; ``end=None`` means to its last.
    """

    id: str
    start_after: str | None = None
    end: str | None = None
    estimate: int = 0

    def contains(self, key: str) -> bool:
        return (self.start_after is None or key > self.start_after) and (self.end is None or key <= self.end)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

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
