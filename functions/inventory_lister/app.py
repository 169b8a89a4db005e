"""One lister of the fleet (invoked asynchronously by the launcher): several streams, work stolen via DynamoDB;
the one that reports the run complete reduces it first when it has the time (fleet.Lister.reduce_here)."""

import os  # noqa: F401
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients, tracing
from hpcstage.inventory import fleet
from hpcstage.s3util import AccessOptions

logger = Logger()
tracer = Tracer(provider=tracing.provider())  # no X-Ray SDK import when tracing is off (hpcstage.tracing)
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = fleet.run_lister(
        s3=clients.s3(),
        ddb=clients.client("dynamodb"),
        sfn=clients.client("stepfunctions"),
        event=event,
        remaining_ms=context.get_remaining_time_in_millis,
        source_s3=clients.source_s3(AccessOptions.from_dict(event["config"].get("access"))),
    )
    metrics.add_metric(name="PagesListed", unit=MetricUnit.Count, value=out["pages"])
    reduced = out.get("reduced")
    if reduced is not None:  # this lister won the completion and reduced the run: the reduce's metrics
        metrics.add_metric(name="Objects", unit=MetricUnit.Count, value=reduced["objects"])
        metrics.add_metric(name="ListRequests", unit=MetricUnit.Count, value=reduced["list_requests"])
    return out
