"""Items built as PynamoDB builds them: from many threads and classes made and dropped at run
time, and in a forked child (from_raw_data, no server)."""
from __future__ import annotations

import gc
import os
import threading
from typing import Any

from pynamodb.attributes import ListAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._model import ShardedMetaModel


def make(i: int, extra_default: Any = None) -> Any:
    ns = {
        "Meta": type("Meta", (), {"table_name": f"building_t{i}", "host": "http://127.0.0.1:9",
                                  "region": "us-east-1"}),
        "__module__": __name__,
        "pk": UnicodeAttribute(hash_key=True),
        "sk": NumberAttribute(range_key=True),
        f"a{i}": UnicodeAttribute(default=f"d{i}", attr_name=f"x{i}"),
        "tags": ListAttribute(default=list),
        "shards": Sharding(RandomShards(4)),
    }
    if extra_default is not None:
        ns["made"] = UnicodeAttribute(default=extra_default)
    return ShardedMetaModel(f"T{i}", (ShardedModel,), ns)


def raw(cls: Any, i: int, sk: int) -> dict[str, Any]:
    return {"pk": {"S": cls.shards.physical_key("k", 1)}, "sk": {"N": str(sk)}}


def ref(cls: Any, data: dict[str, Any]) -> Any:
    from pynamodb_sharding import _point_reads
    instance = Model._instantiate.__func__(cls, data)  # type: ignore[attr-defined]
    _point_reads.adopt_stored(instance, data)
    return instance.attribute_values


def test_many_threads_many_classes() -> None:
    classes = [make(i) for i in range(12)]
    errors: list[Any] = []
    barrier = threading.Barrier(len(classes) + 4)

    def reader(i: int) -> None:
        cls = classes[i]
        barrier.wait()
        for sk in range(3000):
            data = raw(cls, i, sk)
            got = cls.from_raw_data(dict(data))
            if type(got) is not cls or got.attribute_values != ref(cls, dict(data)) or \
                    list(got.attribute_values) != list(ref(cls, dict(data))):
                errors.append((i, sk, type(got).__name__, got.attribute_values))
                return

    def churner(j: int) -> None:
        barrier.wait()
        for n in range(200):
            c = make(1000 + j * 1000 + n)
            got = c.from_raw_data(raw(c, 0, n))
            if got.attribute_values != ref(c, raw(c, 0, n)):
                errors.append(("churn", j, n))
            del c, got
            if n % 50 == 0:
                gc.collect()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(len(classes))]
    threads += [threading.Thread(target=churner, args=(j,)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_fork_child_reads_as_parent() -> None:
    cls = make(6000)
    data = raw(cls, 0, 1)
    parent = cls.from_raw_data(dict(data)).attribute_values
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = b"0"
        try:
            got = cls.from_raw_data(dict(data)).attribute_values
            other = make(6001)
            got2 = other.from_raw_data(raw(other, 0, 2)).attribute_values
            ok = b"1" if (got == parent and got2 == ref(other, raw(other, 0, 2))) else b"0"
        finally:
            os.write(w, ok)
            os._exit(0)
    os.close(w)
    out = os.read(r, 1)
    os.waitpid(pid, 0)
    assert out == b"1"
