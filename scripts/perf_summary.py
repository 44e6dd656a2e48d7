#!/usr/bin/env python3
"""Medians of allreduce_bw JSON runs (scripts/perf_runs.sh writes LABEL.REP.json files).

Prints one Markdown table per label: size, kolo time and busbw, and for each peer (MPI, Gloo)
its time, busbw and the ratio peer_time / kolo_time (> 1: kolo faster), all medians over runs.
Usage: /usr/bin/python3 scripts/perf_summary.py DIR
"""
import collections
import glob
import json
import os
import statistics
import sys


def load_runs(directory):
    runs = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        label = os.path.basename(path).rsplit(".", 2)[0]
        with open(path) as f:
            runs[label].append(json.load(f))
    return runs


def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def median_of(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    return "n/a" if value is None else f"{value:.{digits}f}"


def table(label, runs):
    first = runs[0]
    peers = first.get("compare", [])
    head = (f"### {label}: {first['collective']} {first['dtype']} {first['op']}, "
            f"{first['ranks']} ranks, {first['transport']}, {len(runs)} runs")
    cols = ["size", "algorithm", "kolo us", "kolo busbw"]
    for p in peers:
        cols += [f"{p} us", f"{p} busbw", f"{p}/kolo"]
    lines = [head, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    by_size = collections.defaultdict(list)
    for run in runs:
        for row in run["rows"]:
            by_size[row["size"]].append(row)
    for size in sorted(by_size):
        rows = by_size[size]
        cells = [human(size), rows[0].get("algorithm", ""),
                 fmt(median_of(r["kolo"]["time_us"] for r in rows)),
                 fmt(median_of(r["kolo"]["busbw"] for r in rows))]
        for p in peers:
            peer = [r.get(p) or {} for r in rows]
            cells += [fmt(median_of(x.get("time_us") for x in peer)),
                      fmt(median_of(x.get("busbw") for x in peer)),
                      fmt(median_of(x.get("ratio") for x in peer))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    runs = load_runs(sys.argv[1])
    for label in sorted(runs):
        print(table(label, runs[label]))
        print()


if __name__ == "__main__":
    main()
