"""Throttle classification tells a hot key range from a table-level shortage and from a GSI.

Error responses are real wire bodies fed through botocore's own parser (a ``before-send`` hook
answers instead of the network, so no server is involved), and PynamoDB errors are produced by
PynamoDB's own code paths over that client, so the chains classified here are the ones users
get: ``PutError -> VerboseClientError -> ClientError``. The clients keep the throttling reasons
as a sharded model's client does (``keep_unmodelled_fields``), so the same results hold on a
botocore before 1.40.10, whose parser drops them; ``TestOlderBotocore`` shows what a client
that does not keep them sees there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import (
    DeleteError,
    GetError,
    PutError,
    QueryError,
    TransactWriteError,
    UpdateError,
)
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding._host import BOTOCORE_VERSION, keep_unmodelled_fields
from pynamodb_sharding._throttling import (
    UNPROCESSED_ITEMS,
    Throttle,
    ThrottleKind,
    ThrottleReason,
    classify,
    classify_response,
    keep_throttling_reasons,
    unprocessed_items_throttle,
)

TABLE_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/audit_log"
INDEX_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/audit_log/index/by-date.v2"
PTEE = "ProvisionedThroughputExceededException"

KEY_RANGE_REASONS = ["TableWriteKeyRangeThroughputExceeded", "TableReadKeyRangeThroughputExceeded"]
INDEX_KEY_RANGE_REASONS = ["IndexWriteKeyRangeThroughputExceeded", "IndexReadKeyRangeThroughputExceeded"]
CAPACITY_REASONS = [
    f"{resource}{operation}{limit}"
    for resource in ("Table", "Index")
    for operation in ("Read", "Write")
    for limit in ("ProvisionedThroughputExceeded", "AccountLimitExceeded", "MaxOnDemandThroughputExceeded")
]


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _answer(status: int, body: Mapping[str, Any]) -> Callable[..., AWSResponse]:
    def handler(request: Any, **_: Any) -> AWSResponse:
        headers = {"x-amzn-requestid": "test-request", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, status, headers, _Raw(json.dumps(body).encode()))

    return handler


def _error_body(
    code: str, reasons_field: str | None = None, reasons: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    prefix = "com.amazon.coral.availability" if code == "ThrottlingException" else "com.amazonaws.dynamodb.v20120810"
    body: dict[str, Any] = {"__type": f"{prefix}#{code}", "message": "throttled"}
    if reasons_field is not None:
        body[reasons_field] = reasons or []
    return body


_PARSER_CLIENT: list[Any] = []


def _parser_client(*, keeping_reasons: bool = True) -> Any:
    session = botocore.session.get_session()
    session.set_credentials("fakeMyKeyId", "fakeSecretAccessKey")
    client = session.create_client(
        "dynamodb",
        "us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: the hook answers
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    if keeping_reasons:
        keep_unmodelled_fields(client)  # as on a sharded model's client
    return client


def _client_error(body: Mapping[str, Any], status: int = 400, client: Any = None) -> ClientError:
    """Return the ClientError botocore's parser makes of ``body`` for a PutItem."""
    if client is None:
        if not _PARSER_CLIENT:
            _PARSER_CLIENT.append(_parser_client())
        client = _PARSER_CLIENT[0]
    client.meta.events.register_first("before-send.dynamodb.*", _answer(status, body), unique_id="parser")
    try:
        with pytest.raises(ClientError) as caught:
            client.put_item(TableName="audit_log", Item={"file_path": {"S": "/a"}})
    finally:
        client.meta.events.unregister("before-send.dynamodb.*", unique_id="parser")
    return caught.value


class Entry(Model):
    class Meta:
        table_name = "audit_log"
        host = "http://127.0.0.1:9"  # never reached: the hook answers every request
        region = "us-east-1"
        aws_access_key_id = "fakeMyKeyId"
        aws_secret_access_key = "fakeSecretAccessKey"
        max_retry_attempts = 0

    file_path = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute(null=True)

    answers: ClassVar[list[Callable[..., AWSResponse]]] = []


@pytest.fixture
def answer_with() -> Iterator[Callable[[Mapping[str, Any]], None]]:
    """Make every request of ``Entry`` get ``body`` back as a 400 response."""
    keep_throttling_reasons(Entry)  # a plain model: its client keeps them only when asked
    events = Entry._get_connection().connection.client.meta.events

    def install(body: Mapping[str, Any]) -> None:
        events.register_first("before-send.dynamodb.*", _answer(400, body), unique_id="test-throttling")

    yield install
    events.unregister("before-send.dynamodb.*", unique_id="test-throttling")


def _save_in_transaction(*items: Entry) -> None:
    with TransactWrite(connection=Entry._get_connection().connection) as transaction:
        for item in items:
            transaction.save(item)


class TestReasons:
    """Every ``ThrottlingReasons`` reason, read from a real parsed response, maps to its kind."""

    @pytest.mark.parametrize("reason", KEY_RANGE_REASONS)
    def test_table_key_range_grows_write_shards(self, reason: str) -> None:
        throttle = classify(
            _client_error(_error_body(PTEE, "ThrottlingReasons", [{"reason": reason, "resource": TABLE_ARN}]))
        )
        assert Throttle(ThrottleKind.KEY_RANGE, PTEE, (ThrottleReason(reason, TABLE_ARN),), None, "PutItem") == throttle
        # Only a hot write partition is fixed by more write shards (issue 14: read throttles
        # never grow write shards).
        assert throttle.grows_shards is reason.startswith("TableWrite")

    @pytest.mark.parametrize("reason", CAPACITY_REASONS)
    def test_capacity_reasons_are_table_level(self, reason: str) -> None:
        resource = INDEX_ARN if reason.startswith("Index") else TABLE_ARN
        throttle = classify(
            _client_error(_error_body(PTEE, "ThrottlingReasons", [{"reason": reason, "resource": resource}]))
        )
        assert throttle.kind == ThrottleKind.TABLE
        assert (ThrottleReason(reason, resource),) == throttle.reasons
        assert ("by-date.v2" if reason.startswith("Index") else None) == throttle.index_name
        assert not throttle.grows_shards

    @pytest.mark.parametrize("reason", INDEX_KEY_RANGE_REASONS)
    def test_index_key_range_names_the_index(self, reason: str) -> None:
        throttle = classify(
            _client_error(_error_body(PTEE, "ThrottlingReasons", [{"reason": reason, "resource": INDEX_ARN}]))
        )
        assert throttle.kind == ThrottleKind.INDEX
        assert throttle.index_name == "by-date.v2"
        assert not throttle.grows_shards

    def test_table_key_range_reason_on_an_index_arn_is_the_index(self) -> None:
        reasons = [{"reason": "TableWriteKeyRangeThroughputExceeded", "resource": INDEX_ARN}]
        assert classify(_client_error(_error_body(PTEE, "ThrottlingReasons", reasons))).kind == ThrottleKind.INDEX

    def test_lower_camel_throttling_reasons_of_throttling_exception(self) -> None:
        reasons = [{"reason": "TableWriteKeyRangeThroughputExceeded", "resource": TABLE_ARN}]
        error = _client_error(_error_body("ThrottlingException", "throttlingReasons", reasons))
        assert "throttlingReasons" in error.response  # botocore keeps the casing of the wire
        throttle = classify(error)
        assert (throttle.kind, throttle.code) == (ThrottleKind.KEY_RANGE, "ThrottlingException")

    def test_request_limit_exceeded_with_reasons(self) -> None:
        reasons = [{"reason": "TableWriteAccountLimitExceeded", "resource": TABLE_ARN}]
        throttle = classify(_client_error(_error_body("RequestLimitExceeded", "ThrottlingReasons", reasons)))
        assert (throttle.kind, throttle.code) == (ThrottleKind.TABLE, "RequestLimitExceeded")

    def test_a_table_level_reason_beside_a_key_range_does_not_grow(self) -> None:
        reasons = [
            {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": TABLE_ARN},
            {"reason": "TableWriteProvisionedThroughputExceeded", "resource": TABLE_ARN},
        ]
        assert classify(_client_error(_error_body(PTEE, "ThrottlingReasons", reasons))).kind == ThrottleKind.TABLE

    def test_an_index_key_range_beside_a_table_key_range_is_the_index(self) -> None:
        reasons = [
            {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": TABLE_ARN},
            {"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": INDEX_ARN},
        ]
        throttle = classify(_client_error(_error_body(PTEE, "ThrottlingReasons", reasons)))
        assert (throttle.kind, throttle.index_name) == (ThrottleKind.INDEX, "by-date.v2")

    def test_a_table_level_reason_beside_an_index_key_range_is_table_level(self) -> None:
        reasons = [
            {"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": INDEX_ARN},
            {"reason": "TableWriteProvisionedThroughputExceeded", "resource": TABLE_ARN},
        ]
        throttle = classify(_client_error(_error_body(PTEE, "ThrottlingReasons", reasons)))
        assert (throttle.kind, throttle.index_name) == (ThrottleKind.TABLE, "by-date.v2")

    def test_an_unknown_future_reason_does_not_grow_shards(self) -> None:
        reasons = [{"reason": "TableWriteSomethingNewExceeded", "resource": TABLE_ARN}]
        assert classify(_client_error(_error_body(PTEE, "ThrottlingReasons", reasons))).kind == ThrottleKind.TABLE


class TestOlderBotocore:
    """Before 1.40.10 botocore's parser drops the reasons: a client keeps them only when
    pynamodb-sharding hooks it, and a hook of one operation reads them from the raw body."""

    REASONS: ClassVar[list[dict[str, str]]] = [
        {"reason": "TableWriteProvisionedThroughputExceeded", "resource": TABLE_ARN},
    ]

    def test_a_client_not_kept_has_them_only_from_1_40_10(self) -> None:
        body = _error_body(PTEE, "ThrottlingReasons", self.REASONS)
        error = _client_error(body, client=_parser_client(keeping_reasons=False))
        if BOTOCORE_VERSION >= (1, 40, 10):
            assert classify(error).kind is ThrottleKind.TABLE
        else:  # taken for a hot key range: what keep_throttling_reasons is for
            assert "ThrottlingReasons" not in error.response
            assert classify(error).kind is ThrottleKind.KEY_RANGE

    def test_a_kept_client_has_them_on_every_release(self) -> None:
        error = _client_error(_error_body(PTEE, "ThrottlingReasons", self.REASONS), client=_parser_client())
        assert error.response["ThrottlingReasons"] == self.REASONS
        assert classify(error).reasons == (ThrottleReason("TableWriteProvisionedThroughputExceeded", TABLE_ARN),)

    def test_classify_response_reads_the_raw_body_when_parsed_has_none(self) -> None:
        body = json.dumps(_error_body(PTEE, "ThrottlingReasons", self.REASONS)).encode()
        parsed = {"Error": {"Code": PTEE, "Message": "throttled"}}
        assert classify_response(parsed).kind is ThrottleKind.KEY_RANGE
        throttle = classify_response(parsed, body=body)
        assert throttle.kind is ThrottleKind.TABLE
        assert throttle.reasons == (ThrottleReason("TableWriteProvisionedThroughputExceeded", TABLE_ARN),)

    def test_a_body_that_is_not_json_adds_nothing(self) -> None:
        parsed = {"Error": {"Code": PTEE, "Message": "throttled"}}
        assert classify_response(parsed, body=b"<html>ThrottlingReasons</html>").kind is ThrottleKind.KEY_RANGE


class TestWithoutReasons:
    """Errors without reasons: the documented defaults, and non-throttles."""

    def test_provisioned_throughput_exceeded_without_reasons_is_a_key_range(self) -> None:
        throttle = classify(_client_error(_error_body(PTEE)))
        assert Throttle(ThrottleKind.KEY_RANGE, PTEE, (), None, "PutItem") == throttle

    @pytest.mark.parametrize("code", ["ThrottlingException", "RequestLimitExceeded"])
    def test_table_level_codes_without_reasons(self, code: str) -> None:
        assert classify(_client_error(_error_body(code))).kind == ThrottleKind.TABLE

    def test_condition_failure_is_not_throttled(self) -> None:
        throttle = classify(_client_error(_error_body("ConditionalCheckFailedException")))
        assert Throttle(ThrottleKind.NOT_THROTTLED, "ConditionalCheckFailedException", (), None, "PutItem") == throttle
        assert not throttle.is_throttle

    def test_plain_exception_is_not_throttled(self) -> None:
        assert Throttle(ThrottleKind.NOT_THROTTLED) == classify(ValueError("boom"))

    def test_cyclic_context_chain_terminates(self) -> None:
        first, second = ValueError("a"), KeyError("b")
        first.__context__, second.__context__ = second, first
        assert classify(first).kind == ThrottleKind.NOT_THROTTLED


class TestPynamoDBChains:
    """PynamoDB's wrappers keep only ``Error``; classify walks back to the reasons."""

    REASONS: ClassVar[list[dict[str, str]]] = [
        {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": TABLE_ARN}
    ]

    @pytest.mark.parametrize(
        ("operation", "error_class", "call"),
        [
            ("PutItem", PutError, lambda: Entry("/a").save()),
            ("UpdateItem", UpdateError, lambda: Entry("/a").update(actions=[Entry.user_id.set("u")])),
            ("DeleteItem", DeleteError, lambda: Entry("/a").delete()),
            ("GetItem", GetError, lambda: Entry.get("/a")),
            ("Query", QueryError, lambda: list(Entry.query("/a"))),
        ],
    )
    def test_wrapped_errors_keep_their_reasons(
        self,
        answer_with: Callable[[Mapping[str, Any]], None],
        operation: str,
        error_class: type[Exception],
        call: Callable[[], object],
    ) -> None:
        answer_with(_error_body(PTEE, "ThrottlingReasons", self.REASONS))
        with pytest.raises(error_class) as caught:
            call()
        assert caught.value.cause_response_code == PTEE  # type: ignore[attr-defined]
        assert "ThrottlingReasons" not in caught.value.cause.response  # type: ignore[attr-defined]
        throttle = classify(caught.value)
        expected = Throttle(ThrottleKind.KEY_RANGE, PTEE, (ThrottleReason(*self.REASONS[0].values()),), None, operation)
        assert expected == throttle

    def test_wrapped_table_level_throttle_does_not_grow(self, answer_with: Callable[[Mapping[str, Any]], None]) -> None:
        answer_with(
            _error_body(
                PTEE,
                "ThrottlingReasons",
                [{"reason": "TableWriteProvisionedThroughputExceeded", "resource": TABLE_ARN}],
            )
        )
        with pytest.raises(PutError) as caught:
            Entry("/a").save()
        assert not classify(caught.value).grows_shards

    @pytest.mark.parametrize("code", ["ThrottlingError", "ProvisionedThroughputExceeded"])
    def test_throttled_transaction(self, answer_with: Callable[[Mapping[str, Any]], None], code: str) -> None:
        answer_with(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "Message": f"Transaction cancelled, please refer cancellation reasons [None, {code}]",
                "CancellationReasons": [
                    {"Code": "None"},
                    {"Code": code, "Message": "Throughput exceeds the capacity"},
                ],
            }
        )
        with pytest.raises(TransactWriteError) as caught:
            _save_in_transaction(Entry("/a"), Entry("/b"))
        throttle = classify(caught.value)
        assert (
            throttle.kind,
            throttle.code,
            throttle.operation,
        ) == (ThrottleKind.KEY_RANGE, "TransactionCanceledException", "TransactWriteItems")

    def test_transaction_cancelled_by_a_condition_is_not_throttled(
        self, answer_with: Callable[[Mapping[str, Any]], None]
    ) -> None:
        answer_with(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "Message": "Transaction cancelled [ConditionalCheckFailed]",
                "CancellationReasons": [
                    {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
                ],
            }
        )
        with pytest.raises(TransactWriteError) as caught:
            _save_in_transaction(Entry("/a"))
        assert classify(caught.value).kind == ThrottleKind.NOT_THROTTLED

    def test_pynamodb_cancellation_reasons_alone_are_read(self) -> None:
        """A VerboseClientError whose original ClientError is gone still classifies."""
        from pynamodb.exceptions import CancellationReason, VerboseClientError

        error = VerboseClientError(
            {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}},
            "TransactWriteItems",
            cancellation_reasons=[None, CancellationReason(code="ThrottlingError")],
        )
        assert classify(TransactWriteError("failed", error)).kind == ThrottleKind.KEY_RANGE


class TestResourceArn:
    """The index name is read from ``.../table/T/index/I`` ARNs and nothing else."""

    @pytest.mark.parametrize(
        ("resource", "expected"),
        [
            (TABLE_ARN, None),
            (INDEX_ARN, "by-date.v2"),
            ("arn:aws-cn:dynamodb:cn-north-1:123456789012:table/T/index/gsi_1", "gsi_1"),
            ("arn:aws:dynamodb:us-east-1:123456789012:table/T/stream/2024-01-01T00:00:00.000", None),
            ("arn:aws:dynamodb:us-east-1:123456789012:table/T/index/", None),
            ("table/T/index/I", "I"),
            ("not an arn", None),
            ("", None),
            (None, None),
        ],
    )
    def test_index_name(self, resource: str | None, expected: str | None) -> None:
        assert expected == ThrottleReason("IndexWriteKeyRangeThroughputExceeded", resource).index_name


class TestUnprocessedItems:
    """A batch's unprocessed entries count as key-range throttles; an empty map does not."""

    def test_unprocessed_items_are_a_key_range_throttle(self) -> None:
        response = {"UnprocessedItems": {"audit_log": [{"PutRequest": {"Item": {"file_path": {"S": "/a"}}}}]}}
        expected = Throttle(ThrottleKind.KEY_RANGE, UNPROCESSED_ITEMS, operation="BatchWriteItem")
        assert expected == unprocessed_items_throttle(response)
        assert unprocessed_items_throttle(response).grows_shards

    def test_unprocessed_keys_of_batch_get(self) -> None:
        response = {"Responses": {}, "UnprocessedKeys": {"audit_log": {"Keys": [{"file_path": {"S": "/a"}}]}}}
        assert Throttle(ThrottleKind.KEY_RANGE, UNPROCESSED_ITEMS, operation="BatchGetItem") == (
            unprocessed_items_throttle(response)
        )

    def test_pynamodb_batch_write_giving_up_is_unprocessed_items(self) -> None:
        """PynamoDB raises this PutError, without a cause, once its resends are exhausted."""
        error = PutError("Failed to batch write items: max_retry_attempts exceeded")
        expected = Throttle(ThrottleKind.KEY_RANGE, UNPROCESSED_ITEMS, operation="BatchWriteItem")
        assert expected == classify(error)
        assert classify(PutError("something else")).kind == ThrottleKind.NOT_THROTTLED

    @pytest.mark.parametrize("response", [{}, {"UnprocessedItems": {}}, {"UnprocessedItems": {"audit_log": []}}])
    def test_nothing_unprocessed(self, response: dict[str, Any]) -> None:
        assert unprocessed_items_throttle(response).kind == ThrottleKind.NOT_THROTTLED


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
reason_names = st.sampled_from(KEY_RANGE_REASONS + INDEX_KEY_RANGE_REASONS + CAPACITY_REASONS) | st.text(max_size=30)
reason_entries = st.fixed_dictionaries(
    {"reason": reason_names | json_values, "resource": st.sampled_from([TABLE_ARN, INDEX_ARN]) | json_values}
)
error_codes = st.sampled_from([PTEE, "ThrottlingException", "RequestLimitExceeded", "TransactionCanceledException"])
responses = st.dictionaries(
    st.sampled_from(["Error", "ThrottlingReasons", "throttlingReasons", "CancellationReasons", "UnprocessedItems"])
    | st.text(max_size=12),
    json_values
    | st.fixed_dictionaries({"Code": error_codes | json_values})
    | st.lists(reason_entries | json_values, max_size=4),
    max_size=5,
)


class TestNeverRaises:
    """Classification is used inside botocore hooks and error handlers: it must never raise."""

    @settings(max_examples=200, deadline=None)
    @given(responses)
    def test_classify_response_total(self, response: dict[str, Any]) -> None:
        throttle = classify_response(response)
        assert throttle.kind in ThrottleKind
        assert (throttle.kind is ThrottleKind.NOT_THROTTLED) == (not throttle.is_throttle)
        unprocessed_items_throttle(response)

    @settings(max_examples=100, deadline=None)
    @given(responses)
    def test_classify_client_error_total(self, response: dict[str, Any]) -> None:
        error = ClientError({"Error": {"Code": "Unknown"}}, "PutItem")
        error.response = response  # botocore's constructor itself rejects malformed responses
        assert classify(PutError("failed", error)).kind in ThrottleKind

    @settings(max_examples=100, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(KEY_RANGE_REASONS + INDEX_KEY_RANGE_REASONS + CAPACITY_REASONS),
                st.sampled_from([TABLE_ARN, INDEX_ARN]),
            ),
            min_size=1,
            max_size=4,
        )
    )
    def test_grows_only_when_every_reason_is_a_table_key_range(self, reasons: list[tuple[str, str]]) -> None:
        response = {
            "Error": {"Code": PTEE},
            "ThrottlingReasons": [{"reason": r, "resource": a} for r, a in reasons],
        }
        expected = all(
            r.startswith("Table") and r.endswith("KeyRangeThroughputExceeded") and a == TABLE_ARN for r, a in reasons
        ) and any(r.startswith("TableWrite") for r, _ in reasons)  # a hot write partition among them
        assert expected == classify_response(response).grows_shards
