"""Values kept per model class in the class itself, so that they live and die with it.

A ``weakref.WeakKeyDictionary`` keyed by a model class keeps the class alive for good as soon as
its value refers back to it (a ``ShardManager`` holds its model): the dictionary holds its
values strongly, so the key's weak reference never dies. Kept in the owner's own ``__dict__``,
the value and its owner form a cycle that the garbage collector frees, as it frees a plain
PynamoDB model class: a class made at run time (a model per tenant's table, a test's model) is
freed once nothing else uses it. (Not for a declared index instance: PynamoDB deep-copies an
inherited index into each subclass, and would copy the value along.)
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Generic, TypeVar

__all__ = ["Owned"]

_V = TypeVar("_V")

_numbers = itertools.count()


class Owned(Generic[_V]):
    """A value per owner (a class or an instance with a ``__dict__``), stored in the owner's own
    ``__dict__`` with the owner: a subclass does not see its base class's value, nor a class
    made from a copy of another's namespace that one's, as with a dictionary keyed by class.
    ``None`` is never stored (it reads as no value)."""

    __slots__ = ("_attribute", "_owners")

    def __init__(self, what: str) -> None:
        self._attribute = f"__pynamodb_sharding_{what}_{next(_numbers)}__"
        # For items(): weak, as the owners; keyed by id so that items() keeps the order the
        # owners were first stored in (a WeakSet's order changes with the addresses, and with it
        # which of two models an error names).
        self._owners: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()

    def get(self, owner: Any) -> _V | None:
        try:
            own = owner.__dict__  # a class's own, not its bases' (faster than vars())
        except AttributeError:  # no __dict__: nothing was stored
            return None
        entry: tuple[Any, _V] | None = own.get(self._attribute)
        return entry[1] if entry is not None and entry[0] is owner else None

    def __contains__(self, owner: Any) -> bool:
        return self.get(owner) is not None

    def __setitem__(self, owner: Any, value: _V) -> None:
        entry = (owner, value)  # a cycle through the owner, which the collector frees with it
        if isinstance(owner, type):
            type.__setattr__(owner, self._attribute, entry)
        else:
            object.__setattr__(owner, self._attribute, entry)
        self._owners[id(owner)] = owner  # a live owner's id is its own: stored once, first place kept

    def setdefault(self, owner: Any, value: _V) -> _V:
        found = self.get(owner)
        if found is not None:
            return found
        self[owner] = value
        return value

    def items(self) -> list[tuple[Any, _V]]:
        """Every owner alive that holds a value, with it, in the order they were first stored."""
        return [(owner, value) for owner in list(self._owners.values()) if (value := self.get(owner)) is not None]
