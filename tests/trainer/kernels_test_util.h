// Shared by the kernel tests: host tensors in any storage dtype, seeded random inputs, central
// finite differences over double-precision reference functions, and element-wise comparison
// with absolute + relative tolerance that names the first failing element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "comm/base/dtype.h"
#include "comm/base/error.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer::testing {

inline constexpr DType kStorageDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

inline float round_to(float v, DType dt) {
  switch (dt) {
    case DType::kFloat16: return half_to_float(float_to_half(v));
    case DType::kBFloat16: return bfloat16_to_float(float_to_bfloat16(v));
    default: return v;
  }
}

// A host buffer holding n elements of a storage dtype.
class Tensor {
 public:
  Tensor(DType dt, size_t n) : dt_(dt), n_(n), bytes_(n * dtype_size(dt) + 64, 0) {}
  Tensor(DType dt, const std::vector<float>& values) : Tensor(dt, values.size()) { set(values); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  size_t size() const { return n_; }
  DType dtype() const { return dt_; }
  void set(const std::vector<float>& values) {
    for (size_t i = 0; i < n_; ++i) set(i, values[i]);
  }
  void set(size_t i, float v) {
    convert(bytes_.data() + i * dtype_size(dt_), dt_, &v, DType::kFloat32, 1);
  }
  float get(size_t i) const {
    float v;
    convert(&v, DType::kFloat32, bytes_.data() + i * dtype_size(dt_), dt_, 1);
    return v;
  }
  std::vector<float> values() const {
    std::vector<float> out(n_);
    for (size_t i = 0; i < n_; ++i) out[i] = get(i);
    return out;
  }

 private:
  DType dt_;
  size_t n_;
  std::vector<uint8_t> bytes_;
};

// n values uniform in [lo, hi), rounded to dt so references see exactly the stored inputs.
inline std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f,
                                        DType dt = DType::kFloat32) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(dist(gen), dt);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Gradient of a scalar function by central differences: (f(x + h e_i) - f(x - h e_i)) / 2h.
inline std::vector<double> finite_difference(
    const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
    double h = 1e-5) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

// sum_i out_i * weight_i: turns a vector-valued function into the scalar loss whose gradient
// with respect to out is weight (the dout fed to the backward kernels).
inline double dot(const std::vector<double>& out, const std::vector<float>& weight) {
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += out[i] * weight[i];
  return s;
}

// |actual - expected| <= atol + rtol |expected| for every element.
template <typename A, typename E>
void expect_close(const std::vector<A>& actual, const std::vector<E>& expected, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const bool ok =
        std::abs(a - e) <= atol + rtol * std::abs(e) || (std::isnan(e) && std::isnan(a));
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e << " (atol "
                    << atol << ", rtol " << rtol << ")";
    }
  }
}

// Tolerance of a half-precision result compared with fp32: a few units of its last place.
inline double storage_rtol(DType dt) {
  switch (dt) {
    case DType::kFloat16: return 4e-3;
    case DType::kBFloat16: return 3e-2;
    default: return 1e-5;
  }
}

}  // namespace kolo::trainer::testing
