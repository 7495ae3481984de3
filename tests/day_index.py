"""The plain ``by_day`` index of the adoption tests' tables: ``day`` and ``at``, all projected.

PynamoDB binds each instance of an index class to the model that declares it, so the plain
models of several tests declare ``by_day = PlainByDay()`` with this one class.
"""

from __future__ import annotations

from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex


class PlainByDay(GlobalSecondaryIndex[Any]):
    """PynamoDB's own index, unsharded: what the application had before adopting the library."""

    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
