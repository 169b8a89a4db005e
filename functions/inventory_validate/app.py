"""Validate the execution input (the state machine's first state) and fill its defaults."""

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage.inventory import tasks

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    cfg = tasks.validate_input(
        event.get("input"),
        run_id=str(event["run_id"]),
        results_bucket=os.environ["RESULTS_BUCKET"],
        results_prefix=os.environ.get("RESULTS_PREFIX", "inventory"),
    )
    logger.info("inventory requested", extra={"bucket": cfg.bucket, "prefix": cfg.prefix})
    return {"config": tasks.config_dict(cfg), "started": event["started"]}
