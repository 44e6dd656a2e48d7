#!/usr/bin/env bash
# Tests of kolorun, kolo's local launcher: output prefixes, the KOLO_* environment, teardown of
# the job when a rank fails or kolorun is signalled, and option errors.
# Usage: kolorun_test.sh /path/to/kolorun   (exit 0 when every check passed)
set -u

KOLORUN=${1:?usage: kolorun_test.sh /path/to/kolorun}
# Sleeps carry a duration unique to this test run so pgrep finds only our leftovers.
MARK="30.$$"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=common/check.sh
source "$(dirname "$0")/common/check.sh"

# run ARGS...: runs kolorun, leaving stdout/stderr in $TMP and the exit code in $rc and the
# wall time in $elapsed_ms.
run() {
  local start end
  start=$(date +%s%N)
  "$KOLORUN" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  end=$(date +%s%N)
  elapsed_ms=$(((end - start) / 1000000))
}

no_leftovers() {
  sleep 0.2
  ! pgrep -f "sleep $MARK" >/dev/null
}

contains() { grep -qE -- "$2" "$TMP/$1"; }

# An ssh-like remote shell: it passes no KOLO_SECRET* on, and runs its words joined by spaces in
# sh -c, as ssh does (kolorun --hosts quotes every word it sends).
printf '#!/bin/sh\nshift\nexec env -u KOLO_SECRET -u KOLO_SECRET_FILE sh -c "$*"\n' >"$TMP/rsh"
chmod +x "$TMP/rsh"
rsh="$TMP/rsh {host}"

# Output of every rank, prefixed, on the right stream; partial last lines flushed.
run -np 3 sh -c 'echo hi $KOLO_RANK'
check "prefix exit code" test "$rc" = 0
check "prefixed lines" test "$(sort "$TMP/out")" = "$(printf '[0] hi 0\n[1] hi 1\n[2] hi 2')"

run -np 2 sh -c 'echo err $KOLO_RANK >&2; printf "part $KOLO_RANK"'
check "stderr prefixed" test "$(sort "$TMP/err")" = "$(printf '[0] err 0\n[1] err 1')"
check "partial line flushed" test "$(sort "$TMP/out")" = "$(printf '[0] part 0\n[1] part 1')"

run --no-prefix -np 2 sh -c 'echo plain $KOLO_RANK'
check "--no-prefix" test "$(sort "$TMP/out")" = "$(printf 'plain 0\nplain 1')"

# A line over 64 KiB is split into prefixed lines of 64 KiB, and no other rank's line lands in
# the middle of one: rank 0 writes 150000 bytes in pieces while rank 1 prints short lines.
long_line='for i in $(seq 15); do head -c 10000 /dev/zero | tr "\0" A; sleep 0.03; done; echo'
short_lines='for i in $(seq 8); do sleep 0.05; echo "short $i"; done'
run -np 2 sh -c "if [ \$KOLO_RANK = 0 ]; then $long_line; else $short_lines; fi"
check "long line: exit code" test "$rc" = 0
check "long line: split into 3 prefixed lines" \
  test "$(grep '^\[0\] A*$' "$TMP/out" | awk '{ print length($0) }' | tr '\n' ' ')" = \
  "65540 65540 18932 "
check "long line: other ranks' lines whole" test "$(grep -c '^\[1\] short [1-8]$' "$TMP/out")" = 8
check "long line: nothing else" test "$(wc -l <"$TMP/out")" = 11
# A split never cuts a UTF-8 character: 65535 bytes and a 2-byte "é" go as 65535 bytes and "é".
run -np 1 sh -c 'head -c 65535 /dev/zero | tr "\0" C; printf "\303\251\n"'
check "long line: split between characters" \
  test "$(LC_ALL=C awk '{ print length($0) }' "$TMP/out" | tr '\n' ' ')" = "65539 6 "
# Without a prefix the output passes through unchanged: a 200000-byte line stays one line (before,
# a newline was inserted every 64 KiB).
run --no-prefix -np 1 sh -c 'head -c 200000 /dev/zero | tr "\0" B; echo'
check "long line --no-prefix: unchanged" \
  test "$(LC_ALL=C awk '{ print length($0) }' "$TMP/out" | tr '\n' ' ')" = "200000 "

# The environment of each rank.
run -np 2 sh -c 'echo "$KOLO_RANK $KOLO_SIZE $KOLO_LOCAL_RANK $KOLO_LOCAL_SIZE" \
  "$KOLO_ADDR $KOLO_PORT $KOLO_SECRET $KOLO_LAUNCHER"'
env_re='^\[([01])\] \1 2 \1 2 127\.0\.0\.1 [0-9]+ [0-9a-f]{64} kolorun$'
check "env vars" test "$(grep -cE "$env_re" "$TMP/out")" = 2
check "same port and secret in all ranks" test "$(cut -d' ' -f7,8 "$TMP/out" | sort -u | wc -l)" = 1
port=$(head -n1 "$TMP/out" | cut -d' ' -f7)
check "port in range" test "$port" -ge 1 -a "$port" -le 65535

KOLO_SECRET=mysecret run --addr 127.0.0.2 --port 4242 -np 1 \
  sh -c 'echo $KOLO_ADDR $KOLO_PORT $KOLO_SECRET'
check "--addr, --port, KOLO_SECRET kept" test "$(cat "$TMP/out")" = "[0] 127.0.0.2 4242 mysecret"

run -np 1 -- sh -c 'echo "$@"' sh -np 5 --bogus
check "CMD flags are CMD's" test "$(cat "$TMP/out")" = "[0] -np 5 --bogus"

# A failing rank stops the others at once and gives its exit code.
run -np 3 sh -c "[ \$KOLO_RANK = 1 ] && exit 3; sleep $MARK"
check "failing rank exit code" test "$rc" = 3
check "failing rank is quick (${elapsed_ms} ms)" test "$elapsed_ms" -lt 10000
check "failing rank message" contains err 'kolorun: rank 1 exited with code 3'
check "no leftovers after failure" no_leftovers

run -np 2 sh -c "[ \$KOLO_RANK = 0 ] && kill -KILL \$\$; sleep $MARK"
check "SIGKILLed rank exit code" test "$rc" = 137
check "SIGKILLed rank message" contains err 'rank 0 killed by signal 9 \(SIGKILL\)'
check "no leftovers after SIGKILL" no_leftovers

# Ranks that ignore SIGTERM are killed after --grace.
run --grace 1 -np 3 sh -c "trap '' TERM; [ \$KOLO_RANK = 2 ] && exit 4; sleep $MARK"
check "grace exit code" test "$rc" = 4
check "grace then SIGKILL (${elapsed_ms} ms)" test "$elapsed_ms" -ge 900 -a "$elapsed_ms" -lt 8000
check "no leftovers after SIGKILL escalation" no_leftovers

# SIGTERM to kolorun is forwarded to the ranks.
"$KOLORUN" -np 2 sleep "$MARK" >"$TMP/out" 2>"$TMP/err" &
pid=$!
sleep 0.5
kill -TERM "$pid"
wait "$pid"
rc=$?
check "SIGTERM forwarded exit code" test "$rc" = 143
check "SIGTERM forwarded message" contains err 'received SIGTERM'
check "no leftovers after SIGTERM" no_leftovers

# kolorun killed with SIGKILL cannot stop its job itself: each rank gets SIGTERM from the kernel
# (its parent-death signal) and ends, instead of living on as an orphan.
"$KOLORUN" -np 2 sleep "$MARK" >"$TMP/out" 2>"$TMP/err" &
pid=$!
disown "$pid"  # no "Killed" line from bash
sleep 0.5
check "ranks run before the SIGKILL" test "$(pgrep -fc "^sleep $MARK")" = 2
kill -KILL "$pid"
for _ in 1 2 3 4 5 6 7 8 9 10; do no_leftovers && break; done
check "no leftovers after kolorun is SIGKILLed" no_leftovers
# With --hosts the remote shell is the child that gets it ('env' execs the host's kolorun,
# which stops its ranks in turn).
"$KOLORUN" --hosts 127.0.0.1:1,127.0.0.1:1 --rsh 'env H={host}' sleep "$MARK" \
  >"$TMP/out" 2>"$TMP/err" &
pid=$!
disown "$pid"
sleep 1
check "--hosts ranks run before the SIGKILL" test "$(pgrep -fc "^sleep $MARK")" = 2
kill -KILL "$pid"
for _ in 1 2 3 4 5 6 7 8 9 10; do no_leftovers && break; done
check "no leftovers after kolorun --hosts is SIGKILLed" no_leftovers

# Option errors exit 2 naming the option; help and version exit 0.
run --bogus -np 2 true
check "unknown option exit code" test "$rc" = 2
check "unknown option named" contains err "'--bogus'"
run -np 0 true
check "-np 0 rejected" test "$rc" = 2
check "-np range named" contains err '-np.*\[1, 1024\]'
run -np 2000 true
check "-np 2000 rejected" test "$rc" = 2
run true
check "missing -np" test "$rc" = 2
run -np 2
check "missing CMD" test "$rc" = 2
run -np
check "-np without value" test "$rc" = 2
run -np 2 -n 3 true
check "-np given twice rejected" test "$rc" = 2
check "-np given twice named" contains err 'option -np is given twice'
run --port 70000 -np 1 true
check "--port out of range" test "$rc" = 2
run --addr not-an-ip -np 1 true
check "--addr invalid" test "$rc" = 2
run --grace x -np 1 true
check "--grace invalid" test "$rc" = 2
run --help
check "--help exit code" test "$rc" = 0
check "--help on stdout" contains out 'usage: kolorun'
run --version
check "--version" test "$rc" = 0

# A command that cannot be executed fails with a message naming it.
run -np 3 /nonexistent/kolorun-test-cmd
check "missing command fails" test "$rc" -ne 0
check "missing command named" contains err "kolorun-test-cmd"
run -np 2 kolorun-no-such-command-$$
check "missing command on PATH fails" test "$rc" = 127

# The thread counts of the ranks' math libraries: the CPUs divided among the ranks, unless set.
cpus=$(nproc)
run -np 2 sh -c 'echo "threads $OMP_NUM_THREADS $OPENBLAS_NUM_THREADS"'
share=$((cpus / 2 > 0 ? cpus / 2 : 1))
check "OMP/OPENBLAS threads default to CPUs / ranks" contains out "threads $share $share"
OMP_NUM_THREADS=7 run -np 1 sh -c 'echo "threads $OMP_NUM_THREADS"'
check "OMP_NUM_THREADS set by the user is kept" contains out "threads 7"
OMP_NUM_THREADS='' OPENBLAS_NUM_THREADS='' run -np 2 \
  sh -c 'echo "threads $OMP_NUM_THREADS $OPENBLAS_NUM_THREADS"'
check "empty OMP/OPENBLAS threads count as unset" contains out "threads $share $share"

# hwloc: --topology and --bind (builds without hwloc say so).
run --topology
if [ "$rc" = 0 ]; then
  check "--topology counts this host's hardware threads" contains out "core\\(s\\), $cpus hardware"
  if [ "$cpus" -ge 2 ]; then
    run --bind core -np 2 sh -c 'grep Cpus_allowed_list /proc/self/status'
    mine=$(grep -c "Cpus_allowed_list:.[0-9]*$" "$TMP/out")
    check "--bind core -np 2: each rank on a core of its own" test "$mine" = 2
    check "--bind core: different cores" \
      test "$(sed 's/.*list:.//' "$TMP/out" | sort -u | wc -l)" = 2
    run --bind core --hosts 127.0.0.1:2 --rsh "$rsh" \
      sh -c 'grep Cpus_allowed_list /proc/self/status'
    check "--bind core --hosts: different cores" \
      test "$(sed 's/.*list:.//' "$TMP/out" | sort -u | wc -l)" = 2
  fi
  run --bind socket -np 1 true
  check "--bind with an unknown value is refused, naming it" contains err "--bind='socket'"
else
  check "--topology without hwloc names the package" contains err "libhwloc-dev"
fi

# Several hosts: option errors name what is missing.
run --nnodes 2 -np 1 true
check "--nnodes without --addr is refused" contains err "needs --addr"
KOLO_SECRET= KOLO_SECRET_FILE= run --nnodes 2 --addr 10.0.0.1 -np 1 true
check "--nnodes without a shared secret is refused" contains err "KOLO_SECRET"
run --hosts a:2,b:3 true
check "--hosts with unequal counts is refused" contains err "same count"
# -np may repeat the --hosts count, before or after it, but not change it.
for order in "--hosts 127.0.0.1:3,127.0.0.1:3 -np 1" "-np 1 --hosts 127.0.0.1:3,127.0.0.1:3"; do
  # shellcheck disable=SC2086 # the options are words
  run $order --rsh 'env H={host}' sh -c 'echo $KOLO_RANK/$KOLO_SIZE'
  check "-np disagreeing with --hosts is refused ($order)" test "$rc" = 2
  check "... naming both counts" contains err "gives 3 ranks per host but -np says 1"
  check "... before starting anything" test ! -s "$TMP/out"
done
run --hosts 127.0.0.1:2 -np 2 --rsh "$rsh" sh -c 'echo $KOLO_RANK/$KOLO_SIZE'
check "-np equal to the --hosts count" test "$(sort "$TMP/out")" = "$(printf '[0] 0/2\n[1] 1/2')"
run --hosts 127.0.0.1:1 --rsh "$rsh" printf '<%s>\n' 'a b' '$HOME;echo injected' "it's" ''
expected=$(printf '[0] <%s>\n' 'a b' '$HOME;echo injected' "it's" '')
check "--hosts: CMD's words reach the rank unchanged" test "$(cat "$TMP/out")" = "$expected"

# The job's secret reaches every host: KOLO_SECRET as it is, else KOLO_SECRET_FILE by absolute
# path, else a fresh one, the same on every host.
show_secret='echo "s=$KOLO_SECRET f=$KOLO_SECRET_FILE"'
KOLO_SECRET="a b'\$x" run --hosts 127.0.0.1:1,127.0.0.1:1 --rsh "$rsh" sh -c "$show_secret"
check "--hosts: KOLO_SECRET handed on" \
  test "$(sort "$TMP/out")" = "$(printf '[0] s=a b'"'"'$x f=\n[1] s=a b'"'"'$x f=')"
# ... on the remote shell's stdin: no command line holds it (the remote shell's, with the
# secret, was visible to every local user's ps for the whole job). This remote shell stays
# running, as ssh does, its arguments on show.
printf '#!/bin/sh\nshift\nenv -u KOLO_SECRET -u KOLO_SECRET_FILE sh -c "$*"\n' >"$TMP/rsh-stays"
chmod +x "$TMP/rsh-stays"
KOLO_SECRET=kolorun-secret-on-stdin run --hosts 127.0.0.1:1,127.0.0.1:1 --rsh "$TMP/rsh-stays {host}" \
  sh -c 'echo "s=$KOLO_SECRET"; ps -eo args'
check "--hosts: the secret reaches the hosts on no command line" \
  test "$(grep -c kolorun-secret-on-stdin "$TMP/out")" = 2
# A secret --hosts cannot hand on as one line is refused before anything starts.
KOLO_SECRET="$(printf 'two\nlines')" run --hosts 127.0.0.1:1 --rsh "$rsh" true
check "--hosts: a KOLO_SECRET with a line break is refused" contains err "a line break"
KOLO_SECRET="$(head -c 5000 /dev/zero | tr '\0' s)" run --hosts 127.0.0.1:1 --rsh "$rsh" true
check "--hosts: a KOLO_SECRET over 4096 bytes is refused" contains err "it has 5000 bytes"
echo kolorun-test-secret >"$TMP/secret"
kolorun_path=$(realpath "$KOLORUN")
(cd "$TMP" && env -u KOLO_SECRET KOLO_SECRET_FILE=secret "$kolorun_path" --hosts \
  127.0.0.1:1,127.0.0.1:1 --rsh "$rsh" sh -c "$show_secret" >"$TMP/out" 2>"$TMP/err")
check "--hosts: KOLO_SECRET_FILE handed on as an absolute path" \
  test "$(sort "$TMP/out")" = "$(printf '[0] s= f=%s\n[1] s= f=%s' "$TMP/secret" "$TMP/secret")"
KOLO_SECRET='' KOLO_SECRET_FILE='' run --hosts 127.0.0.1:1,127.0.0.1:1 --rsh "$rsh" \
  sh -c "$show_secret"
check "--hosts: a fresh secret, the same on every host" \
  test "$(grep -cE '^\[[01]\] s=[0-9a-f]{64} f=$' "$TMP/out")" = 2 -a \
  "$(cut -d' ' -f2 "$TMP/out" | sort -u | wc -l)" = 1
run --hosts 127.0.0.1:1 --bind core --rsh 'echo {host}' true
check "--hosts passes --bind on" contains out "kolorun .* --bind core -- true$"

# Messages name what failed: a host's remote shell, or the job's (global) rank.
run --hosts 127.0.0.1:1 --rsh '/nonexistent/kolorun-rsh {host}' true
check "remote shell not found: exit code" test "$rc" = 127
check "remote shell not found: named" \
  contains err "cannot execute host 0 \\(127\\.0\\.0\\.1\\)'s remote shell '/nonexistent/kolorun-rsh'"
check "remote shell not found: no rank blamed" test "$(grep -c 'rank 0' "$TMP/err")" = 0
run --hosts 127.0.0.1:1 --rsh 'false {host}' true
check "remote shell failing: exit code" test "$rc" = 1
check "remote shell failing: named" \
  contains err "host 0 \\(127\\.0\\.0\\.1\\)'s remote shell 'false' exited with code 1"
KOLO_SECRET=x run --nnodes 2 --node-rank 1 --addr 127.0.0.1 -np 1 /nonexistent/kolorun-test-cmd
check "node 1: its rank 1 cannot execute" contains err "kolorun: rank 1: cannot execute"
KOLO_SECRET=x run --nnodes 2 --node-rank 1 --addr 127.0.0.1 -np 2 \
  sh -c "[ \$KOLO_RANK = 3 ] && exit 3; sleep $MARK"
check "node 1: global rank 3 named" contains err "kolorun: rank 3 exited with code 3"
check "no leftovers on node 1" no_leftovers

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
