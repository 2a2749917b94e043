"""Plots the soak series (bench/results/soak-series.csv) into a PNG: one
panel each for throughput, claim latency, storage and dead tuples, one line
per side, the part with the snapshot held shaded.

    soak_plot.py SERIES_CSV PNG SECS HOLD_SECS RATE
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

series_csv, png, secs, hold, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = list(csv.DictReader(open(series_csv)))
for r in rows:  # storage without the history kept on purpose (queue_done, pgmq's archive)
    r["working_bytes"] = float(r["total_bytes"]) - float(r["history_bytes"])
sides = list(dict.fromkeys(r["side"] for r in rows))
colors = {"queue": "tab:blue", "pgmq": "tab:orange"}


def values(side, column, scale=1.0):
    pts = [(int(r["t"]), float(r[column]) * scale) for r in rows if r["side"] == side and r[column] != ""]
    return [p[0] for p in pts], [p[1] for p in pts]


fig, axes = plt.subplots(4, 1, figsize=(9, 11), sharex=True)
panels = [
    ("jobs completed / s", [("jobs_per_s", 1.0, "-")]),
    ("claim latency, ms (solid: median, dashed: p99)", [("claim_p50_ms", 1.0, "-"), ("claim_p99_ms", 1.0, "--")]),
    ("MB on disk (solid: all tables + indexes\nbut the retained history; dashed: the\ntable claims scan + its indexes)",
     [("working_bytes", 1 / 1048576, "-"), ("claim_table_bytes", 1 / 1048576, "--")]),
    ("dead tuples (all tables)", [("dead_tuples", 1.0, "-")]),
]
for ax, (title, cols) in zip(axes, panels):
    for side in sides:
        for column, scale, style in cols:
            x, y = values(side, column, scale)
            ax.plot(x, y, style, color=colors.get(side), label=side if style == "-" else None)
    ax.axvspan(secs - hold, secs, color="grey", alpha=0.15, label="snapshot held" if ax is axes[0] else None)
    ax.set_ylabel(title, fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
axes[0].legend(loc="lower left", fontsize=8)
axes[-1].set_xlabel("seconds")
fig.suptitle(f"Soak: {rate} jobs/s, one job per claim and completion; a REPEATABLE READ snapshot held "
             f"for the last {hold} s", fontsize=9)
fig.tight_layout()
fig.savefig(png, dpi=90)
