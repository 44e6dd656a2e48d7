// kolo_gpu_trainer_tests: the CUDA trainer backend against the CPU backend on the same inputs.
// Every kernel in float32, float16 and bfloat16 on ragged shapes (the CPU backend run in the
// same dtype is the reference), then BERT-tiny (masked LM and classification heads, dropout
// on, padding in the batch): the forward loss and every gradient tensor against the CPU
// backend's fp32 model, within the CPU mixed-precision tests' tolerances (tests/trainer/
// kernels_mixed_test.cc: 1e-2 of each tensor's scale for fp16, 6e-2 for bf16; 1e-4 for fp32).
// A plain program (the device image has no test framework), run by scripts/gpu_check.sh; it
// prints "kolo_gpu_trainer_tests: N checks, M failed" and exits 1 on failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "tests/gpu/tally.h"
#include "trainer/kernels/backend.h"
#include "trainer/kernels/cuda/cuda_backend.h"
#include "trainer/model/bert.h"

namespace kolo::trainer {
namespace {

using gpu_test::expect;

// Largest |a - b| over the largest |b|: the error relative to the tensor's scale.
double scaled_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  return scale == 0 ? err : err / scale;
}

double tolerance(DType dt) {
  return dt == DType::kFloat32 ? 1e-4 : dt == DType::kFloat16 ? 1e-2 : 6e-2;
}

// A buffer of one backend holding n values in dt.
struct Buf {
  Backend* be;
  DType dt;
  size_t n;
  void* p;
  Buf(Backend& b, DType d, const std::vector<float>& values)
      : be(&b), dt(d), n(values.size()), p(b.alloc(std::max<size_t>(1, n) * dtype_size(d))) {
    std::vector<char> host(n * dtype_size(dt));
    convert(host.data(), dt, values.data(), DType::kFloat32, n);
    be->copy_from_host(p, host.data(), host.size());
  }
  Buf(Backend& b, DType d, size_t count) : Buf(b, d, std::vector<float>(count, 0.0f)) {}
  ~Buf() { be->free(p); }
  Buf(const Buf&) = delete;
  std::vector<float> read() const {
    std::vector<char> host(n * dtype_size(dt));
    be->copy_to_host(host.data(), p, host.size());
    std::vector<float> out(n);
    convert(out.data(), DType::kFloat32, host.data(), dt, n);
    return out;
  }
};

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Runs `op` on both backends in dt; it returns its outputs read back, compared tensor by tensor.
using Op = std::function<std::vector<std::vector<float>>(Backend&, DType)>;
void compare(const std::string& name, const Op& op) {
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    try {
      const auto want = op(cpu_backend(), dt);
      const auto got = op(cuda_backend(), dt);
      for (size_t i = 0; i < want.size(); ++i) {
        const double err = scaled_error(got[i], want[i]);
        char line[256];
        std::snprintf(line, sizeof line, "%s %s output %zu: scaled error %.3g (tolerance %.3g)",
                      name.c_str(), dtype_name(dt), i, err, tolerance(dt));
        expect(err <= tolerance(dt), line);
      }
    } catch (const std::exception& e) {
      expect(false, name + " " + dtype_name(dt) + ": " + e.what());
    }
  }
}

void kernel_tests() {
  compare("linear", [](Backend& be, DType dt) {
    const int T = 37, K = 72, N = 40;
    Buf x(be, dt, random_values(T * K, 1)), w(be, dt, random_values(N * K, 2, 0.2f));
    Buf b(be, dt, random_values(N, 3)), y(be, dt, T * N);
    Buf dy(be, dt, random_values(T * N, 4)), dx(be, dt, T * K);
    Buf dw(be, dt, random_values(N * K, 5)), db(be, dt, random_values(N, 6));
    be.linear_forward(y.p, x.p, w.p, b.p, T, K, N, dt);
    be.linear_backward(dx.p, dw.p, db.p, dy.p, x.p, w.p, T, K, N, dt);
    return std::vector{y.read(), dx.read(), dw.read(), db.read()};
  });
  // C = 100: one element a step; 256: 16 bytes a step (fp32, fp16 and bf16).
  for (const int C : {100, 256}) {
    compare("layernorm C=" + std::to_string(C), [C](Backend& be, DType dt) {
      const int T = 70;
      Buf x(be, dt, random_values(T * C, 7, 3.0f)), g(be, dt, random_values(C, 8));
      Buf bt(be, dt, random_values(C, 9)), out(be, dt, T * C),
          dout(be, dt, random_values(T * C, 10));
      Buf mean(be, DType::kFloat32, T), rstd(be, DType::kFloat32, T), dx(be, dt, T * C);
      Buf dg(be, dt, random_values(C, 11)), db(be, dt, random_values(C, 12));
      be.layernorm_forward(out.p, static_cast<float*>(mean.p), static_cast<float*>(rstd.p), x.p,
                           g.p, bt.p, T, C, 1e-12f, dt);
      be.layernorm_backward(dx.p, dg.p, db.p, dout.p, x.p, static_cast<float*>(mean.p),
                            static_cast<float*>(rstd.p), g.p, T, C, dt);
      return std::vector{out.read(), mean.read(), rstd.read(), dx.read(), dg.read(), db.read()};
    });
  }
  compare("elementwise", [](Backend& be, DType dt) {
    const size_t n = 100003;
    Buf x(be, dt, random_values(n, 13, 2.0f)), d(be, dt, random_values(n, 14));
    std::vector<std::vector<float>> out;
    for (int k = 0; k < 9; ++k) {
      Buf o(be, dt, n);
      switch (k) {
        case 0: be.gelu_forward(o.p, x.p, n, dt); break;
        case 1: be.gelu_backward(o.p, d.p, x.p, n, dt); break;
        case 2: be.relu_forward(o.p, x.p, n, dt); break;
        case 3: be.relu_backward(o.p, d.p, x.p, n, dt); break;
        case 4: be.tanh_forward(o.p, x.p, n, dt); break;
        case 5: be.tanh_backward(o.p, d.p, x.p, n, dt); break;
        case 6: be.add(o.p, x.p, d.p, n, dt); break;
        case 7: be.dropout_forward(o.p, x.p, n, 0.3f, 42, 12345, dt); break;
        default: be.dropout_backward(o.p, d.p, n, 0.3f, 42, 12345, dt); break;
      }
      out.push_back(o.read());
    }
    return out;
  });
  // S = 19: the softmax reads one score a step; 20: four (16 bytes).
  for (const int S : {19, 20}) {
    compare("attention S=" + std::to_string(S), [S](Backend& be, DType dt) {
      const int B = 3, C = 48, NH = 4;
      std::vector<int32_t> mask(B * S, 1);
      for (int j = 13; j < S; ++j) mask[S + j] = 0;  // trailing padding in sequence 1
      mask[2 * S + 3] = 0;                           // a padded key inside sequence 2
      Buf qkv(be, dt, random_values(size_t(B) * S * 3 * C, 15)), out(be, dt, size_t(B) * S * C);
      Buf probs(be, dt, size_t(B) * NH * S * S), dout(be, dt, random_values(size_t(B) * S * C, 16));
      Buf dqkv(be, dt, size_t(B) * S * 3 * C);
      be.attention_forward(out.p, probs.p, qkv.p, mask.data(), B, S, C, NH, 0.1f, 7, 99, dt);
      be.attention_backward(dqkv.p, dout.p, qkv.p, probs.p, mask.data(), B, S, C, NH, 0.1f, 7, 99,
                            dt);
      return std::vector{out.read(), probs.read(), dqkv.read()};
    });
  }
  compare("cross_entropy", [](Backend& be, DType dt) {
    const int N = 9, V = 1001;
    std::vector<int32_t> targets = {5, -100, 1000, 0, 17, -100, 333, 999, 2};
    Buf logits(be, dt, random_values(size_t(N) * V, 17, 3.0f)), losses(be, DType::kFloat32, N);
    Buf dlogits(be, dt, size_t(N) * V);
    std::vector<int32_t> argmax(N), from_loss(N);
    const float loss = be.cross_entropy_forward(static_cast<float*>(losses.p), from_loss.data(),
                                                logits.p, targets.data(), N, V, -100, dt);
    be.cross_entropy_backward(dlogits.p, logits.p, targets.data(), N, V, -100, 0.5f, dt);
    be.argmax_rows(argmax.data(), logits.p, N, V, dt);
    return std::vector{std::vector<float>{loss}, losses.read(), dlogits.read(),
                       std::vector<float>(argmax.begin(), argmax.end()),
                       std::vector<float>(from_loss.begin(), from_loss.end())};
  });
  compare("embedding", [](Backend& be, DType dt) {
    // 80 tokens of each type: the type rows take the GPU's path for rows of many tokens.
    const int B = 4, S = 40, C = 40, V = 50;
    std::vector<int32_t> ids(B * S), types(B * S);
    for (int t = 0; t < B * S; ++t) {
      ids[t] = (t * 7) % 13;  // repeated ids
      types[t] = t % 2;
    }
    Buf word(be, dt, random_values(V * C, 18)), pos(be, dt, random_values(S * C, 19));
    Buf type(be, dt, random_values(2 * C, 20)), out(be, dt, size_t(B) * S * C);
    Buf dout(be, dt, random_values(size_t(B) * S * C, 21));
    Buf dword(be, dt, V * C), dpos(be, dt, S * C), dtype(be, dt, 2 * C);
    be.embed_forward(out.p, ids.data(), types.data(), word.p, pos.p, type.p, B, S, C, dt);
    be.embed_backward(dword.p, dpos.p, dtype.p, dout.p, ids.data(), types.data(), B, S, C, dt);
    return std::vector{out.read(), dword.read(), dpos.read(), dtype.read()};
  });
  compare("sum_squares", [](Backend& be, DType dt) {
    Buf x(be, dt, random_values(300001, 22));
    bool nonfinite = false;
    const double s = be.sum_squares(x.p, x.n, dt, &nonfinite);
    Buf y(be, dt, std::vector<float>{1.0f, INFINITY, 2.0f});
    bool bad = false;
    be.sum_squares(y.p, y.n, dt, &bad);
    return std::vector<std::vector<float>>{{float(s), float(nonfinite), float(bad)}};
  });
  // The optimizers' update kernels (a device model's step): three AdamW steps and three SGD
  // steps with Nesterov momentum on fp32 master weights from gradients in dt, with a multiplier
  // and a clipping factor; the weights and states read back.
  compare("optimizer updates", [](Backend& be, DType dt) {
    const size_t n = 200003;
    Buf g(be, dt, random_values(n, 23, 300.0f));
    Buf p(be, DType::kFloat32, random_values(n, 24)), m(be, DType::kFloat32, n);
    Buf v(be, DType::kFloat32, n), q(be, DType::kFloat32, random_values(n, 25));
    Buf buf(be, DType::kFloat32, n);
    AdamWScalars a;
    a.shrink = 1.0f - 1e-3f * 0.01f;
    SgdScalars s{1e-2f, 0.01f, 0.9f, true};
    for (int t = 1; t <= 3; ++t) {
      a.step_size = 1e-3f / (1.0f - std::pow(0.9f, float(t)));
      a.bc2_sqrt = std::sqrt(1.0f - std::pow(0.999f, float(t)));
      be.adamw_update(static_cast<float*>(p.p), static_cast<float*>(m.p), static_cast<float*>(v.p),
                      g.p, dt, n, 1.0f / 256, 0.5f, a);
      be.sgd_update(static_cast<float*>(q.p), static_cast<float*>(buf.p), g.p, dt, n, 1.0f / 256,
                    0.5f, s);
    }
    return std::vector{p.read(), m.read(), v.read(), q.read(), buf.read()};
  });
}

// ||a - b|| / ||b||, the whole-model tests' measure (tests/trainer/python/compare.py, which
// checks the CPU model in each dtype against PyTorch's fp32 model).
double norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += double(x) * x;
  return std::sqrt(sum);
}
// ||a - b|| over `scale` (by default ||b||).
double norm_error(const std::vector<float>& a, const std::vector<float>& b, double scale = -1) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(diff) / std::max(scale < 0 ? norm(b) : scale, 1e-30);
}

// compare.py's tolerances for a whole model's gradients: fp32 1e-4, fp16 1e-2, bf16 0.15
// (the reasons are given there).
double model_tolerance(DType dt) {
  return dt == DType::kFloat32 ? 1e-4 : dt == DType::kFloat16 ? 1e-2 : 1.5e-1;
}

// BERT-tiny with both heads on a padded batch: the CUDA model in dt against the CPU model in
// fp32, from the same seed (the same initial weights) and dropout seed, measured as
// compare.py measures the CPU model against PyTorch.
void bert_tests() {
  BertConfig c = bert_preset("tiny");
  c.hidden_dropout = c.attention_dropout = 0.1f;
  c.num_labels = 3;
  TokenBatch b;
  b.batch = 4;
  b.seq = 32;
  for (int s = 0; s < b.batch; ++s) {
    for (int t = 0; t < b.seq; ++t) {
      const bool real = t < b.seq - 5 * s;
      b.input_ids.push_back(real ? (t == 0 ? 101 : (37 * t + 1000 * s + 11) % c.vocab_size) : 0);
      b.token_type_ids.push_back(real && t >= 10 ? 1 : 0);
      b.attention_mask.push_back(real ? 1 : 0);
      b.mlm_labels.push_back(real && t % 5 == 2 ? (13 * t + 7 * s) % c.vocab_size : kIgnoreIndex);
    }
    b.labels.push_back(s % 3);
  }
  std::vector<std::string> names;
  auto run = [&](Backend& be, DType dt, std::vector<std::vector<float>>* grads) {
    Bert m(be, c, dt, b.batch, b.seq, /*seed=*/11);
    m.set_dropout_seed(3);
    m.zero_grad();
    const float loss = m.forward(b);
    // fp16 runs with a loss scale, as training does and as the CPU model's fp16 check against
    // PyTorch does (tests/trainer/tools/model_dump.cc: 1024): unscaled, the attention's score
    // gradients fall among fp16's subnormals.
    const float scale = dt == DType::kFloat16 ? 1024.0f : 1.0f;
    m.backward(scale);
    std::vector<char> host(m.buffer_bytes());
    be.copy_to_host(host.data(), m.grads(), host.size());
    for (const ParamInfo& p : m.layout().params()) {
      std::vector<float> g(p.numel);
      convert(g.data(), DType::kFloat32, host.data() + p.offset * dtype_size(dt), dt, p.numel);
      for (float& x : g) x /= scale;
      grads->push_back(std::move(g));
      if (names.size() < grads->size()) names.push_back(p.name);
    }
    return loss;
  };
  std::vector<std::vector<float>> want;
  const float want_loss = run(cpu_backend(), DType::kFloat32, &want);
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    try {
      std::vector<std::vector<float>> got;
      const float loss = run(cuda_backend(), dt, &got);
      const double tol = model_tolerance(dt);
      char line[320];
      std::snprintf(line, sizeof line, "bert-tiny %s loss %.6f vs cpu fp32 %.6f", dtype_name(dt),
                    loss, want_loss);
      expect(std::abs(loss - want_loss) <= tolerance(dt) * std::abs(want_loss), line);
      double worst = 0, worst_max = 0;
      std::string worst_name;
      for (size_t i = 0; i < want.size(); ++i) {
        double err = norm_error(got[i], want[i]);
        const std::string& name = names[i];
        const size_t key = name.rfind(".key.bias");
        if (key != std::string::npos && key + 9 == name.size()) {
          // Zero in exact arithmetic (the softmax ignores the constant q.b_k each query row
          // gets), so both sides hold rounding noise: measured against the query bias's
          // gradient of the same layer, as compare.py does.
          const std::string query = name.substr(0, key) + ".query.bias";
          for (size_t j = 0; j < names.size(); ++j) {
            if (names[j] == query) err = norm_error(got[i], want[i], norm(want[j]));
          }
        }
        if (err > worst) worst = err, worst_name = name;
        worst_max =
            std::max(worst_max, key == std::string::npos ? scaled_error(got[i], want[i]) : 0.0);
        std::snprintf(line, sizeof line,
                      "bert-tiny %s gradient %s: ||error|| / ||gradient|| %.3g (tolerance %.3g; "
                      "largest element's error %.3g of the largest element)",
                      dtype_name(dt), name.c_str(), err, tol, scaled_error(got[i], want[i]));
        expect(err <= tol, line);
      }
      std::printf(
          "bert-tiny %s: loss %.6f (cpu fp32 %.6f), worst gradient %s at %.3g of its norm "
          "(tolerance %.3g); worst element error %.3g of a tensor's largest\n",
          dtype_name(dt), loss, want_loss, worst_name.c_str(), worst, tol, worst_max);
    } catch (const std::exception& e) {
      expect(false, std::string("bert-tiny ") + dtype_name(dt) + ": " + e.what());
    }
  }
}

}  // namespace
}  // namespace kolo::trainer

int main() {
  try {
    kolo::trainer::cuda_backend();
  } catch (const std::exception& e) {
    std::printf("kolo_gpu_trainer_tests: no CUDA device: %s\n", e.what());
    return 1;
  }
  kolo::trainer::kernel_tests();
  kolo::trainer::bert_tests();
  return kolo::gpu_test::summary("kolo_gpu_trainer_tests");
}
