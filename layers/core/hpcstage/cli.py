"""The hpcstage command line (local use): inventory, run (local state machines), demo.

Exit codes follow the AWS CLI's (hpcstage.errors): 0 done, 1 done but not what was asked (nothing
under the prefix, an incomplete inventory, a failed execution), 2 the command line does not parse,
252 a bad parameter value, 253 credentials or configuration, 254 an error from S3, 255 anything else.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import __version__
from .errors import (
    EXIT_INTERRUPTED,
    EXIT_OTHER,
    EXIT_PARSE,
    EXIT_SERVICE,
    HpcstageError,
    InputError,
)
from .inventory.directory import is_directory_bucket, run_directory_inventory
from .inventory.lister import ListOptions
from .inventory.output import LocalStore, OutputStore, S3Store, hive_ddl, target_name
from .inventory.procs import ListerProcesses, default_processes
from .inventory.report import human_bytes, render_report
from .inventory.runner import InventoryOptions, Progress, default_workers, run_inventory, seeds_from_hints
from .inventory.versions import VERSIONS
from .s3util import (
    AccessOptions,
    S3Url,
    Timeouts,
    access_summary,
    in_process_mock,
    make_s3_client,
    parse_s3_url,
)

DEFAULTS = Timeouts()


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {v}")
    return v


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < v <= 3600:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 3600 seconds: {text}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hpcstage",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"hpcstage {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    inv = sub.add_parser("inventory", help="count, size and catalogue a bucket (or prefix) in parallel")
    inv.add_argument("url", help="s3://bucket[/prefix]")
    inv.add_argument("--endpoint-url", help="S3 endpoint (e.g. a local emulator)")
    inv.add_argument("--region", help="AWS region of the bucket")
    inv.add_argument(
        "--workers",
        type=_positive_int,
        default=default_workers(),
        help=f"concurrent ListObjectsV2 streams that split work among themselves, over all processes, at "
        f"most: each process lets in what its page latency and CPU per page keep busy (default {default_workers()})",
    )
    inv.add_argument(
        "--procs",
        type=_positive_int,
        help="processes to list in, sharing the streams and stealing work from each other (default: one "
        f"per usable core, here {default_processes()}; 1 under an in-process mock of S3)",
    )
    inv.add_argument(
        "--out",
        help="folder or s3://bucket/prefix that keeps every run: each run gets its own folder "
        "OUT/BUCKET/TIME/ beneath it, printed at the end (default ./hpcstage-out)",
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
    inv.add_argument(
        "--stats",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="when stderr is not a terminal, print a progress line this often (default 10)",
    )
    _add_timeout_options(inv)

    run = sub.add_parser("run", help="execute the inventory state machine locally (embedded default)")
    run.add_argument("machine", choices=["inventory"])
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


def _add_timeout_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=DEFAULTS.connect,
        metavar="SECONDS",
        help=f"wait this long for a connection to S3 (default {DEFAULTS.connect:g})",
    )
    parser.add_argument(
        "--read-timeout",
        type=_seconds,
        default=DEFAULTS.read,
        metavar="SECONDS",
        help=f"wait this long for an answer to one request (default {DEFAULTS.read:g})",
    )
    parser.add_argument(
        "--max-attempts",
        type=_positive_int,
        default=DEFAULTS.attempts,
        help=f"attempts per request while listing, with backoff (default {DEFAULTS.attempts}; "
        "the checks before the listing make at most 2)",
    )


def _read_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{what}: no such file: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{what}: {path} is a folder, not a file") from None
    except (PermissionError, UnicodeDecodeError) as err:
        raise InputError(f"{what}: cannot read {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{what}: {path} is not valid JSON: {err}") from None


def read_hints(path: str, workers: int) -> list[dict[str, Any]]:
    """A ranges.json, checked whole before the listing starts."""
    hints = _read_json(path, "--hints")
    if not isinstance(hints, list):
        raise InputError(
            f"--hints: {path} is not a ranges.json (a list of {{start_after, end, objects}} rows); "
            f"got a JSON {type(hints).__name__}"
        )
    try:
        seeds_from_hints(hints, workers)
    except InputError as err:
        raise InputError(f"--hints {path}: {err}") from None
    return hints


def read_previous(path: str, bucket: str, prefix: str) -> dict[str, Any]:
    """A summary.json of an earlier run of the same target, checked before the listing starts."""
    prev = _read_json(path, "--previous")
    needed = ("bucket", "prefix", "objects", "bytes", "by_prefix")
    if not isinstance(prev, dict) or any(k not in prev for k in needed):
        raise InputError(f"--previous: {path} is not a summary.json of hpcstage (needs {', '.join(needed)})")
    if not isinstance(prev["objects"], int) or not isinstance(prev["bytes"], int):
        raise InputError(f"--previous: {path}: 'objects' and 'bytes' must be whole numbers")
    if not isinstance(prev["by_prefix"], dict) or not isinstance(prev["by_prefix"].get("prefixes", {}), dict):
        raise InputError(f"--previous: {path}: 'by_prefix' is not a by-prefix table")
    if (prev["bucket"], prev["prefix"]) != (bucket, prefix):
        raise InputError(
            f"--previous: {path} is an inventory of s3://{prev['bucket']}/{prev['prefix']}, "
            f"not of s3://{bucket}/{prefix}"
        )
    return prev


@dataclass
class RunOutput:
    """Where one run writes: its own folder, and the target's Hive table folder beside the runs."""

    store: OutputStore
    hive: OutputStore
    destination_arn: str
    key_prefix: str


def prepare_output(out: str | None, bucket: str, prefix: str, stamp: str, s3: Any, probe: Any) -> RunOutput:
    """The run's own folder ``OUT/BUCKET/STAMP`` (never one an earlier run wrote to), checked writable.

    A file, an unwritable folder or a missing output bucket is refused here, before any listing: the
    checks use ``probe`` (short timeouts, two attempts), the stores ``s3`` (the listing's client).
    """
    from .inventory.probe import call

    target = target_name(prefix)
    marker = json.dumps({"bucket": bucket, "prefix": prefix, "started": stamp, "version": __version__})
    if out and out.startswith("s3://"):
        url = parse_s3_url(out)
        base = f"{url.prefix.strip('/')}/{bucket}".lstrip("/")
        root = f"{base}/{stamp}"
        try:
            if call(probe, url.bucket, Prefix=root + "/", MaxKeys=1).get("KeyCount", 0):
                raise InputError(f"--out: s3://{url.bucket}/{root}/ already holds files: start the run again")
            S3Store(probe, url.bucket, root).put_bytes("run.json", marker.encode())
            store = S3Store(s3, url.bucket, root)
        except HpcstageError as err:
            raise type(err)(f"--out {out}: {err}") from None
        except Exception as err:  # noqa: BLE001 - the S3 answer, as one line
            raise InputError(f"--out {out}: cannot write there: {err}") from None
        return RunOutput(
            store, S3Store(s3, url.bucket, f"{base}/hive/{target}"), f"arn:aws:s3:::{url.bucket}", f"{root}/"
        )
    base_dir = Path(out or "hpcstage-out")
    if base_dir.exists() and not base_dir.is_dir():
        raise InputError(
            f"--out: {base_dir} is a file; give a folder (each run gets its own folder beneath it)"
        )
    run_dir = base_dir / bucket / stamp
    if run_dir.exists() and any(run_dir.iterdir()):
        raise InputError(f"--out: {run_dir} already holds files: start the run again")
    try:
        local = LocalStore(run_dir)
        local.put_bytes("run.json", marker.encode())
        hive = LocalStore(base_dir / bucket / "hive" / target)
    except OSError as err:
        raise InputError(f"--out: cannot write to {base_dir}: {err.strerror or err}") from None
    return RunOutput(local, hive, f"file://{local.root}", "")


def _previous_store(previous: dict[str, Any] | None, s3: Any) -> OutputStore | None:
    """Where the previous run's output is, from its summary (for the object-level diff)."""
    if not previous or not previous.get("output"):
        return None
    where = str(previous["output"])
    if where.startswith("s3://"):
        url = parse_s3_url(where)
        return S3Store(s3, url.bucket, url.prefix.rstrip("/"))
    return LocalStore(where) if Path(where, "manifest.json").is_file() else None


def cmd_inventory(args: argparse.Namespace) -> int:
    url = parse_s3_url(args.url)
    # every input is read and checked before anything is listed or written
    hints = read_hints(args.hints, args.workers) if args.hints else None
    if args.previous and args.versions:
        raise InputError(
            "--previous compares the current objects of two runs; it cannot be combined with --versions "
            "(run the comparison without --versions)"
        )
    previous = read_previous(args.previous, url.bucket, url.prefix) if args.previous else None
    timeouts = Timeouts(connect=args.connect_timeout, read=args.read_timeout, attempts=args.max_attempts)
    access = AccessOptions(
        profile=args.profile,
        unsigned=args.no_sign_request,
        role_arn=args.role_arn,
        external_id=args.external_id,
        request_payer=args.request_payer,
    )
    procs = min(args.workers, _processes(args.procs))
    # the worker processes start now: they import and get ready while this one checks the bucket
    with ListerProcesses(procs - 1) as spare:
        return _inventory(args, url, hints, previous, timeouts, access, procs, spare)


def _processes(asked: int | None) -> int:
    """--procs, or the default: one per usable core, and 1 where an in-process mock answers S3 (another
    process would not see it)."""
    if in_process_mock():
        if asked is not None and asked > 1:
            raise InputError(
                f"--procs {asked}: an in-process mock of S3 (moto's mock_aws) answers here, and other "
                "processes would not see it; use --procs 1"
            )
        return 1
    return asked if asked is not None else default_processes()


def _inventory(
    args: argparse.Namespace,
    url: S3Url,
    hints: list[dict[str, Any]] | None,
    previous: dict[str, Any] | None,
    timeouts: Timeouts,
    access: AccessOptions,
    procs: int,
    spare: ListerProcesses,
) -> int:
    from .inventory.probe import check_listable
    from .progress import ProgressDisplay

    probe = make_s3_client(args.endpoint_url, args.region, pool=2, timeouts=timeouts.probe(), access=access)
    check_listable(probe, url.bucket, url.prefix)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    s3 = make_s3_client(
        args.endpoint_url, args.region, pool=args.workers + 32, timeouts=timeouts, access=access
    )
    # The output (and a previous run's) is yours: written with your own credentials, not the target's.
    if access.default:
        out_s3, out_probe = s3, probe
    else:
        out_s3 = make_s3_client(args.endpoint_url, args.region, timeouts=timeouts)
        out_probe = make_s3_client(args.endpoint_url, args.region, pool=2, timeouts=timeouts.probe())
    out = prepare_output(args.out, url.bucket, url.prefix, stamp, out_s3, out_probe)
    opts = InventoryOptions(
        workers=args.workers,
        processes=procs,
        spare_processes=spare,
        listing=ListOptions(stats_depth=args.depth, source=VERSIONS if args.versions else None),
        extra_summary=access_summary(access),
        hints=hints,
        previous_summary=previous,
        previous_store=_previous_store(previous, out_s3),
        destination_arn=out.destination_arn,
        manifest_key_prefix=out.key_prefix,
        hive=out.hive,
    )
    progress = Progress(phase="listing")  # the checks are done: what the display shows first is the listing
    display = ProgressDisplay(progress, mode="off" if args.no_progress else "auto", interval=args.stats)
    with display:
        if is_directory_bucket(s3, url.bucket):
            summary = run_directory_inventory(s3, url.bucket, url.prefix, out.store, opts, progress=progress)
        else:
            summary = run_inventory(s3, url.bucket, url.prefix, out.store, opts, progress=progress)
    summary["timeline"] = display.timeline.rows
    _write_reports(out.store, summary)
    out.hive.put_bytes("athena.sql", hive_ddl(out.hive.uri()).encode())
    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary, out.store.uri("report.html"))
    return 0


def _write_reports(store: OutputStore, summary: dict[str, Any]) -> None:
    """summary.json and report.html again, now with the run's timeline (sampled by the display)."""
    from .inventory.report_html import render_html

    store.put_bytes("summary.json", json.dumps(summary, indent=2).encode())
    store.put_bytes("report.html", render_html(summary).encode())


def _print_summary(summary: dict[str, Any], report: str, top: int = 5) -> None:
    from .inventory.report_html import prefix_tree

    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # the core layer has no rich; the local extras do
        print(render_report(summary))
        print(f"Report: {report}")
        return
    s = summary
    t = Table(title=f"s3://{s['bucket']}/{s['prefix']}", title_justify="left")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_row("objects", f"{s['objects']:,}")
    t.add_row("bytes", f"{s['bytes']:,} ({human_bytes(s['bytes'])})")
    t.add_row("LIST requests", f"{s['list_requests']:,} (${s['list_cost_usd']:.4f})")
    t.add_row("time", f"{s['seconds']:.1f} s ({s['objects_per_second']:,.0f} objects/s)")
    for c, v in s["by_storage_class"].items():
        t.add_row(f"  {c}", f"{v['objects']:,} / {human_bytes(v['bytes'])}")
    base = s["prefix"][: s["prefix"].rfind("/") + 1]
    tops = sorted(
        prefix_tree(s["by_prefix"]["prefixes"], base)["kids"].items(), key=lambda kv: (-kv[1]["bytes"], kv[0])
    )
    for p, v in tops[:top]:
        share = v["bytes"] / s["bytes"] if s["bytes"] else 0.0
        t.add_row(
            f"  {base}{p or '(root)'}", f"{human_bytes(v['bytes'])} ({share:.0%}), {v['objects']:,} objects"
        )
    if len(tops) > top:
        t.add_row(f"  … {len(tops) - top} more prefixes", "in the report")
    if "diff" in s:
        t.add_row("change since previous", f"{s['diff']['objects']:+,} objects, {s['diff']['bytes']:+,} B")
    Console().print(t)
    print(f"Report: {report}")
    print(f"Output: {s['output']}")


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
        return err.exit_code
    except KeyboardInterrupt:
        print("hpcstage: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 - a user never sees a traceback; botocore's own errors first
        from botocore.exceptions import BotoCoreError, ClientError

        from .s3util import translate_botocore_error

        if isinstance(err, BotoCoreError):
            known = translate_botocore_error(err)
            print(f"hpcstage: error: {known}", file=sys.stderr)
            return known.exit_code
        if isinstance(err, ClientError):
            e = err.response.get("Error", {})
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
            print(
                f"hpcstage: error: S3 answered {e.get('Code', '?')} (HTTP {status}) to "
                f"{err.operation_name}: {e.get('Message', '')}".rstrip(": "),
                file=sys.stderr,
            )
            return EXIT_SERVICE
        print(
            f"hpcstage: error: unexpected {type(err).__name__}: {err} "
            "(please report it with the command that led to it)",
            file=sys.stderr,
        )
        return EXIT_OTHER
    return EXIT_PARSE


if __name__ == "__main__":
    sys.exit(main())
