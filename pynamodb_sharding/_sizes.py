"""The size of an item as DynamoDB counts it, and the write units a put of it costs.

Items are in botocore's wire shape (``{"name": {"S": "value"}, ...}``), as requests carry them.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["item_size", "item_write_units", "transaction_write_units"]


def _number_size(text: str) -> int:
    digits = text.lstrip("+-").split("e")[0].split("E")[0].replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1


def _binary_size(text: Any) -> int:
    if isinstance(text, bytes | bytearray):
        return len(text)
    try:
        return len(base64.b64decode(str(text)))
    except ValueError:
        return len(str(text))


def _value_size(value: Any) -> int:
    """Approximate size of one wire ``AttributeValue``, as DynamoDB sizes items."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return 0
    ((kind, content),) = value.items()
    if kind == "S":
        return len(str(content).encode())
    if kind == "N":
        return _number_size(str(content))
    if kind == "B":
        return _binary_size(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS") and isinstance(content, list):
        member = {"SS": "S", "NS": "N", "BS": "B"}[kind]
        return sum(_value_size({member: element}) for element in content)
    if kind == "L" and isinstance(content, list):
        return 3 + sum(1 + _value_size(element) for element in content)
    if kind == "M" and isinstance(content, Mapping):
        return 3 + sum(1 + item_size({name: element}) for name, element in content.items())
    return 0


def item_size(item: Mapping[str, Any]) -> int:
    """Approximate size in bytes of a wire-format item: UTF-8 names plus value sizes.

    Strings count their UTF-8 bytes, numbers one byte per two significant digits plus one,
    binaries their decoded bytes, booleans and nulls one byte, lists and maps three bytes plus
    one per element, as DynamoDB documents item sizes.
    """
    untrusted: object = item  # request bodies may hold anything
    if not isinstance(untrusted, Mapping):
        return 0
    return sum(len(str(name).encode()) + _value_size(value) for name, value in item.items())


def item_write_units(item: Mapping[str, Any]) -> int:
    """The write units a put of ``item`` costs: one per started KB of its size."""
    return max(1, math.ceil(item_size(item) / 1024))


def transaction_write_units(items: Iterable[Mapping[str, Any]], checks: int = 0) -> int:
    """The write units DynamoDB bills a ``TransactWriteItems`` that puts or deletes ``items``
    and checks ``checks`` more keys (``ConditionCheck``, of absent or small items): twice a
    plain write's, per action (a move of an item under 1 KB: 2 for its put, 2 for its delete).

    DynamoDB Local reports less (2 for a small move, whatever its checks): a job reports the
    larger of the two, so its report and its dry run's estimate agree on both servers.
    """
    return 2 * (sum(item_write_units(item) for item in items) + checks)
