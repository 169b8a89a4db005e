"""Start a staging execution when a staging request or a ready marker lands in S3.

Invoked by the EventBridge rule on S3 "Object Created" events for the configured bucket, key prefix
and suffix (template.yaml: StagingTriggerRule; the bucket must have EventBridge notifications turned
on). A ``*.json`` object is a staging request, laid over DEFAULT_STAGING_REQUEST; any other object (a
``_READY`` marker) stages the inventory in its directory with DEFAULT_STAGING_REQUEST.

Exactly one execution per object version: the execution name is a hash of bucket, key and version id
(or ETag and sequencer), a Powertools idempotency record in DynamoDB answers duplicate and replayed
events without calling Step Functions again, and ExecutionAlreadyExists (a replay after the record
expired) counts as success. The key is only ever data: it never reaches a shell or the name.
"""

import functools
import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from hpcstage import clients, tracing
from hpcstage.staging import trigger as staging_trigger
from hpcstage.staging.config import StagingDefaults

logger = Logger()
tracer = Tracer(provider=tracing.provider())  # no X-Ray SDK import when tracing is off (hpcstage.tracing)
metrics = Metrics()

# Longer than EventBridge retries a delivery (24 h) and than any archive replay is likely to lag.
IDEMPOTENCY_EXPIRY_S = 7 * 24 * 3600


@functools.cache
def idempotent_start() -> tuple[Callable[..., dict[str, Any]], IdempotencyConfig]:
    """Built on first use, not at import: the table name comes from the environment."""
    persistence = DynamoDBPersistenceLayer(
        table_name=os.environ["IDEMPOTENCY_TABLE"], boto3_client=clients.client("dynamodb")
    )
    config = IdempotencyConfig(expires_after_seconds=IDEMPOTENCY_EXPIRY_S)

    @idempotent_function(data_keyword_argument="trigger", persistence_store=persistence, config=config)
    def start(trigger: dict[str, str]) -> dict[str, Any]:
        obj = staging_trigger.TriggerObject(**trigger)
        request = staging_trigger.trigger_input(
            clients.s3(),
            obj,
            default_request=staging_trigger.default_request_from_env(
                os.environ.get("DEFAULT_STAGING_REQUEST")
            ),
            work_bucket=os.environ["STAGING_WORK_BUCKET"],
            work_prefix=os.environ.get("STAGING_WORK_PREFIX", "staging"),
            defaults=StagingDefaults.from_env(os.environ),
        )
        return staging_trigger.start_staging(
            clients.client("stepfunctions"), os.environ["STAGING_STATE_MACHINE_ARN"], obj, request
        )

    return start, config


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    obj = staging_trigger.trigger_object(event)
    start, config = idempotent_start()
    config.register_lambda_context(context)
    out = start(trigger=obj.to_dict())
    logger.info("staging triggered", extra={"object": obj.to_dict(), "execution": out})
    return out
