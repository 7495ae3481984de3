"""DynamoDB expressions over items in DynamoDB JSON, for the fleet simulator's in-memory tables.

Covers what PynamoDB sends: condition expressions (comparisons, ``BETWEEN``, ``IN``, ``AND``,
``OR``, ``NOT``, ``attribute_exists``, ``attribute_not_exists``, ``attribute_type``,
``begins_with``, ``contains``, ``size``), key conditions, and update expressions (``SET``
with ``+``/``-``, ``if_not_exists``, ``list_append``; ``REMOVE``; ``ADD``; ``DELETE``) over
top-level attributes and dotted or indexed paths.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

__all__ = ["ExpressionError", "condition", "number_text", "projection", "update"]

Item = dict[str, Any]
_TOKEN = re.compile(r"\s*(<>|<=|>=|[=<>(),.\[\]+-]|#[\w-]+|:[\w-]+|\d+|[A-Za-z_][\w-]*)")


class ExpressionError(ValueError):
    """An expression the simulator cannot read (a ``ValidationException`` to the client)."""


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            msg = f"cannot read expression {text!r} at {text[position:]!r}"
            raise ExpressionError(msg)
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def number(value: Mapping[str, Any]) -> Decimal:
    return Decimal(value["N"])


def _comparable(value: Mapping[str, Any] | None) -> Any:
    if value is None:
        return None
    ((kind, content),) = value.items()
    if kind == "N":
        return ("N", Decimal(content))
    if kind in ("SS", "BS"):
        return (kind, frozenset(content))
    if kind == "NS":
        return (kind, frozenset(Decimal(n) for n in content))
    if kind == "L":
        return (kind, tuple(_comparable(v) for v in content))
    if kind == "M":
        return (kind, tuple(sorted((k, _comparable(v)) for k, v in content.items())))
    return (kind, content)


class _Parser:
    def __init__(self, text: str, names: Mapping[str, str], values: Mapping[str, Any]) -> None:
        self.tokens = _tokens(text)
        self.position = 0
        self.names = names
        self.values = values

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            msg = f"expected {expected or 'more'} in {' '.join(self.tokens)!r}, got {token!r}"
            raise ExpressionError(msg)
        self.position += 1
        return token

    def at(self, word: str) -> bool:
        token = self.peek()
        return token is not None and token.upper() == word

    # -- paths and operands ---------------------------------------------------------------

    def path(self) -> list[str | int]:
        segments: list[str | int] = [self.name(self.take())]
        while self.peek() in (".", "["):
            if self.take() == ".":
                segments.append(self.name(self.take()))
            else:
                segments.append(int(self.take()))
                self.take("]")
        return segments

    def name(self, token: str) -> str:
        if token.startswith("#"):
            if token not in self.names:
                msg = f"name placeholder {token} has no ExpressionAttributeNames entry"
                raise ExpressionError(msg)
            return self.names[token]
        return token

    def operand(self) -> Callable[[Item], Any]:
        token = self.peek()
        if token is not None and token.startswith(":"):
            self.take()
            if token not in self.values:
                msg = f"value placeholder {token} has no ExpressionAttributeValues entry"
                raise ExpressionError(msg)
            value = self.values[token]
            return lambda item: value
        following = self.tokens[self.position + 1 : self.position + 2]
        if token is not None and token.lower() == "size" and following == ["("]:
            self.take()
            self.take("(")
            path = self.path()
            self.take(")")

            def size(item: Item) -> Any:
                found = resolve(item, path)
                if found is None:
                    return None
                ((kind, content),) = found.items()
                return {"N": str(len(content.encode() if kind == "S" else content))}

            return size
        path = self.path()
        return lambda item: resolve(item, path)

    # -- conditions ------------------------------------------------------------------------

    def condition(self) -> Callable[[Item], bool]:
        left = self.conjunction()
        while self.at("OR"):
            self.take()
            right = self.conjunction()
            left = (lambda a, b: lambda item: a(item) or b(item))(left, right)
        return left

    def conjunction(self) -> Callable[[Item], bool]:
        left = self.negation()
        while self.at("AND"):
            self.take()
            right = self.negation()
            left = (lambda a, b: lambda item: a(item) and b(item))(left, right)
        return left

    def negation(self) -> Callable[[Item], bool]:
        if self.at("NOT"):
            self.take()
            inner = self.negation()
            return lambda item: not inner(item)
        return self.primary()

    def primary(self) -> Callable[[Item], bool]:
        if self.peek() == "(":
            self.take()
            inner = self.condition()
            self.take(")")
            return inner
        token = self.peek() or ""
        function = token.lower()
        if function in ("attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains"):
            self.take()
            self.take("(")
            path = self.path()
            argument = None
            if self.peek() == ",":
                self.take()
                argument = self.operand()
            self.take(")")
            return _function(function, path, argument)
        left = self.operand()
        if self.at("BETWEEN"):
            self.take()
            low = self.operand()
            self.take("AND")
            high = self.operand()
            return lambda item: _between(left(item), low(item), high(item))
        if self.at("IN"):
            self.take()
            self.take("(")
            options = [self.operand()]
            while self.peek() == ",":
                self.take()
                options.append(self.operand())
            self.take(")")
            return lambda item: left(item) is not None and any(
                _comparable(left(item)) == _comparable(o(item)) for o in options
            )
        comparator = self.take()
        right = self.operand()
        return _comparison(comparator, left, right)

    def done(self) -> None:
        if self.peek() is not None:
            msg = f"unexpected {self.peek()!r} in {' '.join(self.tokens)!r}"
            raise ExpressionError(msg)


def resolve(item: Mapping[str, Any], path: list[str | int]) -> Any:
    """The value at ``path`` in ``item`` (DynamoDB JSON), ``None`` when absent."""
    current: Any = {"M": item}
    for segment in path:
        if isinstance(segment, int):
            items = current.get("L") if isinstance(current, Mapping) else None
            if not isinstance(items, list) or segment >= len(items):
                return None
            current = items[segment]
        else:
            fields = current.get("M") if isinstance(current, Mapping) else None
            if not isinstance(fields, Mapping) or segment not in fields:
                return None
            current = fields[segment]
    return current


def _function(name: str, path: list[str | int], argument: Callable[[Item], Any] | None) -> Callable[[Item], bool]:
    def check(item: Item) -> bool:
        found = resolve(item, path)
        if name == "attribute_exists":
            return found is not None
        if name == "attribute_not_exists":
            return found is None
        if found is None or argument is None:
            return False
        wanted = argument(item)
        ((kind, content),) = found.items()
        if name == "attribute_type":
            return bool(kind == wanted["S"])
        if name == "begins_with":
            ((_, prefix),) = wanted.items()
            return isinstance(content, str) and content.startswith(prefix)
        # contains
        ((_, needle),) = wanted.items()
        if kind == "S":
            return bool(needle in content)
        if kind in ("SS", "NS", "BS"):
            return bool(needle in content)
        if kind == "L":
            return any(_comparable(v) == _comparable(wanted) for v in content)
        return False

    return check


def _between(value: Any, low: Any, high: Any) -> bool:
    a, lo, hi = _comparable(value), _comparable(low), _comparable(high)
    return a is not None and a[0] == lo[0] == hi[0] and lo[1] <= a[1] <= hi[1]


def _comparison(comparator: str, left: Callable[[Item], Any], right: Callable[[Item], Any]) -> Callable[[Item], bool]:
    def check(item: Item) -> bool:
        a, b = _comparable(left(item)), _comparable(right(item))
        if comparator == "=":
            return bool(a is not None and a == b)
        if comparator == "<>":
            return bool(a != b)
        if a is None or b is None or a[0] != b[0]:
            return False
        if comparator == "<":
            return bool(a[1] < b[1])
        if comparator == "<=":
            return bool(a[1] <= b[1])
        if comparator == ">":
            return bool(a[1] > b[1])
        if comparator == ">=":
            return bool(a[1] >= b[1])
        msg = f"unknown comparator {comparator!r}"
        raise ExpressionError(msg)

    return check


def condition(text: str, names: Mapping[str, str], values: Mapping[str, Any]) -> Callable[[Item], bool]:
    """A predicate over items for a condition (or key condition, or filter) expression."""
    parser = _Parser(text, names, values)
    predicate = parser.condition()
    parser.done()
    return predicate


def _set_at(item: Item, path: list[str | int], value: Any) -> None:
    parent = item if len(path) == 1 else resolve(item, path[:-1])
    last = path[-1]
    if len(path) == 1:
        item[str(last)] = value
    elif isinstance(last, int) and parent is not None and "L" in parent:
        items = parent["L"]
        if last < len(items):
            items[last] = value
        else:
            items.append(value)
    elif parent is not None and "M" in parent:
        parent["M"][str(last)] = value
    else:
        msg = f"the document path {path} does not exist in the item"
        raise ExpressionError(msg)


def _remove_at(item: Item, path: list[str | int]) -> None:
    if len(path) == 1:
        item.pop(str(path[0]), None)
        return
    parent = resolve(item, path[:-1])
    last = path[-1]
    if isinstance(last, int) and parent is not None and "L" in parent and last < len(parent["L"]):
        del parent["L"][last]
    elif parent is not None and "M" in parent:
        parent["M"].pop(str(last), None)


def _arithmetic(a: Any, sign: str, b: Any) -> Any:
    if a is None or b is None:
        msg = "The provided expression refers to an attribute that does not exist in the item"
        raise ExpressionError(msg)
    if "N" not in a or "N" not in b:
        msg = "An operand in the update expression has an incorrect data type"
        raise ExpressionError(msg)
    total = number(a) + number(b) if sign == "+" else number(a) - number(b)
    return {"N": _number_text(total)}


def number_text(value: Decimal) -> str:
    """A number as DynamoDB stores and returns it: no exponent, no trailing zeros (``"1.5"``,
    ``"2"``, ``"0"``)."""
    if value == 0:
        return "0"
    text = format(value.normalize(), "f")
    return text


def _number_text(value: Decimal) -> str:
    """The result of arithmetic (``ADD``, ``+``, ``-``) as DynamoDB Local returns it: exact
    decimal arithmetic, whose result keeps the larger scale of its operands (``70 + 0.50`` is
    ``70.50``), without an exponent."""
    return format(value, "f")


def update(
    text: str, names: Mapping[str, str], values: Mapping[str, Any], *, add_scale: Decimal = Decimal(1)
) -> Callable[[Item], None]:
    """A function applying an update expression to an item (in place); ``add_scale``
    multiplies the numbers ``ADD`` adds (what ``add_scale`` identical requests would add)."""
    parser = _Parser(text, names, values)
    steps: list[Callable[[Item, Item], None]] = []
    while parser.peek() is not None:
        clause = parser.take().upper()
        while True:
            path = parser.path()
            if clause == "SET":
                parser.take("=")
                steps.append(_set_step(path, _value(parser)))
            elif clause == "REMOVE":
                steps.append(lambda item, original, p=path: _remove_at(item, p))  # type: ignore[misc]
            elif clause in ("ADD", "DELETE"):
                steps.append(_add_step(clause, path, parser.operand(), add_scale))
            else:
                msg = f"unknown update clause {clause!r}"
                raise ExpressionError(msg)
            if parser.peek() != ",":
                break
            parser.take()

    def apply(item: Item) -> None:
        # Every operand reads the item as it was before the update, as DynamoDB evaluates them
        # (``SET a = b, b = a`` swaps): the steps change ``item`` and read a copy of it.
        original = _copy({"M": item})["M"]
        for step in steps:
            step(item, original)

    return apply


def _value(parser: _Parser) -> Callable[[Item], Any]:
    first = _term(parser)
    if parser.peek() in ("+", "-"):
        sign = parser.take()
        second = _term(parser)
        return lambda item: _arithmetic(first(item), sign, second(item))
    return first


def _term(parser: _Parser) -> Callable[[Item], Any]:
    token = (parser.peek() or "").lower()
    if token in ("if_not_exists", "list_append") and parser.tokens[parser.position + 1 : parser.position + 2] == ["("]:
        parser.take()
        parser.take("(")
        if token == "if_not_exists":
            path = parser.path()
            parser.take(",")
            fallback = _term(parser)
            parser.take(")")
            return lambda item: resolve(item, path) if resolve(item, path) is not None else fallback(item)
        left = _term(parser)
        parser.take(",")
        right = _term(parser)
        parser.take(")")
        return lambda item: {"L": [*left(item)["L"], *right(item)["L"]]}
    return parser.operand()


def _set_step(path: list[str | int], value: Callable[[Item], Any]) -> Callable[[Item, Item], None]:
    def step(item: Item, original: Item) -> None:
        computed = value(original)
        if computed is None:
            msg = "The provided expression refers to an attribute that does not exist in the item"
            raise ExpressionError(msg)
        _set_at(item, path, _copy(computed))

    return step


def _copy(value: Any) -> Any:
    ((kind, content),) = value.items()
    if isinstance(content, list):
        return {kind: [(_copy(v) if isinstance(v, dict) else v) for v in content]}
    if isinstance(content, dict):
        return {kind: {k: _copy(v) for k, v in content.items()}}
    return {kind: content}


def _add_step(
    clause: str, path: list[str | int], operand: Callable[[Item], Any], scale: Decimal
) -> Callable[[Item, Item], None]:
    def step(item: Item, original: Item) -> None:
        given = operand(original)
        found = resolve(original, path)
        ((kind, content),) = given.items()
        if clause == "ADD" and kind == "N":
            base = Decimal(0) if found is None else number(found)
            _set_at(item, path, {"N": _number_text(base + Decimal(content) * scale)})
            return
        if kind not in ("SS", "NS", "BS"):
            msg = f"{clause} takes a number or a set, got {kind}"
            raise ExpressionError(msg)
        existing = [] if found is None else list(found[kind])
        if clause == "ADD":
            merged = existing + [v for v in content if v not in existing]
        else:
            merged = [v for v in existing if v not in content]
        if merged:
            _set_at(item, path, {kind: merged})
        else:
            _remove_at(item, path)

    return step


def projection(text: str, names: Mapping[str, str]) -> Callable[[Item], Item]:
    """A function returning what a ``ProjectionExpression`` keeps of an item: each listed path
    that the item has (a path into a map or list keeps the enclosing documents, with only what
    the paths name)."""
    parser = _Parser(text, names, {})
    paths = [parser.path()]
    while parser.peek() == ",":
        parser.take()
        paths.append(parser.path())
    parser.done()

    def project(item: Item) -> Item:
        kept: Item = {}
        for path in paths:
            found = resolve(item, path)
            if found is None:
                continue
            if len(path) == 1:
                kept[str(path[0])] = _copy(found)
                continue
            current: Any = {"M": kept}
            for segment, following in itertools.pairwise(path):
                container = current.get("M")
                if container is None or not isinstance(segment, str):
                    break
                current = container.setdefault(segment, {"L": []} if isinstance(following, int) else {"M": {}})
            else:
                last = path[-1]
                if isinstance(last, int) and "L" in current:
                    current["L"].append(_copy(found))
                elif isinstance(last, str) and "M" in current:
                    current["M"][last] = _copy(found)
        return kept

    return project
