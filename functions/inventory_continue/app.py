"""Gather the sub-ranges of shards that stopped on their budget into the next round's items."""

import os  # noqa: F401
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients
from hpcstage.inventory import tasks

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    cfg = tasks.config_from(event["config"])
    return tasks.continue_task(clients.s3(), cfg, int(event["round"]))
