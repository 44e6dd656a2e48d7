#!/usr/bin/env python3
# Plots bus bandwidth against message size from one or more `allreduce_bw --json` files: a line
# for kolo and one per baseline (MPI, Gloo) of each file, log2 size axis, written to a PNG.
#   /usr/bin/python3 scripts/plot_busbw.py run1.json [run2.json ...] -o busbw.png
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

STYLES = {"kolo": ("tab:blue", "o"), "mpi": ("tab:orange", "s"), "gloo": ("tab:green", "^")}


def size_label(value, _position=None):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def load_run(path):
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"plot_busbw: {path}: {e}")
    if run.get("benchmark") != "allreduce_bw" or "rows" not in run:
        sys.exit(f"plot_busbw: {path}: not an allreduce_bw --json file")
    run["_file"] = os.path.basename(path)
    return run


def run_label(run):
    return (f"{run['collective']} {run['dtype']} np{run['ranks']} {run['transport']}"
            f" ({run['launcher']})")


def legend_labels(runs):
    """One label per run; the file name is added where two runs would read alike."""
    labels = [run_label(run) for run in runs]
    return [f"{label} [{run['_file']}]" if labels.count(label) > 1 else label
            for label, run in zip(labels, runs)]


def series(run, name):
    """(sizes, busbw) of one runner; rows where it was n/a are skipped."""
    sizes, busbw = [], []
    for row in run["rows"]:
        m = row.get(name)
        if m and "busbw" in m:
            sizes.append(row["size"])
            busbw.append(m["busbw"])
    return sizes, busbw


def plot(runs, out, title):
    fig, ax = plt.subplots(figsize=(9, 5.5))
    dashes = ["-", "--", ":", "-."]
    labels = legend_labels(runs)
    for i, run in enumerate(runs):
        for name in ["kolo"] + list(run.get("compare", [])):
            sizes, busbw = series(run, name)
            if not sizes:
                continue
            color, marker = STYLES.get(name, (None, "x"))
            label = name if len(runs) == 1 else f"{name}: {labels[i]}"
            ax.plot(sizes, busbw, dashes[i % len(dashes)], color=color, marker=marker,
                    markersize=4, label=label)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_xlabel("message size (bytes, largest buffer)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title or (f"kolo {runs[0]['kolo_version']}: " + run_label(runs[0])
                           if len(runs) == 1 else "allreduce_bw busbw"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot_busbw: wrote {out}")


def main():
    parser = argparse.ArgumentParser(description="Plot busbw vs size from allreduce_bw --json")
    parser.add_argument("json", nargs="+", help="allreduce_bw --json output files")
    parser.add_argument("-o", "--out", default="busbw.png", help="PNG to write (busbw.png)")
    parser.add_argument("--title", help="plot title (default: from the first run)")
    args = parser.parse_args()
    plot([load_run(p) for p in args.json], args.out, args.title)


if __name__ == "__main__":
    main()
