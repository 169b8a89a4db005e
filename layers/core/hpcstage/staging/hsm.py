"""Lustre HSM work on the cluster head node, through SSM Run Command.

File names never appear in a command line. A list of absolute paths is written to S3,
NUL-separated (the one byte no path can hold); the remote script copies it down and hands it to
``xargs -0``, so each name reaches ``lfs`` as one argv entry, byte for byte. The scripts below are
constants: the only variable values (the list's S3 URL, a parallelism, a mount path) are passed as
positional parameters of ``bash -c SCRIPT NAME ARGS...``, each quoted with ``hpcstage.shell``, so no
value is ever spliced into script text. Paths are absolute, so none can be read as an option.

Files go to ``lfs`` in batches (a process per file does not scale to 100k files under SSM's
timeout): request commands in calls of at most ``HSM_REQUEST_MAX_FILES``, state and action queries
in calls of ``HSM_PROBE_BATCH``. Results that name files come back as ``base64(path) TAB text`` lines
or as ``@batch TAB base64(lfs output)`` (stdout is text; names may hold newlines). Counts come back
as ``NAME <int>`` lines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .. import shell
from ..s3util import parse_s3_url
from ..ssm import CommandResult, run_command
from .errors import RemoteCommandError, StagingError

_PRELUDE = r"""set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
export work
mkdir "$work/out"
aws s3 cp --only-show-errors "$1" "$work/list"
# NUL-separated files and directories in; NUL-separated regular files out (symlinks skipped).
expand_files() {
  while IFS= read -r -d '' p; do
    if [ -L "$p" ]; then continue
    elif [ -d "$p" ]; then find "$p" -type f -print0
    elif [ -f "$p" ]; then printf '%s\0' "$p"
    fi
  done
}
# NUL-separated names in; names without a newline to $work/plain, the others to $work/odd. lfs
# prints one line per file, so output lines map to files one to one only for the plain names;
# the odd ones are asked about one at a time.
split_names() {
  while IFS= read -r -d '' f; do
    case $f in
      *$'\n'*) printf '%s\0' "$f" >&4 ;;
      *) printf '%s\0' "$f" >&3 ;;
    esac
  done 3>"$work/plain" 4>"$work/odd"
}
"""

# Lustre sends all the files of one `lfs hsm_restore|hsm_archive|hsm_release` as ONE request, and
# the client refuses a request of MDS_MAXREQSIZE/3 bytes or more with E2BIG (llite/dir.c,
# LL_IOC_HSM_REQUEST): 24 + 32 bytes a file, so at most 52 files. `xargs -n` keeps each call below.
# Those three parse options with getopt_long, so `--` ends the options; `lfs hsm_state` and
# `lfs hsm_action` parse none and would take `--` for a file name (lustre/utils/lfs.c), so they
# get the absolute paths alone.
HSM_REQUEST_MAX_FILES = 50
# Files per `lfs hsm_state` / `lfs hsm_action` call (xargs also keeps each argv within ARG_MAX).
HSM_PROBE_BATCH = 512

# $1 list URL, $2 parallel lfs processes. hsm_restore only queues requests, so this is quick.
RESTORE_SCRIPT = (
    _PRELUDE
    + rf"""xargs -0 -r -n {HSM_REQUEST_MAX_FILES} -P "$2" lfs hsm_restore -- <"$work/list"
"""
)

# $1 list URL (files and directories), $2 parallel lfs processes.
ARCHIVE_SCRIPT = (
    _PRELUDE
    + rf"""expand_files <"$work/list" >"$work/files"
xargs -0 -r -n {HSM_REQUEST_MAX_FILES} -P "$2" lfs hsm_archive -- <"$work/files"
"""
)

# $1 list URL (verified files only), $2 parallel lfs processes.
RELEASE_SCRIPT = (
    _PRELUDE
    + rf"""xargs -0 -r -n {HSM_REQUEST_MAX_FILES} -P "$2" lfs hsm_release -- <"$work/list"
"""
)

# $1 list URL, $2 parallel lfs processes. Each file's `hsm_action` and `hsm_state` lines are
# classified by one awk per batch (no process per file): pending (an action other than NOOP), and
# of the idle ones, released or resident, exported (exists archived, not dirty or lost) or not.
# A batch whose lfs call fails (a file removed meanwhile) is asked again file by file; files that
# still fail are counted as errors. Counts come back as one line per batch, summed at the end.
COUNT_SCRIPT = (
    _PRELUDE
    + r"""classify() {
  awk '
    function hexval(s,   i, v) {
      v = 0
      for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
      return v
    }
    function bit(v, b) { return int(v / b) % 2 }
    NR == FNR { pending[FNR] = ($0 !~ /: NOOP$/); next }
    {
      if (!match($0, /: \(0x[0-9a-f]+\)[a-z_ ]*(, archive_id:[0-9]+)?$/)) { bad++; next }
      m = hexval(substr($0, RSTART + 5, 8)); n++
      if (pending[FNR]) { p++; next }
      if (bit(m, 4)) rel++; else res++
      if (bit(m, 1) && bit(m, 8) && !bit(m, 2) && !bit(m, 64)) ex++; else nex++
    }
    END { printf "%d %d %d %d %d %d %d\n", n, p, res, rel, ex, nex, bad }' "$1" "$2"
}
# One file: its lines with the path cut off, so a newline in the name cannot split them.
probe_one() {
  local a s
  a=$(lfs hsm_action "$1" 2>/dev/null) && s=$(lfs hsm_state "$1" 2>/dev/null) || return 1
  printf 'f%s\n' "${a#"$1"}" >>"$2"
  printf 'f%s\n' "${s#"$1"}" >>"$3"
}
# $1 "batch" (names without newlines: one lfs call for all) or "each"; then the files.
count_batch() {
  local mode=$1 out errors=0 f
  shift
  out=$(mktemp "$work/out/c.XXXXXX")
  if [ "$mode" = each ] || ! { lfs hsm_action "$@" >"$out.a" && lfs hsm_state "$@" >"$out.s"; } 2>/dev/null; then
    : >"$out.a"; : >"$out.s"
    for f in "$@"; do probe_one "$f" "$out.a" "$out.s" || errors=$((errors + 1)); done
  fi
  if [ -s "$out.a" ]; then classify "$out.a" "$out.s" >"$out"; fi
  printf '0 0 0 0 0 0 0 %d\n' "$errors" >>"$out"
  rm -f -- "$out.a" "$out.s"
}
export -f classify probe_one count_batch
expand_files <"$work/list" | split_names
xargs -0 -r -n HSM_PROBE_BATCH -P "$2" bash -c 'count_batch batch "$@"' count_batch <"$work/plain"
xargs -0 -r -n HSM_PROBE_BATCH bash -c 'count_batch each "$@"' count_batch <"$work/odd"
cat "$work"/out/* 2>/dev/null | awk '
  { n += $1; p += $2; res += $3; rel += $4; ex += $5; nex += $6; bad += $7; err += $8 }
  END {
    printf "HSM_FILES %d\nHSM_PENDING %d\nHSM_IDLE_RESIDENT %d\nHSM_IDLE_RELEASED %d\n", n + bad + err, p, res, rel
    printf "HSM_IDLE_EXPORTED %d\nHSM_IDLE_NOT_EXPORTED %d\nHSM_UNREADABLE %d\nHSM_ERRORS %d\n", ex, nex, bad, err
  }'
""".replace("HSM_PROBE_BATCH", str(HSM_PROBE_BATCH))
)

# $1 list URL (files and directories). Per listed entry that is not a regular file or directory
# one line `base64(path) TAB MISSING|SYMLINK`; per batch of files without a newline in their name
# one line `@batch TAB base64(lfs hsm_state output)` (one base64 process a batch, not a file);
# per file with a newline in its name, or in a batch whose lfs call failed, one line
# `base64(path) TAB state` (or `ERROR ...`). Batch outputs go to files of their own, so parallel
# batches cannot interleave.
STATE_SCRIPT = (
    _PRELUDE
    + r"""b64() { printf '%s' "$1" | base64 -w0; }
state_of() {
  local f=$1 s
  if s=$(lfs hsm_state "$f" 2>&1); then s=${s#"$f:"}; else s="ERROR $s"; fi
  s=${s//$'\n'/ }
  printf '%s\t%s\n' "$(b64 "$f")" "${s//$'\t'/ }"
}
# $1 "batch" (names without newlines: one lfs call for all) or "each"; then the files.
state_batch() {
  local mode=$1 out f
  shift
  out=$(mktemp "$work/out/s.XXXXXX")
  if [ "$mode" = batch ] && lfs hsm_state "$@" >"$out.s" 2>/dev/null; then
    printf '@batch\t%s\n' "$(base64 -w0 <"$out.s")" >"$out"
  else
    for f in "$@"; do state_of "$f"; done >"$out"
  fi
  rm -f -- "$out.s"
}
export -f b64 state_of state_batch
while IFS= read -r -d '' p; do
  if [ -L "$p" ]; then printf '%s\tSYMLINK\n' "$(b64 "$p")"
  elif [ -d "$p" ]; then find "$p" -type f -print0 >&3
  elif [ -f "$p" ]; then printf '%s\0' "$p" >&3
  else printf '%s\tMISSING\n' "$(b64 "$p")"
  fi
done <"$work/list" 3>"$work/files"
split_names <"$work/files"
xargs -0 -r -n HSM_PROBE_BATCH -P "$2" bash -c 'state_batch batch "$@"' state_batch <"$work/plain"
xargs -0 -r -n HSM_PROBE_BATCH bash -c 'state_batch each "$@"' state_batch <"$work/odd"
cat "$work"/out/* 2>/dev/null || true
""".replace("HSM_PROBE_BATCH", str(HSM_PROBE_BATCH))
)

# $1 a directory on the file system.
FREE_SCRIPT = r"""set -euo pipefail
printf 'FREE_BYTES %d\n' "$(df --output=avail -B1 -- "$1" | tail -n 1)"
"""

# $1 the mount path, $2 a file expected under it. What the mount table says of the path (a
# Mountpoint for Amazon S3 mount is `fuse mountpoint-s3`: its FUSE fsname is always
# "mountpoint-s3", so the bucket is not in the table), and whether the file is there.
MOUNT_SCRIPT = r"""set -euo pipefail
printf 'MOUNT %s\n' "$(findmnt -rn -o FSTYPE,SOURCE --mountpoint "$1" || true)"
if [ -e "$2" ]; then echo SAMPLE_PRESENT; else echo SAMPLE_ABSENT; fi
"""
MOUNTPOINT_S3_MOUNT = "fuse mountpoint-s3"

# `lfs hsm_state` flag bits (lustre_user.h enum hsm_states) and the words lfs prints for them.
_STATE_BITS = {
    0x01: "exists",
    0x02: "dirty",
    0x04: "released",
    0x08: "archived",
    0x10: "norelease",
    0x20: "noarchive",
    0x40: "lost",
}
_WORD_ALIASES = {"never_release": "norelease", "never_archive": "noarchive", "lost_from_hsm": "lost"}
_STATE_RE = re.compile(r"\(0x(?P<mask>[0-9a-fA-F]+)\)(?P<words>[^,]*)(?:,\s*archive_id:(?P<archive>\d+))?")


@dataclass(frozen=True)
class HsmState:
    flags: frozenset[str]
    archive_id: int | None = None

    @property
    def exported(self) -> bool:
        """The file's current contents are in the repository: archived, and not changed since."""
        return {"exists", "archived"} <= self.flags and not self.flags & {"dirty", "lost"}

    @property
    def released(self) -> bool:
        return "released" in self.flags


def parse_hsm_state(text: str) -> HsmState:
    """Parse what ``lfs hsm_state FILE`` prints after ``FILE:``, e.g. ``(0x0000000d) released exists
    archived, archive_id:1``. The hex mask decides when present; the words are a fallback."""
    match = _STATE_RE.search(text)
    words = text.replace(",", " ").split() if match is None else match.group("words").split()
    flags = {_WORD_ALIASES.get(w, w) for w in words if _WORD_ALIASES.get(w, w) in _STATE_BITS.values()}
    archive_id = None
    if match is not None:
        mask = int(match.group("mask"), 16)
        flags = {name for bit, name in _STATE_BITS.items() if mask & bit}
        archive_id = int(match.group("archive")) if match.group("archive") else None
    elif not flags:
        raise StagingError(f"cannot read lfs hsm_state output {text!r}")
    return HsmState(frozenset(flags), archive_id)


# One line of `lfs hsm_state` output for a file whose name holds no newline: the name, then ": (0x"
# and the mask. The flags part has a fixed form, so the greedy name takes the last such suffix.
_BATCH_LINE_RE = re.compile(rb"(?P<path>.*): (?P<state>\(0x[0-9a-f]+\)[a-z_ ]*(?:, archive_id:\d+)?)")


def parse_state_report(stdout: str) -> dict[str, HsmState | str]:
    """``STATE_SCRIPT`` output → {absolute path: HsmState, or MISSING / SYMLINK / ERROR ... text}."""
    states: dict[str, HsmState | str] = {}
    for line in stdout.splitlines():
        if not line:
            continue
        encoded, sep, text = line.partition("\t")
        if not sep:
            raise StagingError(f"unexpected line in an hsm_state report: {line[:200]!r}")
        if encoded == "@batch":
            states.update(_parse_state_batch(_b64(text.strip())))
            continue
        path = _b64(encoded).decode("utf-8", "surrogateescape")
        text = text.strip()
        if text in ("MISSING", "SYMLINK") or text.startswith("ERROR"):
            states[path] = text
        else:
            states[path] = parse_hsm_state(text)
    return states


def _b64(field: str) -> bytes:
    try:
        return base64.b64decode(field, validate=True)
    except (binascii.Error, ValueError) as err:
        raise StagingError(f"unexpected base64 field in an hsm_state report: {field[:200]!r}") from err


def _parse_state_batch(raw: bytes) -> dict[str, HsmState]:
    """The stdout of one ``lfs hsm_state FILE...`` over names without newlines: a line a file."""
    states: dict[str, HsmState] = {}
    for line in raw.split(b"\n"):
        if not line:
            continue
        m = _BATCH_LINE_RE.fullmatch(line)
        if m is None:
            raise StagingError(f"cannot read lfs hsm_state output line {line[:200]!r}")
        path = m.group("path").decode("utf-8", "surrogateescape")
        states[path] = parse_hsm_state(m.group("state").decode("ascii"))
    return states


@dataclass(frozen=True)
class HsmCounts:
    """What ``COUNT_SCRIPT`` found under a list of paths (see its comment). ``files`` counts every
    regular file found, including the ``unreadable`` and ``errors`` ones lfs could not report."""

    files: int
    pending: int
    idle_resident: int
    idle_released: int
    idle_exported: int
    idle_not_exported: int
    unreadable: int
    errors: int

    @property
    def restored(self) -> int:
        """Files whose restore is over and whose data is on the file system."""
        return self.idle_resident

    @property
    def archived(self) -> int:
        """Files with no action pending whose current contents are in the repository."""
        return self.idle_exported


_COUNT_FIELDS = {
    "HSM_FILES": "files",
    "HSM_PENDING": "pending",
    "HSM_IDLE_RESIDENT": "idle_resident",
    "HSM_IDLE_RELEASED": "idle_released",
    "HSM_IDLE_EXPORTED": "idle_exported",
    "HSM_IDLE_NOT_EXPORTED": "idle_not_exported",
    "HSM_UNREADABLE": "unreadable",
    "HSM_ERRORS": "errors",
}


def parse_counts(stdout: str) -> dict[str, int]:
    """``NAME <int>`` lines → {NAME: int}; the last line for a name wins."""
    counts: dict[str, int] = {}
    for line in stdout.splitlines():
        m = re.fullmatch(r"([A-Z_]+) (\d+)", line.strip())
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def parse_hsm_counts(stdout: str) -> HsmCounts:
    counts = parse_counts(stdout)
    missing = [name for name in _COUNT_FIELDS if name not in counts]
    if missing:
        raise StagingError(f"the HSM count printed no {', '.join(missing)}")
    return HsmCounts(**{field: counts[name] for name, field in _COUNT_FIELDS.items()})


def bash_command(name: str, script: str, *args: str) -> str:
    """``bash -c SCRIPT NAME ARGS...`` as one quoted line: inside SCRIPT the args are $1, $2, ..."""
    return shell.command(["bash", "-c", script, name, *args])


def encode_path_list(paths: Iterable[str]) -> bytes:
    """NUL-terminated entries, as ``xargs -0`` and ``read -d ''`` expect."""
    out = bytearray()
    for p in paths:
        if "\0" in p:
            raise StagingError(f"path {p!r} contains a NUL byte")
        out += p.encode("utf-8", "surrogateescape") + b"\0"
    return bytes(out)


class HeadNode:
    """Runs the scripts above on one instance; file lists and long output go through ``work_url``."""

    def __init__(
        self,
        ssm: Any,
        s3: Any,
        instance_id: str,
        work_url: str,
        run_id: str,
        *,
        parallel: int = 16,
        timeout_s: int = 600,
        max_wait_s: float = 600.0,
        poll_interval_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(parallel, int) or isinstance(parallel, bool) or not 1 <= parallel <= 256:
            raise ValueError(f"parallel must be 1..256, not {parallel!r}")
        self.ssm = ssm
        self.s3 = s3
        self.instance_id = instance_id
        work = parse_s3_url(work_url)
        self.bucket = work.bucket
        base = work.prefix.strip("/")
        self.prefix = f"{base}/{run_id}" if base else run_id
        self.parallel = parallel
        self.timeout_s = timeout_s
        self.max_wait_s = max_wait_s
        self.poll_interval_s = poll_interval_s
        self.sleep = sleep

    def put_paths(self, purpose: str, paths: Iterable[str]) -> tuple[str, int]:
        """Upload a NUL-separated path list; returns (s3 URL, entries). Named by its content, so
        writing the same list twice (a retried Lambda) yields the same object."""
        digest = hashlib.sha256()
        count = 0
        fd, tmp = tempfile.mkstemp(suffix=".nul")
        try:
            with os.fdopen(fd, "wb") as f:
                for p in paths:
                    chunk = encode_path_list([p])
                    digest.update(chunk)
                    f.write(chunk)
                    count += 1
            name = f"lists/{purpose}-{digest.hexdigest()[:20]}.nul"
            self.s3.upload_file(tmp, self.bucket, f"{self.prefix}/{name}")
        finally:
            os.unlink(tmp)
        return self.url(name), count

    def url(self, name: str) -> str:
        """Where ``name`` lives in this run's part of the work bucket."""
        return f"s3://{self.bucket}/{self.prefix}/{name}"

    def put_json(self, name: str, body: bytes) -> str:
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{name}", Body=body)
        return self.url(name)

    def get_bytes(self, url: str) -> bytes:
        loc = parse_s3_url(url)
        body: bytes = self.s3.get_object(Bucket=loc.bucket, Key=loc.prefix)["Body"].read()
        return body

    def run(self, name: str, script: str, *args: str) -> CommandResult:
        """Run a script to completion; a non-zero exit raises RemoteCommandError with its stderr."""
        result = run_command(
            self.ssm,
            self.instance_id,
            [bash_command(name, script, *args)],
            timeout_s=self.timeout_s,
            max_wait_s=self.max_wait_s,
            poll_interval_s=self.poll_interval_s,
            output_s3_bucket=self.bucket,
            output_s3_prefix=f"{self.prefix}/ssm-output",
            s3=self.s3,
            sleep=self.sleep,
        )
        if not result.succeeded:
            tail = result.stderr.strip()[-500:]
            raise RemoteCommandError(
                f"{name} on {self.instance_id} (SSM command {result.command_id}) ended {result.status} "
                f"with exit code {result.exit_code}" + (f": {tail}" if tail else "")
            )
        return result

    # -- the operations --------------------------------------------------------------------

    def restore(self, list_url: str) -> None:
        self.run("hsm-restore", RESTORE_SCRIPT, list_url, str(self.parallel))

    def archive(self, list_url: str) -> None:
        self.run("hsm-archive", ARCHIVE_SCRIPT, list_url, str(self.parallel))

    def release(self, list_url: str) -> None:
        self.run("hsm-release", RELEASE_SCRIPT, list_url, str(self.parallel))

    def counts(self, list_url: str) -> HsmCounts:
        """HSM actions and states of the files under the listed paths (``COUNT_SCRIPT``)."""
        result = self.run("hsm-count", COUNT_SCRIPT, list_url, str(self.parallel))
        try:
            return parse_hsm_counts(result.stdout)
        except StagingError as err:
            raise RemoteCommandError(f"hsm-count on {self.instance_id}: {err}") from None

    def states(self, list_url: str) -> dict[str, HsmState | str]:
        return parse_state_report(self.run("hsm-state", STATE_SCRIPT, list_url, str(self.parallel)).stdout)

    def free_bytes(self, path: str) -> int:
        counts = parse_counts(self.run("free-bytes", FREE_SCRIPT, path).stdout)
        if "FREE_BYTES" not in counts:
            raise RemoteCommandError(f"free-bytes on {self.instance_id} printed no FREE_BYTES line")
        return counts["FREE_BYTES"]

    def mount_info(self, path: str, sample: str) -> tuple[str, bool]:
        """(``FSTYPE SOURCE`` of the mount at ``path``, or "" if none; whether ``sample`` exists)."""
        lines = self.run("mount-check", MOUNT_SCRIPT, path, sample).stdout.splitlines()
        mount = next((ln[len("MOUNT ") :].strip() for ln in lines if ln.startswith("MOUNT ")), "")
        return mount, "SAMPLE_PRESENT" in lines
