"""report.html from a summary: the prefix drill-down, the run's charts, the change, and an empty run."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hpcstage.inventory.model import KeyRange, ShardResult
from hpcstage.inventory.report import build_summary, diff_summaries, render_report
from hpcstage.inventory.report_html import prefix_tree, render_html
from hpcstage.inventory.stats import InventoryStats

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def summary(objects: dict[str, int], prefix: str = "", depth: int = 2) -> dict[str, Any]:
    stats = InventoryStats(prefix=prefix, depth=depth, now=NOW)
    stats.add_page(
        [
            {
                "Key": k,
                "Size": n,
                "LastModified": NOW - timedelta(days=3),
                "ETag": '"e"',
                "StorageClass": "STANDARD",
            }
            for k, n in sorted(objects.items())
        ]
    )
    merged = InventoryStats(prefix=prefix, depth=depth, now=NOW)
    merged.merge(stats)  # as run_streams does: merging aggregates the pages still pending
    result = ShardResult(
        range=KeyRange(id="r0"),
        objects=len(objects),
        bytes=sum(objects.values()),
        list_requests=1,
        retries=0,
        done=True,
    )
    return build_summary(
        bucket="bkt",
        prefix=prefix,
        stats=merged,
        results=[result],
        probe_requests=0,
        started=NOW,
        finished=NOW + timedelta(seconds=2),
        output_uri="/tmp/out",
        planned_ranges=1,
    )


def test_prefix_tree_rolls_the_deepest_level_up_to_every_parent() -> None:
    tree = prefix_tree(
        {
            "a/x/": {"objects": 2, "bytes": 20},
            "a/y/": {"objects": 1, "bytes": 5},
            "b/z/": {"objects": 4, "bytes": 1},
            "top.txt": {"objects": 1, "bytes": 7},
        }
    )
    assert (tree["objects"], tree["bytes"]) == (8, 33)
    assert {k: (v["objects"], v["bytes"]) for k, v in tree["kids"].items()} == {
        "a/": (3, 25),
        "b/": (4, 1),
        "top.txt": (1, 7),
    }
    assert {k: v["bytes"] for k, v in tree["kids"]["a/"]["kids"].items()} == {"x/": 20, "y/": 5}
    assert tree["kids"]["top.txt"]["kids"] == {}


def test_prefix_tree_starts_below_the_folder_of_the_inventory_prefix() -> None:
    tree = prefix_tree({"data/run1/a/": {"objects": 1, "bytes": 1}}, base="data/")
    assert list(tree["kids"]) == ["run1/"] and list(tree["kids"]["run1/"]["kids"]) == ["a/"]


def test_drill_down_is_nested_details_largest_first() -> None:
    html = render_html(summary({"small/a/1": 1, "big/b/1": 100, "big/c/1": 50}))
    names = re.findall(r'<span class="p" title="([^"]*)">', html)
    assert names == ["big/", "big/b/", "big/c/", "small/", "small/a/"]
    assert html.count('<details class="node">') == 2 and html.count('<details class="leaf">') == 3


def test_totals_cards_and_timeline() -> None:
    s = summary({f"p/{i}": 1024 for i in range(3)})
    s["timeline"] = [
        {"t": 0.0, "objects": 0, "bytes": 0, "streams": 1, "requests": 0, "ranges_done": 0},
        {"t": 2.0, "objects": 3, "bytes": 3072, "streams": 0, "requests": 1, "ranges_done": 1},
    ]
    html = render_html(s)
    assert '<p id="totals">3 objects, 3.00 KiB (3,072 bytes)' in html
    assert html.count("<polyline") == 4
    assert "No previous run to compare with" in html


def test_change_since_previous_signs_removed_bytes_negative() -> None:
    before = summary({"a/1": 10, "a/2": 30})
    after = summary({"a/1": 10, "b/1": 5})
    after["diff"] = diff_summaries(before, after)
    after["diff"]["exact"] = {
        "added": {"objects": 1, "bytes": 5},
        "removed": {"objects": 1, "bytes": 30},
        "changed": {"objects": 0, "bytes": 0},
        "by_prefix": [],
    }
    html = render_html(after)
    assert '<span class="muted">+0</span> objects, <span class="neg">-25 B</span>' in html
    assert 'removed: 1 objects (<span class="neg">-30 B</span>)' in html
    assert 'added: 1 objects (<span class="pos">+5 B</span>)' in html


def test_report_txt_signs_removed_bytes_negative_as_report_html_does() -> None:
    before = summary({"a/1": 10, "a/2": 30, "a/3": 4})
    after = summary({"a/1": 12, "b/1": 5})
    after["diff"] = diff_summaries(before, after)
    after["diff"]["exact"] = {
        "added": {"objects": 1, "bytes": 5},
        "removed": {"objects": 2, "bytes": 34},
        "changed": {"objects": 1, "bytes": 2},
        "by_prefix": [],
    }
    text = render_report(after)
    assert "  objects -1  bytes -27\n" in text
    assert "  added 1 (+5 B), removed 2 (-34 B), changed 1 (+2 B)\n" in text
    html = render_html(after)
    assert 'removed: 2 objects (<span class="neg">-34 B</span>)' in html


def test_an_empty_summary_renders() -> None:
    html = render_html(summary({}))
    assert '<p id="totals">0 objects, 0 B (0 bytes)' in html
    assert "the run was too short to chart" not in html  # no timeline at all: said once, plainly
    assert "No timeline" in html
