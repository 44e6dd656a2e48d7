// kolo_gpu_tests: the device packer (fusion/cuda/convert.h) against kolo::convert on the
// host: every float dtype pair, scales 1 and 0.375, counts around the four-element vector
// width, misaligned starts (the element-by-element path), and more spans than one launch
// takes; bit for bit. A plain program (no test framework: the device image has none), run by
// scripts/gpu_check.sh; it prints "kolo_gpu_tests: N checks, M failed" and exits 1 on failure.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "fusion/cuda/convert.h"
#include "tests/gpu/tally.h"

namespace kolo::fusion::cuda {
namespace {

using gpu_test::expect;

// A CUDA error ends the run: what follows would only repeat it.
void ok(cudaError_t e) {
  if (e == cudaSuccess) return;
  std::printf("kolo_gpu_tests: CUDA error: %s\n", cudaGetErrorString(e));
  std::exit(1);
}

struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { ok(cudaMalloc(&p, bytes + 64)); }
  ~Device() { cudaFree(p); }
  char* at(size_t byte) const { return static_cast<char*>(p) + byte; }
};

// Host values in `dt` with a spread of magnitudes (overflow to inf in fp16 included).
std::vector<char> host_values(DType dt, size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mant(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-20, 20);
  std::vector<float> f(n);
  for (float& v : f) v = std::ldexp(mant(gen), exp(gen));
  std::vector<char> out(n * dtype_size(dt));
  convert(out.data(), dt, f.data(), DType::kFloat32, n);
  return out;
}

void check_pair(DType from, DType to, double scale) {
  const std::vector<size_t> counts = {0, 1, 3, 4, 5, 7, 1023, 4096, (1u << 20) + 3};
  // Spans packed back to back, every other one starting one element off alignment.
  std::vector<Span> spans;
  std::vector<std::vector<char>> inputs;
  size_t in_elems = 0, out_elems = 0;
  for (int copy = 0; copy < 40; ++copy)  // 360 spans: three launches
    for (size_t c : counts) {
      inputs.push_back(host_values(from, c, uint32_t(spans.size())));
      const size_t skew = spans.size() % 2;
      spans.push_back({reinterpret_cast<const void*>((in_elems + skew) * dtype_size(from)),
                       reinterpret_cast<void*>((out_elems + skew) * dtype_size(to)), c});
      in_elems += c + 8;
      out_elems += c + 8;
    }
  Device src(in_elems * dtype_size(from)), dst(out_elems * dtype_size(to));
  for (size_t i = 0; i < spans.size(); ++i) {
    const size_t off = reinterpret_cast<size_t>(spans[i].src);
    ok(cudaMemcpy(src.at(off), inputs[i].data(), inputs[i].size(), cudaMemcpyHostToDevice));
    spans[i].src = src.at(off);
    spans[i].dst = dst.at(reinterpret_cast<size_t>(spans[i].dst));
  }
  convert_spans(spans.data(), spans.size(), from, to, scale, nullptr);
  ok(cudaDeviceSynchronize());
  for (size_t i = 0; i < spans.size(); ++i) {
    const size_t bytes = spans[i].count * dtype_size(to);
    std::vector<char> got(bytes), want(bytes);
    ok(cudaMemcpy(got.data(), spans[i].dst, bytes, cudaMemcpyDeviceToHost));
    convert(want.data(), to, inputs[i].data(), from, spans[i].count, scale);
    expect(std::memcmp(got.data(), want.data(), bytes) == 0,
           std::string(dtype_name(from)) + " -> " + dtype_name(to) + " x " + std::to_string(scale) +
               ", span " + std::to_string(i) + " of " + std::to_string(spans[i].count) +
               " elements");
  }
}

void every_float_pair_matches_the_host_bit_for_bit() {
  for (DType from : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (DType to : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
      for (double scale : {1.0, 0.375}) check_pair(from, to, scale);
}

void other_dtypes_copy() {
  const size_t n = 1000;
  std::vector<int64_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = int64_t(i) * 7919 - 3;
  Device a(n * 8), b(n * 8);
  ok(cudaMemcpy(a.p, host.data(), n * 8, cudaMemcpyHostToDevice));
  Span span{a.p, b.p, n};
  convert_spans(&span, 1, DType::kInt64, DType::kInt64, 1.0, nullptr);
  std::vector<int64_t> got(n);
  ok(cudaMemcpy(got.data(), b.p, n * 8, cudaMemcpyDeviceToHost));
  expect(got == host, "int64 copy");
}

}  // namespace
}  // namespace kolo::fusion::cuda

int main() {
  namespace kc = kolo::fusion::cuda;
  kc::every_float_pair_matches_the_host_bit_for_bit();
  kc::other_dtypes_copy();
  return kolo::gpu_test::summary("kolo_gpu_tests");
}
