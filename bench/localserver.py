"""A local S3-compatible endpoint serving a keyspace model: ListObjectsV2 (and V1) XML, HeadBucket.

No per-object memory: every page is generated from the model (rank arithmetic), so millions of
objects cost nothing to "create". A per-page latency (default 50 ms) stands in for S3's.

Answers follow S3 (and moto, which the tests compare against): Prefix, StartAfter, ContinuationToken,
MaxKeys (max 1,000), Delimiter/CommonPrefixes, EncodingType=url (keys percent-encoded with
urllib.parse.quote, as moto does), IsTruncated, NextContinuationToken, KeyCount. Continuation tokens
are opaque strings that carry the next rank. Requests are not authenticated.

    python -m bench.localserver --shape unicode --objects 2000000 --port 9000 --latency 0.05
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.sax.saxutils import escape

from bench import keyspace as K

NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def _lm(ks: K.Keyspace, r: int) -> str:
    return ks.last_modified(r).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class KeyspaceBucket:
    """One bucket backed by a keyspace model."""

    def __init__(self, name: str, ks: K.Keyspace) -> None:
        self.name = name
        self.ks = ks
        self._frags: dict[bool, list[str]] = {}

    def precompute(self) -> None:
        """Render every object's <Contents> once, both encodings, so that a page costs a join instead of
        1,000 model lookups: the endpoint's CPU then stays out of the timings of the tools it serves
        (before, rendering took ~50 ms of CPU a page on the same cores as the listers)."""
        ranks = list(range(self.ks.n))
        self._frags = {url: self._render(ranks, url) for url in (False, True)}

    def _token(self, rank: int, prefix: str) -> str:
        return f"{rank}-{zlib.crc32(prefix.encode()):08x}"

    def _rank_of_token(self, token: str, prefix: str) -> int | None:
        rank, _, check = token.partition("-")
        if not rank.isdigit() or check != f"{zlib.crc32(prefix.encode()):08x}":
            return None
        return int(rank)

    def walk(
        self, prefix: str, r0: int, max_keys: int, delimiter: str
    ) -> tuple[list[int], list[str], int, bool]:
        """From rank r0: (object ranks, common prefixes, next rank, truncated) within ``prefix``."""
        ks = self.ks
        _, b = ks.prefix_range(prefix)
        ranks: list[int] = []
        prefixes: list[str] = []
        r = r0
        while r < b and len(ranks) + len(prefixes) < max_keys:
            if delimiter:
                key = ks.key(r)
                i = key.find(delimiter, len(prefix))
                if i >= 0:
                    cp = key[: i + len(delimiter)]
                    prefixes.append(cp)
                    succ = K.succ_prefix(cp)
                    r = b if succ is None else max(r + 1, ks.count_lt(succ))
                    continue
            ranks.append(r)
            r += 1
        return ranks, prefixes, r, r < b

    def start_rank(self, prefix: str, after: str | None) -> int:
        a, _ = self.ks.prefix_range(prefix)
        if after:
            return max(a, self.ks.count_le(after))
        return a

    def contents_xml(self, ranks: list[int], url: bool) -> list[str]:
        frags = self._frags.get(url)
        if frags is not None:
            return [frags[r] for r in ranks]
        return self._render(ranks, url)

    def _render(self, ranks: list[int], url: bool) -> list[str]:
        ks = self.ks
        out = []
        for r in ranks:
            key = ks.key(r)
            k = quote(key) if url else escape(key)
            out.append(
                f"<Contents><Key>{k}</Key><LastModified>{_lm(ks, r)}</LastModified>"
                f"<ETag>{escape(ks.etag(r), {chr(34): '&quot;'})}</ETag><Size>{ks.size(r)}</Size>"
                f"<StorageClass>{ks.storage_class(r)}</StorageClass></Contents>"
            )
        return out


def _prefixes_xml(prefixes: list[str], url: bool) -> list[str]:
    return [
        f"<CommonPrefixes><Prefix>{quote(p) if url else escape(p)}</Prefix></CommonPrefixes>"
        for p in prefixes
    ]


def list_v2_xml(bucket: KeyspaceBucket, q: dict[str, str]) -> tuple[int, str]:
    prefix = q.get("prefix", "")
    delimiter = q.get("delimiter", "")
    url = q.get("encoding-type") == "url"
    try:
        max_keys = min(1000, max(0, int(q.get("max-keys", "1000"))))
    except ValueError:
        return 400, _error("InvalidArgument", "Provided max-keys not an integer or within integer range")
    token = q.get("continuation-token")
    start_after = q.get("start-after")
    if token is not None:
        r0 = bucket._rank_of_token(token, prefix)
        if r0 is None:
            return 400, _error("InvalidArgument", "The continuation token provided is incorrect")
    else:
        r0 = bucket.start_rank(prefix, start_after)
    ranks, cps, nxt, truncated = (
        bucket.walk(prefix, r0, max_keys, delimiter) if max_keys else ([], [], r0, False)
    )
    parts = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{NS}">',
        f"<Name>{escape(bucket.name)}</Name>",
        f"<Prefix>{quote(prefix) if url and prefix else escape(prefix)}</Prefix>",
        f"<MaxKeys>{max_keys}</MaxKeys>",
        f"<KeyCount>{len(ranks) + len(cps)}</KeyCount>",
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
    ]
    if delimiter:
        parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
    parts += bucket.contents_xml(ranks, url)
    parts += _prefixes_xml(cps, url)
    if url:
        parts.append("<EncodingType>url</EncodingType>")
    if token:
        parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
    if truncated:
        parts.append(f"<NextContinuationToken>{bucket._token(nxt, prefix)}</NextContinuationToken>")
    if not token and start_after:
        parts.append(f"<StartAfter>{escape(start_after)}</StartAfter>")
    parts.append("</ListBucketResult>")
    return 200, "".join(parts)


def list_v1_xml(bucket: KeyspaceBucket, q: dict[str, str]) -> tuple[int, str]:
    prefix = q.get("prefix", "")
    delimiter = q.get("delimiter", "")
    url = q.get("encoding-type") == "url"
    max_keys = min(1000, max(0, int(q.get("max-keys", "1000"))))
    marker = q.get("marker", "")
    r0 = bucket.start_rank(prefix, marker or None)
    if marker and delimiter:
        # a marker that is a common prefix skips the whole group
        succ = K.succ_prefix(marker) if marker.endswith(delimiter) else None
        if succ is not None:
            r0 = max(r0, bucket.ks.count_lt(succ))
    ranks, cps, _, truncated = (
        bucket.walk(prefix, r0, max_keys, delimiter) if max_keys else ([], [], r0, False)
    )
    parts = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{NS}">',
        f"<Name>{escape(bucket.name)}</Name>",
        f"<Prefix>{escape(prefix)}</Prefix>",
        f"<Marker>{escape(marker)}</Marker>",
        f"<MaxKeys>{max_keys}</MaxKeys>",
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
    ]
    if delimiter:
        parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
    parts += bucket.contents_xml(ranks, url)
    parts += _prefixes_xml(cps, url)
    if truncated and delimiter:
        last_key = bucket.ks.key(ranks[-1]) if ranks else ""
        last = max([last_key, *cps])
        parts.append(f"<NextMarker>{quote(last) if url else escape(last)}</NextMarker>")
    if url:
        parts.append("<EncodingType>url</EncodingType>")
    parts.append("</ListBucketResult>")
    return 200, "".join(parts)


def _error(code: str, message: str) -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{escape(message)}'
        f"</Message></Error>"
    )


class _Handler(BaseHTTPRequestHandler):
    server: LocalS3Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def _send(self, status: int, body: str = "", content_type: str = "application/xml") -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amz-request-id", "bench")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _bucket(self) -> tuple[KeyspaceBucket | None, str, dict[str, str]]:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        name, _, key = path.lstrip("/").partition("/")
        return self.server.buckets.get(name), key, q

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        bucket, key, _ = self._bucket()
        self._send(200 if bucket is not None and not key else 404)

    def do_GET(self) -> None:  # noqa: N802
        bucket, key, q = self._bucket()
        if urlsplit(self.path).path in ("", "/"):
            names = "".join(
                f"<Bucket><Name>{escape(b)}</Name><CreationDate>2024-01-01T00:00:00.000Z</CreationDate>"
                f"</Bucket>"
                for b in self.server.buckets
            )
            return self._send(
                200,
                f'<?xml version="1.0" encoding="UTF-8"?>\n<ListAllMyBucketsResult xmlns="{NS}">'
                f"<Owner><ID>bench</ID></Owner><Buckets>{names}</Buckets></ListAllMyBucketsResult>",
            )
        if bucket is None:
            return self._send(404, _error("NoSuchBucket", "The specified bucket does not exist"))
        if key:
            return self._send(404, _error("NoSuchKey", "GetObject is not served by the bench endpoint"))
        if "location" in q:
            return self._send(
                200, f'<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="{NS}"/>'
            )
        if self.server.latency_s > 0:
            time.sleep(self.server.latency_s)
        with self.server.lock:
            self.server.pages += 1
        status, body = list_v2_xml(bucket, q) if q.get("list-type") == "2" else list_v1_xml(bucket, q)
        self._send(status, body)


class LocalS3Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, buckets: dict[str, K.Keyspace], latency_s: float = 0.05, port: int = 0, precompute: bool = False
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.buckets = {name: KeyspaceBucket(name, ks) for name, ks in buckets.items()}
        if precompute:
            for b in self.buckets.values():
                b.precompute()
        self.latency_s = latency_s
        self.lock = threading.Lock()
        self.pages = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def serve(
    buckets: dict[str, K.Keyspace], latency_s: float = 0.05, port: int = 0, precompute: bool = False
) -> Iterator[LocalS3Server]:
    """Run the endpoint in a background thread for the duration of the block."""
    server = LocalS3Server(buckets, latency_s, port, precompute)
    th = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    th.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        th.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(K.SHAPES), default="unicode")
    ap.add_argument("--objects", type=int, default=2_000_000)
    ap.add_argument("--bucket", default="bench-bucket")
    ap.add_argument("--port", type=int, default=9000)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds added to every LIST page")
    ap.add_argument("--seconds", type=float, default=3600.0, help="stop after this long")
    ap.add_argument(
        "--precompute",
        action="store_true",
        help="render every page before serving (as bench.realtime does), so the endpoint's CPU stays low",
    )
    args = ap.parse_args(argv)
    ks = K.make(args.shape, args.objects)
    with serve({args.bucket: ks}, args.latency, args.port, precompute=args.precompute) as server:
        print(
            f"serving s3://{args.bucket} ({args.objects:,} {args.shape} objects) at {server.url}", flush=True
        )
        time.sleep(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
