#!/usr/bin/env bash
# The one prepared check for a machine with an NVIDIA GPU (issue 17; docs/gpu.md): builds kolo's
# device code with nvcc and g++ alone (the device image has CUDA but none of the Debian
# packages the CMake build needs), runs the device tests and benchmarks, and prints a summary.
# It takes about a minute on an H200 (budget: 8 minutes).
#   bash scripts/gpu_check.sh [OUT_DIR]        (default build-gpu/)
# With build-gpu-bundle/ present (scripts/gpu_bundle.sh, carried from a CMake build; GPU_BUNDLE
# names another folder) it also runs the trainer's CUDA backend tests and the NCCL communicator's.
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), KOLO_CUDA_ARCH
# (default 90: H100/H200), CXX (default g++).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-gpu}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${KOLO_CUDA_ARCH:-90}
cxx=${CXX:-g++}
mkdir -p "$out"
start=$(date +%s)

# Host sources the device code needs (errors, dtypes, the host converter that is the tests'
# reference, the device packer's rules), then the kernels.
host_sources=(comm/base/error.cc comm/base/dtype.cc comm/base/convert.cc comm/base/log.cc
              comm/base/env.cc fusion/cuda/convert_path.cc)
objects=()
for src in "${host_sources[@]}"; do
  obj=$out/$(echo "${src%.cc}" | tr / _).o
  "$cxx" -O2 -std=c++20 -I. -c "$src" -o "$obj"
  objects+=("$obj")
done
"$nvcc" -O2 -std=c++17 -arch=sm_"$arch" -I. -c fusion/cuda/convert.cu -o "$out/convert_cu.o"
objects+=("$out/convert_cu.o")
cuda_include=$(dirname "$(dirname "$nvcc")")/include
for program in tests/gpu/convert_test.cc:kolo_gpu_tests benchmarks/gpu/device_pack_bw.cc:device_pack_bw; do
  "$cxx" -O2 -std=c++20 -I. -I"$cuda_include" -c "${program%%:*}" -o "$out/${program##*:}.o"
  "$nvcc" -arch=sm_"$arch" "$out/${program##*:}.o" "${objects[@]}" -o "$out/${program##*:}"
done
echo "gpu_check: built in $(( $(date +%s) - start )) s"
if [[ ${GPU_CHECK_BUILD_ONLY:-0} == 1 ]]; then exit 0; fi

nvidia-smi -L || true
status=0
"$out/kolo_gpu_tests" | tee "$out/tests.log" || status=1
"$out/device_pack_bw" --mib 256 --iters 20 | tee "$out/pack_bw.log" || status=1
# The trainer's CUDA backend against the CPU one: built by the CMake build, carried here by
# scripts/gpu_bundle.sh (the device image lacks OpenBLAS and the other Debian packages).
bundle=${GPU_BUNDLE:-build-gpu-bundle}
cuda_lib=$(dirname "$(dirname "$nvcc")")/lib64
# The CUDA libraries the bundle links (cudart, cuBLAS, cuBLASLt, NCCL) are the machine's own,
# but an image may keep some outside the toolkit (NCCL from a Python wheel, say): add the
# folder of each one the loader would not find.
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  if [[ ! -e $cuda_lib/$lib ]] && ! ldconfig -p | grep -q "$lib"; then
    found=$(find /usr /opt /usr/local -name "$lib" -print -quit 2>/dev/null || true)
    if [[ -n $found ]]; then
      cuda_lib=$cuda_lib:$(dirname "$found")
      echo "gpu_check: $lib from $(dirname "$found")"
    else
      echo "gpu_check: $lib not found on this machine"
    fi
  fi
done
for name in kolo_gpu_trainer_tests kolo_gpu_nccl_tests kolo_gpu_engine_tests; do
  if [[ -x $bundle/$name ]]; then
    LD_LIBRARY_PATH=$bundle/lib:$cuda_lib:${LD_LIBRARY_PATH:-} timeout 300 "$bundle/$name" |
      tee "$out/$name.log" || status=1
  else
    echo "$name: not run (no $bundle: run scripts/gpu_bundle.sh where the CMake build is and carry it)" >"$out/$name.log"
  fi
done
# The engine's cost on device tensors over a raw NCCL allreduce (world 1, one GPU).
if [[ -x $bundle/engine_overhead ]]; then
  LD_LIBRARY_PATH=$bundle/lib:$cuda_lib:${LD_LIBRARY_PATH:-} KOLO_SIZE=1 KOLO_RANK=0 timeout 120 \
    "$bundle/engine_overhead" --device cuda -n 200 -w 20 | tee "$out/engine_overhead.log" || status=1
else
  echo "engine_overhead: not run (no $bundle)" >"$out/engine_overhead.log"
fi
# BERT-base, seq 128, fp16 on the GPU: forward + backward, then with the optimizer step (AdamW
# on the device), the GEMMs against the backend's own 8192^3 rate (issue 17, point 4).
if [[ -x $bundle/trainer_throughput ]]; then
  # Each run's status counts (the loop's alone was its last run's).
  (failed=0
   for extra in "" "--train"; do
     LD_LIBRARY_PATH=$bundle/lib:$cuda_lib:${LD_LIBRARY_PATH:-} timeout 240 \
       "$bundle/trainer_throughput" --device cuda --preset base --batch 32 --seq 128 \
       --dtypes float16 bfloat16 --threads "$(nproc)" $extra || failed=1
   done
   exit $failed) | tee "$out/bert_base.log" || status=1
else
  echo "trainer_throughput: not run (no $bundle)" >"$out/bert_base.log"
fi
# PyTorch's BERT of the same shape on the same GPU (tests/trainer/python/kolo_torch.py's
# IdiomaticBertMlm, the image's python3): stored in fp16 / bf16 as kolo's, and the usual
# fp32 model under autocast.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  (failed=0
   for mode in "--dtype float16" "--dtype bfloat16" "--dtype float16 --amp" "--dtype bfloat16 --amp"; do
     # shellcheck disable=SC2086  # mode is two or three words
     timeout 120 python3 tests/trainer/python/kolo_torch.py --bench --device cuda --preset base \
       --batch 32 --seq 128 --steps 10 $mode || failed=1
   done
   exit $failed) 2>&1 | tee "$out/torch_bert_base.log" || status=1
else
  echo "torch: not run (no python3 with a CUDA torch)" | tee "$out/torch_bert_base.log"
fi
echo "== gpu_check summary ($(( $(date +%s) - start )) s)"
grep -h "^kolo_gpu_tests:" "$out/tests.log" || echo "kolo_gpu_tests: no result"
grep -h "^device_pack:" "$out/pack_bw.log" || echo "device_pack: no result"
grep -h "^kolo_gpu_trainer_tests:\|^bert-tiny" "$out/kolo_gpu_trainer_tests.log" || echo "kolo_gpu_trainer_tests: no result"
grep -h "^kolo_gpu_nccl_tests:" "$out/kolo_gpu_nccl_tests.log" || echo "kolo_gpu_nccl_tests: no result"
grep -h "^kolo_gpu_engine_tests:" "$out/kolo_gpu_engine_tests.log" || echo "kolo_gpu_engine_tests: no result"
grep -h "^1x8B\|^100x\|^workload" "$out/engine_overhead.log" || echo "engine_overhead --device cuda: no result"
grep -h "^# BERT\|^# cuda GEMM\|^kolo\|^impl" "$out/bert_base.log" || echo "trainer_throughput --device cuda: no result"
grep -h "^torch" "$out/torch_bert_base.log" || echo "torch BERT-base: no result"
exit $status
