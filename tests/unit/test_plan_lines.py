"""What a reindex dry run prints per index value: exact counts when the sample is the whole
table, estimates (``about``) when it is a part scaled up (found by a new user's trial: 301 and
518 printed for a table holding 300 and 519)."""

from __future__ import annotations

from pynamodb_sharding.migration import MigrationPlan


def a_plan(sampled: int, table_items: int) -> MigrationPlan:
    return MigrationPlan(
        job="reindex Credential (secrets) index 'by_type'", table_items=table_items, table_bytes=1, sampled=sampled,
        estimated_items=table_items, estimated_keys=1, estimated_writes=0, estimated_moves=0,
        estimated_write_units=900, deletes="none", segments_done=0, total_segments=4, estimated_rewrites=300,
        index_values=(("credential", 301, 0), ("service", 0, 5)),
    )


def test_a_sampled_table_prints_estimates() -> None:
    lines = list(a_plan(sampled=827, table_items=829).lines())
    assert "value:      'credential': about 301 entries rewritten" in lines
    assert "value:      'service': about 0 entries rewritten, about 5 left as they are (other models')" in lines


def test_a_table_read_whole_prints_counts() -> None:
    lines = list(a_plan(sampled=829, table_items=829).lines())
    assert "value:      'credential': 301 entries rewritten" in lines
