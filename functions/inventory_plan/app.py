"""Write the first listing round's items: the root range, or the previous run's ranges when auditing."""

import os  # noqa: F401
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients
from hpcstage.inventory import tasks

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    cfg = tasks.config_from(event["config"])
    out = tasks.plan_task(clients.s3(), cfg)
    metrics.add_metric(name="SeedRanges", unit=MetricUnit.Count, value=out["ranges"])
    return out
