"""Contract tests: PynamoDB still routes every request through the hooks ShardedModel overrides.

If a PynamoDB release stops calling one of ``pynamodb_sharding._host.OVERRIDDEN_HOOKS`` on a
path (``update``, ``delete``, ``refresh``, ``BatchWrite``, transactions, ``from_raw_data``...),
one of these tests fails in CI (which also runs the newest PynamoDB the declared range allows).
Then the runtime guard is proved to fail closed: with a hook bypassed the way such a
release would, the request is refused before sending and the table is unchanged. The last
tests pin the botocore behaviour ``_host`` relies on to keep the response fields an older
botocore's DynamoDB model drops (throttling reasons, warm throughput), and where botocore emits
``before-parse``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from botocore.httpsession import URLLib3Session
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import HostContractError, RandomShards, ShardedModel, Sharding, ShardingError
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import (
    BATCH_WRITE_GAVE_UP,
    BEFORE_PARSE_HOOK,
    BOTOCORE_VERSION,
    OVERRIDDEN_HOOKS,
    botocore_client,
    missing_fields,
    put_arguments,
    route_http_sends,
)
from pynamodb_sharding._item import pin
from pynamodb_sharding._throttling import ThrottleKind, ThrottleReason, classify, error_chain, keep_throttling_reasons
from pynamodb_sharding.testing import record_requests, simulate_partition_limits
from tests.raw import raw_items


class Ledger(ShardedModel):
    class Meta:
        table_name = "contract_ledger"

    account = UnicodeAttribute(hash_key=True)
    entry = NumberAttribute(range_key=True)
    note = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


Bind = Callable[..., Any]


@pytest.fixture
def ledger(dynamodb_models: Bind) -> type[Ledger]:
    dynamodb_models(Ledger)
    for n in range(3):
        Ledger("acct", n, note="v1").save()
    return Ledger


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the calls of every overridden hook (and ``serialize``, the save path)."""
    counted: Counter[str] = Counter()
    for name in (*OVERRIDDEN_HOOKS, "serialize"):
        raw = ShardedModel.__dict__[name]
        if isinstance(raw, classmethod):
            original = raw.__func__

            def class_spy(cls: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
                counted[_name] += 1
                return _original(cls, *args, **kwargs)

            monkeypatch.setattr(Ledger, name, classmethod(class_spy))
        else:
            def spy(self: Any, *args: Any, _name: str = name, _original: Any = raw, **kwargs: Any) -> Any:
                counted[_name] += 1
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(Ledger, name, spy)
    return counted


def _connection() -> Any:
    return Ledger._get_connection().connection


@pytest.mark.parametrize("operation", ["transact_update", "transact_delete"])
def test_instance_requests_route_through_the_key_hook(
    ledger: type[Ledger], calls: Counter[str], operation: str,
) -> None:
    """PynamoDB builds a transaction's update and delete with the key hook (the model's own
    update, delete and refresh build their requests themselves, see writes.py)."""
    item = Ledger.get("acct", 1)
    calls.clear()
    if operation == "transact_update":
        with TransactWrite(connection=_connection()) as tx:
            tx.update(item, actions=[Ledger.note.set("v2")])
    else:
        with TransactWrite(connection=_connection()) as tx:
            tx.delete(item)
    assert calls["_get_hash_range_key_serialized_values"] >= 1


def test_put_arguments_are_save_args(ledger: type[Ledger]) -> None:
    """_host.put_arguments builds what Model._get_save_args builds from the same attributes:
    the keys popped out, the next version set, the version check added to the condition."""
    item = Ledger.get("acct", 1)
    condition = Ledger.note == "v1"
    args, kwargs = Model._get_save_args(item, condition)
    attributes = item.serialize()
    mine, kwargs_mine = put_arguments(item, attributes, condition)
    assert tuple(args) == mine
    assert kwargs["attributes"] == kwargs_mine["attributes"]
    assert kwargs.get("range_key") == kwargs_mine.get("range_key")
    assert str(kwargs["condition"]) == str(kwargs_mine["condition"])


def test_batch_delete_routes_through_the_item_key_hook(ledger: type[Ledger], calls: Counter[str]) -> None:
    items = list(Ledger.query("acct"))
    calls.clear()
    with Ledger.batch_write() as batch:
        for item in items:
            batch.delete(item)
    assert calls["_get_serialized_keys"] == len(items)
    assert [] == raw_items(Ledger)


@pytest.mark.parametrize("operation", ["batch_save", "transact_save"])
def test_writes_of_new_items_route_through_serialize(
    ledger: type[Ledger], calls: Counter[str], operation: str,
) -> None:
    """PynamoDB builds batch and transactional puts with serialize (the model's own save builds
    its request itself, see writes.py)."""
    item = Ledger("acct", 10, note="new")
    if operation == "batch_save":
        with Ledger.batch_write() as batch:
            batch.save(item)
    else:
        with TransactWrite(connection=_connection()) as tx:
            tx.save(item)
    assert calls["serialize"] >= 1
    if operation != "batch_save":  # BatchWrite puts serialize() directly, without a condition
        assert calls["_get_save_args"] >= 1
    assert "acct" == Ledger.get("acct", 10).account


def test_items_read_back_route_through_instantiate(ledger: type[Ledger], calls: Counter[str]) -> None:
    raw = raw_items(Ledger)[0]
    paths: dict[str, Callable[[], list[Ledger]]] = {
        "from_raw_data": lambda: [Ledger.from_raw_data(raw)],
        "get": lambda: [Ledger.get("acct", 0)],
        "query": lambda: list(Ledger.query("acct")),
        "scan": lambda: list(Ledger.scan()),
        "batch_get": lambda: list(Ledger.batch_get([("acct", 0)])),
    }
    for name, read in paths.items():
        calls.clear()
        items = read()
        assert calls["_instantiate"] == len(items), name
        assert {"acct"} == {item.account for item in items}, name
    with TransactGet(connection=_connection()) as tx:
        future = tx.get(Ledger, "acct", 2)
    assert "acct" == future.get().account


class _Counted(Model):
    """A plain model whose instantiation steps are counted (the class is called, then
    ``_container_deserialize`` fills it)."""

    class Meta:
        table_name = "contract_counted"

    steps: Counter[str] = Counter()  # noqa: RUF012 (a record of the calls)

    owner = UnicodeAttribute(hash_key=True)
    renamed = UnicodeAttribute(attr_name="stored_as", default="d")
    amount = NumberAttribute(null=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _Counted.steps[f"init {kwargs.get('_user_instantiated')}"] += 1
        super().__init__(*args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        _Counted.steps[f"set {name}"] += 1
        super().__setattr__(name, value)


def test_pynamodb_instantiates_by_init_then_container_deserialize() -> None:
    """What ``_building`` takes in fewer steps (``_host.builds_as_pynamodb``): PynamoDB calls the
    class with ``_user_instantiated=False``, then empties ``attribute_values`` and sets the
    defaults and each stored value with ``setattr``, under the attribute's Python name."""
    raw = {"owner": {"S": "o"}, "stored_as": {"S": "kept"}, "amount": {"N": "2"}}
    _Counted.steps.clear()
    item = Model._instantiate.__func__(_Counted, raw)  # type: ignore[attr-defined]
    assert _Counted.steps["init False"] == 1
    assert _Counted.steps["set attribute_values"] == 2  # in __init__, and emptied again
    assert _Counted.steps["set renamed"] == 3  # its default twice (__init__, then again), its value
    assert item.attribute_values == {"renamed": "kept", "owner": "o", "amount": 2}
    assert list(item.attribute_values) == ["renamed", "amount", "owner"]  # the default first, then by name
    # Nothing but the values is kept on the instance, and no metaclass steps in when the class
    # is called: an instance made without calling a class that has no __init__ of its own
    # (_building) misses nothing.
    assert list(vars(item)) == ["attribute_values"]
    for meta in (*type(_Counted).__mro__, *type(Ledger).__mro__):
        assert meta in (type, object) or "__call__" not in vars(meta), meta
    plain = Model._instantiate.__func__(Ledger, {"account": {"S": "a_1"}, "entry": {"N": "1"}})  # type: ignore[attr-defined]
    assert list(vars(plain)) == ["attribute_values"]


def test_every_request_gets_its_connection_from_the_hook(ledger: type[Ledger], calls: Counter[str]) -> None:
    """PynamoDB asks the model's _get_connection for every request: the key guard is armed there."""
    item = Ledger.get("acct", 1)
    calls.clear()
    item.update(actions=[Ledger.note.set("v2")])
    list(Ledger.query("acct"))
    with TransactWrite(connection=_connection()) as tx:
        tx.delete(item)
    assert calls["_get_connection"] >= 3


def test_create_table_sends_the_schema_hook(dynamodb_local: Any, calls: Counter[str]) -> None:
    """PynamoDB builds CreateTable from the model's _get_schema (which adds the shard attributes
    of multi-attribute indexes)."""
    from pynamodb_sharding.testing.binding import ModelBinding

    with ModelBinding(dynamodb_local) as binding:
        binding.bind(Ledger)
    assert calls["_get_schema"] >= 1


def test_class_key_hook_refuses(ledger: type[Ledger]) -> None:
    """PynamoDB's class-level paths build keys with _serialize_keys: it raises, nothing is sent."""
    with record_requests(Ledger) as recorder:
        with pytest.raises(ShardingError, match="cannot be sent to DynamoDB without choosing a shard"):
            Model.get.__func__(Ledger, "acct", 1)  # type: ignore[attr-defined]
        with pytest.raises(ShardingError):
            Ledger._serialize_keys("acct", 1)
    assert {} == dict(recorder.requests)


class TestGuardFailsClosed:
    """With a hook bypassed as a changed PynamoDB would, the request is refused before sending."""

    def test_transact_delete_without_the_key_hook(self, ledger: type[Ledger], monkeypatch: pytest.MonkeyPatch) -> None:
        item = Ledger.get("acct", 1)
        monkeypatch.setattr(Ledger, "_get_hash_range_key_serialized_values",
                            Model._get_hash_range_key_serialized_values)
        before = raw_items(Ledger)
        with (record_requests(Ledger) as recorder, pytest.raises(HostContractError, match="no shard suffix"),
              TransactWrite(connection=_connection()) as tx):
            tx.delete(item)
        assert "TransactWriteItems" not in recorder.requests
        assert before == raw_items(Ledger)

    def test_batch_delete_without_the_item_key_hook(
        self, ledger: type[Ledger], monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        items = list(Ledger.query("acct"))
        monkeypatch.setattr(Ledger, "_get_serialized_keys", Model._get_serialized_keys)
        monkeypatch.setattr(Ledger, "_serialize_keys", classmethod(Model._serialize_keys.__func__))  # type: ignore[attr-defined]
        with pytest.raises(HostContractError), Ledger.batch_write() as batch:
            for item in items:
                batch.delete(item)
        assert 3 == len(raw_items(Ledger))

    def test_transact_put_without_serialize(self, ledger: type[Ledger], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(Ledger, "serialize", Model.serialize)
        with (pytest.raises(HostContractError, match=r"Ledger\.account.*TransactWriteItems"),
              TransactWrite(connection=_connection()) as tx):
            tx.save(Ledger("acct", 20))
        assert 3 == len(raw_items(Ledger))


def test_batch_write_gives_up_with_the_known_text(dynamodb_models: Bind) -> None:
    """PynamoDB's give-up error of a batch write still has the text throttling.classify knows."""
    dynamodb_models(Ledger)
    saved = Ledger.Meta.max_retry_attempts
    Ledger.Meta.max_retry_attempts = 1
    try:
        with (
            simulate_partition_limits(Ledger, write_units=1),
            pytest.raises(PutError) as raised,
            Ledger.batch_write() as batch,
        ):
            for n in range(25):
                item = Ledger("acct", n)
                pin(item, shard_manager(Ledger), 1)  # one physical key, so the batch is throttled
                batch.save(item)
    finally:
        Ledger.Meta.max_retry_attempts = saved
    assert str(raised.value.msg).startswith(BATCH_WRITE_GAVE_UP)
    assert raised.value.cause is None
    assert ThrottleKind.KEY_RANGE is classify(raised.value).kind


# -- botocore: the raw body behind a parsed response, and what older releases leave out -------


class Receipt(ShardedModel):
    class Meta:
        table_name = "contract_receipt"
        max_retry_attempts = 0

    account = UnicodeAttribute(hash_key=True)
    entry = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


class PlainReceipt(Model):
    class Meta:
        table_name = "contract_plain_receipt"
        max_retry_attempts = 0

    account = UnicodeAttribute(hash_key=True)
    entry = NumberAttribute(range_key=True)


TABLE_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/contract_receipt"
#: A table-level throttle: with its reasons it is TABLE, without them (dropped) a KEY_RANGE.
PROVISIONED = {"reason": "TableWriteProvisionedThroughputExceeded", "resource": TABLE_ARN}


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def _throttle_body(code: str = "ProvisionedThroughputExceededException", **extra: Any) -> bytes:
    return json.dumps({
        "__type": f"com.amazonaws.dynamodb.v20120810#{code}",
        "message": "Throughput exceeds the provisioned throughput (injected)", **extra,
    }).encode()


def _answer_puts(model: type[Model], body: bytes) -> Callable[[], None]:
    """Answer every PutItem of ``model``'s client with a 400 carrying ``body``; returns the undo."""
    events = botocore_client(model).meta.events

    def answer(request: Any, **_: Any) -> AWSResponse:
        headers = {"x-amzn-requestid": "injected", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 400, headers, _Body(body))

    events.register_first("before-send.dynamodb.PutItem", answer, unique_id="contract-answer-puts")
    return lambda: events.unregister("before-send.dynamodb.PutItem", unique_id="contract-answer-puts")


def _client_error(error: BaseException) -> ClientError:
    """botocore's own ``ClientError`` under PynamoDB's wrappers (the last in the chain: PynamoDB's
    ``VerboseClientError`` wrapping it keeps only ``Error``)."""
    return [current for current in error_chain(error) if isinstance(current, ClientError)][-1]


def test_needs_retry_sees_the_raw_body_and_the_parsed_response_the_caller_gets(dynamodb_models: Bind) -> None:
    """``needs-retry.dynamodb.<Operation>`` gets ``(http_response, parsed)`` after an attempt:
    ``http_response.content`` is the raw body, and ``parsed`` is the dict the ``ClientError``
    raised afterwards holds, so what a handler adds there reaches the caller."""
    dynamodb_models(PlainReceipt)
    body = _throttle_body(ThrottlingReasons=[PROVISIONED])
    seen: list[tuple[bytes, dict[str, Any]]] = []

    def mark(response: Any = None, **_: Any) -> None:
        http_response, parsed = response
        seen.append((http_response.content, parsed))
        parsed["ContractMarker"] = "added in needs-retry"

    events = botocore_client(PlainReceipt).meta.events
    undo = _answer_puts(PlainReceipt, body)
    events.register_first("needs-retry.dynamodb.PutItem", mark, unique_id="contract-mark")
    try:
        with pytest.raises(PutError) as raised:
            PlainReceipt("acct", 1).save()
    finally:
        events.unregister("needs-retry.dynamodb.PutItem", unique_id="contract-mark")
        undo()
    assert [content for content, _ in seen] == [body]
    error = _client_error(raised.value)
    assert error.response is seen[0][1]
    assert error.response["ContractMarker"] == "added in needs-retry"


def test_before_parse_is_emitted_where_declared(dynamodb_models: Bind) -> None:
    """botocore emits ``before-parse`` with a ``customized_response_dict`` merged into the parsed
    response from 1.36.0 (``BEFORE_PARSE_HOOK``, what fastparse needs); before, never."""
    dynamodb_models(PlainReceipt)
    PlainReceipt("acct", 1).save()
    calls: list[str] = []

    def customize(customized_response_dict: dict[str, Any], **_: Any) -> None:
        calls.append("before-parse")
        customized_response_dict["ContractProbe"] = 1

    parsed_seen: list[dict[str, Any]] = []
    events = botocore_client(PlainReceipt).meta.events
    events.register("before-parse.dynamodb.GetItem", customize, unique_id="contract-before-parse")
    events.register("after-call.dynamodb.GetItem", lambda parsed, **_: parsed_seen.append(parsed),
                    unique_id="contract-after-call")
    try:
        PlainReceipt.get("acct", 1)
    finally:
        events.unregister("before-parse.dynamodb.GetItem", unique_id="contract-before-parse")
        events.unregister("after-call.dynamodb.GetItem", unique_id="contract-after-call")
    assert calls == (["before-parse"] if BEFORE_PARSE_HOOK else [])
    assert ("ContractProbe" in parsed_seen[0]) is BEFORE_PARSE_HOOK


class TestUnmodelledFields:
    """What an older botocore's DynamoDB model does not name is read from the raw body."""

    def test_the_fields_missing_are_those_of_the_installed_release(self, dynamodb_models: Bind) -> None:
        dynamodb_models(PlainReceipt)
        missing = missing_fields(botocore_client(PlainReceipt))
        # 1.40.10 is the first release whose model has the reasons lists.
        assert ("ThrottlingReasons" in missing) is (BOTOCORE_VERSION < (1, 40, 10))
        if BOTOCORE_VERSION >= (1, 40, 10):
            assert missing == frozenset()
        if BOTOCORE_VERSION < (1, 35, 0):
            assert missing == {"ThrottlingReasons", "WarmThroughput"}

    def test_a_sharded_model_s_throttle_keeps_its_reasons(self, dynamodb_models: Bind) -> None:
        dynamodb_models(Receipt)
        undo = _answer_puts(Receipt, _throttle_body(ThrottlingReasons=[PROVISIONED]))
        try:
            with pytest.raises(PutError) as raised:
                Receipt("acct", 1).save()
        finally:
            undo()
        throttle = classify(raised.value)
        assert throttle.reasons == (ThrottleReason("TableWriteProvisionedThroughputExceeded", TABLE_ARN),)
        assert throttle.kind is ThrottleKind.TABLE
        assert _client_error(raised.value).response["ThrottlingReasons"] == [PROVISIONED]

    def test_a_plain_model_keeps_them_once_asked(self, dynamodb_models: Bind) -> None:
        dynamodb_models(PlainReceipt)
        keep_throttling_reasons(PlainReceipt)
        keep_throttling_reasons(PlainReceipt)  # once per client, however often asked
        # ThrottlingException spells its list throttlingReasons.
        on_demand = {"reason": "TableWriteMaxOnDemandThroughputExceeded", "resource": TABLE_ARN}
        undo = _answer_puts(PlainReceipt, _throttle_body("ThrottlingException", throttlingReasons=[on_demand]))
        try:
            with pytest.raises(PutError) as raised:
                PlainReceipt("acct", 1).save()
        finally:
            undo()
        assert classify(raised.value).reasons == (ThrottleReason("TableWriteMaxOnDemandThroughputExceeded", TABLE_ARN),)

    def test_describe_table_keeps_its_warm_throughput(self, dynamodb_models: Bind) -> None:
        dynamodb_models(Receipt)
        http = URLLib3Session()
        warm = {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 24, "Status": "ACTIVE"}

        def warmed(request: Any, **_: Any) -> AWSResponse:
            answer = http.send(request)  # DynamoDB Local's own answer, with a warm throughput added
            document = json.loads(answer.content)
            document["Table"]["WarmThroughput"] = warm
            return AWSResponse(request.url, answer.status_code, dict(answer.headers),
                               _Body(json.dumps(document).encode()))

        events = botocore_client(Receipt).meta.events
        events.register_first("before-send.dynamodb.DescribeTable", warmed, unique_id="contract-warm")
        try:
            described = Receipt.describe_table()
        finally:
            events.unregister("before-send.dynamodb.DescribeTable", unique_id="contract-warm")
        assert described["WarmThroughput"] == warm
        assert described["TableName"] == Receipt.Meta.table_name


class TestAsyncTransportHooks:
    """The botocore privates :func:`pynamodb_sharding._host.route_http_sends` replaces: an
    endpoint's ``http_session`` (what ``Endpoint._send`` sends with) and ``Endpoint._needs_retry``
    (emits ``needs-retry`` and sleeps for the delay a handler returns)."""

    @staticmethod
    def _client() -> Any:
        import botocore.session

        return botocore.session.get_session().create_client(
            "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="k", aws_secret_access_key="s",
            config=botocore.config.Config(retries={"total_max_attempts": 3, "mode": "standard"}),
        )

    def test_verify_is_what_the_client_was_made_with(self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """The default (botocore's bundle), ``verify=False``, a bundle's path, and the path of
        ``AWS_CA_BUNDLE`` when the client names none (or ``REQUESTS_CA_BUNDLE``'s, which
        botocore reads too and is unset here)."""
        import botocore.session

        from pynamodb_sharding._host import http_verify, route_http_sends

        bundle, environment = str(tmp_path / "ca.pem"), str(tmp_path / "env.pem")
        monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
        monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
        for verify, variable, expected in ((None, None, True), (False, None, False), (bundle, None, bundle),
                                           (None, environment, environment)):
            if variable is not None:
                monkeypatch.setenv("AWS_CA_BUNDLE", variable)
            client = botocore.session.get_session().create_client(
                "dynamodb", region_name="us-east-1", endpoint_url="https://127.0.0.1:9",
                aws_access_key_id="k", aws_secret_access_key="s", verify=verify)
            assert http_verify(client) == expected
            route_http_sends(client, lambda request: None, lambda seconds: None)
            assert http_verify(client) == expected  # still, once routed

    def test_proxies_are_what_the_client_was_made_with(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``Config(proxies=..., proxies_config=...)``; else ``HTTPS_PROXY``/``HTTP_PROXY`` for the
        endpoint, unless ``NO_PROXY`` names it; with credentials, their ``Proxy-Authorization``."""
        import botocore.config
        import botocore.session

        from pynamodb_sharding._host import http_proxies, route_http_sends

        for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
            monkeypatch.delenv(name, raising=False)

        def proxy_of(url: str, config: Any = None) -> tuple[str | None, dict[str, str], Any]:
            client = botocore.session.get_session().create_client(
                "dynamodb", region_name="us-east-1", endpoint_url=url, aws_access_key_id="k",
                aws_secret_access_key="s", config=config)
            route_http_sends(client, lambda request: None, lambda seconds: None)  # read once routed
            proxies = http_proxies(client)
            found = proxies.proxy_url_for(url)
            return found, proxies.proxy_headers_for(found) if found else {}, proxies.settings

        configured = botocore.config.Config(proxies={"https": "http://u:p@proxy.example:3128"},
                                            proxies_config={"proxy_use_forwarding_for_https": True})
        assert ("http://u:p@proxy.example:3128", {"Proxy-Authorization": "Basic dTpw"},
                {"proxy_use_forwarding_for_https": True}) == proxy_of("https://dynamodb.example", configured)
        assert (None, {}, {}) == proxy_of("https://dynamodb.example")
        monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
        monkeypatch.setenv("HTTP_PROXY", "proxy.example:8080")
        assert "http://proxy.example:3128" == proxy_of("https://dynamodb.example")[0]
        assert "http://proxy.example:8080" == proxy_of("http://127.0.0.1:8000")[0]
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,.example")
        assert None is proxy_of("http://127.0.0.1:8000")[0]
        assert None is proxy_of("https://dynamodb.example")[0]

    def test_needs_retry_is_the_method_replaced(self) -> None:
        import inspect

        from botocore.endpoint import Endpoint

        parameters = list(inspect.signature(Endpoint._needs_retry).parameters)
        assert ["self", "attempts", "operation_model", "request_dict", "response", "caught_exception"] == parameters
        source = inspect.getsource(Endpoint._needs_retry)
        assert "needs-retry." in source
        assert "time.sleep(handler_response)" in source
        assert "self.http_session.send(request)" in inspect.getsource(Endpoint._send)

    def test_the_route_answers_and_the_pause_waits_between_retries(self) -> None:
        from tests.faults import error_response

        client = self._client()
        answers = [
            error_response("http://127.0.0.1:9", 500, "InternalServerError", "down"),
            error_response("http://127.0.0.1:9", 500, "InternalServerError", "down"),
            None,  # the client's own session: nothing listens on port 9
        ]
        routed: list[str] = []
        pauses: list[float] = []

        def route(request: Any) -> Any:
            routed.append(request.headers["X-Amz-Target"].decode())
            answer = answers.pop(0)
            if answer is None:
                raise AssertionError("the route's None must reach the own session")
            return answer

        route_http_sends(client, route, pauses.append)
        answers[2] = error_response("http://127.0.0.1:9", 400, "ResourceNotFoundException", "no table")
        with pytest.raises(client.exceptions.ResourceNotFoundException):
            client.get_item(TableName="table", Key={"k": {"S": "v"}})
        assert ["DynamoDB_20120810.GetItem"] * 3 == routed
        assert len(pauses) == 2  # botocore's delays, given to the pause instead of time.sleep
        assert all(0 <= delay <= 20 for delay in pauses)

    def test_a_route_of_none_sends_with_the_own_session(self) -> None:
        from botocore.exceptions import EndpointConnectionError

        client = self._client()
        routed: list[Any] = []
        route_http_sends(client, lambda request: routed.append(request), lambda _: None)
        with pytest.raises(EndpointConnectionError):  # urllib3 found nothing on port 9
            client.get_item(TableName="table", Key={"k": {"S": "v"}})
        assert len(routed) == 3  # each attempt asked the route first

    def test_a_scan_rate_limit_waits_with_the_given_pause(self) -> None:
        """PynamoDB's ``ResultIterator`` waits for its ``rate_limit`` with
        ``page_iter._rate_limiter._time_module.sleep`` (``RateLimiter(time_module=...)``):
        :func:`pynamodb_sharding._host.pace_rate_limit` makes those waits the given pause, and a
        result without a rate limit is left as it is."""
        from pynamodb.pagination import ResultIterator

        from pynamodb_sharding._host import pace_rate_limit

        pages = iter([{"Count": 1, "ScannedCount": 1, "Items": [{}], "LastEvaluatedKey": {"k": {"S": "1"}},
                       "ConsumedCapacity": {"CapacityUnits": 50}},
                      {"Count": 1, "ScannedCount": 1, "Items": [{}], "ConsumedCapacity": {"CapacityUnits": 50}}])
        pauses: list[float] = []
        result = pace_rate_limit(ResultIterator(lambda **_: next(pages), (), {}, rate_limit=10), pauses.append)
        assert 2 == len(list(result))
        assert len(pauses) == 2
        assert pauses[0] == 0  # the first page is sent at once
        assert 4.5 < pauses[1] <= 5  # 50 units at 10 a second, less the time since the first page
        unlimited = ResultIterator(lambda **_: {}, (), {})
        assert pace_rate_limit(unlimited, pauses.append) is unlimited

    def test_a_result_iterator_answers_held_items_from_memory(self) -> None:
        """PynamoDB's ``ResultIterator`` answers ``next()`` from the page it holds while
        ``_index < _count``, and stops at ``_limit == 0``, sending nothing:
        :func:`pynamodb_sharding._host.result_holds_next` says when."""
        from pynamodb.pagination import ResultIterator

        from pynamodb_sharding._host import result_holds_next

        sent: list[int] = []

        def page(**_: Any) -> dict[str, Any]:
            sent.append(1)
            return {"Count": 2, "ScannedCount": 2, "Items": [{"n": 1}, {"n": 2}], "LastEvaluatedKey": {"k": 1}}

        result = ResultIterator(page, (), {}, limit=3)
        assert not result_holds_next(result)  # nothing read yet
        assert next(result) == {"n": 1}
        assert result_holds_next(result)
        assert next(result) == {"n": 2}
        assert len(sent) == 1
        assert not result_holds_next(result)  # the page is used up: the next item needs a request
        assert next(result) == {"n": 1}
        assert len(sent) == 2
        assert result_holds_next(result)  # the limit is reached: next() stops without a request
        with pytest.raises(StopIteration):
            next(result)
        assert len(sent) == 2
        assert not result_holds_next(iter([1]))
