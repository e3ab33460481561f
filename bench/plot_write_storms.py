"""RSS after each write storm, one line per bench_write_storms.py result, in one PNG.

Usage: .venv/bin/python bench/plot_write_storms.py bench/results/write-storms-ab-*.json --out storms.png
(matplotlib, which the benchmarks may use and the controller never does.)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for path in args.results:
        result = json.loads(path.read_text())
        workload = result["workload"]
        storms = [sample["after_storm"] for sample in result["samples"]]
        rss = [sample["rss_mib"] for sample in result["samples"]]
        axes.plot(
            storms,
            rss,
            marker="o",
            label=f"{result['label']}: {workload['services']} services, "
            f"{workload['rate_per_second']:g}/s for {workload['storm_seconds']:g} s",
        )
    axes.set_xlabel("after storm (0: converged, before the first)")
    axes.set_ylabel("controller RSS, MiB")
    axes.set_title("The controller's memory from one write storm to the next")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
