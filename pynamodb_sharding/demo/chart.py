"""The hot-key demo's chart: write rate and shard count over time, saved as a PNG with matplotlib."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from pynamodb_sharding.demo.scenario import DemoResult

__all__ = ["save_chart"]

_COLOURS = {"unsharded": "tab:red", "dynamic": "tab:blue"}


def save_chart(result: DemoResult, path: Path) -> None:
    """Draw both phases' write rates and shard counts and save them to ``path`` as a PNG.

    The figure is drawn without pyplot, so no backend is chosen and no global state changes.
    """
    figure = Figure(figsize=(9, 6.5))
    rates, shards = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.4]})
    for phase in result.phases:
        points = phase.rates()
        colour = _COLOURS.get(phase.name)
        label = "unsharded PynamoDB model" if phase.name == "unsharded" else "DynamicShards model"
        rates.plot([p[0] for p in points], [p[1] for p in points], color=colour, linewidth=2, label=label)
        shards.step(
            [s.at for s in phase.samples],
            [s.shards for s in phase.samples],
            where="post",
            color=colour,
            linewidth=2,
            label=label,
        )
    counts = sorted({s.shards for phase in result.phases for s in phase.samples})
    for n, count in enumerate(counts):
        rates.axhline(
            result.config.limit * count,
            color="grey",
            linestyle="--",
            linewidth=1,
            label="partition limit \N{MULTIPLICATION SIGN} shard count" if n == 0 else None,
        )
    rates.set_ylabel("acknowledged writes / s")
    rates.set_title(
        f"One hot key under a simulated {result.config.limit:g} WCU/s partition limit, {result.config.writers} writers"
    )
    rates.legend(loc="upper left")
    rates.grid(alpha=0.3)
    rates.set_ylim(bottom=0)
    shards.set_ylabel("shard count")
    shards.set_xlabel("seconds since the phase started")
    shards.set_ylim(0, counts[-1] + 1)
    shards.legend(loc="upper left")
    shards.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
