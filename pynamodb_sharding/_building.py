"""Model instances built from the items a read returns, as PynamoDB builds them, in less CPU.

A merged read builds one instance per item returned, and a long read builds tens of thousands:
PynamoDB's ``Model._instantiate`` spends most of a long read's client CPU there. It calls the
class (``__init__`` sets every default), then ``_container_deserialize`` empties the values,
sets the defaults again, and sets each stored value with ``setattr`` through the attribute's
descriptor. :func:`instantiate` walks the same attributes, as they are at that moment (nothing
about a class is kept from one item to the next: a patch, an attribute added, a default
changed is followed at once), and differs in three ways that leave the instance as PynamoDB
leaves it:

- the class is not called when calling it could not be told apart: its ``__init__`` is
  PynamoDB's (and ``AttributeContainer.__init__`` too), it has no ``__new__`` of its own, its
  metaclass no ``__call__``, and every attribute is set directly (below); each callable
  default is then still called as often, and in the order, PynamoDB calls it;
- each default is set once, not twice;
- an attribute whose descriptor is PynamoDB's plain ``Attribute.__set__``, reached by
  ``setattr`` under the attribute's own name, is stored in ``attribute_values`` directly; any
  other (``VersionAttribute``, ``TTLAttribute``, ``MapAttribute``, a property over it...) is
  set with ``setattr``.

A class with a discriminator (polymorphic models), whose instances can be false (``__bool__``,
``__len__``: PynamoDB's descriptors store nothing on them), or that overrides (or whose test
patched) how PynamoDB sets attributes, defaults or the discriminator, deserializes values, or
``__setattr__``, is built by PynamoDB's own ``_instantiate`` (:func:`builds_here` is false).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pynamodb.attributes import Attribute, AttributeContainer
from pynamodb.models import Model

from pynamodb_sharding._host import builds_as_pynamodb, discriminator_attribute, python_attribute_names

__all__ = ["builds_here", "instantiate"]

_M = TypeVar("_M", bound=Model)
_NULL = "NULL"
_MISSING = object()
_MODEL_INIT = Model.__init__
_CONTAINER_INIT = AttributeContainer.__init__
_ATTRIBUTE_SET = Attribute.__set__
_TYPE_CALL = type.__call__


def builds_here(cls: type[Any]) -> bool:
    """Whether :func:`instantiate` builds ``cls``'s items (else PynamoDB's ``_instantiate``)."""
    return (builds_as_pynamodb(cls) and discriminator_attribute(cls) is None
            and getattr(cls, "__bool__", None) is None and getattr(cls, "__len__", None) is None)


def _descriptor(cls: type[Any], name: str) -> object:
    """What ``setattr(instance, name, ...)`` reaches on the class (without calling ``__get__``)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name, _MISSING)
        if found is not _MISSING:
            return found
    return None


def instantiate(cls: type[_M], attribute_values: dict[str, dict[str, Any]]) -> _M:
    """An instance of ``cls`` with the item ``attribute_values`` read back, as PynamoDB's
    ``Model._instantiate`` gives it (``cls`` is one :func:`builds_here` accepts).

    Raises:
        AttributeDeserializationError: a value is not stored with its attribute's type, as
            PynamoDB raises it (and what else PynamoDB raises for a value that is no
            DynamoDB attribute value).
    """
    attributes = cls.get_attributes()
    python_names = python_attribute_names(cls)
    fields = []
    every_direct = True
    for name, attribute in attributes.items():
        stored_name = attribute.attr_name
        direct = (type(attribute).__set__ is _ATTRIBUTE_SET
                  and python_names.get(stored_name, stored_name) == name
                  and _descriptor(cls, name) is attribute)
        every_direct = every_direct and direct
        fields.append((name, stored_name, attribute, direct))
    if (not every_direct or cls.__init__ is not _MODEL_INIT or AttributeContainer.__init__ is not _CONTAINER_INIT
            or cls.__new__ is not object.__new__ or type(cls).__call__ is not _TYPE_CALL):
        instance: _M = cls(_user_instantiated=False)
    else:
        instance = object.__new__(cls)
        for attribute in attributes.values():  # the defaults __init__ would have made, unused
            default = attribute.default
            if callable(default):
                default()
    values: dict[str, Any] = {}
    instance.attribute_values = values
    for name, _stored_name, attribute, direct in fields:
        default = attribute.default
        value = default() if callable(default) else default
        if value is not None:
            if direct:
                values[name] = value
            else:
                setattr(instance, name, value)
    for name, stored_name, attribute, direct in fields:
        stored = attribute_values.get(stored_name)
        if not stored or _NULL in stored:
            continue
        value = attribute.deserialize(attribute.get_value(stored))
        if direct:
            values[name] = value
        else:
            setattr(instance, name, value)
    return instance
