"""Run the pipeline offline: moto in-process (or as a local HTTP endpoint), template.yaml deployed
into it with boto3, executions of the real state machines with a bounded wait.

    with LocalAws() as aws:
        deployed = aws.deploy("template.yaml", {"Stage": "local"})
        result = aws.run(deployed.arn("InventoryStateMachine"), {"bucket": "data"}, timeout_s=120)

moto's CloudFormation has no Serverless transform, so ``deploy_template`` reads the template itself
(``cfn``) and creates each supported resource with ordinary API calls. The names it chooses are
deterministic (``<stack>-<LogicalId>``), so a test knows them in advance.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from unittest import mock

import boto3
from botocore.exceptions import ClientError

from . import motopatch
from .cfn import NO_VALUE, Resolver, TemplateError, as_text, load_template, load_yaml, properties_with_globals
from .cfn import resolve_parameters as _resolve_parameters
from .s3process import S3Process, put_sized_objects

LOG = logging.getLogger(__name__)

DEFAULT_REGION = "us-east-1"
DEFAULT_STACK_NAME = "hpcstage-local"
# How long LocalAws waits, when it stops, for asynchronous Lambda invocations still running (a fleet lister
# finishing its exit after the execution ended: a few DynamoDB writes); a lister that is still listing (an
# execution stopped or failed under it) runs until its deadline, and is left to die with the process.
EVENT_DRAIN_S = 30.0
LOCAL_ROLE_NAME = "hpcstage-local-execution"
MOTO_CONFIG: dict[str, Any] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}

__all__ = [
    "Deployed",
    "DeployedResource",
    "ExecutionResult",
    "ExecutionTimeout",
    "LocalAws",
    "TemplateError",
    "deploy_template",
    "describe_map_runs",
    "run_execution",
]


# --------------------------------------------------------------------------------------------------
# The emulator
# --------------------------------------------------------------------------------------------------

# With quiet=True (the default) these loggers are raised to the given level while LocalAws runs:
# werkzeug logs every HTTP request of the server; moto's interpreter logs each state failure at ERROR
# with a dump of its internal objects, although the same error and cause are in the execution history.
_QUIET_LOGGERS = {
    "werkzeug": logging.WARNING,
    "moto.stepfunctions.parser.asl.component.eval_component": logging.CRITICAL,
}


@contextmanager
def _logger_level(name: str, level: int) -> Iterator[None]:
    logger = logging.getLogger(name)
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)


# The services whose tasks the state machines run through moto's interpreter (lambda:invoke, events:putEvents).
TASK_SERVICES = ("lambda", "events")


def _warm_task_clients(region: str) -> None:
    """Make once the clients moto's Step Functions interpreter makes for each Lambda and EventBridge task.

    The interpreter makes a boto3 client from boto3's default Session for every task it runs
    (``boto_client_for``); the first of each service read botocore's data files for that Session and service
    (0.1-0.15 s each here, up to 0.6 s on a loaded machine) inside the first execution -- at its first task
    and at its last -- a cost Step Functions does not have on AWS. Made here, when the emulator starts, with
    the interpreter's own function, so that an execution pays only what the service would.
    """
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    for service in TASK_SERVICES:
        boto_client_for(region=region, service=service)


class LocalAws:
    """moto with the hpcstage patches, fake credentials and a region, for the life of a ``with``.

    ``server=False`` (default): moto intercepts boto3 in this process (``mock_aws``); fastest.
    ``server=True``: a moto HTTP server on ``127.0.0.1`` at a free port, for external tools (s5cmd,
    aws cli) at ``endpoint_url``. In-process code (handlers, the interpreter) reaches it through
    ``AWS_ENDPOINT_URL`` and ``MOTO_PORT``, which the interpreter uses to call back.
    ``s3_process=True`` (with ``server=True``): S3 is served by a moto server in a process of its own
    (``s3process``) at ``s3_endpoint_url``, which this process's clients and handlers reach through
    ``AWS_ENDPOINT_URL_S3``; the other services stay in this process's server. Its pages are then rendered
    on a core of their own instead of under this process's interpreter lock. Seed it with ``seed_objects``;
    the process ends when the ``with`` does (error and Ctrl-C included) or when this process dies.
    ``s3_readers=n``: n more processes render the ListObjectsV2 pages of seeded buckets that nothing changed
    since, so that parallel listers are served in parallel, as S3 serves them (``s3process``, readers).

    Either way Lambda handlers run in this process, in the thread that invokes them.

    ``patches`` names the motopatch groups in force while the emulator runs (all by default); the
    set applied before is restored on exit. The patches are process-wide: run one LocalAws at a time.
    """

    def __init__(
        self,
        *,
        region: str = DEFAULT_REGION,
        server: bool = False,
        host: str = "127.0.0.1",
        patches: tuple[str, ...] = motopatch.PATCH_GROUPS,
        quiet: bool = True,
        s3_process: bool = False,
        s3_readers: int = 0,
    ) -> None:
        if s3_process and not server:
            raise ValueError("LocalAws(s3_process=True) needs server=True: S3 is then reached over HTTP")
        if s3_readers and not s3_process:
            raise ValueError(
                "LocalAws(s3_readers=...) needs s3_process=True: the readers serve that process's S3"
            )
        self.region = region
        self.s3_process = s3_process
        self.s3_readers = s3_readers
        self.s3: S3Process | None = None
        self.quiet = quiet
        self.server = server
        self.host = host
        self.patches = patches
        self.endpoint_url: str | None = None
        self._stack: ExitStack | None = None
        self._registered: list[str] = []
        self._session: boto3.session.Session | None = None
        self._session_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> LocalAws:
        if self._stack is not None:
            raise RuntimeError("LocalAws is already running")
        stack = ExitStack()
        try:
            previous_patches = motopatch.use_patches(self.patches)
            stack.callback(motopatch.use_patches, previous_patches)
            if self.quiet:
                for logger_name, level in _QUIET_LOGGERS.items():
                    stack.enter_context(_logger_level(logger_name, level))
            stack.enter_context(
                mock.patch.dict(
                    os.environ,
                    {**FAKE_CREDENTIALS, "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region},
                )
            )
            if self.server:
                if self.s3_process:
                    self._start_s3_process(stack)
                self._start_server(stack)
            else:
                from moto import mock_aws

                stack.enter_context(mock_aws(config=MOTO_CONFIG))  # type: ignore[call-overload]
            _warm_task_clients(self.region)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def _start_server(self, stack: ExitStack) -> None:
        from moto.core.config import default_user_config
        from moto.moto_api._internal.models import moto_api_backend
        from moto.server import ThreadedMotoServer

        current = cast(dict[str, dict[str, Any]], default_user_config)
        config = {section: {**current.get(section, {}), **values} for section, values in MOTO_CONFIG.items()}
        stack.enter_context(mock.patch.dict(default_user_config, config))
        # Port 0: the OS picks a free port when the server binds, so there is no window in which
        # another process can take it. (Choosing a port first and binding later can fail, and moto's
        # start() then waits forever for a server that never came up.) MOTO_PORT is read by the
        # interpreter each time it calls back, and is set before anything can call back.
        server = ThreadedMotoServer(ip_address=self.host, port=0, verbose=False)
        server.start()
        stack.callback(moto_api_backend.reset)
        stack.callback(server.stop)
        host, port = server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        os.environ["MOTO_PORT"] = str(port)
        os.environ["AWS_ENDPOINT_URL"] = self.endpoint_url

    def _start_s3_process(self, stack: ExitStack) -> None:
        s3 = S3Process(self.host, readers=self.s3_readers)
        stack.callback(self._forget_s3)
        stack.callback(s3.stop)
        self.s3 = s3
        os.environ["AWS_ENDPOINT_URL_S3"] = s3.endpoint_url

    def _forget_s3(self) -> None:
        self.s3 = None

    @property
    def s3_endpoint_url(self) -> str | None:
        """Where S3 is served: the S3 process, or the one server of every service (None: in-process)."""
        return self.s3.endpoint_url if self.s3 is not None else self.endpoint_url

    def seed_objects(
        self,
        bucket: str,
        objects: Mapping[str, tuple[int, str]],
        ages_days: Mapping[str, float] | None = None,
    ) -> int:
        """Put ``objects`` (key -> (size, storage class)) into the existing ``bucket``, with sizes but no
        bodies, straight into the S3 backend (~25k a second; PUTs manage a few hundred).
        ``ages_days``: how long ago some keys were last modified (the rest: now)."""
        if not self.running:
            raise RuntimeError("LocalAws.seed_objects needs a running emulator")
        ages = ages_days or {}
        rows = [(key, size, cls, ages.get(key)) for key, (size, cls) in objects.items()]
        if self.s3 is not None:
            return self.s3.seed(bucket, rows)
        return put_sized_objects(bucket, rows)

    def __exit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            return
        try:
            self._stop_running_executions()
            still = motopatch.drain_event_invocations(EVENT_DRAIN_S)
            if still:
                LOG.warning(
                    "stopping the emulator under %d asynchronous invocation(s) still running after %.0f s: %s",
                    len(still),
                    EVENT_DRAIN_S,
                    ", ".join(still),
                )
        finally:
            for name in self._registered:
                motopatch.unregister_function(name)
            self._registered.clear()
            self.endpoint_url = None
            self._session = None  # its credentials and endpoints were this run's
            stack.close()

    def _stop_running_executions(self) -> None:
        """Stop executions still running (after a timeout), so no worker outlives the emulator."""
        sfn = self.client("stepfunctions")
        for page in sfn.get_paginator("list_state_machines").paginate():
            for machine in page["stateMachines"]:
                running = sfn.list_executions(
                    stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING"
                )
                for execution in running["executions"]:
                    try:
                        sfn.stop_execution(executionArn=execution["executionArn"])
                    except ClientError as exc:
                        LOG.warning("could not stop %s: %s", execution["executionArn"], exc)

    # -- helpers ------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._stack is not None

    @property
    def session(self) -> boto3.session.Session:
        """The one boto3 Session of this run's clients (made at the first use, dropped when the ``with`` ends).

        A Session per client loaded botocore's endpoint and partition data and the service's model again each
        time: 0.2-0.5 s of CPU for the Step Functions client of an execution, before the execution started.
        """
        with self._session_lock:
            if self._session is None:
                self._session = boto3.session.Session(region_name=self.region)
            return self._session

    def client(self, service: str, **kwargs: Any) -> Any:
        """A client of ``service`` at the emulator's endpoint (S3's own, with ``s3_process``), from ``session``."""
        endpoint = self.s3_endpoint_url if service == "s3" else self.endpoint_url
        session = self.session
        with self._session_lock:  # a Session is not thread-safe; its clients are
            return session.client(service, endpoint_url=endpoint, **kwargs)  # type: ignore[call-overload]

    def register_function(self, function_name: str, code_dir: str | os.PathLike[str]) -> None:
        """Run ``code_dir``'s handler when ``function_name`` is invoked (deploy does this for you)."""
        motopatch.register_function(function_name, code_dir)
        self._registered.append(function_name)

    def deploy(
        self,
        template_path: str | os.PathLike[str],
        parameters: Mapping[str, Any] | None = None,
        code_root: str | os.PathLike[str] | None = None,
        *,
        stack_name: str = DEFAULT_STACK_NAME,
    ) -> Deployed:
        if not self.running:
            raise RuntimeError(
                "LocalAws.deploy needs a running emulator: use it inside `with LocalAws() as aws`"
            )
        deployed = deploy_template(
            template_path,
            parameters,
            code_root,
            stack_name=stack_name,
            region=self.region,
            endpoint_url=self.endpoint_url,
            s3_endpoint_url=self.s3_endpoint_url,
            make_client=self.client,
        )
        self._registered.extend(deployed.registered_functions)
        return deployed

    def run(self, state_machine_arn: str, input: Any = None, **kwargs: Any) -> ExecutionResult:  # noqa: A002
        kwargs.setdefault("status_probe", backend_status)
        return run_execution(self.client("stepfunctions"), state_machine_arn, input, **kwargs)


# --------------------------------------------------------------------------------------------------
# Deploying template.yaml
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeployedResource:
    logical_id: str
    type: str
    name: str
    arn: str | None
    created: bool


@dataclass
class Deployed:
    stack_name: str
    region: str
    account_id: str
    parameters: dict[str, Any]
    resources: dict[str, DeployedResource] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    registered_functions: list[str] = field(default_factory=list)

    def _created(self, logical_id: str) -> DeployedResource:
        resource = self.resources.get(logical_id)
        if resource is None or not resource.created:
            known = sorted(key for key, value in self.resources.items() if value.created)
            raise KeyError(f"{logical_id} was not created locally; created: {known}")
        return resource

    def name(self, logical_id: str) -> str:
        return self._created(logical_id).name

    def arn(self, logical_id: str) -> str:
        arn = self._created(logical_id).arn
        if arn is None:
            raise KeyError(f"{logical_id} has no ARN")
        return arn


_NAME_PROPERTY = {
    "AWS::S3::Bucket": "BucketName",
    "AWS::Serverless::Function": "FunctionName",
    "AWS::Serverless::StateMachine": "Name",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::Events::EventBus": "Name",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::Serverless::SimpleTable": "TableName",
}
_NAME_LIMITS = {
    "AWS::Serverless::Function": 64,
    "AWS::Serverless::StateMachine": 80,
    "AWS::StepFunctions::StateMachine": 80,
}

# Properties each creator understands; any other property is reported in Deployed.notes.
_USED_PROPERTIES: dict[str, set[str]] = {
    "AWS::S3::Bucket": {"BucketName", "VersioningConfiguration", "NotificationConfiguration", "Tags"},
    "AWS::Serverless::Function": {
        "FunctionName",
        "CodeUri",
        "Handler",
        "Runtime",
        "Environment",
        "Timeout",
        "MemorySize",
        "Architectures",
        "Description",
        "EphemeralStorage",
        # Irrelevant in-process: the layer is installed in the venv, permissions are not checked.
        "Layers",
        "Policies",
        "Role",
        "Tracing",
    },
    "AWS::Serverless::StateMachine": {
        "Name",
        "Definition",
        "DefinitionUri",
        "DefinitionSubstitutions",
        "Type",
        "Role",
        "Policies",
        "Tracing",
        "Logging",
    },
    "AWS::StepFunctions::StateMachine": {
        "StateMachineName",
        "Definition",
        "DefinitionString",
        "DefinitionSubstitutions",
        "StateMachineType",
        "RoleArn",
        "TracingConfiguration",
        "LoggingConfiguration",
    },
    "AWS::SNS::Topic": {"TopicName", "FifoTopic", "ContentBasedDeduplication", "Tags"},
    "AWS::Events::EventBus": {"Name", "Tags"},
    "AWS::DynamoDB::Table": {
        "TableName",
        "KeySchema",
        "AttributeDefinitions",
        "BillingMode",
        "ProvisionedThroughput",
        "GlobalSecondaryIndexes",
        "LocalSecondaryIndexes",
        "StreamSpecification",
        "TimeToLiveSpecification",
        "Tags",
    },
    "AWS::Serverless::SimpleTable": {"TableName", "PrimaryKey", "ProvisionedThroughput", "Tags"},
}
_CREATION_ORDER = [
    "AWS::S3::Bucket",
    "AWS::DynamoDB::Table",
    "AWS::Serverless::SimpleTable",
    "AWS::SNS::Topic",
    "AWS::Events::EventBus",
    "AWS::Serverless::Function",
    "AWS::Serverless::StateMachine",
    "AWS::StepFunctions::StateMachine",
]


def _dummy_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "README.txt", "hpcstage local runtime: the handler runs from its CodeUri directory\n"
        )
    return buffer.getvalue()


def _bucket_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")[:63].strip("-.")
    if len(name) < 3:
        raise TemplateError(f"cannot make an S3 bucket name from {text!r}")
    return name


class _Deployment:
    def __init__(
        self,
        template: dict[str, Any],
        parameters: dict[str, Any],
        code_root: Path,
        stack_name: str,
        region: str,
        endpoint_url: str | None,
        s3_endpoint_url: str | None = None,
        make_client: Callable[[str], Any] | None = None,
    ) -> None:
        self.template = template
        self.resources_spec: dict[str, Any] = template["Resources"]
        self.code_root = code_root
        self.stack_name = stack_name
        self.region = region
        self.session = boto3.session.Session(region_name=region) if make_client is None else None
        self._make_client = make_client
        self.endpoint_url = endpoint_url
        self.s3_endpoint_url = s3_endpoint_url or endpoint_url
        self.account_id = str(self.client("sts").get_caller_identity()["Account"])
        self.partition = "aws"
        self.deployed = Deployed(
            stack_name=stack_name, region=region, account_id=self.account_id, parameters=parameters
        )
        self._names: dict[str, str] = {}
        self._naming: set[str] = set()
        self._table_streams: dict[str, str] = {}
        self._skipped_noted: set[str] = set()
        self._role_arn = ""
        pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": self.account_id,
            "AWS::StackName": stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{region}:{self.account_id}:stack/{stack_name}/local",
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NotificationARNs": [],
        }
        self.resolver = Resolver(
            template=template,
            parameters=parameters,
            pseudo=pseudo,
            ref_resource=self._ref,
            get_att=self._get_att,
        )

    def client(self, service: str) -> Any:
        if self._make_client is not None:
            return self._make_client(service)
        assert self.session is not None
        endpoint = self.s3_endpoint_url if service == "s3" else self.endpoint_url
        return self.session.client(service, endpoint_url=endpoint)  # type: ignore[call-overload]

    # -- identities ---------------------------------------------------------------------------------

    def _type(self, logical_id: str) -> str:
        return str(self.resources_spec[logical_id].get("Type"))

    def _supported(self, logical_id: str) -> bool:
        return self._type(logical_id) in _USED_PROPERTIES and self._enabled(logical_id)

    def _enabled(self, logical_id: str) -> bool:
        condition = self.resources_spec[logical_id].get("Condition")
        return condition is None or self.resolver.condition(str(condition))

    def name_of(self, logical_id: str) -> str:
        """The physical name: the template's name property if set, else ``<stack>-<LogicalId>``."""
        if logical_id in self._names:
            return self._names[logical_id]
        if logical_id in self._naming:
            raise TemplateError(f"the name of {logical_id} depends on itself")
        self._naming.add(logical_id)
        try:
            kind = self._type(logical_id)
            properties = properties_with_globals(self.template, self.resources_spec[logical_id])
            explicit = properties.get(_NAME_PROPERTY.get(kind, ""))
            if explicit is not None:
                name = as_text(self.resolver.resolve(explicit))
            elif kind == "AWS::S3::Bucket":
                name = _bucket_name(f"{self.stack_name}-{logical_id}")
            else:
                name = f"{self.stack_name}-{logical_id}"[: _NAME_LIMITS.get(kind, 255)]
        finally:
            self._naming.discard(logical_id)
        self._names[logical_id] = name
        return name

    def arn_of(self, logical_id: str) -> str:
        kind, name = self._type(logical_id), self.name_of(logical_id)
        region, account = self.region, self.account_id
        if kind == "AWS::S3::Bucket":
            return f"arn:aws:s3:::{name}"
        if kind == "AWS::Serverless::Function":
            return f"arn:aws:lambda:{region}:{account}:function:{name}"
        if kind in ("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine"):
            return f"arn:aws:states:{region}:{account}:stateMachine:{name}"
        if kind == "AWS::SNS::Topic":
            return f"arn:aws:sns:{region}:{account}:{name}"
        if kind == "AWS::Events::EventBus":
            return f"arn:aws:events:{region}:{account}:event-bus/{name}"
        if kind in ("AWS::DynamoDB::Table", "AWS::Serverless::SimpleTable"):
            return f"arn:aws:dynamodb:{region}:{account}:table/{name}"
        raise TemplateError(f"no ARN for {logical_id} ({kind})")

    def _placeholder(self, logical_id: str, what: str) -> str:
        if logical_id not in self._skipped_noted:
            self._skipped_noted.add(logical_id)
            self.deployed.notes.append(
                f"{logical_id} ({self._type(logical_id)}) is not created locally; references to it resolve "
                "to 'local-skipped:...' placeholders"
            )
        return f"local-skipped:{logical_id}{what}"

    def _ref(self, logical_id: str) -> Any:
        if not self._supported(logical_id):
            return self._placeholder(logical_id, "")
        kind = self._type(logical_id)
        if kind in ("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine", "AWS::SNS::Topic"):
            return self.arn_of(logical_id)
        return self.name_of(logical_id)

    def _get_att(self, logical_id: str, attribute: str) -> Any:
        if not self._supported(logical_id):
            return self._placeholder(logical_id, f".{attribute}")
        kind, name = self._type(logical_id), self.name_of(logical_id)
        if attribute == "Arn" or (attribute == "TopicArn" and kind == "AWS::SNS::Topic"):
            return self.arn_of(logical_id)
        if attribute in ("Name", "TopicName"):
            return name
        if kind == "AWS::S3::Bucket" and attribute == "DomainName":
            return f"{name}.s3.amazonaws.com"
        if kind == "AWS::S3::Bucket" and attribute == "RegionalDomainName":
            return f"{name}.s3.{self.region}.amazonaws.com"
        if kind == "AWS::DynamoDB::Table" and attribute == "StreamArn":
            if logical_id not in self._table_streams:
                raise TemplateError(f"{logical_id}.StreamArn: the table has no stream (StreamSpecification)")
            return self._table_streams[logical_id]
        raise TemplateError(f"Fn::GetAtt {logical_id}.{attribute} is not supported locally ({kind})")

    # -- creation -----------------------------------------------------------------------------------

    def run(self) -> Deployed:
        self._role_arn = self._ensure_role()
        ordered = sorted(
            self.resources_spec,
            key=lambda logical_id: (
                _CREATION_ORDER.index(self._type(logical_id))
                if self._type(logical_id) in _CREATION_ORDER
                else -1
            ),
        )
        for logical_id in ordered:
            kind = self._type(logical_id)
            if kind not in _USED_PROPERTIES:
                self._record_skipped(
                    logical_id, f"{logical_id} ({kind}): not created locally (unsupported type)"
                )
                continue
            if not self._enabled(logical_id):
                condition = self.resources_spec[logical_id].get("Condition")
                self._record_skipped(
                    logical_id, f"{logical_id}: not created (condition {condition} is false)"
                )
                continue
            properties = properties_with_globals(self.template, self.resources_spec[logical_id])
            ignored = sorted(set(properties) - _USED_PROPERTIES[kind])
            if ignored:
                self.deployed.notes.append(f"{logical_id} ({kind}): properties ignored locally: {ignored}")
            creator = getattr(self, "_create_" + kind.split("::", 1)[1].replace("::", "_").lower())
            arn = creator(logical_id, properties)
            self.deployed.resources[logical_id] = DeployedResource(
                logical_id=logical_id, type=kind, name=self.name_of(logical_id), arn=arn, created=True
            )
        self._resolve_outputs()
        return self.deployed

    def _record_skipped(self, logical_id: str, note: str) -> None:
        self.deployed.notes.append(note)
        self._skipped_noted.add(logical_id)
        self.deployed.resources[logical_id] = DeployedResource(
            logical_id=logical_id, type=self._type(logical_id), name="", arn=None, created=False
        )

    def _ensure_role(self) -> str:
        iam = self.client("iam")
        try:
            return str(iam.get_role(RoleName=LOCAL_ROLE_NAME)["Role"]["Arn"])
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchEntity":
                raise
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = iam.create_role(RoleName=LOCAL_ROLE_NAME, AssumeRolePolicyDocument=json.dumps(trust))
        return str(role["Role"]["Arn"])

    def _resolved(self, value: Any) -> Any:
        resolved = self.resolver.resolve(value)
        return None if resolved is NO_VALUE else resolved

    def _check_arn(self, logical_id: str, created: str) -> str:
        expected = self.arn_of(logical_id)
        if created != expected:
            raise TemplateError(
                f"{logical_id}: created {created}, but references were resolved to {expected}"
            )
        return created

    def _create_s3_bucket(self, logical_id: str, properties: dict[str, Any]) -> str:
        s3 = self.client("s3")
        name = self.name_of(logical_id)
        kwargs: dict[str, Any] = {"Bucket": name}
        if self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        s3.create_bucket(**kwargs)
        versioning = self._resolved(properties.get("VersioningConfiguration"))
        if versioning and versioning.get("Status"):
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning["Status"]})
        notification = self._resolved(properties.get("NotificationConfiguration")) or {}
        if "EventBridgeConfiguration" in notification:
            s3.put_bucket_notification_configuration(
                Bucket=name, NotificationConfiguration={"EventBridgeConfiguration": {}}
            )
        other = sorted(set(notification) - {"EventBridgeConfiguration"})
        if other:
            self.deployed.notes.append(f"{logical_id}: notification settings ignored locally: {other}")
        return self.arn_of(logical_id)

    def _create_serverless_function(self, logical_id: str, properties: dict[str, Any]) -> str:
        name = self.name_of(logical_id)
        code_uri = self._resolved(properties.get("CodeUri"))
        if not isinstance(code_uri, str):
            raise TemplateError(f"{logical_id}: CodeUri must be a local directory path, got {code_uri!r}")
        code_dir = (self.code_root / code_uri).resolve()
        if not code_dir.is_dir():
            raise TemplateError(f"{logical_id}: CodeUri directory {code_dir} does not exist")
        handler = self._resolved(properties.get("Handler"))
        if not isinstance(handler, str):
            raise TemplateError(f"{logical_id}: Handler is required")
        variables = self._resolved((properties.get("Environment") or {}).get("Variables")) or {}
        environment = {key: as_text(value) for key, value in variables.items()}
        kwargs: dict[str, Any] = {
            "FunctionName": name,
            "Runtime": as_text(self._resolved(properties.get("Runtime")) or "python3.12"),
            "Role": self._role_arn,
            "Handler": handler,
            "Code": {"ZipFile": _dummy_zip()},
            "Timeout": int(self._resolved(properties.get("Timeout")) or 3),
            "MemorySize": int(self._resolved(properties.get("MemorySize")) or 128),
            "Environment": {"Variables": environment},
        }
        architectures = self._resolved(properties.get("Architectures"))
        if architectures:
            kwargs["Architectures"] = architectures
        storage = self._resolved(properties.get("EphemeralStorage"))
        if storage:
            kwargs["EphemeralStorage"] = {"Size": int(storage["Size"])}
        description = self._resolved(properties.get("Description"))
        if description:
            kwargs["Description"] = as_text(description)
        created = self.client("lambda").create_function(**kwargs)
        motopatch.register_function(name, code_dir)
        self.deployed.registered_functions.append(name)
        events = self.resources_spec[logical_id].get("Properties", {}).get("Events")
        if events:
            self.deployed.notes.append(f"{logical_id}: event sources not wired locally: {sorted(events)}")
        return self._check_arn(logical_id, str(created["FunctionArn"]))

    def _definition_text(
        self, logical_id: str, properties: dict[str, Any], string_property: str | None
    ) -> str:
        """The state machine definition as JSON text, substitutions applied."""
        substitutions = {
            key: as_text(value)
            for key, value in (self._resolved(properties.get("DefinitionSubstitutions")) or {}).items()
        }
        if properties.get("DefinitionUri") is not None:
            uri = self._resolved(properties["DefinitionUri"])
            if not isinstance(uri, str):
                raise TemplateError(f"{logical_id}: DefinitionUri must be a local file path, got {uri!r}")
            path = (self.code_root / uri).resolve()
            if not path.is_file():
                raise TemplateError(f"{logical_id}: DefinitionUri file {path} does not exist")
            text, is_json = path.read_text(encoding="utf-8"), path.suffix.lower() == ".json"
        elif string_property and properties.get(string_property) is not None:
            text, is_json = as_text(self._resolved(properties[string_property])), True
        elif properties.get("Definition") is not None:
            text, is_json = json.dumps(self._resolved(properties["Definition"])), True
        else:
            raise TemplateError(f"{logical_id}: no state machine definition")
        text = substitute_definition(text, substitutions, json_escape=is_json, where=logical_id)
        try:
            definition = json.loads(text) if is_json else load_yaml(text)
        except (json.JSONDecodeError, ValueError) as exc:
            raise TemplateError(
                f"{logical_id}: the definition is not valid after substitution: {exc}"
            ) from exc
        return json.dumps(definition)

    def _create_state_machine(self, logical_id: str, definition: str, machine_type: str) -> str:
        created = self.client("stepfunctions").create_state_machine(
            name=self.name_of(logical_id), definition=definition, roleArn=self._role_arn, type=machine_type
        )
        return self._check_arn(logical_id, str(created["stateMachineArn"]))

    def _create_serverless_statemachine(self, logical_id: str, properties: dict[str, Any]) -> str:
        definition = self._definition_text(logical_id, properties, None)
        machine_type = as_text(self._resolved(properties.get("Type")) or "STANDARD")
        return self._create_state_machine(logical_id, definition, machine_type)

    def _create_stepfunctions_statemachine(self, logical_id: str, properties: dict[str, Any]) -> str:
        definition = self._definition_text(logical_id, properties, "DefinitionString")
        machine_type = as_text(self._resolved(properties.get("StateMachineType")) or "STANDARD")
        return self._create_state_machine(logical_id, definition, machine_type)

    def _create_sns_topic(self, logical_id: str, properties: dict[str, Any]) -> str:
        attributes = {}
        if self._resolved(properties.get("FifoTopic")):
            attributes["FifoTopic"] = "true"
        if self._resolved(properties.get("ContentBasedDeduplication")):
            attributes["ContentBasedDeduplication"] = "true"
        created = self.client("sns").create_topic(Name=self.name_of(logical_id), Attributes=attributes)
        return self._check_arn(logical_id, str(created["TopicArn"]))

    def _create_events_eventbus(self, logical_id: str, properties: dict[str, Any]) -> str:
        name = self.name_of(logical_id)
        if name != "default":
            self.client("events").create_event_bus(Name=name)
        return self.arn_of(logical_id)

    def _create_table(self, logical_id: str, kwargs: dict[str, Any], ttl: Any) -> str:
        dynamodb = self.client("dynamodb")
        created = dynamodb.create_table(**kwargs)["TableDescription"]
        if created.get("LatestStreamArn"):
            self._table_streams[logical_id] = str(created["LatestStreamArn"])
        if ttl and ttl.get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=kwargs["TableName"],
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
        return self._check_arn(logical_id, str(created["TableArn"]))

    def _create_dynamodb_table(self, logical_id: str, properties: dict[str, Any]) -> str:
        resolved = self._resolved({key: value for key, value in properties.items() if key != "TableName"})
        kwargs: dict[str, Any] = {
            "TableName": self.name_of(logical_id),
            "KeySchema": resolved["KeySchema"],
            "AttributeDefinitions": resolved["AttributeDefinitions"],
        }
        billing = resolved.get("BillingMode", "PROVISIONED")
        kwargs["BillingMode"] = billing
        if billing == "PROVISIONED":
            kwargs["ProvisionedThroughput"] = resolved.get(
                "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
            )
        for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if resolved.get(key):
                kwargs[key] = resolved[key]
        stream = resolved.get("StreamSpecification")
        if stream:
            kwargs["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": stream["StreamViewType"],
            }
        return self._create_table(logical_id, kwargs, resolved.get("TimeToLiveSpecification"))

    def _create_serverless_simpletable(self, logical_id: str, properties: dict[str, Any]) -> str:
        primary = self._resolved(properties.get("PrimaryKey")) or {"Name": "id", "Type": "String"}
        kind = {"String": "S", "Number": "N", "Binary": "B"}[primary.get("Type", "String")]
        kwargs: dict[str, Any] = {
            "TableName": self.name_of(logical_id),
            "KeySchema": [{"AttributeName": primary["Name"], "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": primary["Name"], "AttributeType": kind}],
        }
        throughput = self._resolved(properties.get("ProvisionedThroughput"))
        if throughput:
            kwargs.update(BillingMode="PROVISIONED", ProvisionedThroughput=throughput)
        else:
            kwargs["BillingMode"] = "PAY_PER_REQUEST"
        return self._create_table(logical_id, kwargs, None)

    def _resolve_outputs(self) -> None:
        for name, spec in (self.template.get("Outputs") or {}).items():
            condition = (spec or {}).get("Condition")
            if condition is not None and not self.resolver.condition(str(condition)):
                continue
            try:
                self.deployed.outputs[name] = self._resolved((spec or {}).get("Value"))
            except TemplateError as exc:
                self.deployed.notes.append(f"output {name} not resolved locally: {exc}")


_PLACEHOLDER_RE = re.compile(r"\$\{([^}]*)\}")


def substitute_definition(
    text: str, substitutions: Mapping[str, str], *, json_escape: bool, where: str = ""
) -> str:
    """Replace ``${Key}`` with DefinitionSubstitutions values; any other ``${...}`` is an error.

    Inside a JSON document the value is JSON-escaped, so a quote in a value cannot break the file.
    """
    missing: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in substitutions:
            missing.add(key)
            return match.group(0)
        value = substitutions[key]
        return json.dumps(value)[1:-1] if json_escape else value

    result = _PLACEHOLDER_RE.sub(replace, text)
    if missing:
        raise TemplateError(
            f"{where}: definition placeholders without a DefinitionSubstitutions value: {sorted(missing)}"
        )
    return result


def deploy_template(
    template_path: str | os.PathLike[str],
    parameters: Mapping[str, Any] | None = None,
    code_root: str | os.PathLike[str] | None = None,
    *,
    stack_name: str = DEFAULT_STACK_NAME,
    region: str | None = None,
    endpoint_url: str | None = None,
    s3_endpoint_url: str | None = None,
    make_client: Callable[[str], Any] | None = None,
) -> Deployed:
    """Create the template's resources in the running emulator; return their names and ARNs.

    ``code_root`` is the directory CodeUri and DefinitionUri are relative to (default: the template's
    directory). Every AWS::Serverless::Function is registered so that invoking it runs its handler
    from CodeUri in this process. Unsupported resource types are skipped and listed in ``notes``.
    Deploy into a fresh emulator: resources that already exist are an error, as in CloudFormation.
    ``s3_endpoint_url``: where S3 is, when not at ``endpoint_url`` (``LocalAws(s3_process=True)``).
    ``make_client``: makes the client of a service at the right endpoint (``LocalAws.client``: clients of one
    Session); by default they are made from a new Session for ``region`` at ``endpoint_url``/``s3_endpoint_url``.
    """
    path = Path(template_path)
    template = load_template(path)
    values = _resolve_parameters(template, parameters)
    region = region or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    root = Path(code_root) if code_root is not None else path.parent
    deployment = _Deployment(
        template, values, root.resolve(), stack_name, region, endpoint_url, s3_endpoint_url, make_client
    )
    try:
        return deployment.run()
    except BaseException:
        for name in deployment.deployed.registered_functions:
            motopatch.unregister_function(name)
        raise


# --------------------------------------------------------------------------------------------------
# Running an execution
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutionResult:
    execution_arn: str
    status: str
    output: Any
    error: str | None
    cause: str | None
    history: list[dict[str, Any]]

    @property
    def succeeded(self) -> bool:
        return self.status == "SUCCEEDED"

    def event_types(self) -> list[str]:
        return [str(event["type"]) for event in self.history]


class ExecutionTimeout(TimeoutError):
    """The execution did not finish within timeout_s; it was stopped (unless asked not to)."""

    def __init__(
        self, execution_arn: str, timeout_s: float, last_status: str, final_status: str | None
    ) -> None:
        super().__init__(f"execution {execution_arn} still {last_status} after {timeout_s:g} s")
        self.execution_arn = execution_arn
        self.last_status = last_status
        # The status once stopped (ABORTED), or None when not stopped or it did not settle in time.
        self.final_status = final_status


_MAX_HISTORY_PAGES = 10_000
# How often run_execution asks ``status_probe`` between two DescribeExecution calls.
PROBE_S = 0.05


def backend_status(execution_arn: str) -> str:
    """An execution's status read from moto's Step Functions backend in this process (LocalAws runs it here,
    in either mode): no request, no rendering, microseconds, where a DescribeExecution costs ~7 ms of CPU."""
    from moto.stepfunctions.responses import get_backend

    _, _, _, region, account, _ = execution_arn.split(":", 5)
    return str(get_backend(account, region).describe_execution(execution_arn).status)


def _history_events(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
    for _ in range(_MAX_HISTORY_PAGES):
        page = sfn.get_execution_history(**kwargs)
        events.extend(page.get("events", []))
        token = page.get("nextToken")
        if not token:
            return events
        kwargs["nextToken"] = token
    raise RuntimeError(f"history of {execution_arn} has more than {_MAX_HISTORY_PAGES} pages")


def _new_events(events: list[dict[str, Any]], last_id: int) -> Iterator[dict[str, Any]]:
    return (event for event in events if int(event["id"]) > last_id)


def run_execution(
    sfn: Any,
    state_machine_arn: str,
    input: Any = None,  # noqa: A002 - the Step Functions name for it
    *,
    name: str | None = None,
    timeout_s: float = 300.0,
    poll_s: float = 0.2,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    stop_on_timeout: bool = True,
    history_every_s: float | None = None,
    status_probe: Callable[[str], str] | None = None,
) -> ExecutionResult:
    """Start an execution and wait for it, at most ``timeout_s``.

    ``input`` is JSON-encoded unless it is already a string. ``on_event`` receives each history event
    once, in order, as it appears: the status is polled every ``poll_s`` and the history every
    ``history_every_s`` (default: ``poll_s``) and once more at the end. Works against moto or real AWS alike.
    Raises ExecutionTimeout (after stopping the execution) if it does not finish in time.

    On the embedded endpoint a history costs ~4x a status (moto renders every event: 28 ms of CPU against
    8 ms for 27 events, in the process that runs the execution), so a caller that only shows progress polls
    it less often than the status.

    ``status_probe`` (``LocalAws.run``: ``backend_status``) reads the status without a request; asked every
    ``PROBE_S`` between two polls, it ends the wait as soon as the execution has ended (seen 0.025 s after its
    end on average, instead of ``poll_s / 2``). The status and the output returned still come from
    DescribeExecution.
    """
    if timeout_s <= 0 or poll_s <= 0:
        raise ValueError("timeout_s and poll_s must be positive")
    history_every_s = poll_s if history_every_s is None else history_every_s
    if history_every_s <= 0:
        raise ValueError("history_every_s must be positive")
    text = input if isinstance(input, str) else json.dumps({} if input is None else input)
    # Always named: moto (unlike AWS) does not generate a name, and a second unnamed execution of
    # the same state machine would collide with the first ("...:execution:<machine>:None").
    start = {"stateMachineArn": state_machine_arn, "input": text, "name": name or str(uuid.uuid4())}
    execution_arn = str(sfn.start_execution(**start)["executionArn"])
    deadline = time.monotonic() + timeout_s
    last_id = 0
    description: dict[str, Any] = {"status": "RUNNING"}
    finished = False
    history_due = time.monotonic()
    step_s = poll_s if status_probe is None else min(poll_s, PROBE_S)
    for _ in range(math.ceil(timeout_s / step_s) + 2):
        description = sfn.describe_execution(executionArn=execution_arn)
        if on_event is not None and description["status"] == "RUNNING" and time.monotonic() >= history_due:
            history_due = time.monotonic() + history_every_s
            for event in _new_events(_history_events(sfn, execution_arn), last_id):
                on_event(event)
                last_id = int(event["id"])
        if description["status"] != "RUNNING":
            finished = True
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        _wait(min(poll_s, remaining), execution_arn, status_probe)
    if not finished:
        final_status = None
        if stop_on_timeout:
            sfn.stop_execution(
                executionArn=execution_arn, error="hpcstage.LocalTimeout", cause="run_execution timed out"
            )
            final_status = _settled_status(sfn, execution_arn, poll_s)
        raise ExecutionTimeout(execution_arn, timeout_s, str(description["status"]), final_status)
    history = _history_events(sfn, execution_arn)
    if on_event is not None:
        for event in _new_events(history, last_id):
            on_event(event)
    raw_output = description.get("output")
    return ExecutionResult(
        execution_arn=execution_arn,
        status=str(description["status"]),
        output=json.loads(raw_output) if raw_output is not None else None,
        error=description.get("error"),
        cause=description.get("cause"),
        history=history,
    )


def _wait(seconds: float, execution_arn: str, status_probe: Callable[[str], str] | None) -> None:
    """Sleep ``seconds``, or less: until ``status_probe`` says the execution is no longer RUNNING."""
    if status_probe is None:
        time.sleep(seconds)
        return
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        time.sleep(min(PROBE_S, left))
        if status_probe(execution_arn) != "RUNNING":
            return


_STOP_SETTLE_S = 10.0


def _settled_status(sfn: Any, execution_arn: str, poll_s: float) -> str | None:
    """The status after a stop: moto ends the execution's worker thread shortly after StopExecution
    (AWS reports ABORTED at once), so wait a bounded while for it to leave RUNNING."""
    deadline = time.monotonic() + _STOP_SETTLE_S
    for _ in range(math.ceil(_STOP_SETTLE_S / poll_s) + 1):
        status = str(sfn.describe_execution(executionArn=execution_arn)["status"])
        if status != "RUNNING":
            return status
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    return None


def describe_map_runs(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    """describe_map_run for every Map Run of an execution (item counts for a progress display)."""
    runs = sfn.list_map_runs(executionArn=execution_arn).get("mapRuns", [])
    return [sfn.describe_map_run(mapRunArn=run["mapRunArn"]) for run in runs]
