"""Every PynamoDB and botocore internal pynamodb-sharding relies on, and the guard that fails closed.

PynamoDB gives no public hook for "which key does this request address", so the library
overrides a few private methods and reads a few private attributes. Each one is listed here
with why it is needed and the contract test (``tests/contract/``) that fails when a PynamoDB
or botocore release stops behaving as relied on. Other modules reach these internals through
the functions below, not directly.

Overridden on :class:`~pynamodb_sharding.ShardedModel` (``OVERRIDDEN_HOOKS``), each a hook
PynamoDB calls on paths it builds itself (the model's own ``save``, ``update``, ``delete``,
``refresh``, ``get``, ``query`` ... build their requests in ``_writes``/``_point_reads``):

* ``Model._get_hash_range_key_serialized_values``: the key ``TransactWrite.update/delete`` send;
  returns the physical key. Pinned by
  ``test_host_hooks.py::test_instance_requests_route_through_the_key_hook``.
* ``Model._get_serialized_keys``: the key ``BatchWrite.delete`` sends.
  Pinned by ``test_host_hooks.py::test_batch_delete_routes_through_the_item_key_hook``.
* ``Model._serialize_keys``: the key class-level paths would build from a bare hash key; it
  raises, since no shard is known there. Pinned by ``test_host_hooks.py::test_class_key_hook_refuses``.
* ``Model._get_save_args``: the put ``TransactWrite.save`` sends; the condition is rewritten
  there for the physical key the put addresses (see ``_conditions.py``). Pinned by
  ``test_host_hooks.py::test_writes_of_new_items_route_through_serialize``.
* ``Model._instantiate``: builds items from raw data (``from_raw_data``, query, scan,
  batch_get); decodes the physical key. Pinned by
  ``test_host_hooks.py::test_items_read_back_route_through_instantiate``. Where the class keeps
  PynamoDB's steps (``AttributeContainer._container_deserialize``, ``_set_discriminator``,
  ``_set_defaults``, ``_set_attributes``; :func:`builds_as_pynamodb`), the instance is built
  as those steps build it, without doing them twice (``_building``), values kept under their
  Python names (``Model._dynamo_to_python_attrs``: :func:`python_attribute_names`). Pinned by
  ``test_host_hooks.py::test_pynamodb_instantiates_by_init_then_container_deserialize``.
* ``Model._get_connection``: every request's table connection; the model arms its client's key
  guard there. Pinned by ``test_host_hooks.py::test_every_request_gets_its_connection_from_the_hook``.
* ``Model._get_schema``: what ``create_table`` sends (and PynamoDB's own key metadata); the
  model adds the shard attribute of each ``layout="multi_attribute"`` index. Pinned by
  ``test_host_hooks.py::test_create_table_sends_the_schema_hook``.

Read or called (the functions below): ``Model._hash_keyname``/``_range_keyname`` (the key
attribute names; set by PynamoDB's metaclass), ``Model._get_connection()`` (the table
connection and its botocore client) and ``Model._connection`` (reset when ``Meta`` is
rebound; the test tools' loopback guard puts a descriptor there), ``Model._get_schema()`` and
``Model._ttl_attribute()`` (what ``create_table`` sends; a test binding merges the schemas of
the classes sharing one table), ``Model._indexes``, ``Index._hash_key_attribute()`` and
``Index._model``, ``Model._get_discriminator_attribute()`` and ``_get_discriminator_class()``,
``Model._hash_key_attribute()``/``_range_key_attribute()``/``_handle_version_attribute``/
``_version_attribute_name``/
``update_local_version_attribute`` (the model's writes build their put, update and delete, and
their version check, as ``save``/``update``/``delete`` would: :func:`put_arguments` is pinned by
``test_host_hooks.py::test_put_arguments_are_save_args``), ``TableConnection.connection``
(``transact_write_items``), and botocore's event names ``needs-retry.dynamodb.<Operation>``,
``before-parse`` (whose ``customized_response_dict`` the merged queries' fast parse fills with the
page's items: ``_fastparse.py``, pinned by ``test_host_hooks.py::test_before_parse_is_emitted_where_declared``)
and ``before-parameter-build.dynamodb`` with ``register_first`` (documented botocore extension
points). The asyncio entry points send the requests of a botocore client over the event
loop's connections by replacing its endpoint's ``http_session`` (``client._endpoint``, whose
``_send`` calls ``http_session.send``) and its endpoint's ``_needs_retry`` (botocore's copy
sleeps with ``time.sleep`` between attempts): :func:`route_http_sends`; and they verify TLS
as that session's ``_verify`` says (:func:`http_verify`) and send through the proxies its
``_proxy_config`` names (:func:`http_proxies`); both pinned by
``tests/contract/test_host_hooks.py::TestAsyncTransportHooks``. A scan's ``rate_limit`` waits
between pages with ``ResultIterator.page_iter._rate_limiter._time_module.sleep`` (PynamoDB's
``RateLimiter(time_module=...)``, ``time`` by default), which :func:`pace_rate_limit` makes
the library's pause (a wait that yields on the event loop); pinned by
``test_host_hooks.py::TestAsyncTransportHooks::test_a_scan_rate_limit_waits_with_the_given_pause``.
``ascan`` hands over the items of a page it holds without a greenlet: a ``ResultIterator``
whose ``_index`` is below its ``_count`` (or whose ``_limit`` is 0) answers ``next()`` from
memory (:func:`result_holds_next`); pinned by
``test_host_hooks.py::TestAsyncTransportHooks::test_a_result_iterator_answers_held_items_from_memory``.
No other module names a PynamoDB or botocore private: ``tests/contract/test_internals_fence.py``
fails the build when one does.

**What older botocore releases leave out.** botocore parses DynamoDB's responses by its copy of
DynamoDB's service model, and drops every field that copy does not name. Before 1.40.10 it has
no ``ThrottlingReasons`` on ``ProvisionedThroughputExceededException`` and
``RequestLimitExceeded`` (nor ``throttlingReasons`` on ``ThrottlingException``); before about
1.35.6x no ``WarmThroughput`` in ``DescribeTable``'s ``Table``. :func:`keep_unmodelled_fields`
puts them back from the raw body, on a client whose model lacks them, in a ``needs-retry``
handler: botocore emits ``needs-retry.dynamodb.<Operation>`` after every attempt with
``response=(http_response, parsed)``, where ``http_response.content`` is the raw body and
``parsed`` is the very dict that later ``needs-retry`` and ``after-call`` handlers see and that
``ClientError.response`` holds. Pinned by
``test_host_hooks.py::test_needs_retry_sees_the_raw_body_and_the_parsed_response_the_caller_gets``
and ``test_host_hooks.py::TestUnmodelledFields``. ``before-parse`` (with the
``customized_response_dict`` that :mod:`~pynamodb_sharding._fastparse` fills) is emitted from
botocore 1.36.0 (:data:`BEFORE_PARSE_HOOK`); before that, merged queries are parsed by botocore's
own parser. Pinned by ``test_host_hooks.py::test_before_parse_is_emitted_where_declared``.

**Failing closed.** If a PynamoDB release stopped calling one of the overridden hooks, a
request would carry the bare logical key. :func:`guard_keys` registers a botocore
``before-parameter-build`` handler on each sharded model's client that checks every key and
item addressed to the model's table before it is sent, and raises
:class:`~pynamodb_sharding.HostContractError` for a hash key without a shard
suffix: a wrong key is refused, never written. (``TransactWrite`` over a connection of its own
is not a model's client; the contract tests pin that path.)
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import ssl
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import botocore
import botocore.loaders
from botocore.httpsession import get_cert_path
from botocore.model import NoShapeFoundError
from pynamodb.attributes import Attribute, AttributeContainer
from pynamodb.connection.table import TableConnection
from pynamodb.models import Model, _ModelFuture
from pynamodb.pagination import ResultIterator
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send

from pynamodb_sharding._exceptions import HostContractError
from pynamodb_sharding._keys import KeyCodec

if TYPE_CHECKING:
    from pynamodb.expressions.condition import Condition

#: ``exchange(url, headers, body)``: a reply's status, headers (lower-case names) and body, or
#: ``None`` when it cannot send from where it is called (:func:`routed_exchange`).
RawExchange = Callable[[str, Mapping[str, str], bytes], "tuple[int, dict[str, str], bytes] | None"]

__all__ = [
    "BATCH_WRITE_GAVE_UP",
    "BEFORE_PARSE_HOOK",
    "BOTOCORE_VERSION",
    "OVERRIDDEN_HOOKS",
    "ModelFuture",
    "RawExchange",
    "add_client_hook",
    "arm_client",
    "botocore_client",
    "builds_as_pynamodb",
    "bump_local_version",
    "client_hooks_armed",
    "connection_owner",
    "discriminator_attribute",
    "discriminator_class",
    "discriminator_root",
    "dynamodb_send_signals",
    "event_handlers",
    "event_registry",
    "extra_headers",
    "frozen_credentials",
    "guard_keys",
    "hash_keyname",
    "index_hash_attribute",
    "index_model",
    "index_range_attribute",
    "indexes",
    "instrumented",
    "keep_unmodelled_fields",
    "missing_fields",
    "own_connection",
    "pace_rate_limit",
    "put_arguments",
    "python_attribute_names",
    "query_operation",
    "range_keyname",
    "reset_connection",
    "restore_connection",
    "result_holds_next",
    "route_http_sends",
    "routed_exchange",
    "routed_send",
    "set_connection",
    "share_botocore_data",
    "shared_data_loader",
    "table_connection",
    "table_schema",
    "throttling_reasons_in_body",
    "tls_context",
    "ttl_attribute_name",
    "unshared_connection",
    "version_condition",
    "without_key_guard",
]

#: What PynamoDB's ``TransactGet.get`` returns (``pynamodb.models._ModelFuture``): the async
#: transaction's ``get`` returns it too.
ModelFuture = _ModelFuture

#: The private PynamoDB methods ``ShardedModel`` overrides (see the module docstring).
OVERRIDDEN_HOOKS = (
    "_get_hash_range_key_serialized_values",
    "_get_serialized_keys",
    "_serialize_keys",
    "_get_save_args",
    "_instantiate",
    "_get_connection",
    "_get_schema",
)


#: The ``Meta`` settings that say where the data lives: the endpoint, the region and the account
#: (credentials). A metadata model that follows a sharded model must have these of its owner.
PLACEMENT_SETTINGS = ("host", "region", "aws_access_key_id", "aws_secret_access_key", "aws_session_token")
#: The ``Meta`` settings that say only how requests are sent: a metadata model's own when its
#: ``Meta`` sets them, else its owner's.
TRANSPORT_SETTINGS = (
    "connect_timeout_seconds", "read_timeout_seconds", "max_retry_attempts", "base_backoff_ms",
    "max_pool_connections", "extra_headers",
)
#: The ``Meta`` attributes PynamoDB builds a model's connection from.
CONNECTION_SETTINGS = PLACEMENT_SETTINGS + TRANSPORT_SETTINGS


def connection_fingerprint(meta: Any) -> tuple[str, ...]:
    """The table name and connection settings of a model's ``Meta``, comparable and hashable
    (``repr``: ``extra_headers`` is a dict): models made from a ``Meta`` are made again when it
    changes (a test binding, an app pointing a model elsewhere at run time)."""
    return tuple(repr(getattr(meta, name, None)) for name in ("table_name", *CONNECTION_SETTINGS))


def hash_keyname(model: type[Model]) -> str | None:
    """The Python name of the model's hash-key attribute (``None`` on an abstract base)."""
    return model._hash_keyname


def range_keyname(model: type[Model]) -> str | None:
    """The Python name of the model's range-key attribute, if it has one."""
    return model._range_keyname


def table_connection(model: type[Model]) -> TableConnection:
    """The model's PynamoDB table connection (created on first use)."""
    return model._get_connection()


def botocore_client(model: type[Model]) -> Any:
    """The botocore DynamoDB client the model's requests go through."""
    return model._get_connection().connection.client


def plain_table_connection(model: type[Model]) -> TableConnection:
    """The table connection PynamoDB's own ``Model._get_connection`` builds for ``model``,
    bypassing what the library's models add to it (the fleet simulator reaches the botocore
    client before the library arms it)."""
    return Model._get_connection.__func__(model)  # type: ignore[attr-defined,no-any-return]


def reset_connection(model: type[Model]) -> Any:
    """Drop the model's cached connection (``Model._connection``) so the next request builds one
    from ``Meta`` again; returns what was cached, for :func:`restore_connection`."""
    previous = model.__dict__.get("_connection")
    model._connection = None
    return previous


def connection_owner(model: type[Model]) -> type[Model] | None:
    """The class whose cached connection (``Model._connection``, a class attribute PynamoDB
    reuses down a hierarchy for the same table name) ``model`` would use: the first class of
    its MRO that caches one; ``None`` when none does yet (or the test tools' loopback guard
    holds the slot)."""
    for cls in model.__mro__:
        slot = vars(cls).get("_connection", None)
        if slot is None:
            continue
        if getattr(slot, "follows_subclasses", False) is True:
            return None
        return cls
    return None


def unshared_connection(parent: type[Model]) -> Any:
    """The ``_connection`` a class derived from ``parent`` at run time (a period model, a
    home-region metadata model) starts with: ``None``, so that it builds a connection from its own
    ``Meta`` instead of reusing ``parent``'s cached one (PynamoDB reuses it for the same table
    name); or, while the test tools' loopback guard (``pynamodb_sharding.testing.guard``) holds
    a class ``parent`` derives from, the guard's descriptor: the derived class is then refused
    when its own ``Meta`` (a home region's endpoint, say) is not on this machine."""
    for cls in parent.__mro__:
        slot = vars(cls).get("_connection")
        if getattr(slot, "follows_subclasses", False) is True:
            return slot
    return None


_loaders_lock = threading.Lock()
#: botocore's data loaders shared by the connections of classes derived at run time, by data path.
_data_loaders: dict[str | None, Any] = {}


def shared_data_loader(search_path: str | None) -> Any:
    """The process's botocore loader of data files for ``search_path`` (a session's ``data_path``
    setting): what one session using it has parsed, the next reuses."""
    with _loaders_lock:
        loader = _data_loaders.get(search_path)
        if loader is None:
            loader = _data_loaders[search_path] = botocore.loaders.create_loader(search_path)
        return loader


def share_botocore_data(connection: TableConnection) -> None:
    """Make ``connection``'s botocore client, unless it exists already, now and from a session
    that reads botocore's data files through :func:`shared_data_loader`.

    A class derived at run time (a period model, a home region's metadata model) has a
    connection of its own, and each new botocore session parses botocore's data files again
    before its first request (the endpoint list, DynamoDB's service model and rules: about
    200 ms of CPU): a query over 30 daily periods would spend 6 s there in every new process.
    The data parsed is the same; sessions of one loader only read it.
    """
    base = connection.connection
    if base._client is not None:
        return
    session = base.session  # this thread's, new: its loader is registered lazily, not made yet
    session.register_component("data_loader", shared_data_loader(session.get_config_variable("data_path")))
    base.client  # noqa: B018  # made here, from that session (another thread would make its own)


def own_connection(model: type[Model], default: Any = None) -> Any:
    """What ``model`` itself holds as its cached connection (``Model._connection``, not an
    inherited one), ``default`` when it holds none."""
    return vars(model).get("_connection", default)


def set_connection(model: type[Model], value: Any) -> None:
    """Make ``value`` the model's cached connection (``Model._connection``): the test tools'
    loopback guard puts a descriptor there."""
    model._connection = value


def restore_connection(model: type[Model], previous: Any, *, inherited: bool) -> None:
    """Put back what :func:`reset_connection` returned (``inherited``: the class had none of its own)."""
    if inherited:
        if "_connection" in model.__dict__:
            del model._connection
    else:
        model._connection = previous


def table_schema(model: type[Model]) -> dict[str, Any]:
    """The schema ``create_table`` sends for the model (``Model._get_schema()``): attribute
    definitions, key schema, global and local secondary indexes."""
    schema: dict[str, Any] = dict(model._get_schema())
    return schema


def ttl_attribute_name(model: type[Model]) -> str | None:
    """The stored name of the model's ``TTLAttribute`` (``Model._ttl_attribute()``), if it has one."""
    attribute = model._ttl_attribute()  # type: ignore[no-untyped-call]  # untyped in PynamoDB
    return None if attribute is None else attribute.attr_name


def indexes(model: type[Model]) -> dict[str, Any]:
    """The model's indexes by name (``Model._indexes``, set by PynamoDB's metaclass)."""
    found: dict[str, Any] = model._indexes
    return found


def index_range_attribute(index: Any) -> Attribute[Any] | None:
    """The range-key attribute of a PynamoDB index, ``None`` when it has none."""
    for attribute in index.Meta.attributes.values():
        if attribute.is_range_key:
            found: Attribute[Any] = attribute
            return found
    return None


def index_hash_attribute(index: Any) -> Attribute[Any]:
    """The hash-key attribute of a PynamoDB index (``Index._hash_key_attribute()``)."""
    attribute: Attribute[Any] = index._hash_key_attribute()
    return attribute


def discriminator_attribute(model: type[Model]) -> Any:
    """The model's ``DiscriminatorAttribute``, or ``None`` (``Model._get_discriminator_attribute()``)."""
    return model._get_discriminator_attribute()


#: The methods by which PynamoDB's ``Model._instantiate`` fills an instance read back, as
#: PynamoDB defines them: it calls the class with ``_user_instantiated=False`` (whose ``__init__``
#: sets the discriminator, the defaults and no attributes), then ``_container_deserialize``
#: empties ``attribute_values``, sets the discriminator and the defaults again, then each stored
#: value with ``setattr``. Taken when this module is imported, so that a method patched later
#: (a test's spy) reads as a change.
_CONTAINER_DESERIALIZE = AttributeContainer._container_deserialize
_SET_DISCRIMINATOR = AttributeContainer._set_discriminator
_SET_DEFAULTS = AttributeContainer._set_defaults
_SET_ATTRIBUTES = AttributeContainer._set_attributes


def builds_as_pynamodb(model: type[Model]) -> bool:
    """Whether ``model`` fills instances read back with PynamoDB's own steps, as PynamoDB
    defines them (it overrides, and a patch replaced, none of
    ``AttributeContainer._container_deserialize``, ``_set_discriminator``, ``_set_defaults``,
    ``_set_attributes``, nor ``__setattr__``), which ``_building`` then takes in fewer steps.
    Pinned by ``test_host_hooks.py::test_pynamodb_instantiates_by_init_then_container_deserialize``."""
    # Asked for every item read back: plain comparisons, no loop.
    return (model._container_deserialize is _CONTAINER_DESERIALIZE
            and model._set_defaults is _SET_DEFAULTS
            and model._set_discriminator is _SET_DISCRIMINATOR
            and model._set_attributes is _SET_ATTRIBUTES
            and getattr(model, "__setattr__") is object.__setattr__)  # noqa: B009 (the class's, not an instance's)


def python_attribute_names(model: type[Model]) -> dict[str, str]:
    """Stored name -> the name under which an instance's ``attribute_values`` keeps an
    attribute, where the two differ (``Model._dynamo_to_python_attrs``, what
    ``Attribute.__set__`` reads)."""
    names: dict[str, str] = getattr(model, "_dynamo_to_python_attrs", {})  # untyped in PynamoDB
    return names


#: How PynamoDB's ``BatchWrite.commit`` words the ``PutError`` it raises when items are still
#: unprocessed after ``Meta.max_retry_attempts`` resends. That error has no cause and no
#: attribute to check, so its text is the only way to recognise it. Pinned by
#: ``test_host_hooks.py::test_batch_write_gives_up_with_the_known_text``.
BATCH_WRITE_GAVE_UP = "Failed to batch write items"


def put_arguments(item: Model, attributes: dict[str, Any], condition: Condition | None, *,
                  add_version_condition: bool = True) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` of ``TableConnection.put_item`` for ``item`` stored as ``attributes``
    (its serialized attributes, physical key included), as ``Model._get_save_args`` builds them:
    the keys popped out, the next version set (``Model._handle_version_attribute``), the version
    check added to ``condition``. Pinned by ``test_host_hooks.py::test_put_arguments_are_save_args``."""
    hash_attribute = item._hash_key_attribute()  # type: ignore[no-untyped-call]  # untyped in PynamoDB
    hash_key = attributes.pop(hash_attribute.attr_name, {}).get(hash_attribute.attr_type)
    kwargs: dict[str, Any] = {}
    range_attribute = item._range_key_attribute()  # type: ignore[no-untyped-call]  # untyped in PynamoDB
    if range_attribute:
        range_key = attributes.pop(range_attribute.attr_name, {}).get(range_attribute.attr_type)
        if range_key is not None:
            kwargs["range_key"] = range_key
    version = item._handle_version_attribute(attributes=attributes)
    if add_version_condition and version is not None:
        condition &= version
    kwargs["attributes"] = attributes
    kwargs["condition"] = condition
    return (hash_key,), kwargs


def version_condition(item: Model, *, actions: list[Any] | None = None) -> Condition | None:
    """The ``VersionAttribute`` check a write of ``item`` carries (``None`` without one); with
    ``actions``, the version's update is appended to them (``Model._handle_version_attribute``)."""
    return item._handle_version_attribute(actions=actions)


def discriminator_root(model: type[Model]) -> type[Model] | None:
    """The class of ``model``'s hierarchy that declares its ``DiscriminatorAttribute`` (the
    topmost class whose attributes hold it, ``Model._discriminator`` naming it), ``None`` for a
    model without one."""
    name = getattr(model, "_discriminator", None)  # untyped in PynamoDB
    if not name:
        return None
    for klass in reversed(model.__mro__):
        if isinstance(klass, type) and issubclass(klass, Model) and getattr(klass, "_discriminator", None) == name:
            return klass
    return None


def discriminator_class(item: Model, raw: dict[str, Any]) -> type[Model] | None:
    """The class a stored item's discriminator names (``Model._get_discriminator_class``)."""
    found: type[Model] | None = item._get_discriminator_class(raw)
    return found


def index_model(index: Any) -> type[Model] | None:
    """The model class an index instance is declared on (``Index._model``, set by PynamoDB's
    metaclass), ``None`` for an index not bound to a model."""
    return getattr(index, "_model", None)


def version_attribute_name(item: Model) -> str | None:
    """The name of ``item``'s ``VersionAttribute`` (``Model._version_attribute_name``), ``None``
    when its model has none."""
    name: str | None = item._version_attribute_name
    return name


def absent_attributes(model: type[Model], raw: Mapping[str, Any]) -> list[str]:
    """The stored names of ``model``'s attributes, and its subclasses' (a discriminator's
    classes share the table), that the raw item ``raw`` does not hold, sorted: what a condition
    that the item is unchanged since it was read as ``raw`` requires absent."""
    names: set[str] = set()
    classes = [model]
    while classes:
        cls = classes.pop()
        names.update(attribute.attr_name for attribute in cls.get_attributes().values())
        classes.extend(cls.__subclasses__())
    return sorted(name for name in names if name not in raw)


def unchanged_condition(model: type[Model], raw: Mapping[str, Any], key_names: tuple[str, ...]) -> dict[str, Any]:
    """The condition (request parameters) that holds while the stored item is exactly ``raw``:
    it exists, each attribute of ``raw`` (but its keys, ``key_names``) has the value read, and
    every attribute of ``model`` it did not hold is still missing (:func:`absent_attributes`)."""
    names = {"#h": key_names[0]}
    values: dict[str, Any] = {}
    terms = ["attribute_exists(#h)"]
    for number, (name, value) in enumerate(sorted(raw.items())):
        if name in key_names:
            continue
        names[f"#a{number}"] = name
        values[f":v{number}"] = value
        terms.append(f"#a{number} = :v{number}")
    for number, name in enumerate(absent_attributes(model, raw)):
        names[f"#n{number}"] = name
        terms.append(f"attribute_not_exists(#n{number})")
    condition: dict[str, Any] = {"ConditionExpression": " AND ".join(terms), "ExpressionAttributeNames": names}
    if values:
        condition["ExpressionAttributeValues"] = values
    return condition


def bump_local_version(item: Model) -> None:
    """Advance ``item``'s ``VersionAttribute`` after a successful write, as ``save`` does."""
    item.update_local_version_attribute()  # type: ignore[no-untyped-call]  # untyped in PynamoDB


# -- the guard ---------------------------------------------------------------------------------

_GUARD_EVENT = "before-parameter-build.dynamodb"
_GUARD_ID = "pynamodb_sharding.host.guard_keys"
_guarded: weakref.WeakKeyDictionary[Any, _KeyGuard] = weakref.WeakKeyDictionary()
_guard_lock = threading.Lock()


class _KeyGuard:
    """Refuses requests that address a sharded table with a hash key lacking a shard suffix."""

    def __init__(self) -> None:
        # Each guarded model and its codec; its table name is read at request time, so that
        # tables renamed by test bindings are followed.
        self.models: weakref.WeakKeyDictionary[type[Model], KeyCodec] = weakref.WeakKeyDictionary()

    def add(self, model: type[Model], codec: KeyCodec) -> None:
        self.models[model] = codec

    def _tables(self) -> dict[str, tuple[str, str, KeyCodec]]:
        """Table name -> (model name, hash attribute's stored name, codec)."""
        tables: dict[str, tuple[str, str, KeyCodec]] = {}
        for model, codec in list(self.models.items()):
            name = model._hash_keyname
            if name is None:
                continue
            attribute: Attribute[Any] = model.get_attributes()[name]
            tables[model.Meta.table_name] = (model.__name__, attribute.attr_name, codec)
        return tables

    def __call__(self, params: Mapping[str, Any] | None = None, model: Any = None, **_: Any) -> None:
        if not params or model is None or _bare_keys_allowed.get():
            return
        operation = getattr(model, "name", "")
        addressed = _ADDRESSED_KEYS.get(operation)
        if addressed is None:  # a query or scan addresses no item by its key
            return
        tables = self._tables()
        for table, key in addressed(params):
            target = tables.get(table)
            if target is None or not isinstance(key, Mapping):
                continue
            model_name, attr_name, codec = target
            value = key.get(attr_name)
            physical = value.get("S") if isinstance(value, Mapping) else None
            try:
                codec.decode(physical)
            except Exception:
                msg = (
                    f"{model_name}.{codec.attribute}: a {operation} request to table {table!r} would "
                    f"address {physical!r}, which has no shard suffix; the installed PynamoDB no "
                    f"longer routes this operation through the hooks pynamodb-sharding overrides, "
                    f"so nothing was sent. Install a PynamoDB version this release supports "
                    f"(pynamodb>=6.1,<7) and report the version that fails."
                )
                raise HostContractError(msg) from None


def _one_key(name: str) -> Callable[[Mapping[str, Any]], Iterator[tuple[str, Any]]]:
    def found(params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        yield params.get("TableName", ""), params.get(name)

    return found


def _batch_get_keys(params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for table, request in (params.get("RequestItems") or {}).items():
        for key in request.get("Keys", ()):
            yield table, key


def _batch_write_keys(params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for table, requests in (params.get("RequestItems") or {}).items():
        for request in requests:
            if "PutRequest" in request:
                yield table, request["PutRequest"].get("Item")
            if "DeleteRequest" in request:
                yield table, request["DeleteRequest"].get("Key")


def _transaction_keys(params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for entry in params.get("TransactItems", ()):
        for kind, request in entry.items():
            yield request.get("TableName", ""), request.get("Item" if kind == "Put" else "Key")


#: For each operation that addresses items by their primary key, ``(table, key or item)`` of
#: every item a request addresses; a Query or a Scan addresses none.
_ADDRESSED_KEYS: dict[str, Callable[[Mapping[str, Any]], Iterator[tuple[str, Any]]]] = {
    "GetItem": _one_key("Key"), "UpdateItem": _one_key("Key"), "DeleteItem": _one_key("Key"),
    "PutItem": _one_key("Item"), "BatchGetItem": _batch_get_keys, "BatchWriteItem": _batch_write_keys,
    "TransactWriteItems": _transaction_keys, "TransactGetItems": _transaction_keys,
}


#: Set while a request deliberately addresses a bare key (:func:`without_key_guard`).
_bare_keys_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pynamodb_sharding_bare_keys_allowed", default=False)


@contextlib.contextmanager
def without_key_guard() -> Iterator[None]:
    """Within it, the requests of this thread (or greenlet) may address a bare key: a read that
    looks for an item stored under its unsharded key on purpose (``_point_reads``)."""
    token = _bare_keys_allowed.set(True)
    try:
        yield
    finally:
        _bare_keys_allowed.reset(token)


def guard_keys(model: type[Model], connection: TableConnection, codec: KeyCodec) -> None:
    """Make ``connection``'s botocore client refuse bare logical keys of ``model``'s table (and,
    on a botocore that drops them, keep the throttling reasons of its errors:
    :func:`keep_unmodelled_fields`, which classifying a sharded model's throttles needs)."""
    client = connection.connection.client
    guard = _guarded.get(client)
    if guard is not None and model in guard.models:
        return
    keep_unmodelled_fields(client)
    with _guard_lock:
        guard = _guarded.get(client)
        if guard is None:
            guard = _guarded[client] = _KeyGuard()
            client.meta.events.register_first(_GUARD_EVENT, guard, unique_id=_GUARD_ID)
        guard.add(model, codec)


# -- what older botocore releases leave out ------------------------------------------------


def _release(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:3]:
        digits = "".join(char for char in part if char.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


#: The installed botocore release, e.g. ``(1, 34, 162)``.
BOTOCORE_VERSION = _release(botocore.__version__)
#: Whether botocore emits ``before-parse`` with a ``customized_response_dict`` it merges into the
#: parsed response (1.36.0 and later), which :mod:`~pynamodb_sharding._fastparse` relies on.
BEFORE_PARSE_HOOK = BOTOCORE_VERSION >= (1, 36, 0)

#: The fields of DynamoDB's throttle errors that list why a request was throttled.
_REASON_FIELDS = ("ThrottlingReasons", "throttlingReasons")
#: The error shapes that carry them, and the field each carries in DynamoDB's model.
_REASON_SHAPES = {
    "ProvisionedThroughputExceededException": "ThrottlingReasons",
    "RequestLimitExceeded": "ThrottlingReasons",
    "ThrottlingException": "throttlingReasons",
}
_UNMODELLED_EVENT = "needs-retry.dynamodb"
_UNMODELLED_ID = "pynamodb_sharding.host.keep_unmodelled_fields"
_unmodelled_clients: weakref.WeakSet[Any] = weakref.WeakSet()
_unmodelled_lock = threading.Lock()


def missing_fields(client: Any) -> frozenset[str]:
    """The response fields pynamodb-sharding reads that the DynamoDB model of ``client``'s
    botocore does not name (so its parser drops them): ``"ThrottlingReasons"`` (the reasons
    lists of throttle errors, both spellings) and ``"WarmThroughput"`` (``DescribeTable``)."""
    model = client.meta.service_model
    missing = set()
    for shape_name, field in _REASON_SHAPES.items():
        if field not in _members(model, shape_name):
            missing.add("ThrottlingReasons")
    if "WarmThroughput" not in _members(model, "TableDescription"):
        missing.add("WarmThroughput")
    return frozenset(missing)


def _members(model: Any, shape_name: str) -> Mapping[str, Any]:
    try:
        members: Mapping[str, Any] = model.shape_for(shape_name).members
    except NoShapeFoundError:  # a shape this botocore's model does not have at all
        return {}
    return members


def throttling_reasons_in_body(body: object) -> dict[str, list[Any]]:
    """The throttling reasons lists of a raw DynamoDB error body (``{}`` when it has none)."""
    if not isinstance(body, bytes | bytearray) or b"hrottlingReasons" not in body:
        return {}
    try:
        document = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(document, Mapping):
        return {}
    return {field: document[field] for field in _REASON_FIELDS if isinstance(document.get(field), list)}


class _UnmodelledFields:
    """``needs-retry`` handler: put back into the parsed response what the parser dropped."""

    def __init__(self, missing: frozenset[str]) -> None:
        self.reasons = "ThrottlingReasons" in missing
        self.warm = "WarmThroughput" in missing

    def __call__(self, response: Any = None, operation: Any = None, **_: Any) -> None:
        if not isinstance(response, tuple) or len(response) != 2:
            return  # the attempt raised (no response): nothing was parsed
        http_response, parsed = response
        if not isinstance(parsed, dict):
            return
        status = getattr(http_response, "status_code", None)
        if self.reasons and isinstance(status, int) and status >= 400:
            if not any(field in parsed for field in _REASON_FIELDS):
                parsed.update(throttling_reasons_in_body(getattr(http_response, "content", None)))
        elif self.warm and status == 200 and getattr(operation, "name", None) == "DescribeTable":
            table = parsed.get("Table")
            if isinstance(table, dict) and "WarmThroughput" not in table:
                warm = _warm_throughput_in_body(getattr(http_response, "content", None))
                if warm is not None:
                    table["WarmThroughput"] = warm


def _warm_throughput_in_body(body: object) -> dict[str, Any] | None:
    if not isinstance(body, bytes | bytearray) or b"WarmThroughput" not in body:
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return None
    table = document.get("Table") if isinstance(document, Mapping) else None
    warm = table.get("WarmThroughput") if isinstance(table, Mapping) else None
    return warm if isinstance(warm, dict) else None


def keep_unmodelled_fields(client: Any) -> None:
    """Make ``client`` keep the response fields its botocore's DynamoDB model does not name
    (:func:`missing_fields`), read from the raw body after every attempt; a no-op when the
    model names them all (botocore 1.40.10 and later)."""
    if client in _unmodelled_clients:
        return
    with _unmodelled_lock:
        if client in _unmodelled_clients:
            return
        missing = missing_fields(client)
        if missing:
            # First among the service's handlers, before botocore's retry handler and after the
            # handlers of one operation (which read the body themselves: throttling.classify_response).
            client.meta.events.register_first(_UNMODELLED_EVENT, _UnmodelledFields(missing), unique_id=_UNMODELLED_ID)
        _unmodelled_clients.add(client)


class _RoutedSession:
    """A botocore HTTP session that asks ``route`` first: an answer is the response, ``None``
    sends the request with the client's own session (the sync path, unchanged)."""

    def __init__(self, own: Any, route: Callable[[Any], Any], exchange: RawExchange | None = None) -> None:
        self.own = own
        self.route = route
        self.exchange = exchange

    def send(self, request: Any) -> Any:
        response = self.route(request)
        return self.own.send(request) if response is None else response

    def close(self) -> None:
        self.own.close()


def http_verify(client: Any) -> Any:
    """botocore's ``verify`` for ``client``'s requests, as its HTTP session holds it: ``True``
    (botocore's CA bundle), ``False`` (no check) or a CA bundle's path."""
    session = client._endpoint.http_session
    if isinstance(session, _RoutedSession):
        session = session.own
    return getattr(session, "_verify", True)


_tls_contexts: dict[bool | str, ssl.SSLContext] = {}


def tls_context(verify: Any) -> ssl.SSLContext:
    """The TLS context that verifies as botocore's own session does for its ``verify``:
    ``False`` (no check), ``True`` (botocore's CA bundle), or a CA bundle's path (a file, or a
    directory of certificates, as urllib3 takes either); one per setting, kept."""
    key = verify if isinstance(verify, (bool, str)) else str(verify)
    context = _tls_contexts.get(key)
    if context is None:
        if verify is False:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            path = get_cert_path(verify)
            found = isinstance(path, str)
            context = ssl.create_default_context(cafile=path if found and os.path.isfile(path) else None,
                                                 capath=path if found and os.path.isdir(path) else None)
        _tls_contexts[key] = context
    return context


def http_proxies(client: Any) -> Any:
    """botocore's proxies for ``client``'s requests, as its HTTP session holds them: a
    ``botocore.httpsession.ProxyConfiguration`` (``proxy_url_for(url)``,
    ``proxy_headers_for(proxy_url)``, ``settings``) of ``Config(proxies=..., proxies_config=...)``,
    or else of ``HTTP_PROXY``/``HTTPS_PROXY`` as botocore read them for the client's endpoint
    when it made the client (``NO_PROXY`` applied); ``None`` for a session that has none."""
    session = client._endpoint.http_session
    if isinstance(session, _RoutedSession):
        session = session.own
    return getattr(session, "_proxy_config", None)


def route_http_sends(client: Any, route: Callable[[Any], Any], pause: Callable[[float], None],
                     exchange: RawExchange | None = None) -> None:
    """Make ``client`` send each request through ``route(request)`` (a botocore
    ``AWSResponse``, or ``None`` for its own HTTP session) and wait between retries with
    ``pause`` instead of ``time.sleep``; a client already routed stays as it is. ``exchange``
    sends what a caller built below botocore the same way (:func:`routed_exchange`).

    ``pause`` replaces botocore's ``Endpoint._needs_retry``, which emits
    ``needs-retry.<service>.<Operation>`` and sleeps for the delay the retry handler returns.
    """
    endpoint = client._endpoint
    session = endpoint.http_session
    if isinstance(session, _RoutedSession):
        return
    endpoint.http_session = _RoutedSession(session, route, exchange)
    emitter = endpoint._event_emitter

    def needs_retry(attempts: int, operation_model: Any, request_dict: Any, response: Any = None,
                    caught_exception: Any = None) -> bool:
        service_id = operation_model.service_model.service_id.hyphenize()
        responses = emitter.emit(
            f"needs-retry.{service_id}.{operation_model.name}", response=response, endpoint=endpoint,
            operation=operation_model, attempts=attempts, caught_exception=caught_exception,
            request_dict=request_dict,
        )
        delay = next((answer for _handler, answer in responses if answer is not None), None)
        if delay is None or delay is False:
            return False
        pause(delay)
        return True

    endpoint._needs_retry = needs_retry


#: Called with each sharded model's botocore client before its requests (see :func:`arm_client`).
_client_hooks: list[Callable[[Any], None]] = []


def add_client_hook(hook: Callable[[Any], None]) -> None:
    """Call ``hook(client)`` on the client of every sharded model's connection, from now on."""
    if hook not in _client_hooks:
        _client_hooks.append(hook)


def client_hooks_armed() -> bool:
    """Whether any client hook is registered."""
    return bool(_client_hooks)


def arm_client(client: Any) -> None:
    """Run the client hooks on ``client`` (nothing unless the asyncio side is imported)."""
    for hook in _client_hooks:
        hook(client)


class _PausingClock:
    """The ``time_module`` of PynamoDB's ``RateLimiter``: its waits are ``pause``."""

    def __init__(self, pause: Callable[[float], None]) -> None:
        self.sleep = pause

    @staticmethod
    def time() -> float:
        return time.time()


def pace_rate_limit(result: ResultIterator[Any], pause: Callable[[float], None]) -> ResultIterator[Any]:
    """Make the ``rate_limit`` of PynamoDB's ``result`` (a scan, a query) wait between pages with
    ``pause`` instead of ``time.sleep``; returns ``result``."""
    limiter = getattr(result.page_iter, "_rate_limiter", None)
    if limiter is not None:
        limiter._time_module = _PausingClock(pause)
    return result


def result_holds_next(result: object) -> bool:
    """Whether ``next(result)`` of PynamoDB's ``ResultIterator`` answers without a request: an
    item of the page it holds is left, or its limit is reached."""
    if not isinstance(result, ResultIterator):
        return False
    return bool(result._limit == 0 or result._index < result._count)


# -- the fast path of a merged query's shard requests (pynamodb_sharding._wire) ------------------


class _Captured(Exception):
    """Raised by :class:`_ParamsCapture` with the request PynamoDB built."""

    def __init__(self, operation_kwargs: dict[str, Any]) -> None:
        super().__init__("captured")
        self.operation_kwargs = operation_kwargs


class _ParamsCapture:
    """PynamoDB's ``Connection`` whose ``dispatch`` hands back what it would send, unsent."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def dispatch(self, operation_name: str, operation_kwargs: dict[str, Any]) -> Any:
        raise _Captured(operation_kwargs)


def query_operation(table: TableConnection, hash_key: Any, **query_kwargs: Any) -> dict[str, Any]:
    """The Query request PynamoDB's ``TableConnection.query(hash_key, **query_kwargs)`` would
    send (its ``operation_kwargs``, with the ``ReturnConsumedCapacity`` its ``dispatch`` adds),
    built by PynamoDB's own ``Connection.query`` without sending it. Pinned by
    ``test_host_hooks.py::TestFastQueryHooks::test_query_operation_is_what_pynamodb_sends``."""
    connection = table.connection
    try:
        type(connection).query(_ParamsCapture(connection), table.table_name, hash_key, **query_kwargs)  # type: ignore[arg-type]  # a Connection but for dispatch
    except _Captured as captured:
        kwargs = captured.operation_kwargs
        kwargs.setdefault("ReturnConsumedCapacity", "TOTAL")  # as Connection.dispatch does
        return kwargs
    msg = "PynamoDB's Connection.query returned without dispatching its request."
    raise HostContractError(msg)


def event_registry(client: Any) -> Any:
    """What changes whenever a handler is registered on or unregistered from ``client``'s
    events: botocore's emitter replaces its ``_lookup_cache`` dict then (compare by identity)."""
    return client.meta.events._emitter._lookup_cache


def event_handlers(client: Any, event_name: str) -> list[Any]:
    """The handlers ``client``'s emitter calls for ``event_name``, in order (botocore's
    ``HierarchicalEmitter._handlers.prefix_search``)."""
    return list(client.meta.events._emitter._handlers.prefix_search(event_name))


def frozen_credentials(client: Any) -> Any:
    """The credentials ``client`` signs with now (``ReadOnlyCredentials``), or ``None`` for an
    unsigned client (``client._request_signer._credentials``)."""
    credentials = client._request_signer._credentials
    return None if credentials is None else credentials.get_frozen_credentials()


def extra_headers(connection: Any) -> dict[str, str] | None:
    """PynamoDB's ``Meta.extra_headers`` of a connection (``Connection._extra_headers``), which its
    ``before-send`` handler adds to every request."""
    headers: dict[str, str] | None = getattr(connection, "_extra_headers", None)
    return headers


def routed_send(client: Any) -> Callable[[Any], Any] | None:
    """The event loop's send of a client the asyncio side routed (:func:`route_http_sends`):
    ``route(request)`` answers a response, or ``None`` off the loop; ``None`` when unrouted."""
    session = client._endpoint.http_session
    return session.route if isinstance(session, _RoutedSession) else None


def routed_exchange(client: Any) -> RawExchange | None:
    """The event loop's send, for a request built below botocore, of a client the asyncio side
    routed: ``exchange(url, headers, body)`` answers the reply's status, headers (lower-case
    names) and body, or ``None`` off the loop; ``None`` when unrouted."""
    session = client._endpoint.http_session
    return session.exchange if isinstance(session, _RoutedSession) else None


def instrumented(client: Any) -> bool:
    """Whether botocore's request path of ``client`` is wrapped by an instrumentation (such as
    OpenTelemetry's, which wraps ``BaseClient._make_api_call`` with a ``wrapt`` proxy): the fast
    path leaves its requests to that path then. botocore's own decorator of that method leaves
    a plain function."""
    # Read from the class, a function is itself and a wrapt proxy a proxy (getattr_static walks
    # the classes' dicts the same way at ten times the cost, on every shard request).
    return not isinstance(getattr(type(client), "_make_api_call", None), types.FunctionType)


def dynamodb_send_signals() -> tuple[Any, Any] | None:
    """PynamoDB's ``pre_dynamodb_send`` and ``post_dynamodb_send`` signals when a receiver is
    connected to either (``blinker``'s ``Signal.receivers``), else ``None``."""
    if getattr(pre_dynamodb_send, "receivers", None) or getattr(post_dynamodb_send, "receivers", None):
        return pre_dynamodb_send, post_dynamodb_send
    return None
