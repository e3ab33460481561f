"""The PNG: throughput and latency against concurrency, for one run or two compared.

matplotlib is the optional `plot` extra (`pip install 'llmkube[plot]'`): the controller image and a
plain install do without it, and asking for a plot without it says how to get it.
"""

import textwrap
from collections.abc import Sequence
from pathlib import Path

from llmkube.usercli.benchmark.report import BenchmarkRun
from llmkube.usercli.errors import UserError

INSTALL_HINT = "the PNG plot needs matplotlib: pip install 'llmkube[plot]'"


def write_plot(runs: Sequence[tuple[str, BenchmarkRun]], path: Path) -> None:
    """Left: output tokens/s (solid) and requests/s (dashed, right axis); right: TTFT p50 and p99 and
    time per output token p50, in milliseconds. One colour per run."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display is needed or wanted
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError(INSTALL_HINT) from None

    figure, (throughput, latency) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    requests_axis = throughput.twinx()
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (label, run) in enumerate(runs):
        colour = colours[index % len(colours)]
        levels = sorted(run.levels, key=lambda level: level.concurrency)
        x = [level.concurrency for level in levels]
        throughput.plot(
            x, [lv.output_tokens_per_second for lv in levels], "o-", color=colour, label=f"{label} tok/s"
        )
        requests_axis.plot(
            x, [lv.requests_per_second for lv in levels], "s--", color=colour, label=f"{label} req/s"
        )
        for values, style, name in (
            ([lv.ttft.p50 for lv in levels], "o-", "TTFT p50"),
            ([lv.ttft.p99 for lv in levels], "^:", "TTFT p99"),
            ([lv.tpot.p50 for lv in levels], "s--", "TPOT p50"),
        ):
            points = [(c, v * 1000) for c, v in zip(x, values, strict=True) if v is not None]
            if points:
                latency.plot(*zip(*points, strict=True), style, color=colour, label=f"{label} {name}")
    ticks = sorted({level.concurrency for _, run in runs for level in run.levels})
    for axis in (throughput, latency):
        axis.set_xscale("log", base=2)
        axis.set_xticks(ticks, [str(tick) for tick in ticks])  # 1 2 4 16, not 2^0 2^1 ...
        axis.set_xlabel("concurrent requests")
        axis.grid(True, alpha=0.3)
    throughput.set_ylabel("output tokens/s")
    requests_axis.set_ylabel("requests/s")
    throughput.set_title("Throughput")
    latency.set_ylabel("ms")
    latency.set_title("Latency")
    lines, labels = throughput.get_legend_handles_labels()
    more_lines, more_labels = requests_axis.get_legend_handles_labels()
    throughput.legend(lines + more_lines, labels + more_labels, fontsize="small", loc="upper left")
    latency.legend(fontsize="small", loc="upper left")
    title = runs[0][1].settings.target if len(runs) == 1 else "llmkube benchmark: comparison"
    figure.suptitle(textwrap.fill(title, 120), fontsize="medium")
    figure.savefig(path, dpi=110)
    plt.close(figure)
