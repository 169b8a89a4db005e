"""report.html: one self-contained page per run (no script, no font, no CDN; opens offline).

Everything is drawn from summary.json: where the bytes are (by prefix, with drill-down through the
levels the run collected, by storage class, age and size), the largest objects, the Glacier share, the
change since the previous run, and how the run itself went (streams and objects over time, requests,
retries, cost). Charts are inline SVG and CSS bars; drill-down is nested <details>. Every string that
comes from the bucket (keys and prefixes are arbitrary UTF-8) goes through html.escape.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from .. import __version__
from .report import diff_bytes_change, human_bytes
from .stats import OTHER_PREFIX

CSS = """
:root { --fg:#1d2430; --muted:#5b6675; --line:#dfe3ea; --bar:#3a6ea5; --bar2:#e0a43a; --bg:#f6f7f9; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: var(--fg);
       margin: 0; background: var(--bg); }
header { background: #1d2430; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 20px; font-weight: 600; word-break: break-all; }
header p { margin: 0; color: #c4cbd6; }
main { max-width: 1180px; margin: 0 auto; padding: 18px 28px 40px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; margin: 4px 0 18px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.card .v { font-size: 22px; font-weight: 600; }
.card .l { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .s { color: var(--muted); font-size: 12px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 18px; margin: 0 0 16px; }
h2 { font-size: 16px; margin: 0 0 10px; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
@media (max-width: 900px) { .grid2 { grid-template-columns: 1fr; } }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.k { word-break: break-all; }
.bar { height: 10px; background: var(--bar); border-radius: 2px; min-width: 1px; }
.bar.alt { background: var(--bar2); }
.barcell { width: 28%; }
details { margin: 0; }
details > summary { cursor: pointer; list-style: none; display: grid;
  grid-template-columns: minmax(0, 1fr) 90px 160px 26%; gap: 8px; padding: 4px 8px;
  border-bottom: 1px solid var(--line); align-items: center; }
details > summary::-webkit-details-marker { display: none; }
details > summary .p::before { content: "▸ "; color: var(--muted); }
details[open] > summary .p::before { content: "▾ "; }
details.leaf > summary { cursor: default; }
details.leaf > summary .p::before { content: "  "; }
.kids { margin-left: 18px; }
.row-head { display: grid; grid-template-columns: minmax(0, 1fr) 90px 160px 26%; gap: 8px; padding: 4px 8px;
  font-size: 12px; color: var(--muted); font-weight: 600; border-bottom: 1px solid var(--line); }
.p { word-break: break-all; }
.r { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: var(--muted); }
.pos { color: #1d7a3a; } .neg { color: #b3261e; }
svg text { font: 11px system-ui, "DejaVu Sans", sans-serif; fill: var(--muted); }
footer { color: var(--muted); font-size: 12px; margin-top: 20px; }
"""


def _n(v: int | float) -> str:
    return f"{v:,}"


def _pct(a: float, b: float) -> str:
    return f"{a / b:.1%}" if b else "0.0%"


def _signed(v: int) -> str:
    cls = "pos" if v > 0 else "neg" if v < 0 else "muted"
    return f'<span class="{cls}">{v:+,}</span>'


def _signed_bytes(v: int) -> str:
    cls = "pos" if v > 0 else "neg" if v < 0 else "muted"
    sign = "+" if v > 0 else "-" if v < 0 else "±"
    return f'<span class="{cls}">{sign}{escape(human_bytes(abs(v)))}</span>'


def _bar(value: float, top: float, alt: bool = False) -> str:
    width = 100.0 * value / top if top else 0.0
    return f'<div class="bar{" alt" if alt else ""}" style="width:{width:.2f}%"></div>'


def _card(label: str, value: str, sub: str = "") -> str:
    return (
        f'<div class="card"><div class="l">{escape(label)}</div><div class="v">{value}</div>'
        f'<div class="s">{sub}</div></div>'
    )


# -- prefixes, with drill-down -------------------------------------------------------------------


def prefix_tree(prefixes: dict[str, dict[str, int]], base: str = "") -> dict[str, Any]:
    """The by-prefix table (deepest level collected) rolled up into a tree of its path components
    below ``base`` (the folder the inventory's prefix sits in)."""
    root: dict[str, Any] = {"objects": 0, "bytes": 0, "kids": {}}
    for full, v in prefixes.items():
        path = full[len(base) :] if full.startswith(base) else full
        root["objects"] += v["objects"]
        root["bytes"] += v["bytes"]
        node = root
        parts = path.split("/")
        # "a/b/" -> ["a/", "b/"]; a key at the top level ("file.txt") is a part of its own
        pieces = [p + "/" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        for piece in pieces or [path]:
            node = node["kids"].setdefault(piece, {"objects": 0, "bytes": 0, "kids": {}})
            node["objects"] += v["objects"]
            node["bytes"] += v["bytes"]
    return root


def _tree_html(node: dict[str, Any], total: int, path: str, depth: int, limit: int) -> str:
    kids = sorted(node["kids"].items(), key=lambda kv: (-kv[1]["bytes"], kv[0]))
    out = []
    for name, kid in kids[:limit]:
        full = path + name
        leaf = not kid["kids"]
        summary = (
            f'<summary><span class="p" title="{escape(full)}">{escape(name or "(root)")}</span>'
            f'<span class="r">{_n(kid["objects"])}</span>'
            f'<span class="r">{escape(human_bytes(kid["bytes"]))} ({_pct(kid["bytes"], total)})</span>'
            f"{_bar(kid['bytes'], total)}</summary>"
        )
        inner = "" if leaf else f'<div class="kids">{_tree_html(kid, total, full, depth + 1, limit)}</div>'
        out.append(f'<details class="{"leaf" if leaf else "node"}">{summary}{inner}</details>')
    if len(kids) > limit:
        rest = kids[limit:]
        out.append(
            f'<div class="muted" style="padding:4px 8px">… {len(rest):,} more: '
            f"{_n(sum(k['objects'] for _, k in rest))} objects, "
            f"{escape(human_bytes(sum(k['bytes'] for _, k in rest)))}</div>"
        )
    return "".join(out)


def _prefix_section(s: dict[str, Any], limit: int = 40) -> str:
    bp = s["by_prefix"]
    base = s["prefix"][: s["prefix"].rfind("/") + 1]
    tree = prefix_tree(bp["prefixes"], base)
    total = max(1, s["bytes"])
    note = (
        f"Collected to depth {bp['depth']}: click a prefix to open the level below."
        if bp["depth"] > 1
        else "Collected to depth 1 (run with <code>--depth 3</code> to drill down three levels)."
    )
    if OTHER_PREFIX in bp["prefixes"]:
        note += (
            f" The table keeps {len(bp['prefixes']) - 1:,} prefixes; the objects of any further ones are "
            f"counted under {escape(OTHER_PREFIX)} (a smaller --depth keeps them apart)."
        )
    if base:
        note += f" Prefixes below s3://{escape(s['bucket'])}/{escape(base)}."
    return (
        f'<section id="prefixes"><h2>Where the bytes are: by prefix</h2><p class="muted">{note}</p>'
        '<div class="row-head"><span>prefix</span><span class="r">objects</span>'
        '<span class="r">bytes (share)</span><span></span></div>'
        f"{_tree_html(tree, total, base, 0, limit)}</section>"
    )


# -- tables with bars ----------------------------------------------------------------------------


def _rows_table(head: Sequence[str], rows: Sequence[tuple[str, int, int]], total_bytes: int) -> str:
    top_b = max([b for _, _, b in rows] or [0])
    top_o = max([o for _, o, _ in rows] or [0])
    body = "".join(
        f'<tr><td class="k">{escape(label)}</td><td class="n">{_n(o)}</td>'
        f'<td class="n">{escape(human_bytes(b))}</td><td class="n">{_pct(b, total_bytes)}</td>'
        f'<td class="barcell">{_bar(b, top_b)}{_bar(o, top_o, alt=True)}</td></tr>'
        for label, o, b in rows
    )
    cols = "".join(f'<th class="{"n" if i else ""}">{escape(h)}</th>' for i, h in enumerate(head))
    legend = '<span style="color:var(--bar)">■</span> bytes <span style="color:var(--bar2)">■</span> objects'
    return f"<table><tr>{cols}<th>{legend}</th></tr>{body}</table>"


def _classes(s: dict[str, Any]) -> str:
    rows = sorted(
        ((c, v["objects"], v["bytes"]) for c, v in s["by_storage_class"].items()), key=lambda r: -r[2]
    )
    g = s["glacier_share"]
    return (
        '<section id="classes"><h2>Storage classes</h2>'
        + _rows_table(["class", "objects", "bytes", "share"], rows, s["bytes"])
        + f'<p class="muted">Glacier classes: {_n(g["objects"])} objects ({g["objects_fraction"]:.1%}), '
        f"{escape(human_bytes(g['bytes']))} ({g['bytes_fraction']:.1%}); "
        f"{_n(g['needs_restore_objects'])} need a restore before they can be read.</p></section>"
    )


def _ages(s: dict[str, Any]) -> str:
    rows = [(r["age"], r["objects"], r["bytes"]) for r in s["age_histogram"]]
    return (
        '<section id="ages"><h2>Age (since last modified)</h2>'
        + _rows_table(["age", "objects", "bytes", "share"], rows, s["bytes"])
        + "</section>"
    )


def _sizes(s: dict[str, Any]) -> str:
    rows = [(r["range"], r["objects"], r["bytes"]) for r in s["size_histogram"]]
    return (
        '<section id="sizes"><h2>Object sizes</h2>'
        + _rows_table(["size", "objects", "bytes", "share"], rows, s["bytes"])
        + "</section>"
    )


def _largest(s: dict[str, Any]) -> str:
    body = "".join(
        f'<tr><td class="n">{escape(human_bytes(r["size"]))}</td><td class="k">{escape(r["key"])}</td></tr>'
        for r in s["largest"]
    )
    return (
        '<section id="largest"><h2>Largest objects</h2>'
        f'<table><tr><th class="n">size</th><th>key</th></tr>{body}</table></section>'
    )


def _diff(s: dict[str, Any], limit: int = 30) -> str:
    d = s.get("diff")
    if not d:
        return (
            '<section id="diff"><h2>Change since the previous run</h2><p class="muted">No previous run '
            "to compare with: pass <code>--previous OUT/BUCKET/TIME/summary.json</code> (or run an audit) "
            "to see what changed.</p></section>"
        )
    head = (
        f"<p>Since the run finished {escape(str(d.get('previous_finished')))}: "
        f"{_signed(d['objects'])} objects, {_signed_bytes(d['bytes'])}.</p>"
    )
    exact = d.get("exact")
    if exact:
        head += "<p>" + ", ".join(
            f"{k}: {_n(exact[k]['objects'])} objects ({_signed_bytes(diff_bytes_change(exact, k))})"
            for k in ("added", "removed", "changed")
        )
        head += "</p>"
        rows = "".join(
            f'<tr><td class="k">{escape(r["prefix"] or "(root)")}</td>'
            f'<td class="n">{_n(r["added"]["objects"])}</td><td class="n">{_n(r["removed"]["objects"])}</td>'
            f'<td class="n">{_n(r["changed"]["objects"])}</td></tr>'
            for r in exact["by_prefix"][:limit]
        )
        table = (
            '<table><tr><th>prefix</th><th class="n">added</th><th class="n">removed</th>'
            f'<th class="n">changed</th></tr>{rows}</table>'
        )
    else:
        rows = "".join(
            f'<tr><td class="k">{escape(r["prefix"] or "(root)")}</td><td class="n">{_signed(r["objects"])}</td>'
            f'<td class="n">{_signed_bytes(r["bytes"])}</td></tr>'
            for r in d["by_prefix"][:limit]
        )
        table = (
            f'<table><tr><th>prefix</th><th class="n">objects</th><th class="n">bytes</th></tr>{rows}</table>'
            if rows
            else '<p class="muted">No prefix changed.</p>'
        )
    return f'<section id="diff"><h2>Change since the previous run</h2>{head}{table}</section>'


# -- the run -------------------------------------------------------------------------------------


def _line_chart(
    rows: Sequence[dict[str, Any]], field: str, title: str, fmt: Any = _n, w: int = 520, h: int = 160
) -> str:
    if len(rows) < 2:
        return f'<p class="muted">{escape(title)}: the run was too short to chart.</p>'
    t_max = max(r["t"] for r in rows) or 1.0
    v_max = max(r[field] for r in rows) or 1
    pad_l, pad_b, pad_t = 76, 20, 18
    pts = " ".join(
        f"{pad_l + (w - pad_l - 6) * r['t'] / t_max:.1f},"
        f"{pad_t + (h - pad_b - pad_t) * (1 - r[field] / v_max):.1f}"
        for r in rows
    )
    return (
        f'<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{escape(title)}">'
        f'<text x="{pad_l}" y="12">{escape(title)} (max {escape(fmt(v_max))})</text>'
        f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - 6}" y2="{h - pad_b}" stroke="#dfe3ea"/>'
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}" stroke="#dfe3ea"/>'
        f'<text x="{pad_l - 4}" y="{pad_t + 4}" text-anchor="end">{escape(fmt(v_max))}</text>'
        f'<text x="{pad_l - 4}" y="{h - pad_b}" text-anchor="end">0</text>'
        f'<text x="{w - 6}" y="{h - 4}" text-anchor="end">{t_max:,.0f} s</text>'
        f'<polyline fill="none" stroke="#3a6ea5" stroke-width="1.6" points="{pts}"/></svg>'
    )


def _run(s: dict[str, Any]) -> str:
    timeline = s.get("timeline") or []
    rows = [
        ("time", f"{s['seconds']:,.1f} s ({s['objects_per_second']:,.0f} objects/s)"),
        ("LIST requests", f"{_n(s['list_requests'])} (of which {_n(s['retries'])} retries)"),
        ("LIST cost", f"${s['list_cost_usd']:,.4f}"),
        ("ranges", f"{_n(s['ranges_planned'])} seeded, {_n(s['ranges_listed'])} listed"),
        ("ranges handed over", _n(s.get("ranges_given", 0))),
        ("started", str(s["started"])),
        ("finished", str(s["finished"])),
    ]
    table = "".join(f'<tr><td>{escape(k)}</td><td class="n">{escape(v)}</td></tr>' for k, v in rows)
    charts = (
        '<div class="grid2">'
        + _line_chart(timeline, "streams", "streams listing")
        + _line_chart(timeline, "objects", "objects listed")
        + _line_chart(timeline, "requests", "pages listed")
        + _line_chart(timeline, "bytes", "bytes listed", fmt=human_bytes)
        + "</div>"
        if timeline
        else '<p class="muted">No timeline: this run was not watched by the command line '
        "(a deployed run's history is in its Step Functions execution).</p>"
    )
    return f'<section id="run"><h2>The run</h2><table>{table}</table>{charts}</section>'


def render_html(summary: dict[str, Any]) -> str:
    s = summary
    target = f"s3://{s['bucket']}/{s['prefix']}"
    g = s["glacier_share"]
    cards = "".join(
        [
            _card("objects", _n(s["objects"]), f"{_n(s['multipart_objects'])} multipart"),
            _card("bytes", escape(human_bytes(s["bytes"])), f"{_n(s['bytes'])} B"),
            _card("prefixes", _n(len(s["by_prefix"]["prefixes"])), f"at depth {s['by_prefix']['depth']}"),
            _card(
                "Glacier share",
                f"{g['bytes_fraction']:.1%}",
                f"{_n(g['needs_restore_objects'])} need restore",
            ),
            _card("LIST cost", f"${s['list_cost_usd']:,.4f}", f"{_n(s['list_requests'])} requests"),
            _card("time", f"{s['seconds']:,.1f} s", f"{s['objects_per_second']:,.0f} objects/s"),
        ]
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>hpcstage inventory of {escape(target)}</title><style>{CSS}</style></head><body>"
        f'<header><h1>Inventory of {escape(target)}</h1><p id="totals">{_n(s["objects"])} objects, '
        f"{escape(human_bytes(s['bytes']))} ({_n(s['bytes'])} bytes) · finished {escape(str(s['finished']))}"
        "</p></header><main>"
        f'<div class="cards">{cards}</div>'
        + _prefix_section(s)
        + _diff(s)
        + '<div class="grid2">'
        + _classes(s)
        + _ages(s)
        + "</div>"
        + _run(s)
        + _sizes(s)
        + _largest(s)
        + f"<footer>hpcstage {escape(__version__)} · output {escape(str(s['output']))}</footer>"
        "</main></body></html>\n"
    )
