"""The shared fan-out pool's size: 32 by default, grown to the largest ``Sharding(max_workers=)``
declared, and what ``set_fanout_threads`` or the environment variable set wins over both."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

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


def test_an_empty_environment_variable_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNAMODB_SHARDING_FANOUT_THREADS", " ")
    Sharding(HashedShards(64), max_workers=64)
    assert fanout_threads() == 64


def test_a_malformed_environment_variable_fails_the_first_read_not_the_declaration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNAMODB_SHARDING_FANOUT_THREADS", "many")
    Sharding(HashedShards(64), max_workers=64)  # a model module still imports
    with pytest.raises(ValueError, match=r"PYNAMODB_SHARDING_FANOUT_THREADS='many': expected a positive number"):
        fanout_threads()


def test_a_submit_to_a_pool_replaced_meanwhile_goes_to_the_new_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    # Another thread replaced the pool (a model declaring more max_workers) between this
    # caller's fanout_executor() and its submit: the old pool, shut down, refuses the task.
    old, new = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    old.shutdown()
    handed = iter([old, new, new])
    monkeypatch.setattr(_pool, "fanout_executor", lambda: next(handed))
    try:
        assert _pool.fanout_submit(lambda x: x + 1, 41).result(timeout=10) == 42
    finally:
        new.shutdown()


def test_a_submit_refused_by_the_current_pool_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = ThreadPoolExecutor(1)
    closed.shutdown()  # as at interpreter shutdown: the pool was not replaced
    monkeypatch.setattr(_pool, "fanout_executor", lambda: closed)
    with pytest.raises(RuntimeError, match="cannot schedule new futures"):
        _pool.fanout_submit(lambda: None)
