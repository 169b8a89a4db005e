"""After a failure: cancel the job if it runs, release only the staged inputs, keep every output."""

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
    c = steps.LazyClients(clients.client, s3=clients.s3())
    out = steps.cleanup_task(c, event["run"], event.get("error"))
    logger.info("cleanup done", extra={"cleanup": out})
    return out
