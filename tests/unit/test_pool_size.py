"""The shared fan-out pool's size: 32 by default, grown to the largest ``Sharding(max_workers=)``
declared, and what ``set_fanout_threads`` or the environment variable set wins over both."""

from __future__ import annotations

import pytest

from pynamodb_sharding import HashedShards, Sharding, _pool, fanout_threads, set_fanout_threads
from pynamodb_sharding._pool import DEFAULT_FANOUT_THREADS


@pytest.fixture(autouse=True)
def own_pool_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from a process that declared nothing and set nothing; the real pool is
    left untouched (its executor is put back afterwards, never shut down here)."""
    monkeypatch.setattr(_pool, "_size", None)
    monkeypatch.setattr(_pool, "_declared", 0)
    monkeypatch.setattr(_pool, "_executor", None)
    monkeypatch.delenv("PYNAMODB_SHARDING_FANOUT_THREADS", raising=False)


def test_the_default_is_32_threads() -> None:
    assert DEFAULT_FANOUT_THREADS == 32
    assert fanout_threads() == 32


def test_a_declared_max_workers_above_32_grows_the_pool() -> None:
    Sharding(HashedShards(64), max_workers=64)
    assert fanout_threads() == 64
    Sharding(HashedShards(48), max_workers=48)  # a smaller one does not shrink it
    assert fanout_threads() == 64
    Sharding(HashedShards(8), max_workers=4)
    assert fanout_threads() == 64


def test_a_size_set_wins_over_the_declarations_until_it_is_unset() -> None:
    Sharding(HashedShards(64), max_workers=64)
    set_fanout_threads(8)
    assert fanout_threads() == 8
    Sharding(HashedShards(96), max_workers=96)
    assert fanout_threads() == 8
    set_fanout_threads(None)
    assert fanout_threads() == 96


def test_the_environment_variable_wins_over_the_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNAMODB_SHARDING_FANOUT_THREADS", "16")
    Sharding(HashedShards(64), max_workers=64)
    assert fanout_threads() == 16


def test_the_pool_created_has_the_grown_size() -> None:
    Sharding(HashedShards(64), max_workers=64)
    executor = _pool.fanout_executor()
    try:
        assert executor._max_workers == 64  # type: ignore[attr-defined]
    finally:
        executor.shutdown(wait=False)


@pytest.mark.parametrize("threads", [0, -1, True, 2.5, "8"])
def test_a_bad_size_is_refused_naming_the_fix(threads: object) -> None:
    with pytest.raises(ValueError, match=r"set_fanout_threads\(.*\): expected a positive int, e\.g\. 32, or None"):
        set_fanout_threads(threads)  # type: ignore[arg-type]
    assert fanout_threads() == 32
