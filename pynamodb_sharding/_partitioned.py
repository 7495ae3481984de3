"""Requests of a time-partitioned model, each sent to its period's table.

A model declared with ``Meta.table_name = TimePartitioned(...)`` (see
:mod:`pynamodb_sharding._periods`) has one table per period. Each period's table is served by a
*period model*: a subclass of the declared model whose ``Meta.table_name`` is that period's
table, made once per period and process (:func:`period_model`). The declared model sends
nothing itself:

* an item's ``save``, ``update``, ``delete`` and ``refresh`` (and its transaction and batch
  writes) run as its period model's, the period taken from the item's time attribute, which is
  part of its key;
* ``get``/``batch_get`` read the period table of each key;
* ``query``, ``count`` and ``scan`` read the periods their range touches (or, unbounded, the
  periods whose tables exist), one after the other in period order, which is sort-key order,
  with one cursor that names the period it stopped in.

Items read come back as instances of the declared model, so saving one after changing its
time sends it to the table of its new period, as PynamoDB would write a changed key anew.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pynamodb.attributes import NumberAttribute, UTCDateTimeAttribute
from pynamodb.constants import PAY_PER_REQUEST_BILLING_MODE, PROVISIONED_BILLING_MODE
from pynamodb.exceptions import PynamoDBException, TableDoesNotExist, TableError
from pynamodb.expressions.condition import Condition

from pynamodb_sharding._batch import ShardedBatchWrite
from pynamodb_sharding._cursor import cursor_or_none
from pynamodb_sharding._exceptions import (
    CursorError,
    PeriodRangeError,
    PeriodsMissingError,
    PeriodsMissingWarning,
    PeriodTableMissingError,
    PeriodTableNotActiveError,
    ShardingDefinitionError,
    caller_stacklevel,
)
from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._host import (
    botocore_client,
    connection_fingerprint,
    discriminator_attribute,
    range_keyname,
    unshared_connection,
)
from pynamodb_sharding._periods import TimePartitioned, template_of
from pynamodb_sharding._throttling import error_chain

if TYPE_CHECKING:
    from pynamodb.models import Model

__all__ = [
    "PeriodBatchWrite",
    "PeriodResultIterator",
    "billing_arguments",
    "check_declaration",
    "existing_periods",
    "is_missing_period_table",
    "is_missing_table",
    "period_model",
]

_M = TypeVar("_M", bound="Model")
_T = TypeVar("_T")
_NOT_FOUND = "ResourceNotFoundException"
_IN_USE = "ResourceInUseException"
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at fork time; it does not exist here.
    global _lock
    _lock = threading.Lock()


at_fork(after_in_child=_after_fork_in_child)


def declaration(model: type[Any]) -> TimePartitioned:
    """The ``TimePartitioned`` of a declared (template) model."""
    declared = model.Meta.table_name
    assert isinstance(declared, TimePartitioned)
    return declared


def check_declaration(model: type[Any]) -> None:
    """Refuse a ``TimePartitioned`` whose attribute is not the model's time range key."""
    declared = declaration(model)
    name = model.__name__
    where = f"{name}.{declared.attribute}"
    attribute = model.get_attributes().get(declared.attribute)
    if attribute is None or declared.attribute != range_keyname(model):
        msg = (
            f"{where}: TimePartitioned(attribute={declared.attribute!r}) must name {name}'s range key "
            f"({range_keyname(model)!r}): an item's key then names its period's table, so get, update "
            f"and delete address one table. Make the time attribute the range key."
        )
        raise ShardingDefinitionError(msg)
    if not isinstance(attribute, (NumberAttribute, UTCDateTimeAttribute)):
        msg = (
            f"{where}: a time-partitioned model's time attribute must be a NumberAttribute of epoch "
            f"seconds (or milliseconds, unit='ms') or a UTCDateTimeAttribute, not a {type(attribute).__name__}."
        )
        raise ShardingDefinitionError(msg)
    if declared.unit == "ms" and not isinstance(attribute, NumberAttribute):
        msg = f"{where}: TimePartitioned(unit='ms') is for a NumberAttribute of epoch milliseconds; remove unit."
        raise ShardingDefinitionError(msg)


# -- period models ----------------------------------------------------------------------------


def period_model(model: type[_M], period: str) -> type[_M]:
    """The subclass of the declared ``model`` that reads and writes ``period``'s table.

    Made once per period (and per connection settings) and reused; its ``Meta`` inherits every
    setting of ``model.Meta`` but the table name, and its shard counts are the declared model's.
    """
    declared = declaration(model)
    if declared.parse(period) is None:
        msg = f"{model.__name__}: {period!r} is not a {declared.period} period's text (e.g. {declared.current()!r})."
        raise PeriodRangeError(msg)
    # A change of the connection settings (a test binding, an app pointing the model elsewhere
    # at run time) makes new period models.
    fingerprint = connection_fingerprint(model.Meta)
    cache: dict[Any, Any] | None = model.__dict__.get("_period_models")
    found = cache.get((fingerprint, period)) if cache is not None else None
    if found is not None:
        return found  # type: ignore[no-any-return]
    with _lock:
        cache = model.__dict__.get("_period_models")
        if cache is None or cache.get("fingerprint") != fingerprint:
            cache = {"fingerprint": fingerprint}  # the settings changed: the old models are stale
            model._period_models = cache  # type: ignore[attr-defined]
        found = cache.get((fingerprint, period))
        if found is None:
            parent: Any = model.Meta
            meta = type("Meta", (parent,), {"table_name": declared.table_name(period), "__module__": model.__module__})
            metaclass: Any = type(model)
            found = metaclass(model.__name__, (model,), {
                "Meta": meta,
                "__module__": model.__module__,
                "__qualname__": model.__qualname__,
                "DoesNotExist": model.DoesNotExist,
                "_partitioned_by": declared,
                "_period": period,
                "_period_template": model,
                "_connection": unshared_connection(model),  # its own, never a cached one of the declared model
                "_derived_at_run_time": True,
            })
            cache[(fingerprint, period)] = found
    return found  # type: ignore[no-any-return]


def item_period(item: Any) -> str:
    """The period an item belongs in, from its time attribute."""
    model = type(item)
    declared = declaration(model)
    value = getattr(item, declared.attribute)
    if value is None:
        msg = (
            f"{model.__name__}.{declared.attribute}: is None, but it picks the item's table "
            f"({declared.template!r}); set it before this request."
        )
        raise ValueError(msg)
    return declared.period_of(value)


@contextlib.contextmanager
def as_period_item(item: _M) -> Iterator[type[_M]]:
    """Run a request of ``item`` as an instance of its period model, then give it back its class."""
    template = type(item)
    model = period_model(template, item_period(item))
    item.__class__ = model
    try:
        yield model
    finally:
        item.__class__ = template


def as_declared(item: _M, model: type[Any]) -> _M:
    """An item a period model read, as an instance of the declared model."""
    item.__class__ = model
    return item


def is_missing_table(error: BaseException | None) -> bool:
    """Whether ``error`` (or what it wraps) is DynamoDB's ``ResourceNotFoundException``."""
    if error is None:
        return False
    for current in error_chain(error):
        if getattr(current, "cause_response_code", None) == _NOT_FOUND:
            return True
        response = getattr(current, "response", None)
        if isinstance(response, dict) and response.get("Error", {}).get("Code") == _NOT_FOUND:
            return True
    return False


#: ``period_table_state``: the period's table does not exist.
MISSING = "MISSING"
#: DynamoDB's statuses of a table that exists but answers item requests with
#: ``ResourceNotFoundException``: being created, or being deleted.
_NOT_READY = frozenset({"CREATING", "DELETING"})


def period_table_state(model: type[Any], error: BaseException) -> str | None:
    """What a ``ResourceNotFoundException`` of a request to a period model's table means.

    ``None`` when ``error`` is another error; :data:`MISSING` when ``DescribeTable`` confirms
    that the period's table does not exist; else the table's status: ``"CREATING"`` (another
    writer or a rotation is creating it), ``"DELETING"``, or ``"ACTIVE"`` (it became active
    since, or the error named another table, such as a ``DynamicShards`` model's metadata
    table).
    """
    if not is_missing_table(error):
        return None
    try:
        status = model.describe_table().get("TableStatus")
    except TableDoesNotExist:
        return MISSING
    except PynamoDBException:
        return None
    return str(status)


def holds_nothing(state: str | None) -> bool:
    """Whether a :func:`period_table_state` says the period holds no item: no table, or one that
    is not active yet (or no longer)."""
    return state == MISSING or state in _NOT_READY


def is_missing_period_table(model: type[Any], error: BaseException) -> bool:
    """Whether ``error`` says that the period model's own table does not exist or is not
    active: either way the period holds no item, so a read of it reads nothing. A
    ``ResourceNotFoundException`` naming another table (a ``DynamicShards`` model's metadata
    table) is not: the period's table is active."""
    return holds_nothing(period_table_state(model, error))


def wait_until_ready(model: type[Any], timeout: float) -> str:
    """Wait until the period model's table is neither being created nor deleted.

    Polls ``DescribeTable`` (0.05 s, doubling to 2 s apart) for at most ``timeout`` seconds.

    Returns:
        The table's status (``"ACTIVE"``, or ``"UPDATING"``, which serves requests too), or
        :data:`MISSING` once it does not exist (it was deleted, or its creation failed).

    Raises:
        PeriodTableNotActiveError: still ``CREATING`` (or ``DELETING``) after ``timeout``.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            status = model.describe_table().get("TableStatus")
        except TableDoesNotExist:
            return MISSING
        if status not in _NOT_READY:
            return str(status)
        if time.monotonic() + delay > deadline:
            template = template_of(model)
            declared = declaration(template)
            msg = (
                f"{template.__name__}.{declared.attribute}: the table {model.Meta.table_name!r} of period "
                f"{model._period!r} is still {status} after {timeout:g} s "
                f"(TimePartitioned(creation_timeout={declared.creation_timeout:g})); nothing was written. "
                f"Retry the write, or create the tables ahead with `pynamodb-sharding tables rotate "
                f"{template.__module__}:{template.__qualname__}` so that no write waits for one."
            )
            raise PeriodTableNotActiveError(msg)
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def billing_arguments(model: type[Any]) -> dict[str, Any]:
    """``create_table`` arguments of a period's table: ``Meta``'s billing, else on-demand."""
    meta = model.Meta
    mode = getattr(meta, "billing_mode", None)
    read = getattr(meta, "read_capacity_units", None)
    write = getattr(meta, "write_capacity_units", None)
    if mode is None:
        mode = PROVISIONED_BILLING_MODE if read and write else PAY_PER_REQUEST_BILLING_MODE
    if mode == PAY_PER_REQUEST_BILLING_MODE:
        return {"billing_mode": mode}
    return {"billing_mode": mode, "read_capacity_units": read or 1, "write_capacity_units": write or 1}


def create_period_table(model: type[Any], *, wait: bool = True) -> bool:
    """Create a period model's table (and missing companions); ``False`` if it already existed.

    With ``wait``, returns once the table and its companions are active; a table that another
    writer or a rotation is creating at the same moment (``ResourceInUseException``) is waited
    for the same way, at most the declaration's ``creation_timeout`` each.
    """
    created = True
    try:
        # PynamoDB's own wait polls without a bound: wait here instead.
        model.create_table(wait=False, **billing_arguments(template_of(model)))
    except TableError as error:
        if error.cause_response_code != _IN_USE:
            raise
        created = False  # another writer or a rotation is creating it (or a companion)
    if wait:
        timeout = declaration(template_of(model)).creation_timeout
        for table in (model, *model.companion_models()):
            wait_until_ready(table, timeout)
    return created


def write(item: Any, send: Callable[[], _T]) -> _T:
    """Send a write of ``item`` to its period's table.

    A table being created (by another writer or a rotation) is waited for; a missing one is
    created (``missing="create"``) or the write refused.
    """
    template = type(item)
    declared = declaration(template)
    with as_period_item(item) as model:
        try:
            return send()
        except PynamoDBException as error:
            state = period_table_state(model, error)
            if state is None:
                raise
            if state in _NOT_READY:  # DynamoDB refuses items until the table is ACTIVE: wait for it
                state = wait_until_ready(model, declared.creation_timeout)
            if state == MISSING:
                if declared.missing != "create":
                    raise _refused(template, model, error) from error
                create_period_table(model)
            # Created, or active since the refusal: send again. (When the refusal named another
            # table, the metadata table of DynamicShards, it comes back as it would have.)
            return send()


def _refused(template: type[Any], model: type[Any], error: PynamoDBException) -> PeriodTableMissingError:
    declared = declaration(template)
    table = model.Meta.table_name
    msg = (
        f"{template.__name__}.{declared.attribute}: the item's period {model._period!r} has no "
        f"table {table!r}, and {template.__name__} declares missing='refuse'; nothing was written. "
        f"Create the tables ahead (`pynamodb-sharding tables rotate {template.__module__}:"
        f"{template.__qualname__}`, or pynamodb_sharding.rotation.rotate) or declare missing='create'."
    )
    return PeriodTableMissingError(msg, error)


# -- which periods a read covers --------------------------------------------------------------


def existing_periods(model: type[Any]) -> list[str]:
    """The periods of ``model`` whose tables exist, oldest first (one ``ListTables`` walk)."""
    declared = declaration(model)
    client = botocore_client(period_model(model, declared.current()))
    found: list[str] = []
    start: str | None = None
    while True:
        page = client.list_tables(**({"ExclusiveStartTableName": start} if start else {}))
        for name in page.get("TableNames", []):
            period = declared.period_of_table(name)
            if period is not None:
                found.append(period)
        start = page.get("LastEvaluatedTableName")
        if not start:
            return sorted(found)


def range_bounds(model: type[Any], condition: Condition | None) -> tuple[Any, Any]:
    """The lowest and highest time a range key ``condition`` admits (``None``: unbounded)."""
    if condition is None:
        return None, None
    declared = declaration(model)
    attribute = model.get_attributes()[declared.attribute]
    operands = condition.values
    path = operands[0] if operands else None
    if getattr(path, "path", None) != [attribute.attr_name]:
        return None, None

    def value(operand: Any) -> Any:
        stored = getattr(operand, "value", None)  # a Value operand: {"N": "..."} or {"S": "..."}
        if not isinstance(stored, dict) or len(stored) != 1:
            return None
        ((_, text),) = stored.items()
        return attribute.deserialize(text)

    operator = condition.operator
    if operator == "=" and len(operands) == 2:
        return value(operands[1]), value(operands[1])
    if operator in (">", ">=") and len(operands) == 2:
        return value(operands[1]), None
    if operator in ("<", "<=") and len(operands) == 2:
        return None, value(operands[1])
    if operator == "BETWEEN" and len(operands) == 3:
        return value(operands[1]), value(operands[2])
    return None, None


def periods_to_read(
    model: type[Any], condition: Condition | None, *, forward: bool = True, what: str = "query",
) -> list[str]:
    """The periods a read of ``model`` with range key ``condition`` covers, in reading order.

    A range bounded on both sides covers the periods it touches (their tables need not exist:
    a missing table reads as empty); otherwise the periods whose tables exist, within the
    bounds it has.

    Raises:
        PeriodRangeError: more than ``max_periods`` periods.
    """
    return plan_read(model, condition, forward=forward, what=what)[0]


def plan_read(
    model: type[Any], condition: Condition | None, *, forward: bool = True, what: str = "query",
) -> tuple[list[str], list[str] | None]:
    """:func:`periods_to_read`, and the past periods the read covers whose tables are missing.

    A read with a lower bound on the time covers every period from that bound on; those before
    the current one without a table are the missing ones (oldest first). They are known when
    the tables were listed: always for a range open on one side, and for a closed range when
    the model declares ``missing_periods="raise"`` (one ``ListTables`` walk); otherwise
    ``None``, and the read notices them as it reaches them. A read without a lower bound covers
    the tables that exist: nothing is missing.

    Raises:
        PeriodRangeError: more than ``max_periods`` periods.
    """
    declared = declaration(model)
    low, high = range_bounds(model, condition)
    missing: list[str] | None = []
    existing: list[str] | None = None
    if low is not None and high is not None:
        first, last = declared.period_of(low), declared.period_of(high)
        # One past the cap is enough to refuse: a range over centuries of days is not listed.
        periods = list(itertools.islice(declared.between(first, last), declared.max_periods + 1))
        if declared.missing_periods == "raise" and len(periods) <= declared.max_periods:
            existing = existing_periods(model)
        else:
            missing = None
    else:
        existing = existing_periods(model)
        periods = [period for period in existing
                   if (low is None or period >= declared.period_of(low))
                   and (high is None or period <= declared.period_of(high))]
    if len(periods) > declared.max_periods:
        bounded = low is not None and high is not None
        span = (f"its range spans more than {declared.max_periods} {declared.period}s, from {periods[0]}"
                if bounded else f"more than {declared.max_periods} {declared.period} tables exist in its range")
        fix = ("narrow the range" if bounded else
               f"bound {model.__name__}.{declared.attribute} in the range key condition (e.g. "
               f"{model.__name__}.{declared.attribute}.between(start, end))")
        msg = (
            f"{model.__name__}.{what}: {span} ({declared.template!r}, max_periods={declared.max_periods}); "
            f"nothing was sent. {fix[0].upper()}{fix[1:]}, or declare a larger max_periods."
        )
        raise PeriodRangeError(msg)
    if existing is not None and low is not None:
        missing = _missing_between(declared, set(existing), declared.period_of(low),
                                   None if high is None else declared.period_of(high))
    return (periods if forward else periods[::-1]), missing


def _missing_between(declared: TimePartitioned, existing: set[str], first: str, last: str | None) -> list[str]:
    """The periods from ``first`` to ``last`` (or the current one), before the current one,
    that have no table; oldest first."""
    previous = declared.after(declared.current(), -1)
    last = previous if last is None or last > previous else last
    if first > last:
        return []
    return [period for period in declared.between(first, last) if period not in existing]


def _runs(declared: TimePartitioned, periods: Sequence[str]) -> list[tuple[str, str, int]]:
    """Consecutive periods as ``(first, last, how many)`` runs."""
    runs: list[tuple[str, str, int]] = []
    for period in periods:
        if runs and declared.after(runs[-1][1]) == period:
            first, _, count = runs[-1]
            runs[-1] = (first, period, count + 1)
        else:
            runs.append((period, period, 1))
    return runs


def _describe_missing(declared: TimePartitioned, periods: Sequence[str]) -> str:
    """``"the tables of periods 201501 to 201503 (3 months, 'log.201501' to 'log.201503') do not
    exist"``, naming at most 5 runs of consecutive periods."""
    runs = _runs(declared, periods)
    shown = []
    for first, last, count in runs[:5]:
        if count == 1:
            shown.append(f"{first} ({declared.table_name(first)!r})")
        else:
            shown.append(f"{first} to {last} ({count} {declared.period}s, {declared.table_name(first)!r} "
                         f"to {declared.table_name(last)!r})")
    if len(runs) > 5:
        shown.append(f"{sum(run[2] for run in runs[5:])} more")
    if len(periods) == 1:
        return f"the table of period {shown[0]} does not exist"
    return f"the tables of periods {', '.join(shown)} do not exist"


def report_missing(model: type[Any], what: str, periods: Sequence[str]) -> None:
    """Warn about, or refuse, a read of past periods whose tables are missing, as ``model``
    declares (``missing_periods``); ``periods`` oldest first, none: nothing to say.

    Raises:
        PeriodsMissingError: the model declares ``missing_periods="raise"``.
    """
    declared = declaration(model)
    if not periods or declared.missing_periods == "ignore":
        return
    periods = sorted(periods)
    missing = _describe_missing(declared, periods)
    tables = tuple(declared.table_name(period) for period in periods)
    if declared.missing_periods == "raise":
        msg = (
            f"{model.__name__}.{what}: {missing}: whatever was stored there was "
            f"archived and dropped, deleted, or never written; nothing was read. Bound "
            f"{model.__name__}.{declared.attribute} to periods that have tables, or declare "
            f"TimePartitioned(missing_periods='warn') to read them as empty with a warning."
        )
        raise PeriodsMissingError(msg, periods=tuple(periods), tables=tables)
    msg = (
        f"{model.__name__}.{what}: {missing}, so this {what} read nothing there: "
        f"whatever was stored there was archived and dropped, deleted, or never written. Declare "
        f"TimePartitioned(missing_periods='ignore') to read missing periods as empty silently, or 'raise' "
        f"to refuse such reads."
    )
    warnings.warn(PeriodsMissingWarning(msg, periods=tuple(periods), tables=tables), stacklevel=caller_stacklevel())


# -- one iteration over several periods ---------------------------------------------------------


def parse_cursor(model: type[Any], cursor: Any) -> tuple[str, Any] | None:
    """``(period, the period's own cursor)`` of a cursor a cross-period read returned (``None``
    for none, or an empty one, as PynamoDB reads from the start then)."""
    if cursor_or_none(cursor) is None:
        return None
    declared = declaration(model)
    period: Any = None
    inner: Any = None
    if isinstance(cursor, dict) and set(cursor) == {"period", "cursor"}:
        period, inner = cursor["period"], cursor["cursor"]
    elif isinstance(cursor, str) and "." in cursor:
        period, _, inner = cursor.partition(".")
        inner = inner or None
    if not isinstance(period, str) or declared.parse(period) is None:
        msg = (
            f"{model.__name__}: last_evaluated_key {cursor!r} is not a cursor of {model.__name__}'s "
            f"periods ({declared.template!r}); pass the last_evaluated_key or next_page_token a "
            f"query of {model.__name__} returned, or None to start over."
        )
        raise PeriodRangeError(msg)
    return period, inner


class PeriodResultIterator(Iterator[_M], Generic[_M]):
    """Items of several periods' tables, one period after the other, with one cursor.

    The surface of PynamoDB's ``ResultIterator``: ``last_evaluated_key`` (``None`` before a
    cursor-less read starts and once everything was read; otherwise
    ``{"period": "201602", "cursor": <that period's cursor>}``, a cursor of ``None`` meaning that
    period was read to its end), ``next_page_token`` (the same as one URL-safe ``str``) and
    ``total_count``. Either cursor is accepted back as ``last_evaluated_key``.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        model: type[_M],
        periods: Sequence[str],
        open_period: Callable[[type[_M], Any, int | None], Any],
        *,
        limit: int | None = None,
        given: Any = None,
        forward: bool = True,
        tokens: bool = True,
        page_size: int | None = None,
        filtered: bool = False,
        ends_as_one_query: bool = False,
        missing: Sequence[str] | None = (),
        what: str = "query",
    ) -> None:
        self._model = model
        self._tokens = tokens
        # A query ends where a plain query of one table holding every period's items would:
        # the Limit of its pages is page_size, else limit (see last_evaluated_key).
        self._ends_as_one_query = ends_as_one_query
        self._plain_page_size = page_size if page_size is not None else limit
        self._filtered = filtered or discriminator_attribute(model) is not None  # the class filter too
        self._open = open_period
        self._limit = limit
        self._given = given
        self._what = what
        start = parse_cursor(model, given)
        self._periods = list(periods)
        self._inner_cursor: Any = None
        # Missing past periods: known ones are refused now, or reported once the read has passed
        # them; unknown ones (None: a closed range, tables not listed) are noticed as it reaches them.
        self._notice_missing = missing is None and declaration(model).missing_periods == "warn"
        self._current = declaration(model).current()
        self._forward = forward
        unreported = list(missing or ())
        if start is not None:
            period, self._inner_cursor = start
            self._periods = [p for p in self._periods if (p >= period if forward else p <= period)]
            unreported = [p for p in unreported if (p >= period if forward else p <= period)]
            if self._inner_cursor is None:  # that period was read to its end
                self._periods = [p for p in self._periods if p != period]
                unreported = [p for p in unreported if p != period]
            elif not self._periods or self._periods[0] != period:
                self._periods.insert(0, period)
        if unreported and declaration(model).missing_periods == "raise":
            report_missing(model, what, unreported)
        self._not_passed = sorted(unreported, reverse=not forward)  # in reading order
        self._unreported: list[str] = []
        self._index = 0
        self._inner: Any = None
        self._returned = 0
        self._counted = 0
        self._last: tuple[str, Any] | None = None  # (period, its iterator) of the last item returned
        self._finished = False

    def __iter__(self) -> PeriodResultIterator[_M]:
        return self

    def __next__(self) -> _M:
        while True:
            if self._finished or (self._limit is not None and self._returned >= self._limit):
                self._report_missing()
                raise StopIteration
            if self._index >= len(self._periods):
                self._finished = True
                self._unreported += self._not_passed  # the read passed every period it covers
                self._not_passed = []
                self._report_missing()
                raise StopIteration
            period = self._periods[self._index]
            while self._not_passed and (self._not_passed[0] < period if self._forward else
                                        self._not_passed[0] > period):
                self._unreported.append(self._not_passed.pop(0))
            if self._inner is None:
                left = None if self._limit is None else self._limit - self._returned
                self._inner = self._open(period_model(self._model, period), self._inner_cursor, left)
                self._inner_cursor = None
            try:
                item = next(self._inner)
            except StopIteration:
                self._period_done(period)
                continue
            except PynamoDBException as error:
                state = period_table_state(period_model(self._model, period), error)
                if not holds_nothing(state):
                    raise
                if state == MISSING and self._notice_missing and period < self._current:
                    self._unreported.append(period)
                self._period_done(period)  # no table (or not active yet): the period holds nothing
                continue
            self._report_missing()
            self._returned += 1
            self._last = (period, self._inner)
            return as_declared(item, self._model)  # type: ignore[no-any-return]

    def _report_missing(self) -> None:
        if self._unreported:
            periods, self._unreported = self._unreported, []
            report_missing(self._model, self._what, periods)

    def _period_done(self, period: str) -> None:
        self._counted += int(getattr(self._inner, "total_count", 0) or 0)
        self._inner = None
        self._index += 1
        self._last = (period, None)

    def next(self) -> _M:
        return self.__next__()

    @property
    def last_evaluated_key(self) -> dict[str, Any] | None:
        """The cursor to pass back as ``last_evaluated_key``, or ``None``.

        A query's is ``None`` exactly where a plain PynamoDB query of one table holding every
        period's items would have none (the rule of
        :attr:`~pynamodb_sharding.MergedResultIterator.last_evaluated_key`, counted over the
        whole query: after ``r`` items, a cursor if an item follows in this period or a later
        one, or if ``r`` is a multiple of ``page_size`` (else ``limit``), and ``None`` once a
        ``next()`` found the end). A scan's is ``None`` once the last period was read to its end.
        """
        if self._finished:
            return None
        if self._last is None:
            return parse_cursor_dict(self._given, self._model)
        period, inner = self._last
        cursor = None if inner is None else inner.last_evaluated_key
        if self._ends_as_one_query and self._returned > 0:
            size = self._plain_page_size
            on_a_page_end = size is not None and (self._filtered or self._returned % size == 0)
            if not on_a_page_end and not self._items_left(inner):
                return None
            # The period's own cursor is None only when nothing is left in it.
            return {"period": period, "cursor": cursor}
        if cursor is None and period == self._periods[-1]:
            return None  # the last period was read to its end
        return {"period": period, "cursor": cursor}

    def _items_left(self, inner: Any) -> bool:
        """Whether an item follows the last one returned, in its period or a later one (asking
        each later period for one item, in order, until one has some)."""
        if inner is not None and inner._items_left():
            return True
        later = self._index + 1 if inner is not None else self._index
        for period in self._periods[later:]:
            model = period_model(self._model, period)
            probe = self._open(model, None, 1)
            try:
                next(probe)
            except StopIteration:
                continue
            except PynamoDBException as error:
                if is_missing_period_table(model, error):
                    continue
                return True  # unknown: a cursor is never wrong, resuming reads what is left
            finally:
                close = getattr(probe, "close", None)
                if close is not None:
                    close()
            return True
        return False

    @property
    def next_page_token(self) -> str | None:
        """The cursor as one URL-safe ``str`` (``"<period>.<that period's token>"``)."""
        if not self._tokens:
            msg = (
                f"{self._model.__name__}.scan: a scan's cursor is last_evaluated_key (a dict); it has "
                f"no next_page_token."
            )
            raise CursorError(msg)
        cursor = self.last_evaluated_key
        if cursor is None:
            return None
        period, inner = cursor["period"], cursor["cursor"]
        if inner is None:
            return f"{period}."
        if self._last is None:  # the given cursor, nothing read yet
            if isinstance(inner, str):
                return f"{period}.{inner}"
            unsent = self._open(period_model(self._model, period), inner, 0)  # sends nothing
            token = getattr(unsent, "next_page_token", None)
        else:
            token = getattr(self._last[1], "next_page_token", None)
        return None if token is None else f"{period}.{token}"

    @property
    def total_count(self) -> int:
        """The items the periods' reads counted so far (``Count`` of their pages)."""
        return self._counted + int(getattr(self._inner, "total_count", 0) or 0)


def parse_cursor_dict(cursor: Any, model: type[Any]) -> dict[str, Any] | None:
    parsed = parse_cursor(model, cursor)
    return None if parsed is None else {"period": parsed[0], "cursor": parsed[1]}


# -- batch writes ---------------------------------------------------------------------------------


class _PeriodTableBatch(ShardedBatchWrite[Any]):
    """One period's ``BatchWrite``: its items are serialized as items of the period model."""

    def __init__(self, model: type[Any], template: type[Any], auto_commit: bool) -> None:
        super().__init__(model, auto_commit=auto_commit)
        self._template = template

    def commit(self) -> None:
        operations = list(self.pending_operations)
        items = [operation["item"] for operation in operations]
        for item in items:
            item.__class__ = self.model
        try:
            try:
                super().commit()
            except PynamoDBException as error:
                state = period_table_state(self.model, error)
                if state is None:
                    raise
                if state in _NOT_READY:
                    # Being created: DynamoDB refused the whole request (at most 25 items, sent
                    # at once), so once the table is active the same operations go again.
                    state = wait_until_ready(self.model, declaration(self._template).creation_timeout)
                if state == MISSING:
                    declared = declaration(self._template)
                    table = self.model.Meta.table_name
                    msg = (
                        f"{self._template.__name__}.{declared.attribute}: period {self.model._period!r} has no "
                        f"table {table!r}; this batch wrote nothing to it. Create the tables ahead "
                        f"(`pynamodb-sharding tables rotate`) or declare missing='create'."
                    )
                    raise PeriodTableMissingError(msg, error) from error
                self.pending_operations = operations
                super().commit()
        finally:
            for item in items:
                item.__class__ = self._template


class PeriodBatchWrite:
    """``Model.batch_write()`` of a time-partitioned model: one ``BatchWrite`` per period.

    Used like PynamoDB's (``with UserLog.batch_write() as batch: batch.save(item)``); each
    item goes to the table of its period. With ``missing="create"`` a period's table is
    created (once) before its first batch is sent.

    .. versionadded:: 0.1.0
    """

    def __init__(self, model: type[Any], auto_commit: bool = True) -> None:
        self.model = model
        self.auto_commit = auto_commit
        self._batches: dict[str, _PeriodTableBatch] = {}

    def _batch(self, item: Any) -> _PeriodTableBatch:
        period = item_period(item)
        batch = self._batches.get(period)
        if batch is None:
            model = period_model(self.model, period)
            if declaration(self.model).missing == "create":
                with contextlib.suppress(TableError):
                    if not model.exists():
                        create_period_table(model)
            batch = _PeriodTableBatch(model, self.model, self.auto_commit)
            self._batches[period] = batch
        return batch

    def save(self, put_item: Any) -> None:
        self._batch(put_item).save(put_item)

    def delete(self, del_item: Any) -> None:
        self._batch(del_item).delete(del_item)

    def commit(self) -> None:
        for batch in self._batches.values():
            batch.commit()

    def __enter__(self) -> PeriodBatchWrite:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        if exc_type is None:
            self.commit()


def group_keys(model: type[Any], keys: Iterable[tuple[Any, Any]]) -> dict[str, list[tuple[Any, Any]]]:
    """``(hash key, range key)`` pairs grouped by the period of their range key, in first-seen order."""
    declared = declaration(model)
    grouped: dict[str, list[tuple[Any, Any]]] = {}
    for key in keys:
        grouped.setdefault(declared.period_of(key[1]), []).append(key)
    return grouped
