"""Owned: a value per class (or object) kept in the owner's own __dict__, freed with it."""

from __future__ import annotations

import gc
import weakref

from pynamodb_sharding._owned import Owned


class Base:
    pass


class Child(Base):
    pass


class Slotted:
    __slots__ = ("__weakref__",)


def test_a_value_is_the_class_s_own_not_its_base_s() -> None:
    owned: Owned[str] = Owned("t")
    owned[Base] = "base"
    assert owned.get(Base) == "base"
    assert owned.get(Child) is None
    assert Child not in owned
    owned[Child] = "child"
    assert (owned.get(Base), owned.get(Child)) == ("base", "child")


def test_two_registries_of_one_name_do_not_share_values() -> None:
    first: Owned[int] = Owned("same")
    second: Owned[int] = Owned("same")
    first[Base] = 1
    assert second.get(Base) is None


def test_instances_hold_values_and_one_without_a_dict_holds_none() -> None:
    owned: Owned[int] = Owned("t")
    item = Base()
    owned[item] = 3
    assert owned.get(item) == 3
    assert owned.get(Base()) is None
    assert owned.get(Slotted()) is None
    assert Slotted() not in owned


def test_setdefault_keeps_the_first_value() -> None:
    owned: Owned[list[int]] = Owned("t")
    first = owned.setdefault(Base, [1])
    assert owned.setdefault(Base, [2]) is first


def test_items_are_the_owners_alive_and_a_value_that_refers_back_is_freed_with_its_owner() -> None:
    owned: Owned[object] = Owned("t")
    made = type("Made", (), {})
    owned[made] = {"model": made}  # refers back to its owner, as a shard manager does
    owned[Base] = "kept"
    assert {owner for owner, _ in owned.items()} == {made, Base}
    ref = weakref.ref(made)
    del made
    gc.collect()
    assert ref() is None
    assert owned.items() == [(Base, "kept")]


def test_a_class_made_from_a_copy_of_another_s_namespace_does_not_take_its_value() -> None:
    """``type(name, bases, dict(vars(Other)))`` copies the stored entry; it stays Other's (found
    by an adversarial trial: a cloned model skipped the index agreement check its original had
    passed, and a cloned metadata model followed its original's owner)."""
    owned: Owned[str] = Owned("t")
    original = type("Original", (), {})
    owned[original] = "checked"
    clone = type("Clone", (), {k: v for k, v in vars(original).items() if k not in ("__dict__", "__weakref__")})
    assert owned.get(clone) is None
    assert clone not in owned
    owned[clone] = "its own"
    assert (owned.get(original), owned.get(clone)) == ("checked", "its own")


def test_items_keep_the_order_the_owners_were_first_stored_in() -> None:
    """Which of two disagreeing models an error names must not change with the classes'
    addresses (a set's order did: CI named another model than the one declared first)."""
    owned: Owned[int] = Owned("t")
    classes = [type(f"Model{n}", (), {}) for n in range(40)]
    order = classes[::2] + classes[1::2][::-1]
    for n, cls in enumerate(order):
        owned[cls] = n
    owned[order[0]] = 99  # storing again keeps the first place
    assert [owner for owner, _ in owned.items()] == order
    assert owned.items()[0] == (order[0], 99)
    dropped = order.pop(5)
    classes.remove(dropped)
    ref = weakref.ref(dropped)
    del dropped, cls
    gc.collect()
    assert ref() is None
    assert [owner for owner, _ in owned.items()] == order
