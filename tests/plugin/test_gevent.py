"""A gevent test suite runs with the plugin installed: nothing imports ssl before its patch_all().

The plugin loads in every pytest run (``pytest11`` entry point), before a project's conftest
files and test packages. An application whose ``tests/__init__.py`` calls
``gevent.monkey.patch_all()`` got gevent's ``MonkeyPatchWarning`` ("Monkey-patching ssl after
ssl has already been imported may lead to errors"), naming urllib3 and botocore, which the
plugin had imported through pynamodb; older pins failed outright with a RecursionError. Here
such a suite (patch_all first, then the ``dynamodb_models`` fixture against DynamoDB Local, a
save, a get, a query and two greenlets writing at once) runs in a subprocess with that warning
made an error, both by the interpreter and by pytest.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pynamodb_sharding.testing.local import ENDPOINT_ENV

WARNING_AS_ERROR = "error::gevent.monkey.MonkeyPatchWarning"

PATCH_FIRST = '''
from gevent import monkey

monkey.patch_all()
'''

APP_TEST = '''
import gevent
import socket
import ssl

from gevent import monkey
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model


class Order(Model):
    class Meta:
        table_name = "orders"

    customer = UnicodeAttribute(hash_key=True)
    number = NumberAttribute(range_key=True)


def test_patched_before_anything_imported_ssl():
    assert monkey.is_module_patched("ssl")
    assert monkey.is_module_patched("socket")
    assert socket.socket is gevent.socket.socket
    assert ssl.SSLContext is gevent.ssl.SSLContext


def test_models_work_on_dynamodb_local_under_gevent(dynamodb_models):
    dynamodb_models(Order)
    Order("alice", 1).save()
    writers = [gevent.spawn(Order("bob", number).save) for number in range(2)]
    gevent.joinall(writers, raise_error=True)
    assert Order.get("alice", 1).number == 1
    assert [order.number for order in Order.query("bob")] == [0, 1]
'''


def test_a_gevent_patched_suite_passes_with_the_warning_as_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, dynamodb_local: Any
) -> None:
    monkeypatch.setenv(ENDPOINT_ENV, dynamodb_local.endpoint)  # the inner run starts no server
    package = pytester.mkpydir("app_tests")
    (package / "__init__.py").write_text(PATCH_FIRST)
    (package / "test_orders.py").write_text(APP_TEST)
    result = pytester.run(
        sys.executable, "-W", WARNING_AS_ERROR, "-m", "pytest", "-W", WARNING_AS_ERROR,
        # anyio's pytest plugin (installed here with httpx, for the FastAPI example's tests) imports
        # ssl when pytest starts, before any conftest can patch: a gevent suite disables it.
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:anyio", "app_tests",
    )
    output = str(result.stdout) + str(result.stderr)
    assert "MonkeyPatchWarning" not in output
    result.assert_outcomes(passed=2)
    assert 0 == result.ret
