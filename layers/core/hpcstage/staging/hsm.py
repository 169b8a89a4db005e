"""Lustre HSM work on the cluster head node, through SSM Run Command.

File names never appear in a command line. A list of absolute paths is written to S3,
NUL-separated (the one byte no path can hold); the remote script copies it down and hands it to
``xargs -0``, so each name reaches ``lfs`` as one argv entry, byte for byte. The scripts below are
constants: the only variable values (the list's S3 URL, a parallelism, a mount path) are passed as
positional parameters of ``bash -c SCRIPT NAME ARGS...``, each quoted with ``hpcstage.shell``, so no
value is ever spliced into script text. Paths are absolute, so none can be read as an option.

Results that name files come back as ``base64(path) TAB text`` lines (stdout is text; names may hold
newlines). Counts come back as ``NAME <int>`` lines.
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
"""

# In every script, `xargs -n 256` bounds the files per lfs call, well inside ARG_MAX even for
# 4,096-byte paths.

# $1 list URL, $2 parallel lfs processes. hsm_restore only queues requests, so this is quick.
RESTORE_SCRIPT = (
    _PRELUDE
    + r"""xargs -0 -r -n 256 -P "$2" lfs hsm_restore -- <"$work/list"
"""
)

# $1 list URL (files and directories), $2 parallel lfs processes.
ARCHIVE_SCRIPT = (
    _PRELUDE
    + r"""expand_files <"$work/list" >"$work/files"
xargs -0 -r -n 256 -P "$2" lfs hsm_archive -- <"$work/files"
"""
)

# $1 list URL (verified files only), $2 parallel lfs processes.
RELEASE_SCRIPT = (
    _PRELUDE
    + r"""xargs -0 -r -n 256 -P "$2" lfs hsm_release -- <"$work/list"
"""
)

# $1 list URL, $2 parallel lfs processes. A file is done when `lfs hsm_action` shows NOOP (no
# restore or archive pending). Each lfs process is counted by its own awk, so the parallel outputs
# are single short lines that cannot interleave.
ACTION_COUNT_SCRIPT = (
    _PRELUDE
    + r"""expand_files <"$work/list" >"$work/files"
count_noop() {
  set -o pipefail
  lfs hsm_action -- "$@" | awk '$NF == "NOOP" {n++} END {print n+0}'
}
export -f count_noop
total=$(tr -cd '\000' <"$work/files" | wc -c)
noop=$(xargs -0 -r -n 256 -P "$2" bash -c 'count_noop "$@"' count_noop <"$work/files" | awk '{s += $1} END {print s+0}')
printf 'HSM_TOTAL %d\nHSM_NOOP %d\n' "$total" "$noop"
"""
)

# $1 list URL (files and directories). One line per file: base64(path) TAB state.
STATE_SCRIPT = (
    _PRELUDE
    + r"""b64() { printf '%s' "$1" | base64 -w0; }
state_of() {
  local f=$1 s
  if s=$(lfs hsm_state -- "$f" 2>&1); then s=${s#"$f:"}; else s="ERROR $s"; fi
  s=${s//$'\n'/ }
  printf '%s\t%s\n' "$(b64 "$f")" "${s//$'\t'/ }"
}
while IFS= read -r -d '' p; do
  if [ -L "$p" ]; then printf '%s\tSYMLINK\n' "$(b64 "$p")"
  elif [ -d "$p" ]; then
    while IFS= read -r -d '' f; do state_of "$f"; done < <(find "$p" -type f -print0)
  elif [ -f "$p" ]; then state_of "$p"
  else printf '%s\tMISSING\n' "$(b64 "$p")"
  fi
done <"$work/list"
"""
)

# $1 a directory on the file system.
FREE_SCRIPT = r"""set -euo pipefail
printf 'FREE_BYTES %d\n' "$(df --output=avail -B1 -- "$1" | tail -n 1)"
"""

# $1 the mount path.
MOUNT_SCRIPT = r"""set -euo pipefail
if mountpoint -q -- "$1"; then echo MOUNTED; else echo NOT_MOUNTED; fi
"""

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


def parse_state_report(stdout: str) -> dict[str, HsmState | str]:
    """``STATE_SCRIPT`` output → {absolute path: HsmState, or MISSING / SYMLINK / ERROR ... text}."""
    states: dict[str, HsmState | str] = {}
    for line in stdout.splitlines():
        if not line:
            continue
        encoded, sep, text = line.partition("\t")
        if not sep:
            raise StagingError(f"unexpected line in an hsm_state report: {line[:200]!r}")
        try:
            path = base64.b64decode(encoded, validate=True).decode("utf-8", "surrogateescape")
        except (binascii.Error, ValueError) as err:
            raise StagingError(f"unexpected path field in an hsm_state report: {encoded[:200]!r}") from err
        text = text.strip()
        if text in ("MISSING", "SYMLINK") or text.startswith("ERROR"):
            states[path] = text
        else:
            states[path] = parse_hsm_state(text)
    return states


def parse_counts(stdout: str) -> dict[str, int]:
    """``NAME <int>`` lines → {NAME: int}; the last line for a name wins."""
    counts: dict[str, int] = {}
    for line in stdout.splitlines():
        m = re.fullmatch(r"([A-Z_]+) (\d+)", line.strip())
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


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

    def count_done(self, list_url: str) -> tuple[int, int]:
        """(files with no HSM action pending, files) under the listed paths."""
        counts = parse_counts(
            self.run("hsm-action-count", ACTION_COUNT_SCRIPT, list_url, str(self.parallel)).stdout
        )
        if "HSM_TOTAL" not in counts or "HSM_NOOP" not in counts:
            raise RemoteCommandError(f"hsm-action-count on {self.instance_id} printed no counts")
        # A file name holding a newline and " NOOP" could add a line; never report more than exist.
        return min(counts["HSM_NOOP"], counts["HSM_TOTAL"]), counts["HSM_TOTAL"]

    def states(self, list_url: str) -> dict[str, HsmState | str]:
        return parse_state_report(self.run("hsm-state", STATE_SCRIPT, list_url).stdout)

    def free_bytes(self, path: str) -> int:
        counts = parse_counts(self.run("free-bytes", FREE_SCRIPT, path).stdout)
        if "FREE_BYTES" not in counts:
            raise RemoteCommandError(f"free-bytes on {self.instance_id} printed no FREE_BYTES line")
        return counts["FREE_BYTES"]

    def is_mounted(self, path: str) -> bool:
        out = self.run("mount-check", MOUNT_SCRIPT, path).stdout.split()
        return out[-1:] == ["MOUNTED"]
