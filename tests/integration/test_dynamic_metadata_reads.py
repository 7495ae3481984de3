"""A warm key costs at most one metadata read per cache TTL, however many threads write it.

Metadata requests are counted as botocore sends them. The cache timer is driven by the number
of writes done (one TTL per 250 writes), so 1,000 writes from 16 threads span four TTLs and
must cost at most four metadata reads, and at least three (the cache does expire).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding.testing import record_requests

KEY = "/shared/firetvGen2.txt"
TTL = 10.0
WRITES = 1000
WRITES_PER_TTL = 250


class ReadsShards(ShardMetadata):
    class Meta:
        table_name = "reads_shards"


class WriteCounter:
    """The cache's timer: time advances one TTL per ``WRITES_PER_TTL`` writes."""

    def __init__(self) -> None:
        self.writes = 0
        self.lock = threading.Lock()

    def tick(self) -> None:
        with self.lock:
            self.writes += 1

    def __call__(self) -> float:
        return self.writes * TTL / WRITES_PER_TTL


writes = WriteCounter()


class ReadsLog(ShardedModel):
    class Meta:
        table_name = "reads_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(ReadsShards, initial=4, cache_ttl=TTL, timer=writes))


def test_metadata_reads_per_ttl_of_a_warm_key(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(ReadsLog)
    # Warm: a key without a metadata item is written on its initial count without reading it;
    # its second write reads the count and caches it. Cold, 16 threads would all read it at once.
    ReadsLog(KEY, -2).save()
    with record_requests(ReadsShards) as warming:
        ReadsLog(KEY, -1).save()
    assert {"GetItem": 1} == warming.requests

    def write(n: int) -> None:
        ReadsLog(KEY, n).save()
        writes.tick()

    with record_requests(ReadsShards) as metadata, ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(WRITES)))

    gets = metadata.requests.get("GetItem", 0)
    assert {"GetItem"} == set(metadata.requests)  # nothing but reads of the count
    assert 3 <= gets <= WRITES // WRITES_PER_TTL
    assert ReadsLog.count(KEY) == WRITES + 2
    print(f"\nmetadata reads: {gets} for {WRITES} writes over {WRITES / WRITES_PER_TTL:g} TTLs")
