"""Submit the Slurm job that reads the staged files, and poll it until it ends."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients, tracing
from hpcstage.staging import steps

logger = Logger()
tracer = Tracer(provider=tracing.provider())  # no X-Ray SDK import when tracing is off (hpcstage.tracing)
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    action, run = event["action"], event["run"]
    c = steps.LazyClients(clients.client, s3=clients.s3())
    if action == "submit":
        out = steps.submit_job_task(c, run)
        logger.info("job submitted", extra={"job_id": out["job_id"]})
        return out
    if action == "poll":
        return steps.job_poll_task(c, run, int(event.get("polls", 0)))
    raise ValueError(f"unknown action {action!r}; expected submit or poll")
