"""template.yaml and the state machine definitions pass the validators, and agree with each other.

cfn-lint and `sam validate --lint` check the template but not the ASL inside it; statelint checks the
ASL. Neither checks the seam between them, so this file also does: every ``${Substitution}`` an ASL
file uses is defined by its state machine's DefinitionSubstitutions, and every Lambda a state machine
invokes is a function of this template that the state machine may invoke.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from hpcstage.local.cfn import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
ASL_FILES = sorted((ROOT / "statemachines").glob("*.asl.json"))
SAM = ROOT / ".venv-sam" / "bin" / "sam"
LAYER_REQUIREMENTS = ROOT / "layers" / "core" / "requirements.txt"

SUBSTITUTION = re.compile(r"\$\{([^}]*)\}")
FUNCTION_TYPES = {"AWS::Serverless::Function", "AWS::Lambda::Function"}
# statelint 3.1.0 does not know ItemReader.ReaderConfig.InputType (valid, documented, and needed by
# moto to read a JSON item list); it is the one field taken out before linting.
STATELINT_UNKNOWN = ("ItemReader", "ReaderConfig", "InputType")
STATELINT_UNKNOWN_RE = re.compile(r'^Field "InputType" not allowed in .*\.ItemReader\.ReaderConfig$')


def tool(name: str) -> str:
    """A console script of the environment running the tests (.venv under make test)."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name) or str(ROOT / ".venv" / "bin" / name)
    return found


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(TEMPLATE)


def state_machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: res
        for name, res in template["Resources"].items()
        if res.get("Type") == "AWS::Serverless::StateMachine"
    }


def machine_for(template: dict[str, Any], asl: Path) -> tuple[str, dict[str, Any]]:
    found = [
        (name, res["Properties"])
        for name, res in state_machines(template).items()
        if (ROOT / str(res["Properties"].get("DefinitionUri", ""))).resolve() == asl.resolve()
    ]
    assert len(found) == 1, f"{asl.name}: used by {len(found)} state machines of template.yaml, expected 1"
    return found[0]


def all_states(states: dict[str, Any], path: str = "States") -> list[tuple[str, dict[str, Any]]]:
    """Every state, nested ones (Map ItemProcessor/Iterator, Parallel Branches) included."""
    out = []
    for name, state in states.items():
        here = f"{path}.{name}"
        out.append((here, state))
        inner = state.get("ItemProcessor") or state.get("Iterator")
        if inner:
            out += all_states(inner["States"], f"{here}.ItemProcessor.States")
        for i, branch in enumerate(state.get("Branches", [])):
            out += all_states(branch["States"], f"{here}.Branches[{i}].States")
    return out


def referenced_resource(value: Any) -> str | None:
    """The logical ID a substitution value points at: !GetAtt X.Arn, !Ref X or !Sub "${X.Arn}"."""
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Fn::GetAtt":
            return str(arg[0])
        if fn == "Ref":
            return str(arg)
        if fn == "Fn::Sub" and isinstance(arg, str):
            m = re.fullmatch(r"\$\{([A-Za-z0-9]+)(\.Arn)?\}", arg)
            return m.group(1) if m else None
    return None


def without_statelint_unknowns(node: Any, path: tuple[str, ...] = ()) -> tuple[Any, list[tuple[str, ...]]]:
    """A copy of an ASL document without ItemReader.ReaderConfig.InputType, and where it was."""
    removed: list[tuple[str, ...]] = []

    def walk(n: Any, p: tuple[str, ...]) -> Any:
        if isinstance(n, dict):
            out = {}
            for k, v in n.items():
                if p[-2:] == STATELINT_UNKNOWN[:2] and k == STATELINT_UNKNOWN[2]:
                    removed.append((*p, k))
                    continue
                out[k] = walk(v, (*p, k))
            return out
        if isinstance(n, list):
            return [walk(v, (*p, str(i))) for i, v in enumerate(n)]
        return copy.deepcopy(n)

    return walk(node, path), removed


def differences(a: Any, b: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths at which two JSON documents differ (a key present on one side only counts as one)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append((*path, k))
            else:
                out += differences(a[k], b[k], (*path, k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, (*path, str(i)))
        ]
    return [] if a == b else [path]


def statelint_problems(output: str) -> list[str]:
    """statelint prints "One error:" / "N errors:" and then one indented line per problem."""
    return [line.strip() for line in output.splitlines() if line.startswith((" ", "\t")) and line.strip()]


# --------------------------------------------------------------------------------------------------
# The validators
# --------------------------------------------------------------------------------------------------


def test_cfn_lint_is_clean() -> None:
    res = run([tool("cfn-lint"), "template.yaml"])
    assert res.returncode == 0, f"cfn-lint template.yaml exited {res.returncode}:\n{res.stdout}{res.stderr}"


def test_statelint_strips_only_reader_config_input_type() -> None:
    """The workaround below takes out exactly ItemReader.ReaderConfig.InputType, nothing else."""
    doc = {
        "StartAt": "M",
        "States": {
            "M": {
                "Type": "Map",
                "ItemReader": {"Resource": "r", "ReaderConfig": {"InputType": "JSON", "MaxItems": 5}},
                "Comment": {"InputType": "kept: not under ItemReader.ReaderConfig"},
                "End": True,
            }
        },
    }
    stripped, removed = without_statelint_unknowns(doc)
    assert removed == [("States", "M", "ItemReader", "ReaderConfig", "InputType")]
    assert differences(doc, stripped) == removed
    assert stripped["States"]["M"]["ItemReader"]["ReaderConfig"] == {"MaxItems": 5}
    assert stripped["States"]["M"]["Comment"] == {"InputType": "kept: not under ItemReader.ReaderConfig"}


@pytest.mark.parametrize("asl", ASL_FILES, ids=lambda p: p.name)
def test_statelint_is_clean(asl: Path, tmp_path: Path) -> None:
    original = json.loads(asl.read_text(encoding="utf-8"))
    stripped, removed = without_statelint_unknowns(original)
    # Only ItemReader.ReaderConfig.InputType was taken out, and every such field was.
    assert differences(original, stripped) == removed
    assert all(path[-3:] == STATELINT_UNKNOWN for path in removed)
    copy_path = tmp_path / asl.name
    copy_path.write_text(json.dumps(stripped, indent=1), encoding="utf-8")
    res = run([tool("statelint"), str(copy_path)])
    assert res.returncode == 0, f"statelint {asl.name} (InputType removed):\n{res.stdout}{res.stderr}"
    if removed:
        # On the unmodified file statelint objects to those fields and to nothing else.
        res = run([tool("statelint"), str(asl)])
        problems = statelint_problems(res.stdout + res.stderr)
        assert res.returncode != 0
        assert len(problems) == len(removed), problems
        assert all(STATELINT_UNKNOWN_RE.match(p) for p in problems), problems


def test_sam_validate_lint_is_clean() -> None:
    if not SAM.exists():
        pytest.skip(
            ".venv-sam/bin/sam not installed (aws-sam-cli cannot share .venv): "
            "python3 -m venv .venv-sam && .venv-sam/bin/pip install aws-sam-cli==1.170.0"
        )
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    res = run(
        [str(SAM), "validate", "--lint", "--template", "template.yaml", "--region", "us-east-1"], env=env
    )
    assert res.returncode == 0, f"sam validate --lint exited {res.returncode}:\n{res.stdout}{res.stderr}"


# --------------------------------------------------------------------------------------------------
# template.yaml <-> statemachines/*.asl.json
# --------------------------------------------------------------------------------------------------


def test_every_state_machine_definition_exists(template: dict[str, Any]) -> None:
    machines = state_machines(template)
    assert machines
    for name, res in machines.items():
        uri = res["Properties"].get("DefinitionUri")
        assert isinstance(uri, str), f"{name}: DefinitionUri must be a local file"
        assert (ROOT / uri).is_file(), f"{name}: {uri} does not exist"


@pytest.mark.parametrize("asl", ASL_FILES, ids=lambda p: p.name)
def test_substitutions_are_provided(template: dict[str, Any], asl: Path) -> None:
    text = asl.read_text(encoding="utf-8")
    json.loads(text)  # well-formed before substitution (placeholders sit inside strings)
    name, props = machine_for(template, asl)
    provided = set(props.get("DefinitionSubstitutions") or {})
    used = set(SUBSTITUTION.findall(text))
    assert used, f"{asl.name} uses no substitutions"
    assert not used - provided, (
        f"{asl.name} uses ${{...}} not in {name}.DefinitionSubstitutions: {sorted(used - provided)}"
    )
    assert not provided - used, (
        f"{name}.DefinitionSubstitutions defines {sorted(provided - used)}, unused in {asl.name}"
    )


@pytest.mark.parametrize("asl", ASL_FILES, ids=lambda p: p.name)
def test_lambda_tasks_invoke_functions_of_this_template(template: dict[str, Any], asl: Path) -> None:
    definition = json.loads(asl.read_text(encoding="utf-8"))
    name, props = machine_for(template, asl)
    subs = props.get("DefinitionSubstitutions") or {}
    resources = template["Resources"]
    # LambdaInvokePolicy: FunctionName: !Ref X grants the state machine lambda:InvokeFunction on X.
    may_invoke = {
        referenced_resource(p["LambdaInvokePolicy"]["FunctionName"])
        for p in props.get("Policies", [])
        if isinstance(p, dict) and "LambdaInvokePolicy" in p
    }
    invoked = set()
    for where, state in all_states(definition["States"]):
        if state.get("Type") != "Task":
            continue
        resource = str(state.get("Resource", ""))
        if resource.startswith("arn:aws:states:::lambda:invoke"):
            args = state.get("Parameters") or state.get("Arguments") or {}
            target = args.get("FunctionName")
            assert isinstance(target, str), (
                f"{asl.name} {where}: FunctionName must be a static ${{Substitution}}"
            )
        elif SUBSTITUTION.fullmatch(resource) and referenced_resource(subs.get(resource[2:-1])) in resources:
            target = resource  # a function ARN used directly as the Task's Resource
        else:
            continue
        m = re.fullmatch(r"\$\{([^}]+)\}(:[A-Za-z0-9$_-]+)?", target)
        assert m, f"{asl.name} {where}: FunctionName {target!r} is not a ${{Substitution}} of template.yaml"
        sub = m.group(1)
        assert sub in subs, f"{asl.name} {where}: ${{{sub}}} is not in {name}.DefinitionSubstitutions"
        function = referenced_resource(subs[sub])
        assert function, f"{name}.DefinitionSubstitutions.{sub} = {subs[sub]!r} names no resource"
        assert function in resources, f"{name}.DefinitionSubstitutions.{sub}: no resource {function}"
        assert resources[function]["Type"] in FUNCTION_TYPES, f"{function} is a {resources[function]['Type']}"
        invoked.add(function)
        if "Role" not in props:
            assert function in may_invoke, f"{name} invokes {function} without a LambdaInvokePolicy for it"
    assert invoked, f"{asl.name} invokes no Lambda function"


# --------------------------------------------------------------------------------------------------
# The layer's pinned requirements (layers/core/requirements.txt)
# --------------------------------------------------------------------------------------------------


def layer_pins() -> dict[str, str]:
    pins = {}
    for line in LAYER_REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[a-z,]+\])?==([A-Za-z0-9_.+-]+)", line)
            assert m, f"layers/core/requirements.txt: {line!r} is not pinned with =="
            pins[m.group(1).lower().replace("_", "-")] = m.group(3)
    return pins


def test_layer_requirements_pin_what_the_tests_run_with() -> None:
    """The layer ships the versions pyproject.toml pins and the suite runs with (e.g. the botocore
    whose private handler hpcstage.s3util hooks)."""
    import tomllib

    pins = layer_pins()
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[a-z,]+\])?==(\S+)", dep)
        assert m, f"pyproject.toml dependency {dep!r} is not pinned with =="
        assert pins.get(m.group(1).lower().replace("_", "-")) == m.group(3), f"{dep} differs in the layer"
    for name, version in pins.items():
        assert metadata.version(name) == version, (
            f"layer pins {name}=={version}, tests run {metadata.version(name)}"
        )


# --------------------------------------------------------------------------------------------------
# The fleet's functions: least privilege
# --------------------------------------------------------------------------------------------------

FLEET_FUNCTIONS = {
    "FleetLaunchFunction": {
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:TransactWriteItems",
        "dynamodb:PutItem",
    },
    "FleetListerFunction": {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "dynamodb:TransactWriteItems",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
    },
    "FleetReduceFunction": {"dynamodb:GetItem", "dynamodb:Query"},
}


def _statements(props: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for p in props.get("Policies", []) if isinstance(p, dict) for s in p.get("Statement", [])]


@pytest.mark.parametrize("function", sorted(FLEET_FUNCTIONS))
def test_fleet_functions_name_only_the_table_and_the_actions_they_use(
    template: dict[str, Any], function: str
) -> None:
    props = template["Resources"][function]["Properties"]
    dynamodb = [s for s in _statements(props) if any(str(a).startswith("dynamodb:") for a in _actions(s))]
    assert dynamodb, f"{function} has no DynamoDB statement"
    for s in dynamodb:
        assert s["Resource"] == {"Fn::GetAtt": ["FleetTable", "Arn"]}, f"{function}: {s['Resource']}"
        assert all(str(a).startswith("dynamodb:") for a in _actions(s))
    assert {a for s in dynamodb for a in _actions(s)} == FLEET_FUNCTIONS[function]
    for s in _statements(props):
        for action in _actions(s):
            assert "*" not in action, f"{function}: wildcard action {action}"
        if s.get("Resource") == "*":  # only the SendTask* actions, which take no resource-level permissions
            assert set(_actions(s)) <= {"states:SendTaskSuccess", "states:SendTaskFailure"}, s
    invokes = [s for s in _statements(props) if "lambda:InvokeFunction" in _actions(s)]
    if function == "FleetLaunchFunction":
        assert [s["Resource"] for s in invokes] == [{"Fn::GetAtt": ["FleetListerFunction", "Arn"]}]
    else:
        assert not invokes


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement.get("Action", [])
    return [actions] if isinstance(actions, str) else list(actions)


def test_fleet_table_is_on_demand_encrypted_with_ttl(template: dict[str, Any]) -> None:
    props = template["Resources"]["FleetTable"]["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires", "Enabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert [k["AttributeName"] for k in props["KeySchema"]] == ["pk", "sk"]


# --------------------------------------------------------------------------------------------------
# Security review: checkov (zero findings, every suppression next to its resource with a reason) and IAM
# --------------------------------------------------------------------------------------------------

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
# What the template suppresses, per resource type; anything else checkov finds fails the test.
CHECKOV_SUPPRESSED = {
    "AWS::Serverless::Function": {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_173"},
    "AWS::S3::Bucket": {"CKV_AWS_18", "CKV_AWS_21"},
    "AWS::SNS::Topic": {"CKV_AWS_26"},
    "AWS::DynamoDB::Table": {"CKV_AWS_28", "CKV_AWS_119"},
    "AWS::Logs::LogGroup": {"CKV_AWS_158"},
}


def test_checkov_finds_nothing_and_every_suppression_has_a_reason(template: dict[str, Any]) -> None:
    if not CHECKOV.exists():
        pytest.skip(".venv-checkov/bin/checkov not installed (make test installs checkov==3.3.30 there)")
    res = run([str(CHECKOV), "-f", "template.yaml", "--framework", "cloudformation", "-o", "json"])
    report = json.loads(res.stdout)
    assert report["summary"]["checkov_version"] == "3.3.30"
    failed = [(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]]
    assert failed == [], f"checkov findings: {failed}"
    assert report["summary"]["parsing_errors"] == 0
    skipped = report["results"]["skipped_checks"]
    by_resource: dict[str, set[str]] = {}
    for c in skipped:
        assert len(c["check_result"].get("suppress_comment", "")) > 40, (
            f"{c['check_id']} on {c['resource']}: no reason"
        )
        by_resource.setdefault(c["resource"].split(".", 1)[1], set()).add(c["check_id"])
    resources = template["Resources"]
    for name, ids in by_resource.items():
        assert ids == CHECKOV_SUPPRESSED[resources[name]["Type"]], name
    # every function is treated the same way
    functions = [n for n, r in resources.items() if r["Type"] == "AWS::Serverless::Function"]
    assert sorted(n for n in by_resource if n in functions) == sorted(functions)


def test_source_buckets_must_be_named(template: dict[str, Any]) -> None:
    """No default: a deployment never lets the inventory list every bucket of the account."""
    params = template["Parameters"]
    assert "Default" not in params["SourceBucketArns"]
    for name, res in template["Resources"].items():
        for s in _statements(res.get("Properties", {})):
            assert s.get("Resource") not in ("arn:aws:s3:::*", ["arn:aws:s3:::*"]), name


def test_no_wildcard_actions_anywhere(template: dict[str, Any]) -> None:
    for name, res in template["Resources"].items():
        props = res.get("Properties", {})
        for s in _statements(props) + _if_statements(props):
            for action in _actions(s):
                assert "*" not in str(action), f"{name}: wildcard action {action}"


def _if_statements(props: dict[str, Any]) -> list[dict[str, Any]]:
    """Statements of policies inside !If [cond, {Statement: ...}, NoValue]."""
    out = []
    for p in props.get("Policies", []):
        if isinstance(p, dict) and "Fn::If" in p:
            for branch in p["Fn::If"][1:]:
                if isinstance(branch, dict):
                    out += branch.get("Statement", [])
    return out


def test_trigger_may_use_only_what_powertools_idempotency_calls(template: dict[str, Any]) -> None:
    props = template["Resources"]["StagingTriggerFunction"]["Properties"]
    assert not any("DynamoDBCrudPolicy" in p for p in props["Policies"] if isinstance(p, dict))
    ddb = [s for s in _statements(props) if any(a.startswith("dynamodb:") for a in _actions(s))]
    assert [sorted(_actions(s)) for s in ddb] == [
        ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
    ]
    assert ddb[0]["Resource"] == {"Fn::GetAtt": ["StagingIdempotencyTable", "Arn"]}


def test_inventory_machine_may_invoke_its_two_functions_and_put_events_only(template: dict[str, Any]) -> None:
    """The fleet machine runs no Distributed Map: it reads nothing in S3 and starts no executions."""
    props = template["Resources"]["InventoryStateMachine"]["Properties"]
    assert props["DefinitionUri"] == "statemachines/inventory.asl.json"
    assert props["Name"] == {"Fn::Sub": "${AWS::StackName}-inventory"}
    invoke = [p["LambdaInvokePolicy"]["FunctionName"] for p in props["Policies"] if "LambdaInvokePolicy" in p]
    assert invoke == [{"Ref": "FleetLaunchFunction"}, {"Ref": "FleetReduceFunction"}]
    assert [(s["Action"], s["Resource"]) for s in _statements(props)] == [
        (
            "events:PutEvents",
            {"Fn::Sub": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"},
        )
    ]


def test_one_inventory_machine_started_by_the_schedule_and_watched_by_the_alarm(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    machines = sorted(n for n, r in resources.items() if r["Type"] == "AWS::Serverless::StateMachine")
    assert machines == ["InventoryStateMachine", "StagingStateMachine"]
    assert resources["AuditSchedule"]["Properties"]["Target"]["Arn"] == {"Ref": "InventoryStateMachine"}
    role = resources["AuditScheduleRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    assert role == [
        {"Effect": "Allow", "Action": "states:StartExecution", "Resource": {"Ref": "InventoryStateMachine"}}
    ]
    dims = resources["FailedExecutionsAlarm"]["Properties"]["Dimensions"]
    assert dims == [{"Name": "StateMachineArn", "Value": {"Ref": "InventoryStateMachine"}}]
    assert sorted(template["Outputs"]) == sorted(
        [
            "InventoryStateMachineArn",
            "ResultsBucketName",
            "StagingStateMachineArn",
            "StagingNotificationTopicArn",
            "StagingIdempotencyTableName",
            "StagingClusterPolicyArn",
        ]
    )
    assert sorted(p.name for p in (ROOT / "functions").iterdir() if p.name.startswith("inventory_")) == [
        "inventory_launch",
        "inventory_lister",
        "inventory_reduce",
    ]


def test_the_lister_may_assume_only_the_named_roles(template: dict[str, Any]) -> None:
    props = template["Resources"]["FleetListerFunction"]["Properties"]
    assume = [s for s in _if_statements(props) if "sts:AssumeRole" in _actions(s)]
    assert assume == [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": {"Ref": "SourceRoleArns"}}]
    assert template["Parameters"]["SourceRoleArns"]["Default"] == ""
    listing = [s for s in _statements(props) if "s3:ListBucket" in _actions(s)]
    assert listing == [
        {
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:ListBucketVersions"],
            "Resource": {"Ref": "SourceBucketArns"},
        },
        # the run's data/ (orphan parts), for the reduce it runs when it reports the run complete
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": {"Fn::GetAtt": ["ResultsBucket", "Arn"]}},
    ]


def test_the_lister_may_touch_the_results_as_the_reduce_does_and_no_more(template: dict[str, Any]) -> None:
    """The lister that reports the run complete runs reduce_run (fleet.Lister.reduce_here): it needs what the
    Reduce function needs in the results bucket, on the same resources; the table statements are checked in
    test_fleet_functions_name_only_the_table_and_the_actions_they_use."""

    def s3_grants(function: str) -> set[tuple[str, str]]:
        props = template["Resources"][function]["Properties"]
        return {
            (a, json.dumps(s["Resource"], sort_keys=True))
            for s in _statements(props)
            for a in _actions(s)
            if a.startswith("s3:") and s["Resource"] != {"Ref": "SourceBucketArns"}
        }

    reduce = s3_grants("FleetReduceFunction")
    assert reduce == {
        ("s3:GetObject", json.dumps({"Fn::Sub": "${ResultsBucket.Arn}/${ResultsPrefix}/*"})),
        ("s3:PutObject", json.dumps({"Fn::Sub": "${ResultsBucket.Arn}/${ResultsPrefix}/*"})),
        ("s3:DeleteObject", json.dumps({"Fn::Sub": "${ResultsBucket.Arn}/${ResultsPrefix}/*/data/*"})),
        ("s3:ListBucket", json.dumps({"Fn::GetAtt": ["ResultsBucket", "Arn"]}, sort_keys=True)),
    }
    assert s3_grants("FleetListerFunction") == reduce
    # and the reduce's table reads are among the lister's
    assert FLEET_FUNCTIONS["FleetReduceFunction"] <= FLEET_FUNCTIONS["FleetListerFunction"]


def test_staging_validate_reads_only_the_latest_inventory_pointers(template: dict[str, Any]) -> None:
    from hpcstage.inventory.output import latest_key

    props = template["Resources"]["StagingValidateFunction"]["Properties"]
    by_action = {a: s["Resource"] for s in _statements(props) for a in _actions(s)}
    assert by_action == {
        "s3:PutObject": {"Fn::Sub": "${ResultsBucket.Arn}/${StagingWorkPrefix}/*"},
        "s3:GetObject": {"Fn::Sub": "${ResultsBucket.Arn}/${ResultsPrefix}/*/_latest/*"},
        # so that a missing pointer reads 404 NoSuchKey, not 403 AccessDenied
        "s3:ListBucket": {"Fn::GetAtt": ["ResultsBucket", "Arn"]},
    }
    # The pattern covers the key the inventory state machine writes, and the function finds it by env.
    assert fnmatch.fnmatchcase(latest_key("inventory", "research-data", "genomics/"), "inventory/*/_latest/*")
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert (env["RESULTS_BUCKET"], env["RESULTS_PREFIX"]) == (
        {"Ref": "ResultsBucket"},
        {"Ref": "ResultsPrefix"},
    )
