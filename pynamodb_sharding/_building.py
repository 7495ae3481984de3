"""Model instances built from the items a read returns, as PynamoDB builds them, in less CPU.

A merged read builds one instance per item returned, and a long read builds tens of thousands:
PynamoDB's ``Model._instantiate`` spends most of a long read's client CPU there. It calls the
class (``__init__`` sets the defaults), then ``_container_deserialize`` empties the values and
sets the defaults again, and each attribute goes through ``setattr`` and its descriptor. For a
model class that keeps PynamoDB's own ways of doing so, :func:`instantiate` gives the same
instance, the same values in the same order, the same errors, and skips what is done twice:

- the class is called as PynamoDB calls it (``cls(_user_instantiated=False)``) when it has an
  ``__init__`` or ``__new__`` of its own, or its metaclass a ``__call__``; else the instance
  is made without calling it, as nothing ``__init__`` would do survives
  ``_container_deserialize`` (a callable default is still called as often, and in the order,
  PynamoDB calls it);
- an attribute whose descriptor is PynamoDB's plain ``Attribute.__set__`` (and is the one
  ``setattr`` would reach, under its own name) is stored in ``attribute_values`` directly;
  any other (``VersionAttribute``, ``TTLAttribute``, ``MapAttribute``...) is set with
  ``setattr``, as PynamoDB does.

A class with a discriminator (polymorphic models), whose instances can be false (``__bool__``,
``__len__``: PynamoDB's descriptors store nothing on them), or that overrides (or whose test
patched) how PynamoDB sets attributes, defaults or the discriminator, deserializes values, or
``__setattr__``, is built by PynamoDB's own ``_instantiate`` (:func:`builder` answers
``None``). What is checked on every call stays true when a test patches it after the first
read; each attribute's ``deserialize`` is looked up on every value.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, TypeVar

import attrs
from pynamodb.attributes import Attribute
from pynamodb.models import Model

from pynamodb_sharding._host import builds_as_pynamodb, discriminator_attribute, python_attribute_name

__all__ = ["Builder", "builder", "instantiate"]

_M = TypeVar("_M", bound=Model)
_NULL = "NULL"
_MISSING = object()
_MODEL_INIT = Model.__init__
_ATTRIBUTE_SET = Attribute.__set__
_ATTRIBUTE_GET_VALUE = Attribute.get_value
_TYPE_CALL = type.__call__


@attrs.frozen
class Builder:
    """How :func:`instantiate` builds instances of one class.

    Attributes:
        defaults: ``(name, default, callable, direct)`` of each attribute with a default.
        calls: the callable defaults (in the attributes' order).
        fields: ``(name, stored name, type, attribute, direct)`` of each attribute; ``direct``:
            stored in ``attribute_values`` without ``setattr``; ``type`` is ``None`` where the
            attribute reads its value its own way (``get_value`` overridden).
        kinds: ``(attribute class, its __set__, its get_value)`` as they were when the builder
            was made: a class patched since gets a new builder.
    """

    defaults: tuple[tuple[str, Any, bool, bool], ...]
    calls: tuple[Any, ...]
    fields: tuple[tuple[str, str, str | None, Attribute[Any], bool], ...]
    kinds: tuple[tuple[type[Any], Any, Any], ...]

    def current(self) -> bool:
        """Whether no attribute class's ``__set__`` or ``get_value`` was replaced since."""
        for kind, set_, get_value in self.kinds:  # asked for every item read back: no generator
            if kind.__set__ is not set_ or kind.get_value is not get_value:
                return False
        return True


_builders: weakref.WeakKeyDictionary[type[Any], Builder | None] = weakref.WeakKeyDictionary()
#: The class last asked for and its builder: a read asks for one class item after item.
_last: tuple[type[Any] | None, Builder | None] = (None, None)


def builder(cls: type[Any]) -> Builder | None:
    """The :class:`Builder` of ``cls``, or ``None`` where PynamoDB's ``_instantiate`` builds it."""
    global _last
    if not builds_as_pynamodb(cls):
        return None
    last_class, made = _last
    if last_class is not cls:
        made = _builders.get(cls, _MISSING)  # type: ignore[arg-type]
    if made is not _MISSING and (made is None or made.current()):
        if last_class is not cls:
            _last = (cls, made)
        return made
    made = _builders[cls] = _make_builder(cls)
    _last = (cls, made)
    return made


def _make_builder(cls: type[Any]) -> Builder | None:
    if discriminator_attribute(cls) is not None:
        return None
    if getattr(cls, "__bool__", None) is not None or getattr(cls, "__len__", None) is not None:
        return None
    defaults = []
    fields = []
    kinds: dict[type[Any], tuple[type[Any], Any, Any]] = {}
    for name, attribute in cls.get_attributes().items():
        kind = type(attribute)
        kinds.setdefault(kind, (kind, kind.__set__, kind.get_value))
        direct = (kind.__set__ is _ATTRIBUTE_SET
                  and python_attribute_name(cls, attribute.attr_name) == name
                  and inspect.getattr_static(cls, name, None) is attribute)
        default = attribute.default
        if default is not None:
            defaults.append((name, default, callable(default), direct))
        type_name = getattr(attribute, "attr_type", None) if kind.get_value is _ATTRIBUTE_GET_VALUE else None
        fields.append((name, attribute.attr_name, type_name, attribute, direct))
    calls = tuple(default for _name, default, call, _direct in defaults if call)
    return Builder(tuple(defaults), calls, tuple(fields), tuple(kinds.values()))


def instantiate(cls: type[_M], plan: Builder, attribute_values: dict[str, dict[str, Any]]) -> _M:
    """An instance of ``cls`` with the item ``attribute_values`` read back, as PynamoDB's
    ``Model._instantiate`` gives it (``plan`` is :func:`builder`'s for ``cls``).

    Raises:
        AttributeDeserializationError: a value is not stored with its attribute's type, as
            PynamoDB raises it (and what else PynamoDB raises for a value that is no
            DynamoDB attribute value).
    """
    if cls.__init__ is not _MODEL_INIT or cls.__new__ is not object.__new__ or type(cls).__call__ is not _TYPE_CALL:
        instance: _M = cls(_user_instantiated=False)
    else:
        instance = object.__new__(cls)
        for make in plan.calls:  # as the class's __init__ would have made them, unused
            make()
    values: dict[str, Any] = {}
    instance.attribute_values = values
    for name, default, call, direct in plan.defaults:
        value = default() if call else default
        if value is not None:
            if direct:
                values[name] = value
            else:
                setattr(instance, name, value)
    for name, stored_name, type_name, attribute, direct in plan.fields:
        stored = attribute_values.get(stored_name)
        if not stored or _NULL in stored:
            continue
        raw = stored.get(type_name, _MISSING) if type_name is not None and type(stored) is dict else _MISSING
        if raw is _MISSING:
            raw = attribute.get_value(stored)  # raises as PynamoDB does when the type differs
        if direct:
            values[name] = attribute.deserialize(raw)
        else:
            setattr(instance, name, attribute.deserialize(raw))
    return instance
