"""Write the run's report (report.json under its work prefix) and return its summary."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients, tracing
from hpcstage.staging import steps

logger = Logger()
tracer = Tracer(provider=tracing.provider())  # no X-Ray SDK import when tracing is off (hpcstage.tracing)
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = steps.report_task(clients.s3(), event["run"])
    metrics.add_metric(name="ObjectsStaged", unit=MetricUnit.Count, value=out["objects"])
    metrics.add_metric(name="OutputsExported", unit=MetricUnit.Count, value=out["outputs"])
    return out
