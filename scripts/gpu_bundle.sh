#!/usr/bin/env bash
# Gathers the GPU programs that need kolo's full CMake build (kolo_gpu_trainer_tests: the
# trainer, with OpenBLAS) into one folder to carry to a machine with a GPU, where
# scripts/gpu_check.sh runs them: the programs and, in lib/, the shared libraries they load
# that a bare CUDA image lacks (OpenBLAS and its Fortran runtime, OpenSSL's libcrypto, MPI,
# ...), all without debug information (the device tool carries 64 MiB; this is about 54). The
# CUDA libraries (cudart, cuBLAS, cuBLASLt) are the device machine's own.
#   bash scripts/gpu_bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, build-gpu-bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-build-gpu-bundle}
cmake --build "$build" --target kolo_gpu_trainer_tests
rm -rf "$out"
mkdir -p "$out/lib"
program=$out/kolo_gpu_trainer_tests
cp "$build/tests/gpu/kolo_gpu_trainer_tests" "$program"
strip --strip-debug "$program"
# Everything ldd resolves except the C runtime and CUDA's libraries.
ldd "$program" | awk '/=> \// {print $3}' |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt|libnvidia[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/" && strip --strip-debug "$out/lib/$(basename "$lib")"; done
echo "gpu_bundle: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/lib" | tr '\n' ' '))"
