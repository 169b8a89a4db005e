"""The inventory's Reduce step: every range listed and the pieces tile the key space; then manifest, Parquet,
summary, report, the Hive partition and the _latest pointer (fleet.reduce_run)."""

import os  # noqa: F401
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients, tracing
from hpcstage.inventory import fleet

logger = Logger()
tracer = Tracer(provider=tracing.provider())  # no X-Ray SDK import when tracing is off (hpcstage.tracing)
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    cfg = fleet.FleetConfig.from_dict(event["config"])
    out = fleet.reduce_run(s3=clients.s3(), ddb=clients.client("dynamodb"), cfg=cfg)
    metrics.add_metric(name="Objects", unit=MetricUnit.Count, value=out["objects"])
    metrics.add_metric(name="ListRequests", unit=MetricUnit.Count, value=out["list_requests"])
    return out
