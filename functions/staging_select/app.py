"""Select the objects to stage from the inventory (and follow S3 restores of archived ones)."""

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
    action = event.get("action", "select")
    if action == "restore_poll":
        polled = steps.restore_poll_task(clients.s3(), event["run"], int(event.get("polls", 0)))
        metrics.add_metric(name="ArchivedObjectsPending", unit=MetricUnit.Count, value=polled["pending"])
        return polled
    if action != "select":
        raise ValueError(f"unknown action {action!r}; expected select or restore_poll")
    try:
        out = steps.select_task(steps.LazyClients(clients.client, s3=clients.s3()), event["run"])
    except Exception:
        # Counted (a refused selection is the commonest failure), then raised to the state machine.
        metrics.add_metric(name="SelectionsRefused", unit=MetricUnit.Count, value=1)
        raise
    metrics.add_metric(name="ObjectsSelected", unit=MetricUnit.Count, value=out["objects"])
    metrics.add_metric(name="BytesSelected", unit=MetricUnit.Bytes, value=out["bytes"])
    return out
