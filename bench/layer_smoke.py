"""Prove a built CoreLayer works on its own: run by bench/layer_size.py as

    python3.12 -s -S bench/layer_smoke.py <sam build dir>

with PYTHONPATH=<build dir>/CoreLayer/python and no site-packages (-s -S), so every third-party
import must come from the layer, as on Lambda (where /opt/python also comes before the runtime's
own boto3). Standard library only apart from what the layer provides; prints one JSON object.

Checks: hpcstage.inventory.lister/output/fleet/staging.steps and pyarrow.parquet import from the layer; the
botocore the layer bundles still has the private handler hpcstage.s3util hooks; a ListObjectsV2
answer from a local HTTP endpoint goes through that hook (the fast parser) into hpcstage's Parquet
writer, and the Parquet part reads back; every functions/<name>/app.py imports.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

KEYS = [f"data/part {i:05d}+x.bin" for i in range(2500)] + ["ü中😀", "a&b<c>"]


def _listing_xml(keys: list[str]) -> bytes:
    from urllib.parse import quote_plus

    rows = "".join(
        f"<Contents><Key>{quote_plus(k)}</Key><LastModified>2024-05-01T10:00:00.000Z</LastModified>"
        f"<ETag>&quot;{i:032x}{'-2' if i % 7 == 0 else ''}&quot;</ETag><Size>{i}</Size>"
        f"<StorageClass>{'STANDARD' if i % 3 else 'GLACIER'}</StorageClass></Contents>"
        for i, k in enumerate(keys)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix></Prefix>'
        f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>{len(keys)}</MaxKeys><EncodingType>url</EncodingType>"
        f"<IsTruncated>false</IsTruncated>{rows}</ListBucketResult>"
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    body = _listing_xml(KEYS)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def main(build_dir: Path) -> dict[str, object]:
    layer = (build_dir / "CoreLayer" / "python").resolve()
    out: dict[str, object] = {"python": sys.version.split()[0]}

    mods = {}
    for name in (
        "hpcstage.inventory.lister",
        "hpcstage.inventory.output",
        "hpcstage.inventory.fleet",
        "hpcstage.staging.steps",
        "pyarrow",
        "pyarrow.parquet",
        "pyarrow.compute",
        "boto3",
        "botocore",
        "aws_lambda_powertools",
        "aws_xray_sdk",
    ):
        mod = importlib.import_module(name)
        where = Path(mod.__file__ or "").resolve()
        if layer not in where.parents:
            raise SystemExit(f"{name} imported from {where}, not from the layer {layer}")
        mods[name] = getattr(mod, "__version__", None)
    out["imported"] = mods

    from botocore import handlers

    if not callable(getattr(handlers, "_handle_200_error", None)):
        raise SystemExit("botocore.handlers._handle_200_error is gone: hpcstage.s3util cannot hook it")

    import pyarrow.parquet as pq
    from hpcstage.inventory.output import INVENTORY_SCHEMA, LocalStore, PartWriter
    from hpcstage.s3util import PAGE_KEY, list_page, make_s3_client, page_objects

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")  # noqa: S105
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        s3 = make_s3_client(f"http://127.0.0.1:{server.server_port}", region="us-east-1")
        resp = list_page(s3, "bkt", "", max_keys=len(KEYS))
    finally:
        server.shutdown()
    if resp.get(PAGE_KEY) is None:
        raise SystemExit("the fast ListObjectsV2 parser did not run (botocore hook not effective)")
    keys, objects = page_objects(resp)
    if list(keys) != KEYS:
        raise SystemExit("listed keys differ from the served ones")

    with tempfile.TemporaryDirectory() as tmp:
        writer = PartWriter(LocalStore(tmp), "bkt", "r00000", row_group_rows=1000, tmpdir=tmp)
        writer.add_page(objects)
        parts = writer.close()
        table = pq.read_table(Path(tmp) / parts[0].key)
    if table.schema != INVENTORY_SCHEMA or table.num_rows != len(KEYS):
        raise SystemExit(f"Parquet round trip failed: {table.num_rows} rows, schema {table.schema}")
    if (
        table.column("key").to_pylist() != KEYS
        or sum(table.column("is_multipart_uploaded").to_pylist()) != 358
    ):
        raise SystemExit("Parquet round trip changed the data")
    out["parquet"] = {"rows": table.num_rows, "parts": len(parts), "bytes": parts[0].size}

    apps = []
    for app in sorted((build_dir).glob("*/app.py")):
        spec = importlib.util.spec_from_file_location(f"app_{app.parent.name}", app)
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        apps.append(app.parent.name)
    if not apps:
        raise SystemExit(f"no function artifacts (*/app.py) under {build_dir}")
    out["functions_imported"] = apps
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1))
