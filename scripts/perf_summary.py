#!/usr/bin/env python3
"""Medians of allreduce_bw JSON runs (scripts/perf_runs.sh writes LABEL.REP.json files).

Prints one Markdown table per label: size, kolo time and busbw, and for each peer (MPI, Gloo)
its time, busbw and the ratio peer_time / kolo_time (> 1: kolo faster), all medians over runs.
Runs under one label that differ in rank count (or collective, dtype, op, transport, --algo,
peers, --inplace or --alloc) are not merged: each set gets its own table, its files named in the heading.
A row whose results were wrong (#wrong > 0 in any run, kolo or a peer) is marked in its size
cell and listed under its table, and the exit status is then 1.
Usage: /usr/bin/python3 scripts/perf_summary.py DIR
"""
import collections
import glob
import json
import os
import statistics
import sys

USAGE = "usage: /usr/bin/python3 scripts/perf_summary.py DIR (the OUT_DIR of scripts/perf_runs.sh)"
# The run fields the table's heading reads, and those that must agree for runs to share a median.
HEADING = ("ranks", "collective", "dtype", "op", "transport")
SAME = HEADING + ("algorithm", "compare", "in_place", "alloc")


class Bad(Exception):
    """An input the summary cannot use; the message names the file or folder."""


def check_run(path, run):
    if not isinstance(run, dict) or run.get("benchmark") != "allreduce_bw":
        raise Bad(f"{path}: not an allreduce_bw --json file")
    missing = [k for k in HEADING + ("rows",) if k not in run]
    if missing:
        raise Bad(f"{path}: no {', '.join(missing)} (not a complete allreduce_bw --json file)")
    if not isinstance(run["rows"], list):
        raise Bad(f"{path}: 'rows' is not a list")
    for i, row in enumerate(run["rows"]):
        if not isinstance(row, dict) or "size" not in row or not isinstance(row.get("kolo"), dict):
            raise Bad(f"{path}: row {i + 1} has no size or kolo figures")


def load_runs(directory):
    """{label: {run settings: [run, ...]}}; each run carries its file name in "_file"."""
    if not os.path.isdir(directory):
        raise Bad(f"{directory}: " + ("not a directory" if os.path.exists(directory)
                                       else "no such directory"))
    paths = sorted(glob.glob(os.path.join(glob.escape(directory), "*.json")))
    if not paths:
        raise Bad(f"{directory}: no *.json files (scripts/perf_runs.sh writes LABEL.REP.json)")
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in paths:
        label = os.path.basename(path).rsplit(".", 2)[0]
        try:
            with open(path) as f:
                run = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise Bad(f"{path}: {e}") from None
        check_run(path, run)
        run["_file"] = os.path.basename(path)
        runs[label][json.dumps([run.get(k) for k in SAME])].append(run)
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


def wrong_in(row, runner, file):
    """'FILE: RUNNER #wrong N' where a run counted wrong elements (None: unchecked)."""
    m = row.get(runner)
    n = m.get("wrong") if isinstance(m, dict) else None
    return f"{file}: {runner} #wrong {n}" if isinstance(n, (int, float)) and n > 0 else None


def table(label, runs, split):
    """The Markdown table and the list of wrong results found in it."""
    first = runs[0]
    peers = first.get("compare", [])
    head = (f"### {label}: {first['collective']} {first['dtype']} {first['op']}, "
            f"{first['ranks']} ranks, {first['transport']}, {len(runs)} runs")
    if split:  # the label holds runs of other settings too: say which files these are
        head += " (" + ", ".join(r["_file"] for r in runs) + ")"
    cols = ["size", "algorithm", "kolo us", "kolo busbw"]
    for p in peers:
        cols += [f"{p} us", f"{p} busbw", f"{p}/kolo"]
    lines = [head, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    by_size = collections.defaultdict(list)
    for run in runs:
        for row in run["rows"]:
            by_size[row["size"]].append((run["_file"], row))
    wrong = []
    for size in sorted(by_size):
        rows = [row for _, row in by_size[size]]
        bad = [w for file, row in by_size[size] for runner in ["kolo"] + list(peers)
               if (w := wrong_in(row, runner, file))]
        cells = [human(size) + (" **#wrong**" if bad else ""), rows[0].get("algorithm", ""),
                 fmt(median_of(r["kolo"].get("time_us") for r in rows)),
                 fmt(median_of(r["kolo"].get("busbw") for r in rows))]
        for p in peers:
            peer = [r.get(p) or {} for r in rows]
            cells += [fmt(median_of(x.get("time_us") for x in peer)),
                      fmt(median_of(x.get("busbw") for x in peer)),
                      fmt(median_of(x.get("ratio") for x in peer))]
        lines.append("| " + " | ".join(cells) + " |")
        wrong += [f"{human(size)}: {w}" for w in bad]
    if wrong:
        lines += ["", "**Wrong results** (these rows' figures are not valid measurements): "
                  + "; ".join(wrong)]
    return "\n".join(lines), wrong


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if len(sys.argv) != 2 else sys.stdout)
        return 2 if len(sys.argv) != 2 else 0
    try:
        runs = load_runs(sys.argv[1])
    except Bad as e:
        print(f"perf_summary: {e}", file=sys.stderr)
        return 1
    wrong = 0
    for label in sorted(runs):
        groups = runs[label]
        if len(groups) > 1:
            print(f"perf_summary: {label}: runs with different settings (ranks, collective, dtype,"
                  f" op, transport, algorithm or peers); one table for each", file=sys.stderr)
        # Fewer ranks first, then the files' order.
        for key in sorted(groups, key=lambda k: (str(groups[k][0]["ranks"]).zfill(8), k)):
            text, bad = table(label, groups[key], len(groups) > 1)
            print(text)
            print()
            wrong += len(bad)
    if wrong:
        print(f"perf_summary: {wrong} result(s) with #wrong > 0 (marked **#wrong** above)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
