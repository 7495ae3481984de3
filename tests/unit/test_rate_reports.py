"""Rate reports and growth on the rate, in the fleet simulator (no server, virtual time).

Proves (issue 40):
- a rate report is one write: no report is refused by a condition (0.2 sent 1.72 writes a
  report, about half of them refused by their window's condition, each costing capacity);
- report writes are flat in the number of processes: the same load written by 10, 20 or 40
  processes sends the same reports a second (0.2: 3.9, 7.5, 7.8 writes a second);
- growth on the rate never exceeds what the measured load needs: over random fleets (1 to 40
  processes), steady rates and report settings, the count never passes what two consecutive
  windows of the writes really made both needed at the growth threshold (0.2 grew a steady key
  of 2 shards' load to 4 and 8 on sampling noise); a property test.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.steady_fleet import run_steady

#: The strategies' growth threshold in these runs: 0.7 x 50 write units a second a shard.
THRESHOLD = 35.0


def test_a_report_is_one_write() -> None:
    run = run_steady(40, 40.0, 20.0, rate_reports=10, seed=3)
    assert run.reports > 100
    assert run.report_requests == run.reports
    assert run.condition_failures == 0


def test_report_writes_are_flat_in_the_number_of_processes() -> None:
    """40 units a second of one key (one shard at the threshold of 35): a report per quantum of
    3.5 units (35 x 1 s / 10), about 11 a second, whoever writes them."""
    rates = {processes: run_steady(processes, 40.0, 20.0, rate_reports=10, seed=4).reports_per_second
             for processes in (10, 20, 40)}
    assert all(9.0 <= rate <= 13.0 for rate in rates.values()), rates
    assert max(rates.values()) / min(rates.values()) <= 1.2, rates


def test_the_issues_steady_key_keeps_the_count_its_load_needs() -> None:
    """Issue 40's case: 40 processes, ``rate_reports=10``, a steady 40 units a second (2 shards
    at the threshold of 35): it grew 1 -> 2 -> 4 -> 8 on sampling noise."""
    run = run_steady(40, 40.0, 30.0, rate_reports=10, seed=0)
    assert run.final_count <= 2
    assert run.final_count <= run.justified(THRESHOLD)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    processes=st.integers(1, 40),
    rate=st.floats(5.0, 150.0),
    rate_reports=st.sampled_from([5, 10, 30, 100]),
    seed=st.integers(0, 2**16),
)
def test_growth_never_exceeds_what_the_measured_load_needs(processes: int, rate: float, rate_reports: int,
                                                           seed: int) -> None:
    """Puts of 3 write units (fewer puts for the same load: a small run)."""
    run = run_steady(processes, rate, 12.0, units=3, rate_reports=rate_reports, seed=seed)
    justified = run.justified(THRESHOLD)
    assert max(count for _, count in run.counts) <= justified, (run.counts, run.per_window)
