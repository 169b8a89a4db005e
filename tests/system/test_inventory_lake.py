"""Deployed layout, run offline: every run of a target adds a dt= partition to one Hive table beside the
runs (absolute s3:// paths in symlink.txt, athena.sql with the DDL), and writes report.html."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hpcstage.inventory.output import hive_ddl, hive_root
from hpcstage.localcli import seed_bucket


def test_runs_of_one_target_accumulate_partitions_in_one_hive_table(local_stack: Any) -> None:
    aws, deployed = local_stack
    s3 = aws.client("s3")
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    seed_bucket(bucket, {f"d/f{i:04d}": (10, "STANDARD") for i in range(1500)})
    runs = []
    for _ in range(2):
        res = aws.run(deployed.arn("InventoryStateMachine"), {"bucket": bucket}, timeout_s=300, poll_s=0.2)
        assert res.status == "SUCCEEDED", (res.error, res.cause)
        runs.append(res.output["summary"][len("s3://") :].split("/", 1))
    results_bucket = runs[0][0]
    root = hive_root("inventory", bucket, "")
    keys = sorted(
        o["Key"] for o in s3.list_objects_v2(Bucket=results_bucket, Prefix=root + "/").get("Contents", [])
    )
    partitions = [k for k in keys if k.endswith("/symlink.txt")]
    assert len(partitions) == 2 and f"{root}/athena.sql" in keys
    ddl = s3.get_object(Bucket=results_bucket, Key=f"{root}/athena.sql")["Body"].read().decode()
    assert ddl == hive_ddl(f"s3://{results_bucket}/{root}")
    for (rb, summary_key), part in zip(runs, partitions, strict=True):
        run_root = summary_key.rsplit("/", 1)[0]
        manifest = json.loads(s3.get_object(Bucket=rb, Key=f"{run_root}/manifest.json")["Body"].read())
        lines = s3.get_object(Bucket=rb, Key=part)["Body"].read().decode().splitlines()
        assert lines == [f"s3://{rb}/{f['key']}" for f in manifest["files"]]
        html = s3.get_object(Bucket=rb, Key=f"{run_root}/report.html")["Body"].read().decode()
        assert '<p id="totals">1,500 objects, 14.65 KiB (15,000 bytes)' in html
