"""The quick parse of a merged query's shard pages gives exactly what botocore's parser gives.

botocore's own JSON parser, with DynamoDB's real Query output shape, is the reference: for any
page of items made of every attribute type (binary values nested in maps and lists included),
the hook's result merged the way botocore merges it equals botocore's parse of the same body.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import botocore.session
from botocore.parsers import create_parser
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding._fastparse import _active, _parse_query_page, decode_binary_values

_QUERY = botocore.session.get_session().get_service_model("dynamodb").operation_model("Query")
_HEADERS = {"content-type": "application/x-amz-json-1.0", "x-amzn-requestid": "r1"}

_text = st.text(max_size=8)
_blob = st.binary(max_size=8).map(lambda data: base64.b64encode(data).decode())
_number = st.integers(-10**6, 10**6).map(str)
_scalar = st.one_of(
    _text.map(lambda v: {"S": v}), _number.map(lambda v: {"N": v}), _blob.map(lambda v: {"B": v}),
    st.booleans().map(lambda v: {"BOOL": v}), st.just({"NULL": True}),
    st.lists(_text, min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
    st.lists(_number, min_size=1, max_size=3, unique=True).map(lambda v: {"NS": v}),
    st.lists(_blob, min_size=1, max_size=3, unique=True).map(lambda v: {"BS": v}),
)
_value = st.recursive(_scalar, lambda inner: st.one_of(
    st.dictionaries(_text, inner, max_size=3).map(lambda v: {"M": v}),
    st.lists(inner, max_size=3).map(lambda v: {"L": v}),
), max_leaves=8)
_item = st.dictionaries(st.sampled_from(["pk", "sk", "B", "body", "tags"]), _value, min_size=1)
_page = st.fixed_dictionaries({"Items": st.lists(_item, max_size=4), "Count": st.integers(0, 4),
                               "ScannedCount": st.integers(0, 9)},
                              optional={"LastEvaluatedKey": st.fixed_dictionaries({"pk": _scalar, "sk": _scalar}),
                                        "ConsumedCapacity": st.just({"TableName": "t", "CapacityUnits": 0.5})})


def botocore_parse(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = {"status_code": status, "headers": headers or _HEADERS, "body": body}
    return create_parser("json").parse(response, _QUERY.output_shape)  # type: ignore[no-any-return]


def quick_parse(body: bytes, status: int = 200, headers: dict[str, str] | None = None,
                active: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """What botocore does with the hook in place: the hook, then the parse, then the update."""
    response = {"status_code": status, "headers": headers or _HEADERS, "body": body}
    customized: dict[str, Any] = {}
    if active:
        with _active():
            _parse_query_page(response_dict=response, customized_response_dict=customized)
    else:
        _parse_query_page(response_dict=response, customized_response_dict=customized)
    parsed = create_parser("json").parse(response, _QUERY.output_shape)
    parsed.update(customized)
    return parsed, customized


@settings(max_examples=300, deadline=None)
@given(page=_page)
def test_quick_parse_equals_botocore(page: dict[str, Any]) -> None:
    body = json.dumps(page).encode()
    parsed, customized = quick_parse(body)
    assert customized, "the hook parsed the page"
    assert botocore_parse(body) == parsed


def test_binary_values_are_bytes_wherever_they_are() -> None:
    encoded = base64.b64encode(b"\x00\xff").decode()
    value = {"M": {"a": {"L": [{"B": encoded}, {"BS": [encoded]}]}, "b": {"B": encoded}, "s": {"S": encoded}}}
    decode_binary_values(value)
    assert value == {"M": {"a": {"L": [{"B": b"\x00\xff"}, {"BS": [b"\x00\xff"]}]}, "b": {"B": b"\x00\xff"},
                           "s": {"S": encoded}}}


def test_left_to_botocore_outside_a_merged_query_on_errors_and_other_content() -> None:
    body = json.dumps({"Items": [{"pk": {"S": "a"}}], "Count": 1, "ScannedCount": 1}).encode()
    # Another thread's (or any non-merged) Query on the same client: not touched.
    assert quick_parse(body, active=False)[1] == {}
    # An error response: botocore's error parsing, as always.
    error = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException",
                        "message": "Requested resource not found"}).encode()
    parsed, customized = quick_parse(error, status=400)
    assert customized == {}
    assert parsed["Error"]["Code"] == "ResourceNotFoundException"
    # Another protocol's body (CBOR): not touched; nor a body that is not valid JSON, which
    # botocore's parser reports.
    for content_type, text in (("application/cbor", b"\xbf\xff"), ("application/x-amz-json-1.0", b"{not json")):
        response = {"status_code": 200, "headers": {"content-type": content_type}, "body": text}
        customized: dict[str, Any] = {}
        with _active():
            _parse_query_page(response_dict=response, customized_response_dict=customized)
        assert (customized, response["body"]) == ({}, text)
