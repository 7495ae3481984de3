"""Global tables: item writes never wait on the home region; rate reports are best effort.

A proactive model (``target_utilization``) in eu-west-1 reports each key's write units to the
key's metadata item in the home region once per ``rate_interval``. With the home region
unreachable (a closed port on this machine), proves with injected clocks and an injected
``sleep`` that records every wait:

- a ``save()`` whose report is due returns at once (nothing waited on, neither by the library
  nor by botocore's retries), the item is stored, and the dropped report is counted and
  signalled; the reports due while the home region was just found unreachable are not even
  sent;
- a ``save()`` throttled on a hot key whose growth cannot reach the home region goes on with
  the count it has (no wait on the home region) and is stored once;
- ``grow()``, an explicit change, still waits up to ``home_retry_seconds`` and then fails
  clearly, changing nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pynamodb_sharding import MetadataRequestError
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._metadata import home_model
from pynamodb_sharding.signals import home_request_dropped
from pynamodb_sharding.testing import DynamoDBLocal
from tests.faults import Faults
from tests.regions import (
    CLOSED_PORT,
    HOME,
    OTHER,
    Region,
    create_tables,
    drop_tables,
    history,
    make_region,
    raw_log,
    table_prefix,
)


class Clocks:
    """Epoch and monotonic clocks that only move when the test moves them; ``sleep`` records."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def timer(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


@pytest.fixture
def cut_off(second_server: DynamoDBLocal, clocks: Clocks) -> Iterator[Region]:
    """A proactive log in eu-west-1 whose home region (us-east-1) cannot be reached."""
    tables = table_prefix()
    region = make_region(
        OTHER, second_server.endpoint, tables, home_region=HOME, home_host=CLOSED_PORT,
        dynamic={"cache_ttl": 60.0, "target_utilization": 0.5, "partition_write_units": 10.0,
                 "rate_interval": 5.0, "cooldown": 0.0, "backoff": (0.0, 0.0),
                 "clock": clocks.clock, "timer": clocks.timer, "sleep": clocks.sleep},
    )
    create_tables(region)
    yield region
    drop_tables(region)


def sent_home(region: Region) -> list[str]:
    """Every request the home region's best-effort and patient clients send."""
    sent: list[str] = []
    for retries in (True, False):
        botocore_client(home_model(region.shards, retries=retries)).meta.events.register(
            "before-send.dynamodb", lambda request, **_: sent.append(request.headers["X-Amz-Target"].decode()))
    return sent


def test_a_due_report_never_makes_a_save_wait(cut_off: Region, clocks: Clocks) -> None:
    log = cut_off.log
    sent = sent_home(cut_off)
    dropped: list[dict[str, Any]] = []

    def record(sender: Any, **extra: Any) -> None:
        dropped.append({"sender": sender, **extra})

    with home_request_dropped.connected_to(record):
        # A put is four quanta at these limits (0.5 x 10 units x 5 s over 100 reports): a report
        # is due at once, and the home region is unreachable.
        log(key="k", at=0.0).save()
        assert clocks.waits == []
        assert len(sent) == 1  # one attempt, not retried by botocore
        assert log.shards.strategy.home_requests_dropped == 1
        assert [(entry["sender"], entry["key"], entry["request"]) for entry in dropped] == [(log, "k", "rate report")]
        clocks.now += 1.0
        log(key="k", at=1.0).save()  # due again, within the pause after the failure: not sent
        assert len(sent) == 1
        assert log.shards.strategy.home_requests_dropped == 2
        assert clocks.waits == []
        clocks.now += 5.0
        log(key="k", at=2.0).save()  # past the pause: tried again, once
        assert len(sent) == 2
        assert log.shards.strategy.home_requests_dropped == 3
        assert clocks.waits == []
    assert raw_log(cut_off) == [("k_1", 0.0), ("k_1", 1.0), ("k_1", 2.0)]
    assert history(cut_off, "k") == set()  # nothing written to the local metadata replica


def test_a_throttled_save_goes_on_when_its_growth_cannot_reach_home(cut_off: Region, clocks: Clocks) -> None:
    log = cut_off.log
    Faults(log, "PutItem").plan = ["throttle", "throttle"]
    dropped: list[str] = []
    with home_request_dropped.connected_to(lambda sender, **extra: dropped.append(extra["request"])):
        log(key="hot", at=0.0).save()
    assert clocks.waits == [0.0, 0.0]  # the throttle backoffs (0 here), none on the home region
    # The throttled put counted once in the rate (a report at once: a put is four quanta here),
    # then one growth per throttle.
    assert dropped == ["rate report", "growth", "growth"]
    assert log.shards.strategy.home_requests_dropped == 3
    assert raw_log(cut_off) == [("hot_1", 0.0)]
    assert history(cut_off, "hot") == set()


def test_an_explicit_growth_still_waits_and_fails_clearly(cut_off: Region, clocks: Clocks) -> None:
    with pytest.raises(MetadataRequestError, match="could not be reached for 30"):
        cut_off.log.shards.grow("k")
    assert sum(clocks.waits) == pytest.approx(30.0)
    assert history(cut_off, "k") == set()
