"""The local runtime: the same template, state machines and handlers, run offline on one machine.

moto provides S3, Lambda, Step Functions (it executes ASL with LocalStack's interpreter), SNS,
EventBridge and DynamoDB; ``motopatch`` makes its Lambda call the real Python handlers in-process and
fixes the few moto behaviours the pipeline depends on; ``runtime`` starts moto, deploys template.yaml
into it with boto3 and runs executions with a bounded wait.

Nothing here is imported by the Lambda handlers or the core: it needs the ``[local]`` extra (moto).
"""

from .runtime import (
    Deployed,
    DeployedResource,
    ExecutionResult,
    ExecutionTimeout,
    LocalAws,
    TemplateError,
    deploy_template,
    describe_map_runs,
    run_execution,
)

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
