"""Validate the staging request (the state machine's first state) and record it under the run's work prefix."""

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients, tracing
from hpcstage.staging import steps
from hpcstage.staging.config import StagingDefaults, validate_staging_input

logger = Logger()
tracer = Tracer(provider=tracing.provider())  # no X-Ray SDK import when tracing is off (hpcstage.tracing)
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    cfg = validate_staging_input(
        event.get("input"),
        run_id=str(event["run_id"]),
        work_bucket=os.environ["STAGING_WORK_BUCKET"],
        work_prefix=os.environ.get("STAGING_WORK_PREFIX", "staging"),
        defaults=StagingDefaults.from_env(os.environ),
    )
    logger.info(
        "staging requested",
        extra={"inventory": cfg.inventory or cfg.latest_inventory_of, "target": cfg.target["type"]},
    )
    # EC2 only when a head node is to be found by its ParallelCluster tags (cluster_name); the
    # results bucket only when the input names the latest inventory of a bucket.
    return steps.validate_task(
        clients.s3(),
        cfg,
        steps.LazyClients(clients.client),
        results_bucket=os.environ["RESULTS_BUCKET"],
        results_prefix=os.environ.get("RESULTS_PREFIX", "inventory"),
    )
