#!/usr/bin/env bash
# Gathers the GPU programs that need kolo's full CMake build (kolo_gpu_trainer_tests: the
# trainer, with OpenBLAS; kolo_gpu_nccl_tests; kolo_gpu_engine_tests and engine_overhead: the
# engine on device tensors; trainer_throughput: BERT-base on the GPU) into one folder to carry to a machine with a GPU, where
# scripts/gpu_check.sh runs them: the programs and, in lib/, the shared libraries they load
# that a bare CUDA image lacks (OpenBLAS and its Fortran runtime, OpenSSL's libcrypto, MPI,
# ...), all without debug information (the device tool carries 64 MiB; this is about 55). The
# CUDA libraries (cudart, cuBLAS, cuBLASLt, NCCL) are the device machine's own.
#   bash scripts/gpu_bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, build-gpu-bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-build-gpu-bundle}
programs=(tests/gpu/kolo_gpu_trainer_tests tests/gpu/kolo_gpu_nccl_tests
          tests/gpu/kolo_gpu_engine_tests benchmarks/engine_overhead benchmarks/trainer_throughput)
# The folder is replaced: only one this script made (its marker inside) or an empty one, never a
# folder of the user's (or the build folder) given by mistake.
if [ -e "$out" ] && [ ! -f "$out/.kolo_gpu_bundle" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "gpu_bundle: $out exists and is not a bundle this script made: name an empty or new folder" >&2
  exit 2
fi
cmake --build "$build" --target "${programs[@]##*/}"
rm -rf "$out"
mkdir -p "$out/lib"
touch "$out/.kolo_gpu_bundle"
for program in "${programs[@]}"; do
  name=${program##*/}
  cp "$build/$program" "$out/$name"
  strip --strip-debug "$out/$name"
  # Everything ldd resolves except the C runtime and CUDA's libraries (NCCL included).
  ldd "$out/$name" | awk '/=> \// {print $3}' |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia[^/]*)\.so' |
    while read -r lib; do
      [[ -e $out/lib/$(basename "$lib") ]] || { cp -L "$lib" "$out/lib/" && strip --strip-debug "$out/lib/$(basename "$lib")"; }
    done
done
echo "gpu_bundle: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/lib" | tr '\n' ' '))"
