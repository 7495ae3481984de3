"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

from hypothesis import strategies as st

from pynamodb_sharding._keys import MAX_SHARDS

#: Any non-empty logical key, including ones that contain separators and digits.
logical_keys = st.text(min_size=1, max_size=60)

#: Keys that look like physical keys already: the case that breaks naive decoding.
tricky_logical_keys = st.builds(
    lambda head, n, sep: f"{head}{sep}{n}",
    st.text(min_size=1, max_size=10),
    st.integers(min_value=0, max_value=999),
    st.sampled_from(["_", "#", "__", "-", "::"]),
)

shards = st.integers(min_value=1, max_value=MAX_SHARDS)

separators = st.text(
    alphabet=st.characters(
        blacklist_categories=("Nd", "Nl", "No", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")
    ),
    min_size=1,
    max_size=3,
)

#: Target ids of a delivery list: any non-empty text, multi-byte scripts and JSON escapes included.
target_ids = st.text(min_size=1, max_size=40).filter(lambda text: "\x00" not in text)
