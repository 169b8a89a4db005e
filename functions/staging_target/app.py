"""Drive the staging target: start and poll stage/export/release, and verify the exported outputs."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients, tracing
from hpcstage.staging import steps

logger = Logger()
tracer = Tracer(provider=tracing.provider())  # no X-Ray SDK import when tracing is off (hpcstage.tracing)
metrics = Metrics()

POLLS = {"stage_poll": "stage", "export_poll": "export", "release_poll": "release"}


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    action, run = event["action"], event["run"]
    c = steps.LazyClients(clients.client, s3=clients.s3())
    if action in POLLS:
        return steps.operation_poll_task(c, run, POLLS[action], int(event.get("polls", 0)))
    if action == "stage_start":
        return steps.stage_start_task(c, run)
    if action == "export_start":
        return steps.export_start_task(c, run)
    if action == "verify":
        return steps.verify_task(c, run)
    if action == "release_start":
        return steps.release_start_task(c, run)
    raise ValueError(f"unknown action {action!r}")
