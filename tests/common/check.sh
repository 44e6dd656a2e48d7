# Sourced by the shell tests (set -u, no set -e): `check NAME CONDITION...` runs the condition
# and counts it in $passed or $failed; a failure is named on stderr, with the start of what the
# test left in $TMP/out and $TMP/err where those exist. The test ends with
#   echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]
passed=0
failed=0

check() {
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    return 0
  fi
  failed=$((failed + 1))
  echo "FAIL: $name" >&2
  if [ -f "${TMP:-}/out" ]; then echo "  stdout: $(head -c 2000 "$TMP/out")" >&2; fi
  if [ -f "${TMP:-}/err" ]; then echo "  stderr: $(head -c 2000 "$TMP/err")" >&2; fi
  return 0
}
