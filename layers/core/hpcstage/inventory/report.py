"""Reduce shard results into summary.json and a human report; diff against a previous summary."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import IncompleteInventoryError
from ..s3util import LIST_PRICE_PER_1000
from .model import ShardResult
from .stats import AGE_LABELS, ARCHIVE_CLASSES, GLACIER_CLASSES, InventoryStats


def listed_piece(res: ShardResult) -> tuple[str | None, str | None]:
    """The part of the key space a result covers: (start_after, end], or up to its checkpoint if it stopped."""
    return res.range.start_after, (res.range.end if res.done else res.checkpoint)


def check_tiling(results: Sequence[ShardResult]) -> None:
    """The listed pieces cover the whole key space of the run exactly once: no gap, no overlap.

    Ranges only ever split into pieces that meet end to start, so every key was listed by exactly one
    result if and only if the pieces, sorted, chain from the first key (None) to the last (None).
    Raises IncompleteInventoryError naming the first gap or overlap: a partial count is never a total.
    """
    pieces = sorted((listed_piece(r) for r in results), key=lambda p: (p[0] is not None, p[0] or ""))
    cur: str | None = None
    problems: list[str] = []
    for i, (start, end) in enumerate(pieces):
        if start != cur:
            kind = "overlap" if cur is not None and (start is None or start < cur) else "gap"
            problems.append(f"{kind} at {cur!r} -> {start!r}")
        if end is None and i < len(pieces) - 1:
            problems.append(f"range ({start!r}, end of bucket] is followed by {len(pieces) - 1 - i} more")
            break
        cur = end
    if not pieces:
        problems.append("no range was listed")
    elif cur is not None:
        problems.append(f"nothing listed after {cur!r}")
    if problems:
        raise IncompleteInventoryError(
            f"inventory incomplete: {len(problems)} problem(s) in {len(pieces)} listed ranges: "
            + "; ".join(problems[:5])
        )


EXECUTION_SUMMARY_KEYS = (
    "bucket",
    "prefix",
    "objects",
    "bytes",
    "list_requests",
    "list_cost_usd",
    "ranges_listed",
    "retries",
    "seconds",
)


def execution_summary(summary: dict[str, Any], summary_uri: str) -> dict[str, Any]:
    """The few figures a state machine execution returns (its payload is small), and where the rest is."""
    small = {k: summary[k] for k in EXECUTION_SUMMARY_KEYS}
    small["summary"] = summary_uri
    if "diff" in summary:
        small["diff"] = {"objects": summary["diff"]["objects"], "bytes": summary["diff"]["bytes"]}
        exact = summary["diff"].get("exact")
        if exact:
            small["diff"].update({k: exact[k] for k in ("added", "removed", "changed")})
    return small


# diff_inventories counts added and removed bytes as sizes and changed bytes as the net change; as a
# change in the target's bytes (report.txt and report.html alike), removed objects take theirs away.
DIFF_BYTES_SIGN = {"added": 1, "removed": -1, "changed": 1}


def diff_bytes_change(exact: dict[str, Any], kind: str) -> int:
    """What the ``kind`` objects of an exact diff did to the target's bytes (negative for removed)."""
    return DIFF_BYTES_SIGN[kind] * int(exact[kind]["bytes"])


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} PiB"


def size_bucket_label(bits: int) -> str:
    if bits == 0:
        return "0 B"
    return f"{human_bytes(1 << (bits - 1))} – <{human_bytes(1 << bits)}"


def build_summary(
    *,
    bucket: str,
    prefix: str,
    stats: InventoryStats,
    results: Sequence[ShardResult],
    probe_requests: int,
    started: datetime,
    finished: datetime,
    output_uri: str,
    planned_ranges: int,
    list_price_per_1000: float = LIST_PRICE_PER_1000,
) -> dict[str, Any]:
    list_requests = probe_requests + sum(r.list_requests for r in results)
    glacier = {c: v for c, v in stats.by_class.items() if c in GLACIER_CLASSES}
    archive = {c: v for c, v in stats.by_class.items() if c in ARCHIVE_CLASSES}
    seconds = max(1e-9, (finished - started).total_seconds())
    return {
        "bucket": bucket,
        "prefix": prefix,
        "objects": stats.objects,
        "bytes": stats.bytes,
        "list_requests": list_requests,
        "list_cost_usd": round(list_requests * list_price_per_1000 / 1000, 6),
        "probe_requests": probe_requests,
        "retries": sum(r.retries for r in results),
        "ranges_planned": planned_ranges,
        "ranges_listed": len(results),
        "started": started.isoformat(),
        "finished": finished.isoformat(),
        "seconds": round(seconds, 3),
        "objects_per_second": round(stats.objects / seconds, 1),
        "multipart_objects": stats.multipart,
        "by_storage_class": {c: {"objects": n, "bytes": b} for c, (n, b) in sorted(stats.by_class.items())},
        "glacier_share": {
            "objects": sum(v[0] for v in glacier.values()),
            "bytes": sum(v[1] for v in glacier.values()),
            "objects_fraction": _frac(sum(v[0] for v in glacier.values()), stats.objects),
            "bytes_fraction": _frac(sum(v[1] for v in glacier.values()), stats.bytes),
            "needs_restore_objects": sum(v[0] for v in archive.values()),
        },
        "by_prefix": {
            "depth": stats.depth,
            "prefixes": {
                p: {"objects": n, "bytes": b}
                for p, (n, b) in sorted(stats.by_prefix.items(), key=lambda kv: (-kv[1][1], kv[0]))
            },
        },
        "size_histogram": [
            {"bits": k, "range": size_bucket_label(k), "objects": n, "bytes": b}
            for k, (n, b) in sorted(stats.size_hist.items())
        ],
        "age_histogram": [
            {"age": label, "objects": n, "bytes": b}
            for label, (n, b) in zip(AGE_LABELS, stats.age_hist, strict=True)
        ],
        "largest": [{"key": k, "size": s} for s, k in sorted(stats.top, reverse=True)],
        "oldest": _iso(stats.oldest),
        "newest": _iso(stats.newest),
        "output": output_uri,
    }


def _frac(a: int, b: int) -> float:
    return round(a / b, 6) if b else 0.0


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat() if ts is not None else None


def diff_summaries(previous: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """Objects and bytes added/removed per prefix between two summaries of the same target.

    Summaries hold per-prefix totals, not per-object rows, so this is a net change per prefix;
    object-level added/removed/changed comes from diff_inventories over the Parquet outputs.
    """
    before = previous.get("by_prefix", {}).get("prefixes", {})
    after = current.get("by_prefix", {}).get("prefixes", {})
    rows = []
    for p in sorted(set(before) | set(after)):
        b = before.get(p, {"objects": 0, "bytes": 0})
        a = after.get(p, {"objects": 0, "bytes": 0})
        if a != b:
            rows.append(
                {"prefix": p, "objects": a["objects"] - b["objects"], "bytes": a["bytes"] - b["bytes"]}
            )
    return {
        "objects": current["objects"] - previous["objects"],
        "bytes": current["bytes"] - previous["bytes"],
        "by_prefix": rows,
        "previous_finished": previous.get("finished"),
    }


def render_report(summary: dict[str, Any], top_prefixes: int = 15) -> str:
    s = summary
    lines = [
        f"hpcstage inventory of s3://{s['bucket']}/{s['prefix']}",
        f"  objects        {s['objects']:,}",
        f"  bytes          {s['bytes']:,} ({human_bytes(s['bytes'])})",
        f"  LIST requests  {s['list_requests']:,} (${s['list_cost_usd']:.4f}; {s['probe_requests']} outside the "
        "listed ranges)",
        f"  ranges         {s['ranges_planned']} to start from, {s['ranges_listed']} listed",
        f"  time           {s['seconds']:.1f} s ({s['objects_per_second']:,.0f} objects/s)",
        "",
        "By storage class:",
    ]
    for c, v in s["by_storage_class"].items():
        lines.append(f"  {c:<20} {v['objects']:>14,}  {human_bytes(v['bytes']):>12}")
    g = s["glacier_share"]
    lines.append(
        f"  Glacier classes: {g['objects']:,} objects ({g['objects_fraction']:.1%}), "
        f"{human_bytes(g['bytes'])} ({g['bytes_fraction']:.1%}); {g['needs_restore_objects']:,} need a restore"
    )
    lines += ["", f"Largest prefixes (depth {s['by_prefix']['depth']}):"]
    for p, v in list(s["by_prefix"]["prefixes"].items())[:top_prefixes]:
        lines.append(f"  {p or '(root)':<40} {v['objects']:>12,}  {human_bytes(v['bytes']):>12}")
    lines += ["", "Sizes:"]
    for row in s["size_histogram"]:
        lines.append(f"  {row['range']:<26} {row['objects']:>12,}")
    lines += ["", "Ages:"]
    for row in s["age_histogram"]:
        lines.append(f"  {row['age']:<8} {row['objects']:>12,}  {human_bytes(row['bytes']):>12}")
    lines += ["", "Largest objects:"]
    for row in s["largest"][:10]:
        lines.append(f"  {human_bytes(row['size']):>12}  {row['key']}")
    if "diff" in s:
        d = s["diff"]
        lines += [
            "",
            f"Change since the previous inventory ({d.get('previous_finished')}):",
            f"  objects {d['objects']:+,}  bytes {d['bytes']:+,}",
        ]
        exact = d.get("exact")
        if exact:
            lines.append(
                "  "
                + ", ".join(
                    f"{k} {exact[k]['objects']:,} ({diff_bytes_change(exact, k):+,} B)"
                    for k in ("added", "removed", "changed")
                )
            )
            for row in exact["by_prefix"][:top_prefixes]:
                lines.append(
                    f"  {row['prefix'] or '(root)':<40} +{row['added']['objects']:,} "
                    f"-{row['removed']['objects']:,} ~{row['changed']['objects']:,}"
                )
        else:
            for row in d["by_prefix"][:top_prefixes]:
                lines.append(f"  {row['prefix'] or '(root)':<40} {row['objects']:+12,}  {row['bytes']:+,} B")
    if "versions" in s:
        v = s["versions"]
        lines += [
            "",
            "Versions (ListObjectVersions):",
            f"  current        {v['current']['objects']:>14,}  {human_bytes(v['current']['bytes']):>12}",
            f"  non-current    {v['noncurrent']['objects']:>14,}  {human_bytes(v['noncurrent']['bytes']):>12}",
            f"  {v['delete_markers']:,} delete markers; {v['deleted_keys']:,} keys deleted (latest is a delete marker)",
        ]
    if s.get("request_payer"):
        lines.append(
            f"\nRequester pays: the {s['list_requests']:,} LIST requests (${s['list_cost_usd']:.4f}) "
            "and their data transfer are billed to this account, not the bucket owner."
        )
    lines.append(f"\nOutput: {s['output']}")
    return "\n".join(lines) + "\n"


def ranges_document(results: Sequence[ShardResult]) -> list[dict[str, Any]]:
    """Per-range counts in key order, for planning the next audit of the same target (hints).

    Only ranges that finished are final; a stopped shard's rows are merged with its remainder's.
    """
    rows = []
    for res in results:
        start, end = listed_piece(res)
        rows.append({"start_after": start, "end": end, "objects": res.objects, "bytes": res.bytes})
    rows.sort(key=lambda r: (r["start_after"] is not None, r["start_after"] or ""))
    return rows
