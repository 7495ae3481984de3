"""The fast path steps aside for a botocore client whose request path is wrapped by an
instrumentation (OpenTelemetry's wraps ``BaseClient._make_api_call`` with a ``wrapt`` proxy, a
descriptor that is not a function), and not for botocore's own, a plain function."""

from __future__ import annotations

from typing import Any

import boto3

from pynamodb_sharding._host import instrumented


class _Proxy:
    """What ``wrapt.FunctionWrapper`` is to the class: a descriptor wrapping the function."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else self.wrapped.__get__(instance, owner)


def test_botocore_s_own_client_is_not_instrumented_and_a_wrapped_one_is() -> None:
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                          aws_access_key_id="k", aws_secret_access_key="s")
    assert not instrumented(client)
    base = type(client)
    wrapped = type("Wrapped", (base,), {"_make_api_call": _Proxy(base._make_api_call)})
    assert instrumented(object.__new__(wrapped))
    inherited = type("Inherited", (wrapped,), {})  # wrapped on a base class, as on BaseClient
    assert instrumented(object.__new__(inherited))
