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
