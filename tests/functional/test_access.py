"""Reaching buckets that are not the caller's own: roles to assume, requester pays, anonymous, profiles, and
AccessDenied on part of a bucket (moto, and the project's FakeS3 where a partial denial is needed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from fakes import FakeS3
from hpcstage import cli
from hpcstage.errors import AccessDeniedError, InputError
from hpcstage.inventory.lister import ListOptions
from hpcstage.inventory.output import LocalStore
from hpcstage.inventory.runner import InventoryOptions, run_inventory
from hpcstage.s3util import AccessOptions, make_s3_client
from moto import mock_aws

BUCKET = "collab-data"
ROLE = "arn:aws:iam::210987654321:role/hpcstage-read"


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for i in range(25):
            client.put_object(Bucket=BUCKET, Key=f"data/{i:03d}", Body=b"x" * i)
        yield client


def headers_of(client: Any, operation: str = "ListObjectsV2") -> list[dict[str, str]]:
    sent: list[dict[str, str]] = []

    def record(request: Any, **_: Any) -> None:
        sent.append(
            {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        )

    client.meta.events.register(f"before-send.s3.{operation}", record)
    return sent


class RecordingSts:
    def __init__(self) -> None:
        self.sts = boto3.client("sts", region_name="us-east-1")
        self.calls: list[dict[str, Any]] = []

    def assume_role(self, **params: Any) -> Any:
        self.calls.append(params)
        return self.sts.assume_role(**params)


def test_a_cross_account_target_is_listed_with_the_assumed_role(s3: Any, tmp_path: Path) -> None:
    sts = RecordingSts()
    client = make_s3_client(access=AccessOptions(role_arn=ROLE, external_id="lab-2026"), sts=sts)
    sent = headers_of(client)
    summary = run_inventory(client, BUCKET, "", LocalStore(tmp_path), InventoryOptions(workers=2))
    assert summary["objects"] == 25
    assert sts.calls == [{"RoleArn": ROLE, "RoleSessionName": "hpcstage-inventory", "ExternalId": "lab-2026"}]
    # every LIST was signed with the role's temporary key (moto issues ASIA... ids), none with the caller's
    assert sent and all("Credential=ASIA" in h["authorization"] for h in sent)
    assert all("Credential=testing" not in h["authorization"] for h in sent)


def test_a_role_that_cannot_be_assumed_is_a_one_line_error(s3: Any) -> None:
    class Refusing:
        def assume_role(self, **params: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not trusted"}}, "AssumeRole")

    client = make_s3_client(access=AccessOptions(role_arn=ROLE, external_id="x1"), sts=Refusing())
    with pytest.raises(AccessDeniedError) as err:
        client.list_objects_v2(Bucket=BUCKET)
    assert str(err.value) == (
        f"cannot assume role {ROLE} (AccessDenied): the role's trust policy must allow this principal "
        "with this external id"
    )


def test_request_payer_is_sent_when_asked_and_the_cost_is_shown(s3: Any, tmp_path: Path) -> None:
    client = make_s3_client(access=AccessOptions(request_payer=True))
    sent = headers_of(client)
    opts = InventoryOptions(
        workers=1, listing=ListOptions(page_size=10), extra_summary={"request_payer": True}
    )
    summary = run_inventory(client, BUCKET, "", LocalStore(tmp_path), opts)
    assert [h.get("x-amz-request-payer") for h in sent] == ["requester"] * 3
    assert summary["request_payer"] is True and summary["list_requests"] == 3
    assert (
        "Requester pays: the 3 LIST requests ($0.0000) and their data transfer are billed to this account"
        in (tmp_path / "report.txt").read_text()
    )
    plain = make_s3_client()
    sent_plain = headers_of(plain)
    plain.list_objects_v2(Bucket=BUCKET)
    assert "x-amz-request-payer" not in sent_plain[0]


def run_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[dict[str, str]]]:
    """hpcstage inventory through main(), recording the S3 clients it makes and the LISTs they send."""
    made: list[Any] = []
    sent: list[dict[str, str]] = []
    real = cli.make_s3_client

    def recording(*a: Any, **kw: Any) -> Any:
        client = real(*a, **kw)
        made.append(client)
        client.meta.events.register(
            "before-send.s3.ListObjectsV2",
            lambda request, **_: sent.append({k.lower(): str(v) for k, v in request.headers.items()}),
        )
        return client

    monkeypatch.setattr(cli, "make_s3_client", recording)
    assert cli.main(argv) == 0
    return made, sent


def test_no_sign_request_lists_a_public_bucket_anonymously(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made, sent = run_cli(
        [
            "inventory",
            f"s3://{BUCKET}",
            "--no-sign-request",
            "--out",
            str(tmp_path),
            "--json",
            "--no-progress",
        ],
        monkeypatch,
    )
    from botocore import UNSIGNED

    assert made[0].meta.config.signature_version is UNSIGNED
    assert sent and all("authorization" not in h for h in sent)
    assert json.loads(capsys.readouterr().out)["objects"] == 25


def test_profile_is_honoured_and_an_unknown_one_is_a_one_line_error(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile lab]\nregion = us-east-1\n")
    creds = tmp_path / "credentials"
    creds.write_text("[lab]\naws_access_key_id = AKIALABPROFILE000001\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    out = tmp_path / "out"
    made, sent = run_cli(
        ["inventory", f"s3://{BUCKET}", "--profile", "lab", "--out", str(out), "--json", "--no-progress"],
        monkeypatch,
    )
    assert sent and all("Credential=AKIALABPROFILE000001/" in h["authorization"] for h in sent)
    capsys.readouterr()
    assert (
        cli.main(["inventory", f"s3://{BUCKET}", "--profile", "nope", "--no-progress"]) == 253
    )  # config error
    err = capsys.readouterr().err
    assert err == "hpcstage: error: no AWS profile named 'nope' (profiles in your AWS config: lab)\n"


@pytest.mark.parametrize(
    ("access", "message"),
    [
        ({"unsigned": True, "role_arn": ROLE}, "--no-sign-request sends no credentials"),
        ({"external_id": "abc"}, "an external id is only used with a role to assume"),
        ({"role_arn": "arn:aws:iam::1:user/x"}, "not an IAM role ARN"),
        ({"role_arn": ROLE, "external_id": "bad id with spaces"}, "an external id is 2 to 1,224 characters"),
    ],
)
def test_malformed_access_says_what_is_wrong(access: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as err:
        AccessOptions(**access)
    assert message in str(err.value)


class DenyingS3(FakeS3):
    """FakeS3 whose bucket policy denies listing under ``restricted/``: a page that would show such a key
    is refused with AccessDenied, as S3 refuses a request the policy does not allow."""

    def list_objects_v2(self, **p: Any) -> dict[str, Any]:
        resp = super().list_objects_v2(**p)
        if any(o["Key"].startswith("restricted/") for o in resp.get("Contents", ())):
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2"
            )
        return resp


def test_access_denied_on_part_of_a_bucket_fails_the_run_naming_what_was_not_listed(tmp_path: Path) -> None:
    keys = [f"public/k{i:02d}" for i in range(10)] + [f"restricted/r{i}" for i in range(5)]
    opts = InventoryOptions(workers=1, listing=ListOptions(page_size=5))
    with pytest.raises(AccessDeniedError) as err:
        run_inventory(DenyingS3(keys), "bkt", "", LocalStore(tmp_path), opts)
    assert str(err.value) == (
        "access denied listing bucket bkt (needs s3:ListBucket; a requester-pays bucket also needs "
        "--request-payer) [keys under '' after 'public/k09' to the last key: not listed]"
    )
    assert not (tmp_path / "summary.json").exists(), "a partial count was written as a total"


def test_fleet_input_takes_versions_and_access() -> None:
    from hpcstage.inventory import fleet

    cfg = fleet.validate_input(
        {
            "bucket": "bkt",
            "versions": True,
            "access": {"role_arn": ROLE, "external_id": "e-1", "request_payer": True},
        },
        run_id="r1",
        started="2026-01-01T00:00:00Z",
        results_bucket="res",
        table="t",
    )
    assert cfg.versions is True
    assert cfg.access == {"role_arn": ROLE, "external_id": "e-1", "request_payer": True}
    assert AccessOptions.from_dict(cfg.access) == AccessOptions(
        role_arn=ROLE, external_id="e-1", request_payer=True
    )
    for event, message in [
        ({"bucket": "bkt", "versions": "yes"}, "'versions' must be true or false"),
        ({"bucket": "bkt", "access": {"profile": "lab"}}, "unknown 'access' field(s): profile"),
        ({"bucket": "bkt", "access": {"request_payer": 1}}, "'access.request_payer' must be true or false"),
        (
            {"bucket": "bkt", "access": {"unsigned": True, "role_arn": ROLE}},
            "--no-sign-request sends no credentials",
        ),
    ]:
        with pytest.raises(InputError) as err:
            fleet.validate_input(event, run_id="r1", started="s", results_bucket="res", table="t")
        assert message in str(err.value)


def test_previous_with_versions_is_a_usage_error_before_any_listing(tmp_path: Any) -> None:
    prev = tmp_path / "summary.json"
    prev.write_text("{}")
    # refused before the summary file is even read, and before the bucket is touched
    assert (
        cli.main(["inventory", "s3://collab-data", "--versions", "--previous", str(prev), "--no-progress"])
        == 252
    )
