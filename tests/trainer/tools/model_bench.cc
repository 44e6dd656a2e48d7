// Times BERT fwd+bwd (MLM head on ~15% masked rows, dropout off) for comparison with
//   /usr/bin/python3 tests/trainer/python/kolo_torch.py --bench --preset mini
// Usage: OPENBLAS_NUM_THREADS=1 kolo_model_bench [preset=mini] [batch=32] [seq=128] [steps=5]
//        [dtype=float32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "trainer/model/bert.h"

int main(int argc, char** argv) {
  using namespace kolo::trainer;
  std::string preset = argc > 1 ? argv[1] : "mini";
  int batch = argc > 2 ? std::stoi(argv[2]) : 32;
  int seq = argc > 3 ? std::stoi(argv[3]) : 128;
  int steps = argc > 4 ? std::stoi(argv[4]) : 5;
  kolo::DType dt = kolo::parse_dtype(argc > 5 ? argv[5] : "float32", "dtype argument");
  BertConfig c = bert_preset(preset);
  c.hidden_dropout = c.attention_dropout = 0.0f;
  Bert model(cpu_backend(), c, dt, batch, seq, 1);
  TokenBatch b;
  b.batch = batch;
  b.seq = seq;
  InitRng rng(3, "bench");
  for (int i = 0; i < batch * seq; ++i) {
    int id = static_cast<int>(rng.uniform() * c.vocab_size);
    b.input_ids.push_back(id);
    b.token_type_ids.push_back(0);
    b.attention_mask.push_back(1);
    b.mlm_labels.push_back(rng.uniform() < 0.15f ? id : kIgnoreIndex);
  }
  std::vector<double> times;
  for (int s = 0; s < steps + 2; ++s) {  // two warm-up steps
    auto t0 = std::chrono::steady_clock::now();
    model.zero_grad();
    model.forward(b);
    model.backward(1.0f);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> timed(times.begin() + 2, times.end());
  std::sort(timed.begin(), timed.end());
  double median = timed[timed.size() / 2];
  std::printf(
      "kolo bert-%s %s batch %d seq %d: median %.1f ms/step, %.0f tokens/s (best %.0f); "
      "%zu params, %.1f MiB activations\n",
      preset.c_str(), kolo::dtype_name(dt), batch, seq, median * 1e3, batch * seq / median,
      batch * seq / timed.front(), model.num_params(), model.activation_bytes() / 1048576.0);
  return 0;
}
