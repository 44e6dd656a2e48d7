// trainer_throughput: tokens/s of BERT forward + backward (MLM head on the masked rows) with
// kolo's CPU kernels, next to the same model in PyTorch timed in the same run (a child
// /usr/bin/python3 running tests/trainer/python/kolo_torch.py --bench).
//   build/benchmarks/trainer_throughput [--preset mini] [--batch 32] [--seq 128] [--threads 1]
//                                       [--checkpoint-intervals 0 1]
// With several checkpoint intervals (0: off, k: keep every k-th layer's input and recompute),
// each row also gives the activation arena and the step time against interval 0. Every row
// gives the GEMMs' GFLOP/s and their share of OpenBLAS's sgemm rate at --threads, measured in
// the same run (1024^3; at 1 thread and at every core, the best of 5, printed first: the
// practical peak). A kolo row's share is of the best of one sgemm product run after each of
// its timed steps, so that both see the machine at the same moment.
// --train adds the optimizer step (TrainStep: AdamW, loss scaling in fp16, clipping) to every
// timed step. --device cuda (builds with CUDA) runs the model on GPU 0 instead, without the
// PyTorch run, and holds the GEMMs to the backend's own rate on an 8192^3 product in each
// dtype, measured in the same run (the practical tensor-core peak).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <cblas.h>
#include <CLI/CLI.hpp>

#include "benchmarks/cli_checks.h"
#include "comm/base/cli_parse.h"
#include "comm/base/error.h"
#include "comm/base/text.h"
#include "trainer/config/train_config.h"
#include "trainer/data/rng.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/gemm.h"
#include "trainer/model/bert.h"
#include "trainer/train/train_step.h"
#ifdef KOLO_BENCH_TRAINER_CUDA
#include "trainer/kernels/cuda/cuda_backend.h"
#endif

namespace kt = kolo::trainer;

namespace {

struct Options {
  std::string preset = "mini";
  int batch = 32, seq = 128, steps = 5, warmup = 2, threads = 1;
  float dropout = 0.0f;
  std::vector<std::string> dtypes = {"float32", "float16", "bfloat16"};
  std::vector<int> intervals = {0};
  std::string python = "/usr/bin/python3";
  bool python_given = false;  // --python on the command line: its run failing is an error
  std::string torch_script = KOLO_SOURCE_DIR "/tests/trainer/python/kolo_torch.py";
  bool torch = true;
  bool train = false;          // the optimizer step too
  std::string device = "cpu";  // or cuda
};

kt::Backend& backend_for(const Options& o) {
  if (o.device == "cpu") return kt::cpu_backend();
#ifdef KOLO_BENCH_TRAINER_CUDA
  return kt::cuda_backend_for(0);
#else
  KOLO_THROW(kolo::ErrorCode::kInvalidArgument,
             "--device cuda: this build of kolo has no CUDA backend (KOLO_WITH_CUDA)");
#endif
}

// The optimizer step --train adds: AdamW with weight decay, clipping at 1, dynamic loss
// scaling for fp16, as examples/configs' BERT runs.
kt::TrainConfig train_config(const Options& o, kolo::DType dtype) {
  nlohmann::json json = {
      {"train_batch_size", o.batch},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-4}, {"weight_decay", 0.01}}}}},
      {"gradient_clipping", 1.0}};
  if (dtype == kolo::DType::kFloat16) json["fp16"] = {{"enabled", true}};
  if (dtype == kolo::DType::kBFloat16) json["bf16"] = {{"enabled", true}};
  return kt::parse_train_config(json, 1, false);
}

// Random ids with 15% of the positions labelled for the MLM loss, as the torch side draws them.
kt::TokenBatch random_batch(const kt::BertConfig& config, int batch, int seq) {
  kt::Rng rng(12345);
  kt::TokenBatch b;
  b.batch = batch;
  b.seq = seq;
  const size_t n = static_cast<size_t>(batch) * static_cast<size_t>(seq);
  b.input_ids.resize(n);
  b.token_type_ids.assign(n, 0);
  b.attention_mask.assign(n, 1);
  b.mlm_labels.assign(n, kt::kIgnoreIndex);
  for (size_t i = 0; i < n; ++i) {
    b.input_ids[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(config.vocab_size)));
    if (rng.uniform() < 0.15) b.mlm_labels[i] = b.input_ids[i];
  }
  return b;
}

// Floating-point operations of the GEMMs in one forward + backward (backward: twice the
// forward's), the matrix products only: per layer and token the query/key/value, output and
// two feed-forward projections (2 (4 H^2 + 2 H I)), per layer and sequence the attention
// scores and context (2 * 2 S^2 H), and the MLM head on the masked rows (2 (H^2 + H V)).
double gemm_flops(const kt::BertConfig& c, const kt::TokenBatch& b) {
  const double h = c.hidden, inter = c.intermediate, s = b.seq, tokens = double(b.batch) * s;
  double masked = 0;
  for (int32_t label : b.mlm_labels) masked += label != kt::kIgnoreIndex ? 1 : 0;
  const double per_layer = 2 * tokens * (4 * h * h + 2 * h * inter) + 4 * b.batch * s * s * h;
  const double head = c.mlm_head ? 2 * masked * (h * h + h * c.vocab_size) : 0;
  return 3 * (c.layers * per_layer + head);
}

// OpenBLAS's own sgemm at `threads` of its threads on 1024^3 operands: `trials` timed products
// after one warm-up, the best GFLOP/s. Left at one thread after, as the kernels expect (they
// split GEMMs themselves).
class Sgemm {
 public:
  Sgemm() : a_(size_t{kN} * kN, 0.5f), b_(size_t{kN} * kN, 0.25f), c_(size_t{kN} * kN) {}
  double best(int threads, int trials) {
    openblas_set_num_threads(threads);
    double best = 0;
    for (int i = 0; i <= trials; ++i) {
      const auto start = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a_.data(), kN,
                  b_.data(), kN, 0.0f, c_.data(), kN);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      if (i > 0) best = std::max(best, 2.0 * kN * kN * kN / took.count() / 1e9);
    }
    openblas_set_num_threads(1);
    return best;
  }

 private:
  static constexpr int kN = 1024;
  std::vector<float> a_, b_, c_;
};

double sgemm_gflops(int threads) {
  return Sgemm().best(threads, 5);
}

struct Timing {
  double seconds = 0;      // median of one zero_grad + forward + backward
  size_t arena_bytes = 0;  // the activation arena those steps used
  // CPU: the best sgemm rate (GFLOP/s at --threads) of the trials run between those steps.
  // This VM's speed drifts by up to 1.5x from minute to minute (sgemm 88-152 GFLOP/s at one
  // thread in consecutive runs), so a peak measured only before the rows could even come out
  // below them; trials between the steps see the same machine the steps do.
  double sgemm = 0;
  // CPU at one thread: one step's products replayed alone through the same sgemm (best of 3
  // replays), and the floating-point operations they did. 0 when not measured.
  double gemm_seconds = 0, gemm_flop = 0;
};

// Runs `calls` (one step's products, in order) on scratch operands of their shapes: the time
// the step would take if everything but its GEMMs took none. The best of `trials` replays.
double replay_gemms(const std::vector<kt::cpu::GemmCall>& calls, int trials) {
  size_t a = 1, b = 1, c = 1;
  for (const auto& g : calls) {
    a = std::max(a, size_t(g.trans_a ? g.K : g.M) * size_t(g.lda));
    b = std::max(b, size_t(g.trans_b ? g.N : g.K) * size_t(g.ldb));
    c = std::max(c, size_t(g.M) * size_t(g.ldc));
  }
  std::vector<float> A(a, 0.01f), B(b, 0.01f), C(c, 0.0f);
  double best = 0;
  for (int t = 0; t < trials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& g : calls)
      kt::cpu::sgemm(g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, A.data(), g.lda, B.data(), g.ldb,
                     g.accumulate ? 1.0f : 0.0f, C.data(), g.ldc);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = t == 0 ? took.count() : std::min(best, took.count());
  }
  return best;
}

Timing time_kolo(const Options& o, kolo::DType dtype, int interval) {
  kt::BertConfig config = kt::bert_preset(o.preset);
  config.hidden_dropout = config.attention_dropout = o.dropout;
  kt::Backend& backend = backend_for(o);
  kt::Bert model(backend, config, dtype, o.batch, o.seq, 1);
  model.set_checkpoint_interval(interval);
  std::unique_ptr<kt::TrainStep> step;
  if (o.train)
    step = std::make_unique<kt::TrainStep>(model, train_config(o, dtype), o.warmup + o.steps);
  const kt::TokenBatch batch = random_batch(config, o.batch, o.seq);
  std::vector<double> times;
  std::unique_ptr<Sgemm> sgemm;
  if (o.device == "cpu") sgemm = std::make_unique<Sgemm>();
  double sgemm_best = 0;
  char done[4];
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!step) model.zero_grad();  // TrainStep zeroes them itself
    model.set_dropout_seed(static_cast<uint64_t>(i));
    model.forward(batch);
    model.backward(step ? step->loss_scale() : 1.0f);
    if (step) step->finish();
    backend.copy_to_host(done, model.params(), sizeof done);  // a device's queue drained
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (i >= o.warmup) times.push_back(took.count());
    if (i >= o.warmup && sgemm) sgemm_best = std::max(sgemm_best, sgemm->best(o.threads, 1));
  }
  std::sort(times.begin(), times.end());
  Timing timing{times[times.size() / 2], model.activation_bytes(), sgemm_best};
  // One more step with its products recorded, then replayed alone. Only at one thread: with
  // more, attention's per-head products run side by side in the step but one after another in
  // the replay, so the replay would be no ceiling.
  if (o.device == "cpu" && o.threads == 1 && !step) {
    std::vector<kt::cpu::GemmCall> calls;
    kt::cpu::record_gemms(&calls);
    model.zero_grad();
    model.forward(batch);
    model.backward(1.0f);
    kt::cpu::record_gemms(nullptr);
    timing.gemm_seconds = replay_gemms(calls, 3);
    for (const auto& g : calls) timing.gemm_flop += 2.0 * g.M * g.N * g.K;
  }
  return timing;
}

// The backend's own GEMM rate in `dtype` (TFLOP/s): y = x . w^T with 8192^3, the best of 5
// after a warm-up; the practical peak the device rows are held to.
double device_gemm_tflops(kt::Backend& backend, kolo::DType dtype) {
  constexpr int n = 8192;
  const size_t bytes = size_t{n} * n * kolo::dtype_size(dtype);
  void* x = backend.alloc(bytes);
  void* w = backend.alloc(bytes);
  void* y = backend.alloc(bytes);
  char done[4];
  double best = 0;
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    backend.linear_forward(y, x, w, nullptr, n, n, n, dtype);
    backend.copy_to_host(done, y, sizeof done);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (i > 0) best = std::max(best, 2.0 * n * n * n / took.count() / 1e12);
  }
  backend.free(x);
  backend.free(w);
  backend.free(y);
  return best;
}

// tokens/s that the PyTorch run printed ("... <N> tokens/s ..."), or 0 when it failed (or
// exited with a failure status).
double run_torch(const Options& o) {
  // torch.set_num_threads does not reach the OpenBLAS that torch's GEMMs call here: the
  // child's BLAS threads are set through the environment, as kolo's are.
  const std::string threads = std::to_string(o.threads);
  const std::string command =
      "OPENBLAS_NUM_THREADS=" + threads + " OMP_NUM_THREADS=" + threads + " " +
      kolo::shell_quote(o.python) + " " + kolo::shell_quote(o.torch_script) + " --bench --preset " +
      kolo::shell_quote(o.preset) + " --batch " + std::to_string(o.batch) + " --seq " +
      std::to_string(o.seq) + " --steps " + std::to_string(o.steps) + " --threads " + threads +
      " --dropout " + std::to_string(o.dropout) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return 0;
  double rate = 0;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    std::printf("#   %s", line);
    const std::string text(line);
    const size_t at = text.find(" tokens/s");
    if (at == std::string::npos) continue;
    const size_t begin = text.rfind(' ', at - 1);
    rate = std::atof(text.substr(begin + 1, at - begin - 1).c_str());
  }
  return pclose(pipe) == 0 ? rate : 0;
}

int run(const Options& o) {
  const bool device = o.device != "cpu";
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double tokens = static_cast<double>(o.batch) * o.seq;
  kt::BertConfig shape = kt::bert_preset(o.preset);
  const double flops = gemm_flops(shape, random_batch(shape, o.batch, o.seq));
  // The practical GEMM peak per storage dtype, in GFLOP/s.
  std::map<kolo::DType, double> peak;
  if (device) {
    kt::Backend& backend = backend_for(o);
    for (const std::string& name : o.dtypes) {
      const kolo::DType dtype = kolo::parse_dtype(name, "--dtypes");
      peak[dtype] = device_gemm_tflops(backend, dtype) * 1e3;
      std::printf("# %s GEMM 8192^3 (%s): %.1f TFLOP/s\n", backend.name(), kolo::dtype_name(dtype),
                  peak[dtype] / 1e3);
    }
  } else {
    kt::cpu_backend();  // it chooses OpenBLAS's kernels (kernels/cpu/gemm.h) before they are timed
    const double sgemm_one = sgemm_gflops(1), sgemm_all = sgemm_gflops(cores);
    const double sgemm_mine = o.threads == 1       ? sgemm_one
                              : o.threads == cores ? sgemm_all
                                                   : sgemm_gflops(o.threads);
    std::printf(
        "# OpenBLAS sgemm 1024^3 (%s kernels): %.1f GFLOP/s at 1 thread, %.1f at %d (all "
        "cores)%s\n",
        openblas_get_corename(), sgemm_one, sgemm_all, cores,
        o.threads == 1 || o.threads == cores
            ? ""
            : (", " + std::to_string(sgemm_mine) + " at --threads").c_str());
    for (const std::string& name : o.dtypes) peak[kolo::parse_dtype(name, "--dtypes")] = sgemm_mine;
    peak[kolo::DType::kFloat32] = sgemm_mine;  // the torch row
  }
  kt::set_num_threads(o.threads);
  std::printf("# GEMM work per step: %.2f GFLOP (forward + backward, matrix products only)\n",
              flops / 1e9);
  std::printf(
      "# BERT-%s forward+backward%s on %s, batch %d, seq %d, %d thread(s), dropout %g, median "
      "of %d steps after %d warm-up\n",
      o.preset.c_str(), o.train ? " + optimizer step" : "", o.device.c_str(), o.batch, o.seq,
      o.threads, o.dropout, o.steps, o.warmup);
  double torch_rate = 0;
  if (o.torch && !device) {
    std::printf("# PyTorch (%s %s):\n", o.python.c_str(), o.torch_script.c_str());
    torch_rate = run_torch(o);
    if (torch_rate == 0 && o.python_given)
      KOLO_THROW(kolo::ErrorCode::kInvalidArgument, "--python ", o.python,
                 ": the PyTorch run failed (its output is above; --no-torch skips it)");
    if (torch_rate == 0)
      std::printf("# PyTorch run failed (no tokens/s line or a failure status)\n");
  }
  // Each dtype's step times relative to its first --checkpoint-intervals value's.
  const std::string versus = "vs ckpt " + std::to_string(o.intervals.front());
  std::printf("%-8s %-9s %5s %12s %12s %14s %12s %10s %9s %7s\n", "impl", "dtype", "ckpt",
              "ms/step", "tokens/s", "vs torch fp32", "act_mib", versus.c_str(), "GFLOP/s",
              device ? "%peak" : "%sgemm");
  auto gflops = [&](double seconds) { return flops / seconds / 1e9; };
  if (torch_rate > 0) {
    const double seconds = tokens / torch_rate;
    std::printf("%-8s %-9s %5s %12.1f %12.0f %14.2f %12s %10s %9.1f %6.0f%%\n", "torch", "float32",
                "-", seconds * 1e3, torch_rate, 1.0, "-", "-", gflops(seconds),
                100 * gflops(seconds) / peak[kolo::DType::kFloat32]);
  }
  for (const std::string& name : o.dtypes) {
    const kolo::DType dtype = kolo::parse_dtype(name, "--dtypes");
    Timing first;
    for (size_t i = 0; i < o.intervals.size(); ++i) {
      const Timing t = time_kolo(o, dtype, o.intervals[i]);
      if (i == 0) first = t;
      const double rate = tokens / t.seconds;
      std::printf("%-8s %-9s %5d %12.1f %12.0f", "kolo", kolo::dtype_name(dtype), o.intervals[i],
                  t.seconds * 1e3, rate);
      if (torch_rate > 0)
        std::printf(" %14.2f", rate / torch_rate);
      else
        std::printf(" %14s", "-");
      const double reference = t.sgemm > 0 ? t.sgemm : peak[dtype];
      std::printf(" %12.1f %10.2f %9.1f %6.0f%%", static_cast<double>(t.arena_bytes) / (1 << 20),
                  t.seconds / first.seconds, gflops(t.seconds),
                  100 * gflops(t.seconds) / reference);
      if (t.sgemm > 0) std::printf("  (sgemm %.1f between its steps)", t.sgemm);
      std::printf("\n");
      if (t.gemm_seconds > 0)
        std::printf(
            "#   its %.2f GFLOP of products replayed alone: %.1f ms (%.0f%% of its step), %.1f "
            "GFLOP/s = %.0f%% of that sgemm: the most its %%sgemm could reach\n",
            t.gemm_flop / 1e9, t.gemm_seconds * 1e3, 100 * t.gemm_seconds / t.seconds,
            t.gemm_flop / t.gemm_seconds / 1e9,
            100 * t.gemm_flop / t.gemm_seconds / 1e9 / reference);
      std::fflush(stdout);
    }
  }
  return 0;
}

// Tokens per step above which --batch is refused: 256 times the default step's (32 x 128),
// far past what the activation arena of any preset fits in a host's memory.
constexpr int64_t kMaxTokens = int64_t{1} << 20;

// What is wrong with the flags before anything runs, naming the flag ("" when nothing is): the
// model would otherwise refuse them only after the GEMM peak is measured, in its own words.
std::string flag_error(const Options& o) {
  const kt::BertConfig shape = kt::bert_preset(o.preset);  // an unknown preset names the list
  if (o.seq > shape.max_position)
    return "--seq: '" + std::to_string(o.seq) + "' is not accepted; expected 1 to " +
           std::to_string(shape.max_position) + " (max_position of --preset " + o.preset + ")";
  if (int64_t{o.batch} * o.seq > kMaxTokens)
    return "--batch: '" + std::to_string(o.batch) + "' is not accepted; expected 1 to " +
           std::to_string(kMaxTokens / o.seq) + " (at most " + std::to_string(kMaxTokens) +
           " tokens per step at --seq " + std::to_string(o.seq) + ")";
  // A known dtype that is not a storage dtype would be refused only by the model.
  for (const std::string& name : o.dtypes)
    if (!kt::is_storage_dtype(kolo::parse_dtype(name, "--dtypes")))
      return "--dtypes: '" + name +
             "' is not a storage dtype (accepted: " + kt::kStorageDTypeNames + ")";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"BERT forward+backward tokens/s: kolo's kernels against PyTorch in the same run"};
  Options o;
  app.add_option("--preset", o.preset, "BERT preset: tiny mini small medium base large")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "sequences per step (at most 2^20 tokens per step)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--seq", o.seq, "tokens per sequence (up to the preset's max_position, 512)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed steps first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "kernel / torch threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--dropout", o.dropout, "hidden and attention dropout (the model's range)")
      ->check(kolo::bench::finite_range<float>(0.0, 0.999, true))
      ->capture_default_str();
  app.add_option("--dtypes", o.dtypes, "kolo storage dtypes to time")->capture_default_str();
  app.add_option("--checkpoint-intervals", o.intervals,
                 "activation checkpointing intervals to time (0: off; k: every k-th layer)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  auto* python = app.add_option("--python", o.python,
                                "interpreter with torch (given: its run failing is an error)")
                     ->capture_default_str();
  app.add_flag("!--no-torch", o.torch, "skip the PyTorch run");
  app.add_flag("--train", o.train, "time the optimizer step too (TrainStep: AdamW, clipping)");
  app.add_option("--device", o.device, "cpu, or cuda (GPU 0; builds with CUDA; no PyTorch run)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  KOLO_PARSE_FLAGS(app, argc, argv, "trainer_throughput");
  o.python_given = python->count() > 0;
  try {
    const std::string error = flag_error(o);
    if (!error.empty()) {
      std::fprintf(stderr, "trainer_throughput: %s\n", error.c_str());
      return 1;
    }
    return run(o);
  } catch (const std::exception& e) {  // kolo::Error, or what the model's sizes make of memory
    std::fflush(stdout);               // the rows so far first
    std::fprintf(stderr, "trainer_throughput: %s\n", e.what());
    return 1;
  }
}
