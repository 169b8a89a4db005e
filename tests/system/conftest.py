import sys
from pathlib import Path

# tests/fakes.py is a test helper module shared by the tiers, imported by its file name.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import os  # noqa: E402

import pytest  # noqa: E402

os.environ.update(
    {
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
)

# The template names the buckets its functions may list (no default); moto enforces no IAM, so one name serves.
LOCAL_PARAMETERS = {"SourceBucketArns": "arn:aws:s3:::hpcstage-local-tests"}


@pytest.fixture(scope="module")
def local_stack():  # type: ignore[no-untyped-def]
    """One emulator + deployed template per module (deploying is the slow part); buckets per test."""
    from hpcstage.local import LocalAws

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # Without the "map_tolerance" patch a failed Distributed Map item yields null, as in stock moto;
    # the state machine's own completeness check (Continue) must catch that, so the tests run that way.
    # "dynamodb" serialises moto's DynamoDB, which is not thread-safe (the fleet's listers write it at once).
    with LocalAws(patches=("lambda", "s3_listing", "map_iteration", "dynamodb")) as aws:
        deployed = aws.deploy(os.path.join(root, "template.yaml"), LOCAL_PARAMETERS, root)
        yield aws, deployed
