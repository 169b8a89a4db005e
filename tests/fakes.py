"""A minimal in-memory ListObjectsV2 answering like S3 (for fast planner/lister property tests).

Exactness tests run against moto; this fake exists so that hypothesis can run hundreds of
examples quickly. It encodes keys like S3 with EncodingType=url (quote_plus).
"""

from __future__ import annotations

import bisect
from datetime import UTC, datetime
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
