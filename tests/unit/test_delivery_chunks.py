"""The delivery list's chunking: every chunk fits, nothing is lost, reordered or invented."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding.recipes.delivery import encode_target_ids, split_into_chunks
from tests.strategies import target_ids


class TestSplitIntoChunks:
    """Chunks are under the byte limit as stored, their concatenation is the targets, in order."""

    @given(
        st.lists(target_ids, max_size=200), st.integers(min_value=50, max_value=2000), st.none() | st.integers(1, 50)
    )
    def test_invariants(self, ids: list[str], max_bytes: int, max_targets: int | None) -> None:
        fitting = [target_id for target_id in ids if len(encode_target_ids([target_id]).encode()) <= max_bytes]
        chunks = list(split_into_chunks(fitting, max_bytes=max_bytes, max_targets=max_targets))
        assert fitting == [target_id for chunk in chunks for target_id in chunk]
        assert all(chunk for chunk in chunks)
        assert all(len(encode_target_ids(chunk).encode()) <= max_bytes for chunk in chunks)
        if max_targets is not None:
            assert all(len(chunk) <= max_targets for chunk in chunks)
        # greedy: a chunk is closed only when the next id would not fit
        for chunk, following in itertools.pairwise(chunks):
            assert len(chunk) == max_targets or len(encode_target_ids([*chunk, following[0]]).encode()) > max_bytes

    def test_known_split(self) -> None:
        # ["123456","7890123"] is 20 bytes; with ,"45" it would be 25.
        assert [["123456", "7890123"], ["45"]] == list(split_into_chunks(["123456", "7890123", "45"], max_bytes=24))

    def test_multibyte_ids_are_measured_in_bytes(self) -> None:
        ids = ["ユーザー"] * 10  # 12 bytes each in UTF-8, 14 with quotes
        chunks = list(split_into_chunks(ids, max_bytes=50))
        assert [3, 3, 3, 1] == [len(chunk) for chunk in chunks]
        assert json.loads(encode_target_ids(chunks[0])) == ids[:3]

    def test_an_id_too_long_for_a_chunk_is_refused(self) -> None:
        with pytest.raises(ValueError, match="more than a chunk item holds"):
            list(split_into_chunks(["x" * 100], max_bytes=50))

    def test_an_id_that_is_not_a_string_is_refused(self) -> None:
        with pytest.raises(ValueError, match="not a non-empty string"):
            list(split_into_chunks(["1", 2], max_bytes=50))  # type: ignore[list-item]
