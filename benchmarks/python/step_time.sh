#!/usr/bin/env bash
# step_time.sh: benchmarks/python/step_time.py at several world sizes in one run (the issue's
# measure: world 2 and 4), each launched by kolorun, then the ratios side by side.
#   benchmarks/python/step_time.sh [BUILD_DIR] [WORLDS] [STEP_TIME_ARGS...]
#   defaults: build "2 4"
set -euo pipefail
build=${1:-build}
worlds=${2:-2 4}
shift $(($# > 2 ? 2 : $#))
here=$(cd "$(dirname "$0")" && pwd)
lines=()
for w in $worlds; do
  echo "== world $w (load before: $(cut -d' ' -f1 /proc/loadavg))"
  out=$(PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" "$build/tools/kolorun" -np "$w" \
    /usr/bin/python3 "$here/step_time.py" "$@" 2>&1) || { echo "$out"; exit 1; }
  echo "$out" | sed 's/^\[0\] //'
  while read -r line; do lines+=("$line"); done < <(echo "$out" | sed -n 's/^\[0\] \([a-z-]*\) *world \([0-9]*\) .*ratio *\([0-9.]*\)x.*/\1 \2 \3/p')
done
echo "== ratio to single (one process per rank training alone, same contention)"
printf '%-9s' case
for w in $worlds; do printf '  world %-3s' "$w"; done
echo
for case in hvd ddp-kolo ddp-gloo; do
  printf '%-9s' "$case"
  for w in $worlds; do
    r=$(printf '%s\n' "${lines[@]}" | awk -v c="$case" -v w="$w" '$1 == c && $2 == w { print $3 }')
    printf '  %8sx' "${r:--}"
  done
  echo
done
printf '%-9s' "gloo/kolo"
for w in $worlds; do
  r=$(printf '%s\n' "${lines[@]}" | awk -v w="$w" '$2 == w { v[$1] = $3 }
      END { if (v["ddp-kolo"] > 0) printf "%.2f", v["ddp-gloo"] / v["ddp-kolo"] }')
  printf '  %8sx' "${r:--}"
done
echo "   (DDP's step on gloo over its step on kolo)"
