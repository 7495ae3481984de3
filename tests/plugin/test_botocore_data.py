"""botocore's data files parsed once for the sessions a test suite makes, not once per session."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import botocore.session
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding.testing import bound_models, shared_botocore_data
from pynamodb_sharding.testing.local import DynamoDBLocal


def _loader(data_path: str | None = None) -> Any:
    session = botocore.session.get_session()
    if data_path is not None:
        session.set_config_variable("data_path", data_path)
    return session.get_component("data_loader")


class Reading(Model):
    class Meta:
        table_name = "readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


_OUTSIDE_PYTEST = """
import sys, botocore.loaders, botocore.session
from pynamodb_sharding.testing import shared_botocore_data

def loader(data_path=None):
    session = botocore.session.get_session()
    if data_path is not None:
        session.set_config_variable("data_path", data_path)
    return session.get_component("data_loader")

assert loader() is not loader()  # botocore's own: a parse per session
with shared_botocore_data():
    assert loader() is loader()
    other = loader(sys.argv[1])
    assert other is not loader() and other is loader(sys.argv[1])
    assert sys.argv[1] in other.search_paths  # the session's own data path is honoured
    with shared_botocore_data():
        assert loader() is loader()
    assert loader() is loader()  # the inner end leaves the outer one sharing
assert botocore.session.create_loader is botocore.loaders.create_loader
assert loader() is not loader()  # after the last end, botocore's own again
print("checked")
"""


def test_sessions_share_a_loader_per_data_path_and_botocore_is_restored_after(tmp_path: Any) -> None:
    # In a process of its own: here the plugin's server fixture may already share for the session.
    done = subprocess.run([sys.executable, "-c", _OUTSIDE_PYTEST, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "checked"), done.stderr


def test_the_loaders_are_kept_for_the_next_use() -> None:
    with shared_botocore_data():
        first = _loader()
    with shared_botocore_data():
        assert _loader() is first


def test_a_loader_shared_by_sessions_serves_their_clients(dynamodb_local: DynamoDBLocal) -> None:
    """The plugin's server fixture shares the data: models bound in different tests (here,
    two bindings) read and write with clients made from one parse."""
    assert _loader() is _loader()  # the fixture's sharing is on for the session
    for n in range(2):
        with bound_models(dynamodb_local, Reading):
            Reading("s", n).save()
            assert [item.at for item in Reading.query("s")] == [n]
            loader = Reading._get_connection().connection.client._loader
            assert loader is _loader()
