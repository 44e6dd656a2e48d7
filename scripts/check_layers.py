#!/usr/bin/env python3
"""Checks that kolo's #include graph points down the layers of docs/architecture.md.

Reads every `#include "..."` of the project's sources and fails (exit 1) on:
  - an include from a top-level folder into one above it (the order is LAYERS below);
  - an include loop between top-level folders, between the subsystem folders inside one
    (comm/transport <-> comm/collectives, trainer/model <-> trainer/io, ...), or between files.
Usage: scripts/check_layers.py [--graph]   (--graph prints the folder-level arrows)
"""
import os
import re
import subprocess
import sys

# Lowest first. A file may include its own folder and any folder of a lower layer.
LAYERS = [
    {"comm"},
    {"timeline"},
    {"fusion"},
    {"trainer"},
    {"bindings"},
    {"tools", "examples", "benchmarks"},
    {"tests"},  # the tests may test a program's own parts (allreduce_bw's check pattern)
]
SOURCE = re.compile(r"\.(h|hpp|cc|cpp|c|inc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def layer_of(folder):
    for level, members in enumerate(LAYERS):
        if folder in members:
            return level
    return None


def source_files(root):
    # git's list where the tree is a checkout (untracked build output left out); else every
    # file under the root but build folders (a source download has no .git).
    git = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root,
                         capture_output=True, text=True)
    if git.returncode == 0 and os.path.isdir(os.path.join(root, ".git")):
        listed = git.stdout.split()
    else:
        listed = [os.path.relpath(os.path.join(d, f), root)
                  for d, dirs, names in os.walk(root)
                  for f in names
                  if not os.path.relpath(d, root).split(os.sep)[0].startswith(("build", "."))]
    return [f for f in listed if SOURCE.search(f) and "/" in f and os.path.isfile(os.path.join(root, f))]


def includes(root, files):
    """(includer, included) for every project include that resolves to a file of the tree."""
    known = set(files)
    edges = []
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as text:
            for target in INCLUDE.findall(text.read()):
                if target in known:
                    edges.append((f, target))
                else:  # relative to the including file (e.g. a .inc beside its user)
                    local = os.path.normpath(os.path.join(os.path.dirname(f), target))
                    if local in known:
                        edges.append((f, local))
    return edges


def cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    graph = {n: [] for n in nodes}
    for a, b in edges:
        if a != b:
            graph[a].append(b)
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def subsystem(path):
    """comm/transport/shm/pair.h -> comm/transport; comm/communicator.h -> comm."""
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def main():
    # kolo's tree is where this script lives, whatever the current directory (another
    # repository there passed with 0 files checked).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = source_files(root)
    edges = includes(root, files)
    problems = []

    top = lambda f: f.split("/")[0]
    folder_edges = sorted({(top(a), top(b)) for a, b in edges if top(a) != top(b)})
    for a, b in folder_edges:
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None:
            problems.append(f"folder '{a if la is None else b}' has no layer in scripts/check_layers.py")
        elif lb >= la:
            example = next(f"{x} includes {y}" for x, y in edges if top(x) == a and top(y) == b)
            problems.append(f"{a} -> {b} points up or sideways ({example})")
    for loop in cycles({top(f) for f in files}, folder_edges):
        problems.append("include loop between top-level folders: " + " <-> ".join(loop))
    sub_edges = {(subsystem(a), subsystem(b)) for a, b in edges if subsystem(a) != subsystem(b)}
    for loop in cycles({subsystem(f) for f in files}, sub_edges):
        problems.append("include loop between folders: " + " <-> ".join(loop))
    for loop in cycles(set(files), edges):
        problems.append("include loop between files: " + " <-> ".join(loop))

    if "--graph" in sys.argv:
        for a, b in folder_edges:
            print(f"{a} -> {b}")
    for p in problems:
        print("check_layers: " + p, file=sys.stderr)
    print(f"check_layers: {len(files)} files, {len(edges)} includes, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
