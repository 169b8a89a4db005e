"""Fakes shared by the test tiers.

- ``FakeS3``: a minimal in-memory ListObjectsV2 answering like S3 (for fast planner/lister property
  tests). Exactness tests run against moto; this fake exists so that hypothesis can run hundreds of
  examples quickly. It encodes keys like S3 with EncodingType=url (quote_plus).
- ``answer_explores``: a work-stealing cursor's directory requests, answered by a ``FakeS3``;
  ``cursor_after_pages``: a cursor that has listed the first pages of its keys and asked its levels;
  ``list_ranges``: the keys a ``FakeS3`` gives fresh cursors over some ranges, listed to their ends.
- ``LFS_FAKE``: a stand-in ``lfs`` program with the real one's argument handling and request limit,
  so the head-node HSM scripts can run here for real.
"""

from __future__ import annotations

import bisect
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus


class FakeS3:
    def __init__(self, keys: list[str], sizes: dict[str, int] | None = None) -> None:
        self.keys = sorted(set(keys))
        self.sizes = sizes or {}
        self.calls = 0
        self.fail_next: list[Exception] = []

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        self.calls += 1
        if self.fail_next:
            raise self.fail_next.pop(0)
        prefix = p.get("Prefix", "")
        max_keys = p.get("MaxKeys", 1000)
        if "ContinuationToken" in p:
            start = bisect.bisect_right(self.keys, p["ContinuationToken"])
        else:
            start = bisect.bisect_right(self.keys, p["StartAfter"]) if "StartAfter" in p else 0
        start = max(start, bisect.bisect_left(self.keys, prefix))
        out: list[str] = []
        prefixes: list[str] = []
        delim = p.get("Delimiter")
        i = start
        while i < len(self.keys) and len(out) + len(prefixes) < max_keys and self.keys[i].startswith(prefix):
            key = self.keys[i]
            cut = key.find(delim, len(prefix)) if delim else -1
            if cut >= 0:  # rolled up into a common prefix; skip the rest of it
                cp = key[: cut + len(delim)]
                prefixes.append(cp)
                i = bisect.bisect_left(self.keys, cp + "\U0010ffff")
                continue
            out.append(key)
            i += 1
        truncated = i < len(self.keys) and self.keys[i].startswith(prefix)
        enc = p.get("EncodingType") == "url"
        resp: dict[str, Any] = {
            "IsTruncated": truncated,
            "KeyCount": len(out),
            "Contents": [
                {
                    "Key": quote_plus(k, safe="/") if enc else k,
                    "Size": self.sizes.get(k, len(k)),
                    "LastModified": datetime(2024, 1, 1, tzinfo=UTC),
                    "ETag": '"d41d8cd98f00b204e9800998ecf8427e"',
                    "StorageClass": "STANDARD",
                }
                for k in out
            ],
            "ResponseMetadata": {"RetryAttempts": 0},
        }
        if enc:
            resp["EncodingType"] = "url"
        if not out:
            del resp["Contents"]
        if prefixes:
            resp["CommonPrefixes"] = [{"Prefix": cp} for cp in prefixes]
        if truncated:
            resp["NextContinuationToken"] = max(out[-1:] + prefixes[-1:])
        return resp


# -- a stand-in `lfs` that answers like the real one ---------------------------------------------

# The argument handling and limits of lustre/utils/lfs.c (2.12 and 2.15, the clients FSx for
# Lustre and File Cache run) and lustre/llite/dir.c:
# - `hsm_state` and `hsm_action` parse no options: every argument is a path, so `--` is a file
#   that does not exist; the first path that fails ends the command ("can't get hsm ... for").
# - `hsm_archive|restore|release` parse options with getopt_long (`--` ends them), refuse a path
#   that is not a regular file, and send ALL their files as one request, which the client refuses
#   with E2BIG once it reaches MDS_MAXREQSIZE/3 bytes: 24 + 32 bytes a file, so at most 52 files.
# Each file's HSM mask and pending action live in $LFS_STATE_DIR (a file per path). Environment:
#   LFS_LOG_DIR        every call's argv is written there, NUL-separated, a file per call
#   LFS_DEFAULT_MASK   the mask of a file never touched (default 0: no HSM flags)
#   LFS_ACTION_POLLS   how many `hsm_action` calls see a request pending before it ends (default 0)
#   LFS_FAIL           restore and/or archive (comma-separated): those requests end without effect
#   LFS_UNREADABLE     hsm_state/hsm_action fail (ENODATA) on a path that contains this text
LFS_FAKE = r"""
import errno, getopt, hashlib, os, stat, sys, tempfile

HS_EXISTS, HS_DIRTY, HS_RELEASED, HS_ARCHIVED = 0x1, 0x2, 0x4, 0x8
HS_NORELEASE, HS_NOARCHIVE, HS_LOST = 0x10, 0x20, 0x40
MDS_MAXREQSIZE = 5 * 1024
HSM_REQUEST_HEADER, HSM_USER_ITEM = 24, 32
STATE_DIR = os.environ["LFS_STATE_DIR"]


def log_call(argv):
    fd, _ = tempfile.mkstemp(prefix="call.", dir=os.environ["LFS_LOG_DIR"])
    with os.fdopen(fd, "wb") as f:
        f.write(b"".join(os.fsencode(a) + b"\0" for a in argv))


def state_file(path):
    return os.path.join(STATE_DIR, hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest())


def load(path):
    try:
        with open(state_file(path)) as f:
            mask, action, polls = f.read().split()
            return int(mask, 16), action, int(polls)
    except FileNotFoundError:
        return int(os.environ.get("LFS_DEFAULT_MASK", "0"), 16), "NOOP", 0


def save(path, mask, action, polls):
    tmp = state_file(path) + ".tmp%d" % os.getpid()
    with open(tmp, "w") as f:
        f.write("%x %s %d" % (mask, action, polls))
    os.replace(tmp, state_file(path))


def finish(path, mask, action):
    if action in os.environ.get("LFS_FAIL", "").split(","):
        return mask
    if action == "restore":
        return mask & ~HS_RELEASED
    if action == "archive":
        return (mask | HS_EXISTS | HS_ARCHIVED) & ~(HS_DIRTY | HS_LOST)
    return mask


def words(mask):
    names = [(HS_RELEASED, "released"), (HS_EXISTS, "exists"), (HS_DIRTY, "dirty"),
             (HS_ARCHIVED, "archived"), (HS_NORELEASE, "never_release"),
             (HS_NOARCHIVE, "never_archive"), (HS_LOST, "lost_from_hsm")]
    return "".join(" " + name for bit, name in names if mask & bit)


def probe(cmd, paths):
    if not paths:
        sys.stderr.write("usage: lfs %s FILE ...\n" % cmd)
        return 1
    for path in paths:
        what = "state" if cmd == "hsm_state" else "action"
        if not os.path.lexists(path):
            sys.stderr.write("can't get hsm %s for %s: %s\n" % (what, path, os.strerror(errno.ENOENT)))
            return errno.ENOENT
        if os.environ.get("LFS_UNREADABLE") and os.environ["LFS_UNREADABLE"] in path:
            sys.stderr.write("can't get hsm %s for %s: %s\n" % (what, path, os.strerror(errno.ENODATA)))
            return errno.ENODATA
        mask, action, polls = load(path)
        if cmd == "hsm_state":
            sys.stdout.write("%s: (0x%08x)%s, archive_id:1\n" % (path, mask, words(mask)))
            continue
        if action != "NOOP" and polls > 0:
            save(path, mask, action, polls - 1)
            sys.stdout.write("%s: %s STARTED (from 0 to EOF)\n" % (path, action.upper()))
            continue
        if action != "NOOP":
            mask = finish(path, mask, action)
            save(path, mask, "NOOP", 0)
        sys.stdout.write("%s: NOOP\n" % path)
    return 0


def request(cmd, argv):
    try:
        opts, files = getopt.gnu_getopt(argv, "a:D:hl:m:", ["archive=", "data=", "help", "filelist=", "mntpath="])
    except getopt.GetoptError as err:
        sys.stderr.write("lfs: %s\n" % err)
        return 1
    if not files:
        sys.stderr.write("usage: lfs %s [--] FILE ...\n" % cmd)
        return 1
    for path in files:
        try:
            st = os.lstat(path)
        except OSError as err:
            sys.stderr.write("Cannot stat %s: %s\n" % (path, err.strerror))
            return err.errno
        if not stat.S_ISREG(st.st_mode):
            sys.stderr.write('error: "%s" is not a regular file\n' % path)
            return 1
    if HSM_REQUEST_HEADER + HSM_USER_ITEM * len(files) >= MDS_MAXREQSIZE // 3:
        sys.stderr.write("Cannot send HSM request (use of %s): %s\n" % (files[0], os.strerror(errno.E2BIG)))
        return errno.E2BIG
    action = cmd[len("hsm_"):]
    if action == "release":
        for path in files:
            mask = load(path)[0]
            if not (mask & HS_EXISTS and mask & HS_ARCHIVED) or mask & (HS_DIRTY | HS_LOST):
                sys.stderr.write("Cannot send HSM request (use of %s): %s\n" % (path, os.strerror(errno.EPERM)))
                return errno.EPERM
        for path in files:
            mask, _, _ = load(path)
            save(path, mask | HS_RELEASED, "NOOP", 0)
        return 0
    polls = int(os.environ.get("LFS_ACTION_POLLS", "0"))
    for path in files:
        mask, _, _ = load(path)
        if action == "restore" and not mask & HS_RELEASED:
            continue
        if polls:
            save(path, mask, action, polls)
        else:
            save(path, finish(path, mask, action), "NOOP", 0)
    return 0


def main():
    log_call(sys.argv[1:])
    if len(sys.argv) < 2:
        return 1
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd in ("hsm_state", "hsm_action"):
        return probe(cmd, rest)
    if cmd in ("hsm_archive", "hsm_restore", "hsm_release"):
        return request(cmd, rest)
    sys.stderr.write("lfs: unknown command %s\n" % cmd)
    return 1


sys.exit(main())
"""


def install_fake_lfs(bin_dir: Path) -> None:
    """Write the stand-in ``lfs`` (run by this interpreter) into ``bin_dir``."""
    import stat as _stat
    import sys

    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "lfs"
    path.write_text(f"#!{sys.executable}\n{LFS_FAKE}")
    path.chmod(path.stat().st_mode | _stat.S_IXUSR | _stat.S_IXGRP | _stat.S_IXOTH)


def answer_explores(cur: Any, s3: FakeS3, ways: int, policy: Any) -> list[dict[str, Any]]:
    """Send a ``steal.Cursor``'s directory requests (``explore``) to ``s3`` and hand it the answers, as
    lister.list_range does, until it asks no more (at most five); returns the requests."""
    sent = []
    for _ in range(5):
        q = cur.explore(ways, policy)
        if q is None:
            break
        sent.append(q)
        resp = s3.list_objects_v2(Bucket="bkt", **q)
        cur.take_dirs(q, [p["Prefix"] for p in resp.get("CommonPrefixes", [])], resp["IsTruncated"])
    return sent


def cursor_after_pages(
    s3: FakeS3, keys: list[str], end: str | None, pages: int, page_keys: int, ways: int, policy: Any
) -> Any:
    """A ``steal.Cursor`` over ``(None, end]`` that has taken the first ``pages`` pages of ``keys`` (sorted,
    ``page_keys`` each, truncated) and had its directory requests for a ``ways``-way split answered by ``s3``
    (``answer_explores``)."""
    from hpcstage.inventory.model import KeyRange
    from hpcstage.inventory.steal import Cursor

    cur = Cursor(KeyRange(id="r", start_after=None, end=end))
    for p in range(pages):
        cur.take(keys[p * page_keys : (p + 1) * page_keys], True, f"token-{p}")
    answer_explores(cur, s3, ways, policy)
    return cur


def list_ranges(s3: FakeS3, ranges: Any, page_keys: int) -> list[str]:
    """The keys of ``ranges`` (``KeyRange``s), each listed to its end by a fresh ``steal.Cursor`` through ``s3``
    in pages of ``page_keys``, in the order given."""
    from hpcstage.inventory.steal import Cursor

    listed: list[str] = []
    for rng in ranges:
        piece = Cursor(rng)
        while not piece.done:
            resp = s3.list_objects_v2(Bucket="bkt", **piece.request(page_keys))
            got = [o["Key"] for o in resp.get("Contents", [])]
            listed += got[: piece.take(got, resp["IsTruncated"], resp.get("NextContinuationToken"))]
    return listed


class CountStats:
    """The statistics a listing stream needs (``add_page``, ``merge``): objects and bytes only."""

    def __init__(self) -> None:
        self.objects = 0
        self.bytes = 0

    def add_page(self, objects: Any) -> None:
        self.objects += len(objects)
        self.bytes += sum(o["Size"] for o in objects)

    def merge(self, other: CountStats) -> None:
        self.objects += other.objects
        self.bytes += other.bytes


class Written:
    """A listing stream's writer (``add_page``, ``close``, ``abort``) that keeps the keys written."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.pages = 0

    def add_page(self, objects: Any) -> None:
        self.keys += [o["Key"] for o in objects]
        self.pages += 1

    def close(self) -> list[Any]:
        return []

    def abort(self) -> None:
        self.keys = []


class FakeDirectoryBucket:
    """An S3 Express One Zone directory bucket's ListObjectsV2, as API_ListObjectsV2 documents it:

    - "ListObjectsV2 does not return objects in lexicographical order": each page's Contents and
      CommonPrefixes come in a shuffled order, and a directory's pages split it at arbitrary points;
    - "StartAfter ... is not supported for directory buckets": a request with it fails (InvalidArgument);
    - "/" is the only delimiter, and a Prefix must end in it;
    - the listing "includes the prefixes that are related only to in-progress multipart uploads":
      ``uploads`` are keys being uploaded; their directories appear in CommonPrefixes, never in Contents;
    - ``denied`` prefixes answer AccessDenied (a session policy that does not allow them).
    Continuation tokens are opaque (a random id mapped to the rest of the directory).
    """

    def __init__(
        self,
        keys: dict[str, int],
        *,
        uploads: list[str] = (),  # type: ignore[assignment]
        denied: tuple[str, ...] = (),
        page_size: int = 1000,
        seed: int = 0,
    ) -> None:
        import random

        self.keys = dict(keys)
        self.uploads = list(uploads)
        self.denied = denied
        self.page_size = page_size
        self.rng = random.Random(seed)
        self.tokens: dict[str, list[tuple[str, str]]] = {}
        self.calls: list[dict[str, Any]] = []

    def _error(self, code: str, message: str) -> Exception:
        from botocore.exceptions import ClientError

        return ClientError({"Error": {"Code": code, "Message": message}}, "ListObjectsV2")

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        self.calls.append(p)
        if "StartAfter" in p:
            raise self._error("InvalidArgument", "StartAfter is not supported for directory buckets")
        if p.get("Delimiter") != "/":
            raise self._error("InvalidArgument", "only / is supported as a delimiter")
        prefix = p.get("Prefix", "")
        if prefix and not prefix.endswith("/"):
            raise self._error("InvalidArgument", "a prefix must end in the delimiter")
        if any(prefix.startswith(d) for d in self.denied):
            raise self._error("AccessDenied", "Access Denied")
        if "ContinuationToken" in p:
            entries = self.tokens.pop(p["ContinuationToken"])
        else:
            entries = []
            dirs: set[str] = set()
            for key in [*self.keys, *self.uploads]:
                if not key.startswith(prefix):
                    continue
                rest = key[len(prefix) :]
                if "/" in rest:
                    dirs.add(prefix + rest[: rest.index("/") + 1])
                elif key in self.keys:
                    entries.append(("key", key))
            entries += [("dir", d) for d in dirs]
            self.rng.shuffle(entries)
        page, rest_entries = entries[: self.page_size], entries[self.page_size :]
        self.rng.shuffle(page)
        enc = p.get("EncodingType") == "url"
        resp: dict[str, Any] = {
            "IsTruncated": bool(rest_entries),
            "Contents": [
                {
                    "Key": quote_plus(k, safe="/") if enc else k,
                    "Size": self.keys[k],
                    "LastModified": datetime(2024, 1, 1, tzinfo=UTC),
                    "ETag": '"d41d8cd98f00b204e9800998ecf8427e"',
                    "StorageClass": "EXPRESS_ONEZONE",
                }
                for kind, k in page
                if kind == "key"
            ],
            "CommonPrefixes": [
                {"Prefix": quote_plus(d, safe="/") if enc else d} for kind, d in page if kind == "dir"
            ],
            "ResponseMetadata": {"RetryAttempts": 0},
        }
        if enc:
            resp["EncodingType"] = "url"
        if rest_entries:
            token = f"tok-{self.rng.getrandbits(64):016x}"
            self.tokens[token] = rest_entries
            resp["NextContinuationToken"] = token
        return resp

    def head_bucket(self, **p: Any) -> dict[str, Any]:
        return {"BucketLocationType": "AvailabilityZone", "BucketLocationName": "usw2-az1"}
