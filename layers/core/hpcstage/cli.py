"""The hpcstage command line (local use): inventory, run (local state machines), demo."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import HpcstageError, InputError
from .inventory.directory import is_directory_bucket, run_directory_inventory
from .inventory.lister import ListOptions
from .inventory.output import LocalStore, OutputStore, S3Store
from .inventory.report import human_bytes, render_report
from .inventory.runner import InventoryOptions, Progress, default_workers, run_inventory
from .inventory.versions import VERSIONS
from .s3util import AccessOptions, access_summary, make_s3_client, parse_s3_url


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpcstage", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    inv = sub.add_parser("inventory", help="count, size and catalogue a bucket (or prefix) in parallel")
    inv.add_argument("url", help="s3://bucket[/prefix]")
    inv.add_argument("--endpoint-url", help="S3 endpoint (e.g. a local emulator)")
    inv.add_argument("--region", help="AWS region of the bucket")
    inv.add_argument(
        "--workers",
        type=_positive_int,
        default=default_workers(),
        help=f"concurrent ListObjectsV2 streams that split work among themselves (default {default_workers()})",
    )
    inv.add_argument(
        "--out", help="output directory or s3://bucket/prefix (default ./hpcstage-out/BUCKET/TIME)"
    )
    inv.add_argument("--depth", type=_positive_int, default=1, help="prefix depth for the by-prefix table")
    inv.add_argument("--hints", help="ranges.json of a previous run: its ranges seed the streams")
    inv.add_argument("--previous", help="summary.json of a previous run: report the change since")
    inv.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    inv.add_argument(
        "--versions",
        action="store_true",
        help="every version and delete marker (ListObjectVersions; needs s3:ListBucketVersions)",
    )
    inv.add_argument("--profile", help="named profile of your AWS config to list with")
    inv.add_argument(
        "--no-sign-request",
        action="store_true",
        help="anonymous requests (public buckets, e.g. the AWS Open Data registry)",
    )
    inv.add_argument("--role-arn", help="IAM role to assume for the bucket (cross-account)")
    inv.add_argument("--external-id", help="external id the role's trust policy requires")
    inv.add_argument(
        "--request-payer",
        action="store_true",
        help="list a requester-pays bucket: the LIST requests are billed to you (shown in the summary)",
    )
    inv.add_argument("--no-progress", action="store_true", help="no progress display")

    run = sub.add_parser("run", help="execute a state machine locally (embedded default)")
    run.add_argument("machine", choices=["inventory", "staging"])
    run.add_argument("--input", required=True, help="execution input JSON file (see events/)")
    run.add_argument(
        "--seed-objects",
        type=_positive_int,
        default=20_000,
        help="objects to seed the input's bucket with in the local emulator (default 20,000)",
    )

    demo = sub.add_parser("demo", help="the embedded default, end to end, offline")
    demo.add_argument("--objects", type=_positive_int, default=100_000)
    demo.add_argument("--workdir", default="hpcstage-demo")
    return p


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON: {err}") from None


def _output_store(out: str | None, bucket: str, s3: Any) -> tuple[OutputStore, str, str]:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if out and out.startswith("s3://"):
        url = parse_s3_url(out)
        root = f"{url.prefix.rstrip('/')}/{bucket}/{stamp}".lstrip("/")
        return S3Store(s3, url.bucket, root), f"arn:aws:s3:::{url.bucket}", f"{root}/"
    root_dir = Path(out) if out else Path("hpcstage-out") / bucket / stamp
    return LocalStore(root_dir), f"file://{root_dir.resolve()}", ""


def _previous_store(previous: dict[str, Any] | None, s3: Any) -> OutputStore | None:
    """Where the previous run's output is, from its summary (for the object-level diff)."""
    if not previous or not previous.get("output"):
        return None
    where = str(previous["output"])
    if where.startswith("s3://"):
        url = parse_s3_url(where)
        return S3Store(s3, url.bucket, url.prefix.rstrip("/"))
    return LocalStore(where) if Path(where).is_dir() else None


class _ProgressDisplay:
    """A rich live line on stderr: objects, bytes, ranges done, rate."""

    def __init__(self, progress: Progress, enabled: bool) -> None:
        self.progress = progress
        self.enabled = enabled and sys.stderr.isatty()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = time.monotonic()

    def line(self) -> str:
        p = self.progress
        el = max(1e-6, time.monotonic() - self._start)
        return (
            f"{p.phase}: {p.objects:,} objects  {human_bytes(p.bytes)}  {p.streams_active} streams  "
            f"ranges {p.ranges_done}/{p.ranges_total}  {p.objects / el:,.0f} obj/s  {p.list_requests:,} LIST"
        )

    def __enter__(self) -> _ProgressDisplay:
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            def loop() -> None:
                with Live(console=Console(stderr=True), refresh_per_second=4, transient=True) as live:
                    while not self._stop.wait(0.25):
                        live.update(self.line())

            self._thread = threading.Thread(target=loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


def cmd_inventory(args: argparse.Namespace) -> int:
    url = parse_s3_url(args.url)
    access = AccessOptions(
        profile=args.profile,
        unsigned=args.no_sign_request,
        role_arn=args.role_arn,
        external_id=args.external_id,
        request_payer=args.request_payer,
    )
    s3 = make_s3_client(args.endpoint_url, args.region, pool=args.workers + 32, access=access)
    # The output (and a previous run's) is yours: written with your own credentials, not the target's.
    out_s3 = s3 if access.default else make_s3_client(args.endpoint_url, args.region)
    store, dest_arn, key_prefix = _output_store(args.out, url.bucket, out_s3)
    opts = InventoryOptions(
        workers=args.workers,
        listing=ListOptions(stats_depth=args.depth, source=VERSIONS if args.versions else None),
        extra_summary=access_summary(access),
        hints=_read_json(args.hints) if args.hints else None,
        previous_summary=(previous := _read_json(args.previous) if args.previous else None),
        previous_store=_previous_store(previous, out_s3),
        destination_arn=dest_arn,
        manifest_key_prefix=key_prefix,
    )
    progress = Progress()
    with _ProgressDisplay(progress, enabled=not args.no_progress):
        if is_directory_bucket(s3, url.bucket):
            summary = run_directory_inventory(s3, url.bucket, url.prefix, store, opts, progress=progress)
        else:
            summary = run_inventory(s3, url.bucket, url.prefix, store, opts, progress=progress)
    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary_table(summary)
    return 0


def _print_summary_table(summary: dict[str, Any]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # the core layer has no rich; the local extras do
        print(render_report(summary))
        return
    t = Table(title=f"s3://{summary['bucket']}/{summary['prefix']}")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_row("objects", f"{summary['objects']:,}")
    t.add_row("bytes", f"{summary['bytes']:,} ({human_bytes(summary['bytes'])})")
    t.add_row("LIST requests", f"{summary['list_requests']:,}")
    t.add_row("LIST cost", f"${summary['list_cost_usd']:.4f}")
    t.add_row("ranges (seeded/listed)", f"{summary['ranges_planned']}/{summary['ranges_listed']}")
    t.add_row("time", f"{summary['seconds']:.1f} s")
    for c, v in summary["by_storage_class"].items():
        t.add_row(f"  {c}", f"{v['objects']:,} / {human_bytes(v['bytes'])}")
    Console().print(t)
    print(f"Output: {summary['output']}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "inventory":
            return cmd_inventory(args)
        if args.command in ("run", "demo"):
            from . import localcli  # the local runtime (moto) is only needed here

            return int(localcli.main(args))
        parser.error(f"unknown command {args.command}")
    except HpcstageError as err:
        print(f"hpcstage: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hpcstage: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
