"""A merged query's shard pages, parsed with ``json.loads`` instead of botocore's shape walk.

botocore parses a Query response by walking its output shape in Python, one call per attribute
value: about half the client CPU of reading a large result. A merged query reads its pages on
the fan-out pool's threads, where that walk also competes with the caller's thread for the GIL,
so it costs a merged query more than the same walk costs a plain query on one thread. Each
shard request of a merged query is therefore parsed by :func:`_parse_query_page`, a
``before-parse`` hook of botocore's: a successful JSON response of DynamoDB's is decoded with
``json.loads`` (in C) and only binary values (``B``, ``BS``, wherever they are nested) are
decoded from base64, as botocore decodes them. The result goes to botocore's
``customized_response_dict``, which botocore merges into its parsed response before anything
else sees it: retries, ``after-call`` hooks, PynamoDB's own handling and the response
metadata are unchanged. Errors, other content types and the requests of other code on the
same client (a plain ``query`` in another thread) are left to botocore's parser: the hook acts
only inside :func:`parsed_quickly`, on the thread that sends the request.

botocore emits ``before-parse`` from 1.36.0 (:data:`pynamodb_sharding._host.BEFORE_PARSE_HOOK`).
With an older botocore the hook is never called and botocore's own parser reads every page:
the results are the same, at the client CPU of botocore's shape walk.
"""

from __future__ import annotations

import base64
import json
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pynamodb_sharding._hedging import mark_sent
from pynamodb_sharding._locals import ContextLocal

__all__ = ["decode_binary_values", "parsed_quickly"]

_T = TypeVar("_T")
_local = ContextLocal("fastparse.local")
_EVENT = "before-parse.dynamodb.Query"
_HOOK_ID = "pynamodb-sharding-fast-query-parse"
#: DynamoDB's JSON protocol (awsJson1_0).
_JSON_TYPES = ("application/x-amz-json-1.0", "application/json")
#: The event emitters (one per botocore client) the two hooks are registered on. botocore's
#: ``register`` inspects the handler's signature before it looks at ``unique_id``: registering
#: on every request cost about 5 % of a merged query's client CPU.
_hooked: weakref.WeakSet[Any] = weakref.WeakSet()


def decode_binary_values(value: dict[str, Any]) -> None:
    """Decode, in place, the base64 of the binary values in one raw attribute value (``B``,
    ``BS``, and those inside ``M`` and ``L``), as botocore's parser does."""
    if "M" in value:
        for member in value["M"].values():
            decode_binary_values(member)
    elif "L" in value:
        for member in value["L"]:
            decode_binary_values(member)
    elif "B" in value:
        value["B"] = base64.b64decode(value["B"])
    elif "BS" in value:
        value["BS"] = [base64.b64decode(member) for member in value["BS"]]


def _parse_query_page(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    if not getattr(_local, "active", False) or response_dict.get("status_code") != 200:
        return
    headers = response_dict.get("headers") or {}
    content_type = str(headers.get("content-type", "")).split(";")[0].strip().lower()
    body = response_dict.get("body")
    if content_type not in _JSON_TYPES or not isinstance(body, bytes | bytearray):
        return
    try:
        parsed = json.loads(body)
    except ValueError:
        return  # botocore's parser says what is wrong with it
    if not isinstance(parsed, dict):
        return
    if b'"B' in body:  # a binary value (or an attribute named B...): decode them all
        for item in parsed.get("Items") or ():
            for value in item.values():
                decode_binary_values(value)
        for value in (parsed.get("LastEvaluatedKey") or {}).values():
            decode_binary_values(value)
    customized_response_dict.update(parsed)
    response_dict["body"] = b"{}"  # botocore parses nothing more, then adds the above


@contextmanager
def _active() -> Iterator[None]:
    previous = getattr(_local, "active", False)
    _local.active = True
    try:
        yield
    finally:
        _local.active = previous


def _leaving(**_: Any) -> None:
    if getattr(_local, "active", False):
        mark_sent()


def parsed_quickly(client: Any, send: Callable[[], _T]) -> _T:
    """Run ``send()``, one Query on ``client`` from this thread, parsing its response quickly
    (and telling a hedged call when its request leaves: :func:`~pynamodb_sharding._hedging.mark_sent`)."""
    events = client.meta.events
    if events not in _hooked:  # once per client (two threads may both register: the ids dedupe)
        events.register(_EVENT, _parse_query_page, unique_id=_HOOK_ID)
        # First among the request's before-send handlers: what runs after it is the network's time.
        events.register_first("before-send.dynamodb.Query", _leaving, unique_id=_HOOK_ID + "-sent")
        _hooked.add(events)
    with _active():
        return send()
