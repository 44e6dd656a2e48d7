// device_pack_bw: the fusion buffer's device packer (fusion/cuda/convert.h) against the GPU's
// own device-to-device copy, measured in the same run. Bandwidth counts bytes read plus bytes
// written: a copy of B bytes moves 2B, a pack of n fp32 into fp16 moves 6n.
//   build-gpu/benchmarks/gpu/device_pack_bw [--mib 256] [--iters 20]
// The last line, "device_pack: fp32->fp16 at P% of the device-to-device copy", is what
// scripts/gpu_check.sh reports.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "comm/base/error.h"
#include "fusion/cuda/convert.h"

namespace {

namespace kc = kolo::fusion::cuda;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "device_pack_bw: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Seconds per call of `body`, the mean over `iters` after two warm-up calls, timed with events.
double seconds(int iters, const std::function<void()>& body) {
  cudaEvent_t start, stop;
  ok(cudaEventCreate(&start), "event");
  ok(cudaEventCreate(&stop), "event");
  body();
  body();
  ok(cudaEventRecord(start), "record");
  for (int i = 0; i < iters; ++i) body();
  ok(cudaEventRecord(stop), "record");
  ok(cudaEventSynchronize(stop), "synchronize");
  float ms = 0;
  ok(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  // Two flags only, parsed by hand: the device image has no CLI11.
  size_t mib = 256;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--mib") == 0 && has_value) {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--iters") == 0 && has_value) {
      iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: device_pack_bw [--mib 256] [--iters 20]\n");
      return 2;
    }
  }
  if (mib < 1 || iters < 1) {
    std::fprintf(stderr, "device_pack_bw: --mib and --iters must be at least 1\n");
    return 2;
  }
  const size_t bytes = mib << 20, n = bytes / 4;
  void *a = nullptr, *b = nullptr;
  ok(cudaMalloc(&a, bytes), "cudaMalloc");
  ok(cudaMalloc(&b, bytes), "cudaMalloc");
  ok(cudaMemset(a, 0, bytes), "cudaMemset");
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("# %s, %zu MiB fp32 source, mean of %d calls\n", prop.name, mib, iters);
  const double copy_s =
      seconds(iters, [&] { ok(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice), "copy"); });
  const double copy_gbs = 2.0 * bytes / copy_s / 1e9;
  std::printf("%-28s %10.3f ms %9.1f GB/s\n", "device-to-device copy", copy_s * 1e3, copy_gbs);
  struct Row {
    const char* name;
    kolo::DType from, to;
    double scale;
  };
  const Row rows[] = {{"pack fp32->fp16 x0.5", kolo::DType::kFloat32, kolo::DType::kFloat16, 0.5},
                      {"pack fp32->bf16 x0.5", kolo::DType::kFloat32, kolo::DType::kBFloat16, 0.5},
                      {"unpack fp16->fp32 x2", kolo::DType::kFloat16, kolo::DType::kFloat32, 2.0},
                      {"scale fp32->fp32 x0.5", kolo::DType::kFloat32, kolo::DType::kFloat32, 0.5}};
  double fp16_share = 0;
  for (const Row& r : rows) {
    const size_t count = r.from == kolo::DType::kFloat32 ? n : bytes / 2 / 2;
    kc::Span span{a, b, count};
    const double s =
        seconds(iters, [&] { kc::convert_spans(&span, 1, r.from, r.to, r.scale, nullptr); });
    const double moved = double(count) * (kolo::dtype_size(r.from) + kolo::dtype_size(r.to));
    const double gbs = moved / s / 1e9;
    std::printf("%-28s %10.3f ms %9.1f GB/s %6.1f%% of the copy\n", r.name, s * 1e3, gbs,
                100 * gbs / copy_gbs);
    if (r.to == kolo::DType::kFloat16) fp16_share = 100 * gbs / copy_gbs;
  }
  std::printf("device_pack: fp32->fp16 at %.1f%% of the device-to-device copy (%zu MiB)\n",
              fp16_share, mib);
  cudaFree(a);
  cudaFree(b);
  return 0;
}
