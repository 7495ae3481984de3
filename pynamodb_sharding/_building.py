"""Model instances built from the items a read returns, as PynamoDB builds them, in less CPU.

A merged read builds one instance per item returned, and a long read builds tens of thousands:
PynamoDB's ``Model._instantiate`` spends most of a long read's client CPU there. It calls the
class (``__init__`` sets the defaults), then ``_container_deserialize`` empties the values and
sets the defaults again, and each attribute goes through ``getattr``/``setattr`` on the
instance. For a model class that keeps PynamoDB's own ways of doing so, :func:`instantiate`
gives the same instance, the same values in the same order, the same errors, and skips what is
done twice:

- the class is called as PynamoDB calls it (``cls(_user_instantiated=False)``) when it, or a
  base of the application, has an ``__init__`` of its own; else the instance is made without
  it, as nothing it would do survives ``_container_deserialize``;
- each default is set once (a callable default is called once, not twice);
- an attribute whose descriptor is PynamoDB's plain ``Attribute.__set__`` (and is the one
  ``setattr`` would reach, under its own name) is stored in ``attribute_values`` directly;
  any other (``VersionAttribute``, ``TTLAttribute``, ``MapAttribute``...) is set with
  ``setattr``, as PynamoDB does.

A class with a discriminator (polymorphic models), or that overrides how PynamoDB sets
defaults, the discriminator or deserialized values, or ``__setattr__``, is built by PynamoDB's
own ``_instantiate`` (:func:`builder` answers ``None``).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
from pynamodb.attributes import Attribute
from pynamodb.models import Model

from pynamodb_sharding._host import builds_as_pynamodb, discriminator_attribute, python_attribute_name

__all__ = ["Builder", "builder", "instantiate"]

_M = TypeVar("_M", bound=Model)
_NULL = "NULL"
_MISSING = object()


@attrs.frozen
class Builder:
    """How :func:`instantiate` builds instances of one class.

    Attributes:
        call_init: the class has an ``__init__`` of its own: it is called, as PynamoDB calls it.
        defaults: ``(name, default, callable, direct)`` of each attribute with a default.
        fields: ``(name, stored name, type, deserialize, attribute, direct)`` of each attribute;
            ``direct``: stored in ``attribute_values`` without ``setattr``; ``type`` is ``None``
            where the attribute reads its value its own way (``get_value`` overridden).
    """

    call_init: bool
    defaults: tuple[tuple[str, Any, bool, bool], ...]
    fields: tuple[tuple[str, str, str | None, Callable[[Any], Any], Attribute[Any], bool], ...]


_builders: weakref.WeakKeyDictionary[type[Any], Builder | None] = weakref.WeakKeyDictionary()


def builder(cls: type[Any]) -> Builder | None:
    """The :class:`Builder` of ``cls``, or ``None`` where PynamoDB's ``_instantiate`` builds it."""
    try:
        return _builders[cls]
    except KeyError:
        pass
    made = _make_builder(cls)
    _builders.setdefault(cls, made)
    return made


def _make_builder(cls: type[Any]) -> Builder | None:
    if discriminator_attribute(cls) is not None or not builds_as_pynamodb(cls):
        return None
    defaults = []
    fields = []
    for name, attribute in cls.get_attributes().items():
        kind = type(attribute)
        direct = (kind.__set__ is Attribute.__set__
                  and python_attribute_name(cls, attribute.attr_name) == name
                  and inspect.getattr_static(cls, name, None) is attribute)
        default = attribute.default
        if default is not None:
            defaults.append((name, default, callable(default), direct))
        type_name = attribute.attr_type if kind.get_value is Attribute.get_value else None
        fields.append((name, attribute.attr_name, type_name, attribute.deserialize, attribute, direct))
    return Builder(cls.__init__ is not Model.__init__, tuple(defaults), tuple(fields))


def instantiate(cls: type[_M], plan: Builder, attribute_values: dict[str, dict[str, Any]]) -> _M:
    """An instance of ``cls`` with the item ``attribute_values`` read back, as PynamoDB's
    ``Model._instantiate`` gives it (``plan`` is :func:`builder`'s for ``cls``).

    Raises:
        AttributeDeserializationError: a value is not stored with its attribute's type, as
            PynamoDB raises it.
    """
    instance: _M = cls(_user_instantiated=False) if plan.call_init else object.__new__(cls)
    values: dict[str, Any] = {}
    instance.attribute_values = values
    for name, default, call, direct in plan.defaults:
        value = default() if call else default
        if value is not None:
            if direct:
                values[name] = value
            else:
                setattr(instance, name, value)
    for name, stored_name, type_name, deserialize, attribute, direct in plan.fields:
        stored = attribute_values.get(stored_name)
        if not stored or _NULL in stored:
            continue
        raw = stored.get(type_name, _MISSING) if type_name is not None else _MISSING
        if raw is _MISSING:
            raw = attribute.get_value(stored)  # raises as PynamoDB does when the type differs
        if direct:
            values[name] = deserialize(raw)
        else:
            setattr(instance, name, deserialize(raw))
    return instance
