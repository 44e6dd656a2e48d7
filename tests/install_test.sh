#!/usr/bin/env bash
# Installs kolo into a temporary prefix, then builds tests/install_consumer against it twice:
# with find_package(kolo) and with pkg-config. Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/tests/install_consumer" -B "$prefix/consumer" -G Ninja \
      -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
LD_LIBRARY_PATH="$prefix/lib" "$prefix/consumer/consumer"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" c++ -o "$prefix/consumer_pc" \
  "$src/tests/install_consumer/main.cc" $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs kolo)
LD_LIBRARY_PATH="$prefix/lib" "$prefix/consumer_pc"
echo "install test: find_package and pkg-config consumers both ran"
