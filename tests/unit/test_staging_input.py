"""The staging input schema, the examples in events/ and validate_staging_input agree."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hpcstage.errors import InputError
from hpcstage.inputs import validate as schema_check
from hpcstage.staging.config import MAX_TOTAL_POLLS, StagingConfig, StagingDefaults, validate_staging_input
from hpcstage.staging.trigger import trigger_object

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "layers/core/hpcstage/schemas/staging-input.schema.json").read_text())
INPUTS = sorted(p for p in (ROOT / "events").glob("staging-*.json") if "trigger" not in p.name)
DEFAULTS = StagingDefaults(
    slurm_jwt_secret_arn="arn:aws:secretsmanager:us-east-1:123456789012:secret:slurm-jwt-AbCdEf",
    cluster_user="ec2-user",
)


def validate(event: Any, defaults: StagingDefaults = DEFAULTS) -> StagingConfig:
    return validate_staging_input(event, run_id="run-1", work_bucket="results", defaults=defaults)


def test_there_is_an_example_for_each_use() -> None:
    assert sorted(p.name for p in (ROOT / "events").glob("staging-*.json")) == [
        "staging-filecache.json",
        "staging-fsx.json",
        "staging-latest-inventory.json",
        "staging-local.json",
        "staging-mountpoint.json",
        "staging-trigger-object-created.json",
    ]


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    event = json.loads(path.read_text())
    jsonschema.validate(event, SCHEMA)
    cfg = validate(event)
    assert cfg.target["type"] == event["target"]["type"]
    assert cfg.output == event["output"].replace("{run_id}", "run-1")
    assert cfg.work_url == "s3://results/staging/run-1"
    assert cfg.run() == {"run_id": "run-1", "work": "s3://results/staging/run-1", **cfg.waits}
    assert StagingConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_the_trigger_example_is_an_object_created_event() -> None:
    event = json.loads((ROOT / "events/staging-trigger-object-created.json").read_text())
    obj = trigger_object(event)
    assert (obj.bucket, obj.key, obj.identity) == (
        "hpcstage-requests",
        "staging-requests/run-0042.json",
        "version:IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
    )


def local_event(**changes: Any) -> dict[str, Any]:
    event = json.loads((ROOT / "events/staging-local.json").read_text())
    event.update(changes)
    return event


def test_output_maps_to_a_directory_under_the_job_root() -> None:
    cfg = validate(local_event())
    # A local target exports to the bucket root, so job-root/<prefix> lands exactly at the output.
    assert cfg.output_dir == "staging-output/run-1"
    assert cfg.target["export_url"] == "s3://hpcstage-local-resultsbucket/"
    assert cfg.target["root"] == "/tmp/hpcstage-demo/cache/run-1"
    assert cfg.job["workdir"] == "/tmp/hpcstage-demo/cache/run-1/jobs/run-1"
    fsx = validate(json.loads((ROOT / "events/staging-fsx.json").read_text()))
    assert fsx.output_dir == "results/alignments/run-1"
    assert fsx.target["work_url"] == "s3://results/staging/run-1/head-node"


def test_defaults_fill_the_head_node_and_file_system() -> None:
    event = json.loads((ROOT / "events/staging-fsx.json").read_text())
    del event["target"]["head_node_instance_id"], event["target"]["file_system_id"]
    with pytest.raises(InputError, match="needs 'head_node_instance_id'"):
        validate(event)
    cfg = validate(
        event,
        StagingDefaults(
            head_node_instance_id="i-0abcdef0123456789", fsx_file_system_id="fs-0fedcba987654321"
        ),
    )
    assert cfg.target["head_node_instance_id"] == cfg.job["head_node_instance_id"] == "i-0abcdef0123456789"
    assert cfg.target["file_system_id"] == "fs-0fedcba987654321"


def with_path(event: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    event = copy.deepcopy(event)
    *parents, last = path.split(".")
    node = event
    for name in parents:
        node = node[name]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return event


DELETE = object()


ABS = 'an absolute path on one line, without . or .. components (e.g. "/scratch/hpcstage")'
LOCAL_TARGET_FIELDS = "max_objects_per_call, max_workers, root, type"
ONE_OF = "'job' needs exactly one of 'command' (shell text) or 'script' (s3:// URL of a script)"
COMMAND = 'non-empty shell text without NUL bytes (e.g. "python analyse.py \\"$HPCSTAGE_FILE_LIST\\"")'
INVENTORY = (
    'the s3:// URL of an inventory run, or {"latest": "s3://bucket/prefix"} '
    '(e.g. "s3://hpcstage-results/inventory/my-research-data/run-1")'
)
# (where, what, the exact message): the schema's checks first, then those it cannot state.
MALFORMED = [
    ("inventory", "/local/path", f"'inventory' must be {INVENTORY}, got \"/local/path\""),
    ("inventory", 3, f"'inventory' must be {INVENTORY}, got 3"),
    (
        "inventory",
        {"latest": "my-data"},
        "'inventory.latest' must be the s3:// URL of an inventoried bucket or prefix, as the inventory input "
        'named it (e.g. "s3://my-research-data/genomics/"), got "my-data"',
    ),
    ("inventory", {"newest": "s3://my-data/"}, "unknown 'inventory' field(s): newest; allowed: latest"),
    (
        "selection",
        {},
        "'selection' is empty: it would stage every object in the inventory; give at least one criterion "
        "(prefixes, globs, manifest, min_size, max_size, modified_after, ...)",
    ),
    (
        "selection",
        {"prefix": ["a/"]},
        "unknown 'selection' field(s): prefix; allowed: globs, manifest, max_size, min_size, modified_after, "
        "modified_before, prefixes, storage_classes",
    ),
    ("selection", {"globs": [""]}, "'selection.globs[0]' must be a non-empty string, got \"\""),
    (
        "selection",
        {"manifest": "s3://bkt/dir/"},
        "'selection.manifest' must be an s3:// URL of an object (e.g. \"s3://my-results/selections/keys.txt\"), "
        'got "s3://bkt/dir/"',
    ),
    ("selection", {"min_size": 5, "max_size": 1}, "min_size (5) is larger than max_size (1)"),
    (
        "target.type",
        "nfs",
        '\'target.type\' must be one of "local", "fsx", "filecache", "mountpoint", got "nfs"',
    ),
    ("target.root", "relative/dir", f"'target.root' must be {ABS}, got \"relative/dir\""),
    ("target.root", "/cache/../etc", f"'target.root' must be {ABS}, got \"/cache/../etc\""),
    ("target.root", "/cache\n", f"'target.root' must be {ABS}, got \"/cache\\n\""),
    ("job.workdir", "/home/hpc/$(id)\n", f"'job.workdir' must be {ABS}, got \"/home/hpc/$(id)\\n\""),
    (
        "output",
        "s3://bkt/out/\n",
        "'output' must be an s3:// URL of a key prefix (not a whole bucket) "
        '(e.g. "s3://my-results/outputs/{run_id}/"), got "s3://bkt/out/\\n"',
    ),
    ("target.root", DELETE, f"'target.root' must be {ABS}; it is missing"),
    (
        "target.export_url",
        "s3://x/y",
        f"unknown 'target' field(s): export_url; allowed: {LOCAL_TARGET_FIELDS}",
    ),
    ("target.colour", "blue", f"unknown 'target' field(s): colour; allowed: {LOCAL_TARGET_FIELDS}"),
    ("job.backend", "ssm", f"'job.workdir' must be {ABS}; it is missing"),
    (
        "job",
        {"backend": "ssm", "command": "true", "workdir": "/home/hpc"},
        "a local target needs the local job backend (the cache is a directory on this machine), and the fsx, "
        "filecache and mountpoint targets need ssm or rest; got a local target with the ssm backend",
    ),
    (
        "job.base_url",
        "http://head-node:6820",
        "unknown 'job' field(s): base_url; allowed: backend, command, cpus, env, partition, script, "
        "time_limit_min, user, workdir",
    ),
    ("job.script", "s3://bkt/s.sh", ONE_OF),
    ("job.command", DELETE, ONE_OF),
    ("job.command", "  \n", f"'job.command' must be {COMMAND}, got \"  \\n\""),
    ("job.command", "true\0", f"'job.command' must be {COMMAND}, got \"true\\u0000\""),
    ("job.cpus", 0, "'job.cpus' must be a whole number from 1 to 1024, got 0"),
    ("job.cpus", True, "'job.cpus' must be a whole number from 1 to 1024, got true"),
    (
        "job.env",
        {"HPCSTAGE_OUTPUT_DIR": "/tmp"},
        "'job.env' name \"HPCSTAGE_OUTPUT_DIR\" is reserved: hpcstage sets the HPCSTAGE_* variables",
    ),
    ("job.env", {"BAD-NAME": "x"}, "'job.env' name \"BAD-NAME\" is not a valid environment variable name"),
    ("job.env", {"THREADS": 8}, "'job.env.THREADS' must be a string, got 8"),
    ("job.env", {f"V{i}": "x" for i in range(101)}, "'job.env' has 101 entries; at most 100"),
    (
        "job.partition",
        "bad partition!",
        '\'job.partition\' must be a Slurm partition name (e.g. "compute"), got "bad partition!"',
    ),
    ("job.user", "-c", '\'job.user\' must be a user name (e.g. "ec2-user"), got "-c"'),
    (
        "output",
        "s3://only-a-bucket",
        "'output' must be an s3:// URL of a key prefix (not a whole bucket) "
        '(e.g. "s3://my-results/outputs/{run_id}/"), got "s3://only-a-bucket"',
    ),
    (
        "output",
        "s3://bkt/../escape/",
        "'output': output directory '../escape' has an '..' path component; it could leave the staging root or "
        "collide with another key",
    ),
    ("archived_policy", "ignore", '\'archived_policy\' must be one of "fail", "restore", got "ignore"'),
    ("restore_days", 0, "'restore_days' must be a whole number from 1 to 365, got 0"),
    ("capacity_headroom", 11, "'capacity_headroom' must be a number from 0 to 10, got 11"),
    ("waits", {"job_max_polls": 0}, "'waits.job_max_polls' must be a whole number from 1 to 2300, got 0"),
    (
        "waits",
        {"max_polls": 700},
        "the poll bounds allow 3636 polls (3 x max_polls + job_max_polls + restore_max_polls); at most "
        f"{MAX_TOTAL_POLLS} fit in one execution's 25,000 history events: poll less often instead",
    ),
    (
        "waits",
        {"job_poll_seconds": 1, "job_max_polls": 5},
        "waits.job_poll_seconds x waits.job_max_polls (5 s) is shorter than the job's time limit (10 min): "
        "the run would give up on a job still allowed to run",
    ),
    (
        "waits",
        {"poll_secs": 1},
        "unknown 'waits' field(s): poll_secs; allowed: job_max_polls, job_poll_seconds, max_polls, "
        "poll_seconds, restore_max_polls, restore_poll_seconds",
    ),
    (
        "colour",
        "blue",
        "unknown input field(s): colour; allowed: archived_policy, capacity_headroom, inventory, job, output, "
        "restore_days, restore_tier, selection, target, waits",
    ),
    ("job", DELETE, "'job' must be a JSON object; it is missing"),
]
# What only the code can check: it needs the stack's defaults, or relates fields to one another.
BEYOND_THE_SCHEMA = {
    "min_size (5) is larger than max_size (1)",
    "a local target needs the local job backend",
    "'output': output directory '../escape'",
    "the poll bounds allow 3636 polls",
    "waits.job_poll_seconds x waits.job_max_polls (5 s)",
}


@pytest.mark.parametrize(("path", "value", "message"), MALFORMED, ids=lambda v: str(v)[:40])
def test_malformed_input_says_exactly_what_is_wrong(path: str, value: Any, message: str) -> None:
    event = with_path(local_event(), path, value)
    with pytest.raises(InputError) as err:
        validate(event)
    assert str(err.value) == message
    # The schema alone, as hpcstage.inputs reads it ("$" as ECMA-262's end of string), refuses the rest.
    if message.startswith(tuple(BEYOND_THE_SCHEMA)):
        schema_check(event, "staging-input")
    else:
        with pytest.raises(InputError) as by_schema:
            schema_check(event, "staging-input")
        assert str(by_schema.value) == message


def test_the_input_must_be_an_object() -> None:
    with pytest.raises(InputError) as err:
        validate(["s3://bkt/run-1"])
    assert str(err.value) == "the input must be a JSON object, got list"


def test_defaults_are_the_schemas() -> None:
    event = local_event()
    del event["waits"]
    cfg = validate(event)
    props = SCHEMA["properties"]
    assert (
        (cfg.archived_policy, cfg.restore_days, cfg.restore_tier, cfg.capacity_headroom)
        == (
            props["archived_policy"]["default"],
            props["restore_days"]["default"],
            props["restore_tier"]["default"],
            props["capacity_headroom"]["default"],
        )
        == ("fail", 7, "Bulk", 0.1)
    )
    assert cfg.waits == {name: p["default"] for name, p in props["waits"]["properties"].items()}
    assert cfg.waits == {
        "poll_seconds": 30,
        "max_polls": 240,
        "job_poll_seconds": 60,
        "job_max_polls": 1440,
        "restore_poll_seconds": 900,
        "restore_max_polls": 96,
    }
    assert SCHEMA["properties"]["waits"]["properties"]["max_polls"]["maximum"] == MAX_TOTAL_POLLS
    partial = validate(local_event(waits={"poll_seconds": 1, "job_max_polls": 600}))
    assert partial.waits["poll_seconds"] == 1 and partial.waits["restore_max_polls"] == 96
    event = local_event(waits={"job_poll_seconds": 4, "job_max_polls": 900})
    del event["job"]["cpus"], event["job"]["time_limit_min"]
    job = validate(event).job
    assert (job["cpus"], job["time_limit_min"]) == (1, 60)


def test_a_target_without_a_type_is_of_the_stacks_target_type() -> None:
    event = local_event()
    del event["target"]["type"]
    assert validate(event).target["type"] == "local"
    with pytest.raises(InputError) as err:
        validate(event, StagingDefaults(target_type="mountpoint"))
    assert str(err.value) == (
        "unknown 'target' field(s): root; allowed: bucket, cluster_name, head_node_instance_id, mount_path, "
        "prefix, restore_parallelism, ssm_max_wait_s, ssm_poll_interval_s, ssm_timeout_s, type"
    )


def test_the_latest_inventory_of_a_bucket_is_looked_up_later() -> None:
    event = json.loads((ROOT / "events/staging-latest-inventory.json").read_text())
    cfg = validate(event)
    assert (cfg.inventory, cfg.latest_inventory_of) == ("", "s3://research-data/genomics/")
    explicit = validate(local_event())
    assert explicit.latest_inventory_of is None
    assert (
        explicit.inventory == "s3://hpcstage-local-resultsbucket/inventory/demo-research-data/demo-inventory"
    )


def test_remote_output_must_be_below_the_data_repository() -> None:
    event = json.loads((ROOT / "events/staging-fsx.json").read_text())
    event["output"] = "s3://elsewhere/results/"
    with pytest.raises(InputError, match="must be below s3://research-data/"):
        validate(event)


def test_a_rest_job_needs_the_jwt_secret() -> None:
    event = json.loads((ROOT / "events/staging-filecache.json").read_text())
    with pytest.raises(InputError, match="SlurmJwtSecretArn"):
        validate(event, StagingDefaults())


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = SCHEMA
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def schema_fields() -> list[tuple[str, str, str, str]]:
    """(field, for, required, default) of every field the schema allows, as docs/staging-input.md lists them."""
    found: dict[str, dict[str, Any]] = {}

    def add(name: str, kinds: set[str], required: bool, prop: dict[str, Any], every: set[str]) -> None:
        row = found.setdefault(name, {"for": set(), "req": set(), "default": _resolve(prop).get("default")})
        row["for"] |= kinds
        row["req"] |= kinds if required else set()
        row["every"] = every

    anything = {"*"}
    for name, given in SCHEMA["properties"].items():
        prop = _resolve(given)
        add(name, anything, name in SCHEMA["required"], prop, anything)
        if name == "inventory":
            add("inventory.latest", anything, True, prop["oneOf"][1]["properties"]["latest"], anything)
        elif name in ("selection", "waits"):
            for sub, sp in prop["properties"].items():
                add(f"{name}.{sub}", anything, sub in prop.get("required", []), sp, anything)
        elif name in ("target", "job"):
            key = "type" if name == "target" else "backend"
            add(f"{name}.{key}", anything, key in prop.get("required", []), prop["properties"][key], anything)
            kinds = {b["if"]["properties"][key]["const"] for b in prop["allOf"]}
            for branch in prop["allOf"]:
                kind, then = branch["if"]["properties"][key]["const"], _resolve(branch["then"])
                for sub, sp in then["properties"].items():
                    if sub != key:
                        add(f"{name}.{sub}", {kind}, sub in then.get("required", []), sp, kinds)
    rows = []
    for name, row in found.items():
        where = "" if row["for"] == row["every"] else ", ".join(sorted(row["for"]))
        if row["req"] and row["req"] == row["for"]:
            required = "yes"
        else:
            required = "for " + ", ".join(sorted(row["req"])) if row["req"] else ""
        default = "" if row["default"] is None else f"`{json.dumps(row['default'])}`"
        rows.append((f"`{name}`", where, required, default))
    return rows


def test_the_docs_field_table_is_the_schemas() -> None:
    text = (ROOT / "docs/staging-input.md").read_text()
    table = [
        tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
        for line in text.splitlines()
        if line.startswith("| `")
    ]
    assert [row[:4] for row in table] == schema_fields()
    assert len(table) == 64 and all(len(row) == 5 and row[4] for row in table)
    described = {row[0].strip("`"): row[4] for row in table}
    assert described["job.cpus"] == _resolve(SCHEMA["$defs"]["jobFields"]["cpus"])["description"]
