"""The fleet store's reader of DynamoDB attribute values (fleet._plain) against boto3's TypeDeserializer."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer
from hpcstage.inventory import fleet


def reference(av: dict[str, Any]) -> Any:
    """boto3's reading, with numbers as int and binary as bytes (what the store keeps)."""

    def plain(v: Any) -> Any:
        if isinstance(v, Decimal):
            return int(v)
        if isinstance(v, Binary):
            return bytes(v)
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, set):
            return {plain(x) for x in v}
        return v

    return plain(TypeDeserializer().deserialize(av))


VALUES: list[dict[str, Any]] = [
    {"S": ""},
    {"S": "k/\x00\x01\u00e9\U0001f680 <&>\"'\n"},
    {"S": "x" * 1024},
    {"N": "0"},
    {"N": "-17"},
    {"N": "123456789012345678901234567890"},
    {"N": "1E+3"},
    {"N": "2.0"},
    {"NULL": True},
    {"BOOL": True},
    {"BOOL": False},
    {"B": b"\x00\xffzlib"},
    {"SS": ["a", "b", "\u00e9"]},
    {"NS": ["1", "20", "3E+2"]},
    {"BS": [b"\x00", b"\x01"]},
    {"L": []},
    {"M": {}},
    {
        "L": [
            {
                "M": {
                    "key": {"S": "data/p1-abc-0000.parquet"},
                    "size": {"N": "1200000"},
                    "md5": {"S": "0" * 32},
                }
            },
            {"M": {"rows": {"N": "17000"}, "nested": {"L": [{"NULL": True}, {"S": "s"}, {"N": "7"}]}}},
        ]
    },
]


@pytest.mark.parametrize("av", VALUES, ids=[next(iter(v)) + str(i) for i, v in enumerate(VALUES)])
def test_the_store_reads_each_attribute_type_as_boto3_does(av: dict[str, Any]) -> None:
    assert fleet._plain(av) == reference(av)


def test_a_lease_item_reads_the_same_through_both() -> None:
    raw = {
        "pk": {"S": "run#r#lease"},
        "sk": {"S": "p1"},
        "start_after": {"S": "a"},
        "end": {"NULL": True},
        "objects": {"N": "17000"},
        "parts": {"L": VALUES[-1]["L"][:1]},
        "stats": {"L": [{"S": "stats/p1-abc-0000.json"}]},
    }
    assert fleet._item(raw) == {k: reference(v) for k, v in raw.items()}


def test_an_unknown_attribute_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown DynamoDB attribute type 'X'"):
        fleet._plain({"X": "1"})
