"""Writes of one item of a sharded table: which physical key a put, update or delete addresses,
and the requests that do it.

A new item goes where its strategy says (:meth:`ShardManager.write`, which may retry on a
throttle); an item read back stays where it was read (see :mod:`pynamodb_sharding._item`); an
item stored where the layout no longer writes it (a bare legacy key, an older count) is moved
where a job would move it, in one transaction, and followed when a job moved it meanwhile. The
requests are built and sent here (``PutItem``, ``UpdateItem``, ``DeleteItem``,
``TransactWriteItems``), through the model's table connection, the way PynamoDB's ``save``,
``update`` and ``delete`` send them, so a write goes down from the model and never back up.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from botocore.exceptions import ClientError
from pynamodb.constants import ATTRIBUTES, ITEM
from pynamodb.exceptions import (
    DeleteError,
    GetError,
    PutError,
    PynamoDBException,
    TransactWriteError,
    UpdateError,
    VerboseClientError,
)
from pynamodb.expressions.condition import Condition
from pynamodb.models import Model

from pynamodb_sharding import _attempts as attempts
from pynamodb_sharding import _item as item_shard
from pynamodb_sharding import _regions as regions
from pynamodb_sharding._conditions import Usage, check_item_condition, rewrite_condition
from pynamodb_sharding._descriptor import ShardManager, shard_manager
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._exceptions import (
    DerivedAttributeUpdateError,
    PartialItemError,
    ShardConditionError,
    ShardKeyError,
    ShardMoveError,
)
from pynamodb_sharding._host import (
    botocore_client,
    bump_local_version,
    discriminator_class,
    put_arguments,
    table_connection,
    unchanged_condition,
    version_attribute_name,
    version_condition,
)
from pynamodb_sharding._indexes import check_index_actions, sharded_indexes_of, store_index_values
from pynamodb_sharding._keys import LEGACY_SHARD, MAX_TRANSACTION_ITEMS
from pynamodb_sharding._point_reads import candidate_shards, derives_from_other_attributes, locate, locate_for_write

__all__ = [
    "addressed_key",
    "batch_alone",
    "check_transaction_put",
    "checks_other_shards",
    "condition_failed",
    "delete",
    "delete_condition",
    "keys_may_repeat",
    "new_item_shard",
    "save",
    "single_request_error",
    "stored_form",
    "transaction_put_condition",
    "unique_puts",
    "update",
    "update_condition",
]

#: How often a write follows an item that jobs keep moving before it gives up.
MAX_RELOCATIONS = 3
#: How often a transaction the library sends for one write is sent again when DynamoDB throttles it.
MAX_THROTTLED_TRANSACTIONS = 8

_E = TypeVar("_E", bound=PynamoDBException)
_R = TypeVar("_R")


class _TargetTaken(Exception):
    """A move's target shard holds another item of the same primary key (random strategies)."""


class _FoundElsewhere(Exception):
    """An update of an item no shard held found it saved in another shard meanwhile (pinned there)."""


@contextlib.contextmanager
def lookups_fail_as(error: type[PynamoDBException], action: str) -> Iterator[None]:
    """Within it, a failed read that finds where an item is stored (a ``BatchGetItem`` of its
    candidate shards) raises ``error`` as PynamoDB's ``action`` would have failed: code that
    catches ``DeleteError`` around ``delete()`` catches a lookup's unreachable endpoint too."""
    try:
        yield
    except GetError as failed:
        if type(failed) is not GetError:
            raise
        cause = failed.cause if failed.cause is not None else failed
        raise error(f"Failed to {action}: {cause}", cause) from failed


def condition_failed(error: type[_E], action: str, operation: str, table: str, failed: TransactWriteError,
                     *, reason_code: str = "ConditionalCheckFailed") -> _E:
    """PynamoDB's own error for a condition the library sent inside a transaction:
    ``PutError("Failed to put item: An error occurred (ConditionalCheckFailedException) on request
    (...) on table (...) when calling the PutItem operation: The conditional request failed")``,
    with the same ``cause_response_code``, as applications match on either. With
    ``reason_code="ValidationError"``: the ``ValidationException`` the single request gets."""
    reasons = [reason for reason in failed.cancellation_reasons or [] if reason is not None]
    message = next((reason.message for reason in reasons if reason.code == reason_code and reason.message), None)
    code = "ValidationException" if reason_code == "ValidationError" else "ConditionalCheckFailedException"
    return single_request_error(error, action, operation, table, failed, code,
                                message or "The conditional request failed")


def single_request_error(error: type[_E], action: str, operation: str, table: str, failed: TransactWriteError,
                         code: str, message: str) -> _E:
    """PynamoDB's error for ``operation`` on ``table`` failing with ``code`` and ``message``, for
    a request the library sent as a transaction (which names every table of its actions)."""
    original = getattr(failed.cause, "__cause__", None)
    headers = getattr(original, "response", {}).get("ResponseMetadata", {}).get("HTTPHeaders", {})
    cause = VerboseClientError(
        {"Error": {"Code": code, "Message": message}},
        operation,
        {"request_id": headers.get("x-amzn-requestid", ""), "table_name": table},
    )
    return error(f"Failed to {action}: {cause}", cause)


# -- where a new item goes ------------------------------------------------------------------------


def stored_shard_of_key(target: Model, manager: ShardManager[Any]) -> int | None:
    """Where a new instance's primary key is already stored, for strategies that keep keys
    unique but may have stored it under an older layout (``HashedShards(previous_counts=)``).

    ``None`` when the strategy computes one shard for the key (no read is needed), when it
    does not keep keys unique, or when the key is stored nowhere.
    """
    if not manager.keeps_keys_unique:
        if manager.legacy_unsharded:  # the key may still be stored bare: replace that item
            stored, _ = locate(target, (LEGACY_SHARD,))
            return stored
        return None
    candidates = candidate_shards(target, manager)
    if len(candidates) < 2:
        return None
    stored, _ = locate(target, candidates)
    return stored


def new_item_shard(target: Model) -> int:
    """Pin and return the shard a batch or transactional write of ``target``, whose shard is
    unknown, goes to.

    Raises:
        ShardMoveError: the item must move (a derived attribute changed): ``save()`` moves it.
    """
    manager = shard_manager(type(target))
    if item_shard.moved_from(target, manager) is not None:
        raise item_shard.move_refused(target, manager, "batch-written, written in a transaction or serialized")
    manager.check_writable(getattr(target, manager.attribute))
    stored = stored_shard_of_key(target, manager)
    if stored == LEGACY_SHARD:  # shadow the bare copy (see stored_form)
        return legacy_put_shard(target)
    if stored is not None:
        if derives_from_other_attributes(manager):
            wanted = manager.write_shard(target)
            if wanted != stored:
                derived = ", ".join(manager.derived_attributes)
                msg = (
                    f"{manager.codec.where}: the item {item_shard.logical_key(target, manager)!r} with range key "
                    f"{item_shard.range_value(target, manager)!r} is stored in shard {stored}, but this instance's "
                    f"{derived} selects shard {wanted}, so a batch or transactional write (or serializing "
                    f"it) would leave two copies of one key; nothing was sent. Call save() on it, which "
                    f"moves the stored item in one transaction."
                )
                raise ShardMoveError(msg)
        # Under an older layout a job may move it: a batch sends it through save(), which moves
        # it; a transaction's put requires it to be still there (transaction_put_condition).
        return item_shard.pin(target, manager, stored)
    return item_shard.pin(target, manager, manager.write_shard(target))


def legacy_put_shard(target: Model) -> int:
    """Pin and return the shard a batch or transactional put of ``target``, stored under its
    bare key, goes to: the shard of its key that holds a copy already (a put made it, under a
    smaller count of a dynamic key or with another ``user_id``), else the one a move puts it in.
    A second sharded copy beside that one would be returned as a second item. (Read before the
    put, which carries no condition: a copy put elsewhere in between is not seen.)"""
    manager = shard_manager(type(target))
    found = shadowing_shard(target)
    if found is not None:
        return found
    shard = item_shard.pin(target, manager, manager.legacy_target_shard(target))
    item_shard.state(target).over_bare = True  # see transaction_put_condition
    return shard


def stored_form(target: Model, data: dict[str, dict[str, Any]], *,
                null_check: bool = True) -> dict[str, dict[str, Any]]:
    """``data`` (the item as PynamoDB serializes it) with the physical hash key and each sharded
    index's entry, as DynamoDB stores the item. A new item is assigned its write shard here
    (and keeps it), which is what batch and transactional writes of new items use.

    Raises:
        PartialItemError: the item was read with a projection that left out its key.
    """
    held = item_shard.state(target)
    manager = shard_manager(type(target))
    if null_check and held.partial:
        refuse_partial_put(target, manager)
    held.over_bare = False
    shard = item_shard.known(target, manager)
    if shard == LEGACY_SHARD:
        # A batch or transactional put of an item read from its bare key: a migration may have
        # moved it meanwhile, so put it where a copy is or a move puts it; the bare copy it
        # shadows is deleted by the migration, and reads never return it (the sharded copy wins).
        shard = legacy_put_shard(target)
    elif shard is None:
        shard = new_item_shard(target)
    data[manager.hash_attribute.attr_name] = {"S": item_shard.physical_key(target, manager, shard)}
    store_index_values(target, data)
    return data


def refuse_partial_put(target: Model, manager: ShardManager[Any]) -> None:
    msg = (
        f"{manager.model.__name__}: this item was read with attributes_to_get leaving out its key, so it "
        f"holds only the attributes fetched; a put would replace the stored item without the "
        f"others (PynamoDB refuses it too: its key is missing). Nothing was sent. Call "
        f"item.refresh() first, or change it with item.update(actions=[...])."
    )
    raise PartialItemError(msg)


def _stored_attributes(target: Model) -> dict[str, dict[str, Any]]:
    """The item as DynamoDB stores it (``Model.serialize`` and :func:`stored_form`)."""
    return stored_form(target, Model.serialize(target, null_check=True))


# -- save -------------------------------------------------------------------------------------------


def save(target: Model, condition: Condition | None, add_version_condition: bool, *,
         relocations: int = 0, following: bool = False) -> dict[str, Any]:
    """Save ``target``: a new item goes where its strategy says, a known one stays put, one a
    job may move is moved first (see the model's ``save``). ``following``: the save follows
    the item to where a lookup found it after a write failed (see :func:`_save_misplaced`)."""
    model = type(target)
    check_item_condition(model, condition)  # before the strategy reads anything
    manager = shard_manager(model)
    known = item_shard.known(target, manager)
    if known is not None:
        if manager.misplaced(target, known):  # a job may move it: the save moves it first
            return _save_misplaced(target, known, condition, add_version_condition, relocations)
        if ((following or item_shard.state(target).unconfirmed_create)
                and checks_other_shards(target, condition, add_version_condition)):
            # Found there by a lookup (it may be deleted and created elsewhere before the put),
            # or the last save of this new item may not have been applied (a lost reply):
            # whether another shard holds its key is still to be checked.
            return _create_alone(target, condition, add_version_condition, relocations, found_in_shard=following)
        return _put_where_stored(target, condition, add_version_condition, relocations)
    manager.check_writable(getattr(target, manager.attribute))  # before any I/O
    moved_from = item_shard.moved_from(target, manager)
    if moved_from is not None:
        wanted = manager.write_shard(target)
        if wanted != moved_from:
            return _save_moving(target, moved_from, wanted, condition, add_version_condition)
        item_shard.pin(target, manager, moved_from)
        return _put(target, condition, add_version_condition)
    item_shard.forget(target)
    stored = stored_shard_of_key(target, manager)
    if stored is not None:  # overwrite by key where the key is stored, never a second copy
        item_shard.pin(target, manager, stored)
        if manager.misplaced(target, stored):  # an older layout, or this item's user_id moved it
            return _save_misplaced(target, stored, condition, add_version_condition, relocations)
        if checks_other_shards(target, condition, add_version_condition):
            # The copy found may move, or be deleted and created in another shard, before the
            # put: the condition is checked with no other shard holding the key.
            return _create_alone(target, condition, add_version_condition, relocations)
        return _put_where_stored(target, condition, add_version_condition, relocations)
    item_shard.forget(target)

    attempts.watch(botocore_client(model))
    ambiguous = False  # some attempt of this save may have been applied

    alone = checks_other_shards(target, condition, add_version_condition)
    resent: set[int] = set()  # the shards an attempt of this save may have written to

    def send(shard: int) -> dict[str, Any]:
        nonlocal ambiguous
        item_shard.pin(target, manager, shard)
        with attempts.tracking() as sent:
            try:
                if alone:
                    return _create_alone(target, condition, add_version_condition, relocations,
                                         own_write_possible=shard in resent)
                return _put(target, condition, add_version_condition)
            except BaseException:
                # Forget the shard only when nothing can have been written; after a lost reply
                # every retry (the strategy's, then the application's) must address the same
                # physical key, as PynamoDB's would.
                ambiguous = ambiguous or sent.may_have_applied
                if sent.may_have_applied:
                    resent.add(shard)
                if not ambiguous:
                    item_shard.forget(target)
                raise

    return manager.write(target, send)


def _put(target: Model, condition: Condition | None, add_version_condition: bool) -> dict[str, Any]:
    """Send the ``PutItem`` of ``target`` to its pinned shard, as PynamoDB's ``save`` sends it."""
    model = type(target)
    attributes = _stored_attributes(target)
    args, kwargs = put_arguments(target, attributes, condition, add_version_condition=add_version_condition)
    physical = args[0]
    codec = shard_manager(model).codec
    kwargs["condition"] = rewrite_condition(model, kwargs["condition"], Usage.ITEM, lambda: codec.decode(physical)[1])
    data: dict[str, Any] = table_connection(model).put_item(*args, **kwargs)
    bump_local_version(target)
    return data


def keys_may_repeat(manager: ShardManager[Any]) -> bool:
    """Whether two writes of one key can land in two shards: its strategy picks a shard per
    write (random, dynamic), or derives it from attributes outside the key (``user_id``)."""
    return not manager.keeps_keys_unique or derives_from_other_attributes(manager)


def checks_other_shards(target: Model, condition: Condition | None, add_version_condition: bool) -> bool:
    """Whether a save of ``target`` as a new item must also check that no other shard holds its
    key: its key may be stored in another shard (:func:`keys_may_repeat`) or put there
    meanwhile, and the save carries a condition or a version check (PynamoDB's check of the
    stored item) or the model declares ``Sharding(unique_keys=True)`` (every save replaces the
    stored item, as PynamoDB's put does)."""
    manager = shard_manager(type(target))
    if not keys_may_repeat(manager):
        return False
    if manager.unique_keys:
        return True
    return condition is not None or (add_version_condition and version_condition(target) is not None)


def unique_puts(manager: ShardManager[Any]) -> bool:
    """Whether every put of the model must see the other shards of its key: it declares
    ``Sharding(unique_keys=True)`` and its keys may be stored in several shards."""
    return manager.unique_keys and keys_may_repeat(manager)


def check_transaction_put(target: Model) -> None:
    """Refuse a transactional put (``TransactWrite.save``) of an instance not loaded from the
    table on a ``unique_keys`` model: the transaction could not replace the key's stored copy in
    another shard, and would add a second one.

    Raises:
        ShardMoveError: such a put; nothing is sent.
    """
    manager = shard_manager(type(target))
    if not unique_puts(manager) or item_shard.known(target, manager) is not None:
        return
    msg = (
        f"{manager.codec.where}: {manager.model.__name__} declares Sharding(..., unique_keys=True), so a "
        f"save of an instance not loaded from the table must check the other shards of its key "
        f"{item_shard.logical_key(target, manager)!r} and replace the item where it is stored, which a "
        f"TransactWrite you build cannot do; nothing was sent. Call save() on it (one transaction of "
        f"its own), or load the item first (get or query) and save that instance in the transaction."
    )
    raise ShardMoveError(msg)


def _update_alone(target: Model, hash_key: Any, range_key: Any, actions: list[Any],
                  condition: Condition | None, relocations: int = 0, throttled: int = 0) -> dict[str, Any]:
    """The ``UpdateItem`` of ``target``, which no shard held when it was looked for (so the
    update creates it in the shard chosen), sent as one transaction that also requires every
    other shard of its key to hold nothing: a save of the key elsewhere meanwhile makes it act
    on that copy instead, as PynamoDB's update acts on the stored item. Returns what
    ``UpdateItem`` with ``ALL_NEW`` returns (read consistently after the transaction).
    """
    model = type(target)
    manager = shard_manager(model)
    shard = item_shard.known(target, manager)
    assert shard is not None  # pinned by locate_for_write
    others = [other for other in candidate_shards(target, manager) if other != shard]
    if len(others) + 1 > MAX_TRANSACTION_ITEMS:  # too many to check in one request: as before
        return dict(table_connection(model).update_item(hash_key, range_key=range_key, return_values="ALL_NEW",
                                                         condition=condition, actions=actions))
    connection = table_connection(model)
    checks = _absent_from(connection, manager, item_shard.logical_key(target, manager), others, range_key)
    update_request = connection.get_operation_kwargs(hash_key, range_key=range_key, actions=actions,
                                                     condition=condition)
    table = model.Meta.table_name
    try:
        connection.connection.transact_write_items(
            condition_check_items=checks, delete_items=[], put_items=[], update_items=[update_request],
            client_request_token=str(uuid.uuid4()),
        )
    except TransactWriteError as failed:
        codes = _cancellation_codes(failed, len(checks) + 1)
        if _retry_throttled(codes, throttled):
            return _update_alone(target, hash_key, range_key, actions, condition, relocations, throttled + 1)
        if "ConditionalCheckFailed" in codes[:len(checks)] or (
                "TransactionConflict" in codes and relocations < MAX_RELOCATIONS):
            # Saved in another shard meanwhile: update that copy where it is (write_in_place
            # sends it there, requiring it to be still there).
            found = relocate(target, shard)
            if found is not None and found != shard:
                raise _FoundElsewhere from failed
            if relocations < MAX_RELOCATIONS:
                item_shard.state(target).located_absent = True
                return _update_alone(target, hash_key, range_key, actions, condition, relocations + 1)
        if codes[len(checks)] == "ConditionalCheckFailed":
            raise condition_failed(UpdateError, "update item", "UpdateItem", table, failed) from failed
        raise _refused(UpdateError, "update item", "UpdateItem", table, failed, codes) from failed
    item_shard.state(target).located_absent = False
    found_now = connection.get_item(hash_key, range_key=range_key, consistent_read=True).get(ITEM)
    if found_now is None:  # moved since (a migration took the updated item): read where it is
        where, found_now = locate(target, candidate_shards(target, manager))
        if where is not None:
            item_shard.pin(target, manager, where)
    # Deleted since: nothing to read back, and the instance keeps its attributes (PynamoDB's
    # UpdateItem returns the updated item; a transaction returns none).
    return {ATTRIBUTES: found_now}


def _retry_throttled(codes: list[str | None], throttled: int) -> bool:
    """Whether a transaction cancelled because DynamoDB throttled one of its items is sent again
    (after a pause growing with ``throttled``, the attempts so far), as botocore sends a
    throttled single write again; it does not retry a cancelled transaction."""
    if "ThrottlingError" not in codes or throttled >= MAX_THROTTLED_TRANSACTIONS:
        return False
    time.sleep(min(1.0, 0.05 * 2**throttled) * random.uniform(0.5, 1.0))
    return True


def _create_alone(
    target: Model, condition: Condition | None, add_version_condition: bool, relocations: int,
    *, own_write_possible: bool = False, found_in_shard: bool = False,
) -> dict[str, Any]:
    """Put a new instance in its pinned shard, with ``condition`` and the version check, in one
    transaction that also requires every other shard its key may be in to hold no item of the key.

    This is how a conditional save keeps PynamoDB's meaning on a strategy that does not keep
    keys unique: DynamoDB checks the condition against the stored item, and no concurrent
    save can put a second copy in another shard (transactions are serializable). When another
    shard holds the key, the save acts on that copy, as PynamoDB's acts on the stored item:
    the condition is checked there (``PutError``, ``ConditionalCheckFailedException``, when it
    fails), and the item is replaced there if it holds.

    ``own_write_possible``: an earlier attempt of the same save to this shard may have been
    applied (a lost reply, then a throttle the strategy resends after): a put whose condition
    then fails on an item identical to it is that attempt's, and the save succeeded.

    ``found_in_shard``: a lookup found the item in its pinned shard, so a bare legacy copy of its
    key is a stale one that copy shadows, not another copy of the item: it is not checked.

    Raises:
        ShardConditionError: the key may be in more shards than one transaction can check;
            nothing was sent.
    """
    model = type(target)
    manager = shard_manager(model)
    shard = item_shard.known(target, manager)
    assert shard is not None  # pinned by the caller
    logical = item_shard.logical_key(target, manager)
    others = [other for other in candidate_shards(target, manager)
              if other != shard and not (found_in_shard and other == LEGACY_SHARD)]
    if len(others) + 1 > MAX_TRANSACTION_ITEMS:
        msg = (
            f"{manager.codec.where}: a save of a new instance with a condition or a version check must "
            f"check that no other shard holds the key {logical!r}, and it may be in {len(others) + 1} "
            f"shards, more than one transaction checks ({MAX_TRANSACTION_ITEMS}); nothing was sent. "
            f"Save without the condition (add_version_condition=False for the version check), or "
            f"lower the shard count of the key."
        )
        raise ShardConditionError(msg)
    attempts.watch(botocore_client(model))  # for the tracking of a lost reply below
    connection = table_connection(model)
    attributes = _stored_attributes(target)
    args, kwargs = put_arguments(target, attributes, condition, add_version_condition=add_version_condition)
    put = connection.get_operation_kwargs(
        args[0], range_key=kwargs.get("range_key"), key=ITEM, attributes=kwargs["attributes"],
        condition=rewrite_condition(model, kwargs["condition"], Usage.ITEM, lambda: shard),
    )
    range_ser = manager.serialize_range(item_shard.range_value(target, manager))
    checks = _absent_from(connection, manager, logical, others, range_ser)
    held = item_shard.state(target)
    with attempts.tracking() as sent:
        try:
            data: dict[str, Any] = connection.connection.transact_write_items(
                condition_check_items=checks, delete_items=[], put_items=[put], update_items=[],
                client_request_token=str(uuid.uuid4()),
            )
        except BaseException as exc:
            # Applied or not, unknown: the next save of this instance checks the other shards again.
            held.unconfirmed_create = held.unconfirmed_create or sent.may_have_applied
            if not isinstance(exc, TransactWriteError):
                raise
            failed = exc
        else:
            held.unconfirmed_create = False
            bump_local_version(target)
            return data
    codes = _cancellation_codes(failed, len(checks) + 1)
    table = model.Meta.table_name
    if "ConditionalCheckFailed" in codes[:len(checks)] and relocations < MAX_RELOCATIONS:
        # Stored in another shard: act on that copy, as PynamoDB acts on the stored item, in a
        # transaction again (it may be deleted and created elsewhere meanwhile).
        found = relocate(target, shard)
        if found is not None and found != shard and manager.misplaced(target, found):
            return _save_misplaced(target, found, condition, add_version_condition, relocations + 1)
        # Found (pinned there), or deleted meanwhile (the pin kept): try again.
        return _create_alone(target, condition, add_version_condition, relocations + 1,
                             found_in_shard=found is not None and found != LEGACY_SHARD)
    if codes[len(checks)] == "ConditionalCheckFailed" and "ConditionalCheckFailed" not in codes[:len(checks)]:
        if own_write_possible and _stored_as_put(connection, args[0], range_ser, put):
            held.unconfirmed_create = False
            bump_local_version(target)
            return {}
        raise condition_failed(PutError, "put item", "PutItem", table, failed) from failed
    if "TransactionConflict" in codes and "ValidationError" not in codes and relocations < MAX_RELOCATIONS:
        # Another transaction held one of the keys (a concurrent save of the same key): once
        # it ends, this one's checks see what it wrote.
        return _create_alone(target, condition, add_version_condition, relocations + 1,
                             found_in_shard=found_in_shard)
    raise _refused(PutError, "put item", "PutItem", table, failed, codes) from failed


def _other_shards(target: Model, manager: ShardManager[Any], shard: int) -> list[int]:
    """The shards other than ``shard`` (and the bare key) that may hold ``target``'s key."""
    return [other for other in candidate_shards(target, manager) if other not in (shard, LEGACY_SHARD)]


def _absent_from(connection: Any, manager: ShardManager[Any], logical: str, shards: list[int],
                 range_key: Any) -> list[dict[str, Any]]:
    """The ``ConditionCheck`` items of a transaction requiring ``shards`` to hold no item of the key."""
    absent = manager.hash_attribute.does_not_exist()
    return [connection.get_operation_kwargs(manager.codec.encode(logical, shard), range_key=range_key,
                                            condition=absent) for shard in shards]


def _cancellation_codes(failed: TransactWriteError, actions: int) -> list[str | None]:
    """The code of each action's cancellation reason, in request order (``None`` where none)."""
    codes = [reason.code if reason is not None else None for reason in failed.cancellation_reasons or []]
    return codes + [None] * (actions - len(codes))


def _refused(error: type[_E], action: str, operation: str, table: str, failed: TransactWriteError,
             codes: list[str | None]) -> _E:
    """The error of a write the library sent as a transaction, for reasons other than its
    conditions: what the single ``operation`` would have raised when DynamoDB refused the write
    itself (a ``ValidationException`` for an item too large or a bad key, naming the table
    once), else PynamoDB's error around the transaction's (throttles stay recognisable)."""
    if "ValidationError" in codes:
        return condition_failed(error, action, operation, table, failed, reason_code="ValidationError")
    code = failed.cause_response_code if isinstance(failed.cause, ClientError) else None
    if code not in (None, "TransactionCanceledException"):
        return single_request_error(error, action, operation, table, failed, code,
                                    failed.cause_response_message or "")
    return error(f"Failed to {action}: {failed.cause}", failed.cause)


def _put_where_stored(
    target: Model, condition: Condition | None, add_version_condition: bool, relocations: int,
) -> dict[str, Any]:
    """Put ``target`` in the shard it is known to be stored in. Where another client may have
    moved it, or deleted it and saved the key in another shard, since (random, dynamic and
    user_id shards), the put requires it to be still there and otherwise follows it: to where
    it is now, or, deleted, back where it was, as PynamoDB's save recreates a deleted item."""
    manager = shard_manager(type(target))
    if not keys_may_repeat(manager):
        return _put(target, condition, add_version_condition)
    stored = item_shard.known(target, manager)
    assert stored is not None  # the caller's
    try:
        return _put(target, guarded(target, condition), add_version_condition)
    except PutError as exc:
        if exc.cause_response_code != "ConditionalCheckFailedException":
            raise
        where = relocate(target, stored)
        if where == stored or relocations >= MAX_RELOCATIONS:
            raise  # the condition or the version check failed there
        if where is None:  # deleted meanwhile
            if checks_other_shards(target, condition, add_version_condition):
                return _create_alone(target, condition, add_version_condition, relocations + 1)
            return _put(target, condition, add_version_condition)
        return save(target, condition, add_version_condition, relocations=relocations + 1, following=True)


def _stored_as_put(connection: Any, physical: str, range_key: Any, put: dict[str, Any]) -> bool:
    """Whether the item a transaction's ``put`` writes is stored exactly so (read consistently)."""
    found = connection.get_item(physical, range_key=range_key, consistent_read=True)
    return bool(found.get(ITEM) == put[ITEM])


def _save_misplaced(
    target: Model, stored: int, condition: Condition | None, add_version_condition: bool, relocations: int,
) -> dict[str, Any]:
    """Save an item stored where the layout no longer writes it (a bare legacy key, an older
    count): move it where a job would, in one transaction (put the new copy, delete the stored
    one if it is still there and meets ``condition`` and the version check).

    When a job moved the item first (the transaction finds the stored copy gone), the save
    goes to the item where it is now, with the user's change; when the item was deleted
    meanwhile, the save puts it where the layout writes it, as PynamoDB recreates a deleted
    item; when ``condition`` failed on the stored copy, PynamoDB's ``PutError`` is raised.
    """
    manager = shard_manager(type(target))
    targets = manager.move_targets(target, stored)
    # A random or dynamic strategy lets another item of the same primary key live in another
    # shard: never overwrite it (a legacy move's target, or a computed shard, is this item's).
    target_free = stored != LEGACY_SHARD and not manager.keeps_keys_unique
    for shard in targets:
        try:
            return _save_moving(target, stored, shard, condition, add_version_condition, target_free=target_free)
        except _TargetTaken:
            if stored != LEGACY_SHARD:
                continue
            # A sharded copy shadows the bare one this instance was read from: the save goes to
            # that copy, the item as reads return it, with its condition checked there.
            if relocations >= MAX_RELOCATIONS:
                msg = (
                    f"{manager.codec.where}: the item {item_shard.logical_key(target, manager)!r} with range key "
                    f"{item_shard.range_value(target, manager)!r} moved between its bare key and shard {shard} "
                    f"{MAX_RELOCATIONS + 1} times while this save followed it; nothing was written. Try again."
                )
                raise ShardMoveError(msg) from None
            relocate(target, stored)
            return save(target, condition, add_version_condition, relocations=relocations + 1, following=True)
        except PutError as exc:
            if getattr(exc, "cause_response_code", None) != "ConditionalCheckFailedException":
                raise
            where = relocate(target, stored)
            if where == stored or relocations >= MAX_RELOCATIONS:
                raise  # the condition or the version check failed on the stored copy
            if where is None:  # deleted meanwhile: recreated where the layout writes it
                item_shard.pin(target, manager, shard)
                if checks_other_shards(target, condition, add_version_condition):
                    # ...unless another save of the key put it in another shard meanwhile.
                    return _create_alone(target, condition, add_version_condition, relocations + 1)
                return _put(target, condition, add_version_condition)
            return save(target, condition, add_version_condition, relocations=relocations + 1, following=True)
    msg = (
        f"{manager.codec.where}: the item {item_shard.logical_key(target, manager)!r} with range key "
        f"{item_shard.range_value(target, manager)!r} must move out of shard {stored}, but every shard it could "
        f"move to holds another item of the same primary key (random and dynamic strategies do not "
        f"keep keys unique); nothing was written. Delete the extra copies (read them with "
        f"{manager.model.__name__}.query), or use HashedShards where items are overwritten by key."
    )
    raise ShardMoveError(msg)


def relocate(target: Model, stored: int) -> int | None:
    """After a write addressed to ``stored`` failed its condition: where the item is now
    (pinned there), ``stored`` itself when it is still there (the condition failed on it),
    or ``None`` when no shard holds it (deleted meanwhile; the pin is kept)."""
    manager = shard_manager(type(target))
    held = item_shard.state(target)
    pinned = (held.shard, held.basis)
    item_shard.forget(target)
    shard, _ = locate(target, candidate_shards(target, manager))
    if shard is None:
        held.shard, held.basis = pinned
        return None
    item_shard.pin(target, manager, shard)
    return shard


def guarded(target: Model, condition: Condition | None) -> Condition | None:
    """The condition of a write to ``target`` where a job may move it from: it must still be
    there, else the write would recreate it beside its moved copy."""
    exists: Condition = shard_manager(type(target)).hash_attribute.exists()
    return exists if condition is None else condition & exists


def _save_moving(
    target: Model, stored: int, shard: int, condition: Condition | None, add_version_condition: bool,
    *, target_free: bool = False,
) -> dict[str, Any]:
    """Put ``target`` in ``shard`` and delete its copy in ``stored``, in one transaction.

    ``condition`` and the version check apply to the stored copy, as they would on an
    unsharded table; the delete also requires that copy to still exist, so a concurrent move or
    delete makes the transaction fail instead of leaving two copies. With ``target_free`` the
    put also requires ``shard`` to hold nothing (else :class:`_TargetTaken`).
    """
    model = type(target)
    manager = shard_manager(model)
    connection = table_connection(model)
    hash_attr = manager.hash_attribute
    range_ser = manager.serialize_range(item_shard.range_value(target, manager))
    version_check = version_condition(target) if add_version_condition else None
    delete_condition: Condition = hash_attr.exists()
    for extra in (rewrite_condition(model, condition, Usage.ITEM, lambda: stored), version_check):
        if extra is not None:
            delete_condition &= extra
    held = item_shard.state(target)
    before = (held.shard, held.basis)
    old_physical = manager.codec.encode(item_shard.logical_key(target, manager), stored)
    item_shard.pin(target, manager, shard)
    attributes = _stored_attributes(target)
    args, kwargs = put_arguments(target, attributes, None, add_version_condition=False)
    put = connection.get_operation_kwargs(
        args[0], range_key=kwargs.get("range_key"), key=ITEM, attributes=kwargs["attributes"],
        # A legacy item's target may hold a sharded copy that shadows the bare one (a batch or
        # transactional put made it): never overwrite it, follow it (see _save_misplaced).
        condition=hash_attr.does_not_exist() if target_free or stored == LEGACY_SHARD else None,
    )
    delete_request = connection.get_operation_kwargs(old_physical, range_key=range_ser, condition=delete_condition)
    # A bare item's sharded copy may also be in another shard than the target (put there under
    # a smaller count of a dynamic key, or by an instance with another user_id): none may be.
    checks = (_absent_from(connection, manager, item_shard.logical_key(target, manager),
                           _other_shards(target, manager, shard), range_ser)
              if stored == LEGACY_SHARD else [])
    try:
        data: dict[str, Any] = connection.connection.transact_write_items(
            condition_check_items=checks, delete_items=[delete_request], put_items=[put], update_items=[],
            client_request_token=str(uuid.uuid4()),
        )
    except TransactWriteError as exc:
        held.shard, held.basis = before  # nothing moved
        codes = _cancellation_codes(exc, len(checks) + 2)
        if stored == LEGACY_SHARD and "ConditionalCheckFailed" in codes[:len(checks)] + codes[len(checks) + 1:]:
            raise _TargetTaken from exc  # the bare copy is stale: its condition says nothing
        codes = codes[len(checks):]
        if codes[0] == "ConditionalCheckFailed":
            raise condition_failed(PutError, "put item", "PutItem", model.Meta.table_name, exc) from exc
        if codes[1] == "ConditionalCheckFailed" and target_free:
            raise _TargetTaken from exc
        raise PutError(f"Failed to put item: {exc.cause}", exc.cause) from exc
    item_shard.pin(target, manager, shard)
    bump_local_version(target)
    return data


def transaction_put_condition(target: Model, physical: str, condition: Condition | None) -> Condition | None:
    """The condition of a transactional put of ``target`` at ``physical``: rewritten for its shard
    and, where a job may move the item from there, requiring it to be still there."""
    model = type(target)
    manager = shard_manager(model)
    codec = manager.codec
    condition = rewrite_condition(model, condition, Usage.ITEM, lambda: codec.decode(physical)[1])
    try:
        shard = codec.decode(physical)[1]
    except ShardKeyError:  # not ours (PynamoDB no longer calls serialize): the key guard refuses it
        return condition
    held = item_shard.state(target)
    if held.over_bare:
        held.over_bare = False
        refuse_put_over_bare(target, manager, condition)
    if shard != LEGACY_SHARD and manager.misplaced(target, shard):
        # save() moves it instead: the transaction fails rather than leave a second copy
        # beside the moved one.
        return guarded(target, condition)
    if shard != LEGACY_SHARD and unique_puts(manager):
        # A loaded item (check_transaction_put refused new ones) may have been deleted and its
        # key saved in another shard since: the transaction fails rather than add a copy.
        return guarded(target, condition)
    result: Condition | None = condition
    return result


def refuse_put_over_bare(target: Model, manager: ShardManager[Any], condition: Condition | None) -> None:
    """Refuse a transactional put that would shadow a bare legacy copy of ``target``'s key when
    the transaction cannot do what PynamoDB's put would: check ``condition`` (with the version
    check) against the stored item (it would be checked against the empty shard, so "only if
    absent" would pass and replace the item), or stay in the shard a migration moves the item
    to until it commits (a ``DynamicShards`` count may grow meanwhile, and a shard derived from
    another attribute differs from the stored item's; the migration would then leave a second
    sharded copy). An unconditional put of a fixed layout shadows the bare copy as a batch put
    does.

    Raises:
        ShardMoveError: such a put; nothing is sent.
    """
    fixed_layout = not isinstance(manager.strategy, DynamicShards) and not derives_from_other_attributes(manager)
    if condition is None and fixed_layout:
        return
    why = ("it carries a condition or a version check, which DynamoDB would check against the empty shard it "
           "goes to, not against the stored item" if condition is not None else
           f"the shard a migration moves the item to may change before it commits ({manager.strategy!r})")
    msg = (
        f"{manager.codec.where}: the item {item_shard.logical_key(target, manager)!r} with range key "
        f"{item_shard.range_value(target, manager)!r} is stored under its bare legacy key "
        f"(legacy_unsharded), and a TransactWrite.save of it would put a sharded copy beside it, but "
        f"{why}; nothing was sent. Call save() on it, which moves the item in a transaction of its own "
        f"with your condition checked on the stored item, or save it in a transaction once "
        f"'pynamodb-sharding migrate reshard' has moved it."
    )
    raise ShardMoveError(msg)


# -- update and delete --------------------------------------------------------------------------


def check_actions(target: Model, actions: Any) -> None:
    """Refuse update actions on attributes the item's shard (or an index shard) is derived from.

    Raises:
        DerivedAttributeUpdateError: such an action.
    """
    model = type(target)
    manager = shard_manager(model)
    if sharded_indexes_of(model) and isinstance(actions, list):
        check_index_actions(model, actions)
    derived = set(manager.derived_attributes)
    if not derived or not isinstance(actions, list):
        return
    attributes = model.get_attributes()
    names = {attributes[name].attr_name: name for name in derived}
    for action in actions:
        path = action.values[0] if getattr(action, "values", None) else None
        top = getattr(path, "path", [None])[0]
        if top in names:
            msg = (
                f"{model.__name__}.{names[top]}: {model.__name__}'s shard is derived from {names[top]!r}, "
                f"so an update of it would leave the item in a shard its new value does not select; "
                f"set item.{names[top]} and call item.save(), which moves the item in one transaction."
            )
            raise DerivedAttributeUpdateError(msg)


def addressed_key(target: Model) -> tuple[str, Any]:
    """``(physical hash key, serialized range key)`` an update, delete or refresh of ``target``
    addresses (locating the item when its shard is unknown)."""
    manager = shard_manager(type(target))
    shard = locate_for_write(target)
    range_value = manager.serialize_range(item_shard.range_value(target, manager))
    return item_shard.physical_key(target, manager, shard), range_value


def _item_condition(target: Model, condition: Condition | None) -> Condition | None:
    """``condition`` rewritten for the physical key the item's requests address."""
    model = type(target)
    manager = shard_manager(model)
    return rewrite_condition(model, condition, Usage.ITEM, lambda: manager.codec.decode(addressed_key(target)[0])[1])


def update(target: Model, actions: list[Any], condition: Condition | None, add_version_condition: bool) -> Any:
    """PynamoDB's ``update`` of ``target`` where it is stored (see :func:`write_in_place`)."""
    if not isinstance(actions, list) or len(actions) == 0:
        msg = "the value of `actions` is expected to be a non-empty list"
        raise TypeError(msg)
    check_actions(target, actions)
    model = type(target)
    check_item_condition(model, condition)  # before locating the item reads

    def send(guarded_condition: Condition | None) -> Any:
        hash_key, range_key = addressed_key(target)
        sent = list(actions)
        version = version_condition(target, actions=sent)
        if add_version_condition and version is not None:
            guarded_condition &= version
        if _bare(target) and _move_bare(target):
            raise _FoundElsewhere  # moved into its shard, or a copy there found: updated there
        if item_shard.state(target).located_absent and keys_may_repeat(shard_manager(model)):
            data = _update_alone(target, hash_key, range_key, sent, guarded_condition)
        else:
            data = table_connection(model).update_item(hash_key, range_key=range_key, return_values="ALL_NEW",
                                                       condition=guarded_condition, actions=sent)
        stored = data[ATTRIBUTES]
        if stored is None:  # deleted right after the update (see _update_alone)
            return data
        stored_cls = discriminator_class(target, stored)
        if stored_cls and stored_cls != model:
            msg = f"Cannot update this item from the returned class: {stored_cls.__name__}"
            raise ValueError(msg)
        target.deserialize(stored)
        return data

    return write_in_place(target, send, condition, UpdateError, "update item")


def delete(target: Model, condition: Condition | None, add_version_condition: bool) -> Any:
    """PynamoDB's ``delete`` of ``target`` where it is stored (see :func:`write_in_place`)."""
    model = type(target)
    check_item_condition(model, condition)  # before locating the item reads

    def send(guarded_condition: Condition | None) -> Any:
        hash_key, range_key = addressed_key(target)
        delete_shadowed_copy(target, hash_key, range_key)
        version = version_condition(target)
        if add_version_condition and version is not None:
            guarded_condition &= version
        if _bare(target):
            return _delete_alone(target, hash_key, range_key, guarded_condition)
        return table_connection(model).delete_item(hash_key, range_key=range_key, condition=guarded_condition)

    return write_in_place(target, send, condition, DeleteError, "delete item")


def shadowing_shard(target: Model) -> int | None:
    """The shard of a sharded copy of ``target``, read from its bare legacy key, that shadows the
    bare copy (pinned there), or ``None`` when no shard of its key holds a copy.

    A batch or transactional put of an item read from its bare key puts it in that shard and
    leaves the bare copy behind (see :func:`stored_form`); reads return the sharded copy. An
    instance loaded from the bare key before such a put still addresses the bare copy, whose
    write no read would see: a transactional write looks here when it is built (see
    :func:`_bare` for the others).
    """
    manager = shard_manager(type(target))
    if not manager.legacy_unsharded:
        return None
    shards = tuple(shard for shard in candidate_shards(target, manager) if shard != LEGACY_SHARD)
    shard, _ = locate(target, shards)
    if shard is not None:
        item_shard.pin(target, manager, shard)
    return shard


def _bare(target: Model) -> bool:
    """Whether an update or delete of ``target`` addresses a bare legacy key.

    A batch or transactional put of the item may have put a sharded copy that shadows the bare
    one, and a write to the bare key would change a copy no read returns (an update lost, a
    delete that deletes nothing). A delete is sent as a transaction that also requires every
    shard of the key to hold no copy (:func:`_delete_alone`); an update moves the item into its
    shard first, as the migration does (:func:`_move_bare`), and is then sent there as one
    ``UpdateItem``, whose returned attributes are the item as the update left it. Never decided
    by a read before or after the write: a migration moving the item in between would make the
    write miss it or apply it twice.
    """
    manager = shard_manager(type(target))
    return manager.legacy_unsharded and item_shard.known(target, manager) == LEGACY_SHARD


def _move_bare(target: Model) -> bool:
    """Move the item ``target`` addresses from its bare key into its shard, in one transaction
    as the migration moves it (put the item as stored where no item is, delete the bare copy only
    if it is unchanged, require the key's other shards to hold no copy), and pin ``target`` where
    the item is now. Returns ``False`` when no item is stored there or anywhere (the write then
    goes on as PynamoDB's would on a missing item).
    """
    model = type(target)
    manager = shard_manager(model)
    connection = table_connection(model)
    client = botocore_client(model)
    codec = manager.codec
    hash_name = manager.hash_attribute.attr_name
    range_attribute = manager.range_attribute
    key_names = (hash_name,) if range_attribute is None else (hash_name, range_attribute.attr_name)
    logical = item_shard.logical_key(target, manager)
    range_ser = manager.serialize_range(item_shard.range_value(target, manager))
    absent = {"ConditionExpression": "attribute_not_exists(#h)", "ExpressionAttributeNames": {"#h": hash_name}}
    throttled = 0
    for _ in range(MAX_RELOCATIONS + MAX_THROTTLED_TRANSACTIONS):
        raw = connection.get_item(codec.encode(logical, LEGACY_SHARD), range_key=range_ser,
                                  consistent_read=True).get(ITEM)
        if raw is None:  # moved meanwhile (pinned where it is), or deleted
            return relocate(target, LEGACY_SHARD) is not None
        stored_item = model.from_raw_data(dict(raw))
        shard = manager.legacy_target_shard(stored_item)
        bare_key = {name: raw[name] for name in key_names}
        moved = {**raw, hash_name: {"S": codec.encode(logical, shard)}}
        store_index_values(stored_item, moved)  # each sharded index's entry, as save() stores it

        def key_in(other: int, bare_key: dict[str, Any] = bare_key) -> dict[str, Any]:
            return {**bare_key, hash_name: {"S": codec.encode(logical, other)}}

        others = [other for other in candidate_shards(target, manager) if other not in (shard, LEGACY_SHARD)]
        if len(others) + 2 > MAX_TRANSACTION_ITEMS:  # too many to check in one request: by a read
            if shadowing_shard(target) is not None:
                return True
            others = []
        table = model.Meta.table_name
        actions = [
            {"Put": {"TableName": table, "Item": moved, **absent}},
            {"Delete": {"TableName": table, "Key": bare_key, **unchanged_condition(model, raw, key_names)}},
            *({"ConditionCheck": {"TableName": table, "Key": key_in(other), **absent}} for other in others),
        ]
        try:
            client.transact_write_items(TransactItems=actions, ClientRequestToken=str(uuid.uuid4()))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            codes = [reason.get("Code") for reason in error.response.get("CancellationReasons", [])]
            codes += [None] * (len(actions) - len(codes))
            if _retry_throttled(codes, throttled) or "TransactionConflict" in codes:
                throttled += 1
                continue
            if codes[0] == "ConditionalCheckFailed" or "ConditionalCheckFailed" in codes[2:]:
                # A sharded copy shadows the bare one: the item is that copy.
                return shadowing_shard(target) is not None or relocate(target, LEGACY_SHARD) is not None
            if codes[1] == "ConditionalCheckFailed":
                continue  # changed (or moved) since it was read: read it again
            raise
        item_shard.pin(target, manager, shard)
        return True
    msg = (
        f"{manager.codec.where}: the item {logical!r} with range key "
        f"{item_shard.range_value(target, manager)!r} changed or moved again and again while this update "
        f"moved it into its shard; nothing was written. Try again."
    )
    raise ShardMoveError(msg)


def _delete_alone(target: Model, hash_key: Any, range_key: Any, condition: Condition | None,
                  relocations: int = 0, throttled: int = 0) -> dict[str, Any]:
    """The ``DeleteItem`` of ``target`` at its bare key, sent as one transaction that also
    requires every shard of its key to hold no copy (see :func:`_bare`).

    Raises:
        _FoundElsewhere: a shard holds a copy (pinned there): the delete is sent there.
    """
    model = type(target)
    manager = shard_manager(model)
    others = [other for other in candidate_shards(target, manager) if other != LEGACY_SHARD]
    connection = table_connection(model)
    if len(others) + 1 > MAX_TRANSACTION_ITEMS:  # too many to check in one request: by a read
        if shadowing_shard(target) is not None:
            raise _FoundElsewhere
        return dict(connection.delete_item(hash_key, range_key=range_key, condition=condition))
    checks = _absent_from(connection, manager, item_shard.logical_key(target, manager), others, range_key)
    delete_request = connection.get_operation_kwargs(hash_key, range_key=range_key, condition=condition)
    table = model.Meta.table_name
    try:
        data: dict[str, Any] = connection.connection.transact_write_items(
            condition_check_items=checks, delete_items=[delete_request], put_items=[], update_items=[],
            client_request_token=str(uuid.uuid4()),
        )
    except TransactWriteError as failed:
        codes = _cancellation_codes(failed, len(checks) + 1)
        if _retry_throttled(codes, throttled):
            return _delete_alone(target, hash_key, range_key, condition, relocations, throttled + 1)
        if "ConditionalCheckFailed" in codes[:len(checks)]:
            found = relocate(target, LEGACY_SHARD)
            if found is not None and found != LEGACY_SHARD:
                raise _FoundElsewhere from failed
        if codes[len(checks)] == "ConditionalCheckFailed":
            raise condition_failed(DeleteError, "delete item", "DeleteItem", table, failed) from failed
        if "TransactionConflict" in codes and "ValidationError" not in codes and relocations < MAX_RELOCATIONS:
            # Another transaction held one of the keys (a move of the item): once it ends,
            # this one's checks see what it wrote.
            return _delete_alone(target, hash_key, range_key, condition, relocations + 1, throttled)
        raise _refused(DeleteError, "delete item", "DeleteItem", table, failed, codes) from failed
    return data


def delete_shadowed_copy(target: Model, hash_key: str, range_key: Any) -> None:
    """Before the item at ``hash_key`` in a shard is deleted: delete the bare legacy copy it may
    shadow (``legacy_unsharded``), else reads would return that older copy once the sharded one
    is gone, as if the delete had undone the item's last save.

    A batch or transactional put of an item read from its bare key leaves its bare copy behind
    the sharded one (see :func:`stored_form`); reads return the sharded copy while it exists.
    The bare copy goes first: until the sharded copy is deleted the bare one is never read, so
    deleting it changes nothing a reader sees, also when the item's own delete then fails its
    condition or is never sent.
    """
    model = type(target)
    manager = shard_manager(model)
    if not manager.legacy_unsharded or manager.codec.decode(hash_key)[1] == LEGACY_SHARD:
        return
    bare = manager.codec.encode(item_shard.logical_key(target, manager), LEGACY_SHARD)
    table_connection(model).delete_item(bare, range_key=range_key)


def write_in_place(
    target: Model, send: Callable[[Condition | None], _R], condition: Condition | None,
    error: type[PynamoDBException], action: str,
) -> _R:
    """Send an update or delete of ``target`` where it is stored.

    Where a job may move the item (:meth:`ShardManager.misplaced`), the request also requires it
    to still be there; when a job moved it meanwhile, the request is sent again where it is
    now; when it was deleted meanwhile, it is sent where the layout writes the item, so DynamoDB
    answers as it would on an unsharded table (an update creates the item, a delete does
    nothing, a condition sees no item).
    """
    manager = shard_manager(type(target))
    repeats = keys_may_repeat(manager)
    for _ in range(MAX_RELOCATIONS + 1):
        stored = locate_for_write(target)
        misplaced = manager.misplaced(target, stored)
        # Where another client may move the item, or delete it and save the key in another
        # shard, after this process learnt where it is (random, dynamic and user_id shards; not
        # when its key can be in one shard only): the request requires it to be still there,
        # and follows it when it is not.
        held = item_shard.state(target)
        if not misplaced and not (repeats and not held.located_absent and not held.sole_candidate):
            try:
                return send(_item_condition(target, condition))
            except _FoundElsewhere:  # an update that found no item found it on its second look
                continue
        try:
            return send(guarded(target, _item_condition(target, condition)))
        except _FoundElsewhere:  # a bare copy a sharded copy shadows (see _bare): sent there
            continue
        except error as exc:
            if getattr(exc, "cause_response_code", None) != "ConditionalCheckFailedException":
                raise
            where = relocate(target, stored)
            if where == stored:  # the condition or the version check failed there
                raise
            if where is None:  # deleted meanwhile: as on a plain table, a missing item
                if misplaced:
                    item_shard.pin(target, manager, manager.move_targets(target, stored)[0])
                item_shard.state(target).located_absent = repeats
                try:
                    return send(_item_condition(target, condition))
                except _FoundElsewhere:
                    continue
            continue
    msg = (
        f"{manager.codec.where}: the item {item_shard.logical_key(target, manager)!r} with range key "
        f"{item_shard.range_value(target, manager)!r} moved between shards {MAX_RELOCATIONS + 1} times while "
        f"this {action} followed it (jobs running at once?); nothing was written. Try again."
    )
    raise ShardMoveError(msg)


def _addresses_misplaced(target: Model) -> bool:
    """Whether ``target``'s requests address a shard a job may move it from."""
    return shard_manager(type(target)).misplaced(target, locate_for_write(target))


def update_condition(target: Model, actions: list[Any], condition: Condition | None) -> Condition | None:
    """The condition of a transactional update of ``target`` (``TransactWrite.update``)."""
    check_actions(target, actions)
    _follow_shadowing_copy(target)
    condition = _item_condition(target, condition)
    if _addresses_misplaced(target):  # moved meanwhile: the transaction fails, never recreates it
        condition = guarded(target, condition)
    return condition


def _follow_shadowing_copy(target: Model) -> None:
    """Address a transactional write of ``target``, read from its bare key, to the sharded copy
    that shadows the bare one, when there is one (see :func:`shadowing_shard`). A transaction
    cannot be checked after it is sent: a batch or transactional put of the same item made
    between this read and the commit still leaves this write on the stale bare copy."""
    if shard_manager(type(target)).legacy_unsharded and locate_for_write(target) == LEGACY_SHARD:
        shadowing_shard(target)


def delete_condition(target: Model, condition: Condition | None) -> Condition | None:
    """The condition of a transactional delete of ``target`` (``TransactWrite.delete``).

    A bare legacy copy the item shadows is deleted now, before the transaction is sent (see
    :func:`delete_shadowed_copy`).
    """
    _follow_shadowing_copy(target)
    condition = _item_condition(target, condition)
    delete_shadowed_copy(target, *addressed_key(target))
    if _addresses_misplaced(target):
        condition = guarded(target, condition)
    return condition


# -- batch writes ------------------------------------------------------------------------------


def write_route(
    target: Model, action: regions.WriteAction, condition: Condition | None, add_version_condition: bool,
) -> regions.Route | None:
    """The region a write of ``target`` goes to in a global table (``None``: the model's own);
    see :mod:`pynamodb_sharding._regions`."""
    if not regions.routes_writes(type(target)):  # nearly every model: nothing to work out per write
        return None
    version = version_attribute_name(target)
    conditional = condition is not None or (add_version_condition and version is not None)
    manager = shard_manager(type(target))
    new_item = item_shard.known(target, manager) is None and item_shard.moved_from(target, manager) is None
    return regions.route_of(target, action, conditional=conditional, new_item=new_item)


def batch_alone(target: Model, put: bool, batch_route: regions.Route | None = None) -> bool:
    """Whether a batch put (``put``) or delete of ``target`` must be sent on its own, by ``save()``
    or ``delete()``: a job may be moving it (see :mod:`pynamodb_sharding._batch`), or its write
    goes to another region than the batch (``batch_route``).

    A put of a new instance is assigned its shard here (reading where its key is stored, as
    :func:`stored_form` would), so the batch reads nothing twice.
    """
    if write_route(target, "save" if put else "delete", None, False) != batch_route:
        return True
    manager = shard_manager(type(target))
    if not put:
        # A legacy_unsharded item in a shard may shadow a bare copy: delete() deletes that first.
        return manager.legacy_unsharded or manager.misplaced(target, locate_for_write(target))
    if unique_puts(manager):
        # A put cannot check the other shards of its key in a batch: save() does.
        return True
    known = item_shard.known(target, manager)
    if known is None:
        if item_shard.moved_from(target, manager) is not None:
            return False  # stored_form refuses it: save() moves it (see new_item_shard)
        known = new_item_shard(target)
    # A legacy item's put shadows its bare copy (see stored_form).
    return known != LEGACY_SHARD and manager.misplaced(target, known)


def stored_dict(target: Model, data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``to_dynamodb_dict``'s output with the physical key and the index entries: an item not
    written yet is assigned its write shard here, as :func:`stored_form` does."""
    manager = shard_manager(type(target))
    result = dict(data)
    shard = item_shard.known(target, manager)
    if shard is None:
        shard = new_item_shard(target)
    result[manager.hash_attribute.attr_name] = {"S": item_shard.physical_key(target, manager, shard)}
    store_index_values(target, result)
    return result
