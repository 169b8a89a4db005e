"""The inventory state machine's ValidateInput and Launch steps (one function: the launcher validates its own input).

``{"input": ..., "run_id": ..., "started": ...}`` checks an execution input against
schemas/inventory-input.schema.json and fills its defaults (the first state);
``{"config": ..., "task_token": ...}`` writes the run's meta item and seed ranges (once) and invokes the
listers asynchronously; the listers answer the task token when the run is done.
"""

import os
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
    if "task_token" not in event:
        cfg = fleet.validate_input(
            event.get("input"),
            run_id=str(event["run_id"]),
            started=str(event["started"]),
            results_bucket=os.environ["RESULTS_BUCKET"],
            results_prefix=os.environ.get("RESULTS_PREFIX", "inventory"),
            table=os.environ["FLEET_TABLE"],
            lister_timeout_s=int(os.environ.get("LISTER_TIMEOUT_SECONDS", "900")),
        )
        logger.info("inventory requested", extra={"bucket": cfg.bucket, "prefix": cfg.prefix})
        metrics.add_metric(name="InventoriesRequested", unit=MetricUnit.Count, value=1)
        return {"config": cfg.to_dict(), "started": cfg.started}
    out = fleet.launch(
        s3=clients.s3(),
        ddb=clients.client("dynamodb"),
        sfn=clients.client("stepfunctions"),
        lam=clients.client("lambda", pool=fleet.LAUNCH_THREADS),
        cfg=fleet.FleetConfig.from_dict(event["config"]),
        token=str(event["task_token"]),
        lister_function=os.environ["LISTER_FUNCTION"],
    )
    metrics.add_metric(name="ListersLaunched", unit=MetricUnit.Count, value=out["listers"])
    return out
