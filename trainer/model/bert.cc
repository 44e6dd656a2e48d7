// Bert: parameter layout (Hugging Face names, fused QKV adjacency), initialisation, the arena
// plan, and the embedding and encoder-layer passes. The heads are in bert_heads.cc.
#include "trainer/model/bert.h"

#include <algorithm>
#include <string>

#include "comm/base/error.h"
#include "trainer/model/bert_internal.h"

namespace kolo::trainer {

ParamLayout Bert::make_layout(const BertConfig& c) {
  c.validate();
  const int64_t C = c.hidden, I = c.intermediate;
  ParamLayout p;
  auto linear = [&p](const std::string& name, int64_t out, int64_t in) {
    p.add(name + ".weight", {out, in}, true);
    p.add(name + ".bias", {out}, false);
  };
  auto layer_norm = [&p, C](const std::string& name) {
    p.add(name + ".weight", {C}, false);
    p.add(name + ".bias", {C}, false);
  };
  p.add("bert.embeddings.word_embeddings.weight", {c.vocab_size, C}, true);
  p.add("bert.embeddings.position_embeddings.weight", {c.max_position, C}, true);
  p.add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab, C}, true);
  layer_norm("bert.embeddings.LayerNorm");
  for (int l = 0; l < c.layers; ++l) {
    std::string pre = "bert.encoder.layer." + std::to_string(l) + ".";
    // query | key | value weights, then their biases, packed: one [3C, C] matrix and one [3C]
    // vector for the fused QKV GEMM.
    p.add(pre + "attention.self.query.weight", {C, C}, true);
    p.add_packed(pre + "attention.self.key.weight", {C, C}, true);
    p.add_packed(pre + "attention.self.value.weight", {C, C}, true);
    p.add(pre + "attention.self.query.bias", {C}, false);
    p.add_packed(pre + "attention.self.key.bias", {C}, false);
    p.add_packed(pre + "attention.self.value.bias", {C}, false);
    linear(pre + "attention.output.dense", C, C);
    layer_norm(pre + "attention.output.LayerNorm");
    linear(pre + "intermediate.dense", I, C);
    linear(pre + "output.dense", C, I);
    layer_norm(pre + "output.LayerNorm");
  }
  if (c.num_labels > 0) {
    linear("bert.pooler.dense", C, C);
    linear("classifier", c.num_labels, C);
  }
  if (c.mlm_head) {
    linear("cls.predictions.transform.dense", C, C);
    layer_norm("cls.predictions.transform.LayerNorm");
    p.add("cls.predictions.bias", {c.vocab_size}, false);
  }
  return p;
}

Bert::Bert(Backend& backend, const BertConfig& config, DType dtype, int batch, int seq,
           uint64_t seed)
    : Model(backend, dtype, make_layout(config)), config_(config), acts_(new Acts()) {
  const ParamLayout& p = layout();
  auto off = [&p](const std::string& name) { return p.find(name).offset; };
  emb_word_ = off("bert.embeddings.word_embeddings.weight");
  emb_pos_ = off("bert.embeddings.position_embeddings.weight");
  emb_type_ = off("bert.embeddings.token_type_embeddings.weight");
  emb_ln_w_ = off("bert.embeddings.LayerNorm.weight");
  emb_ln_b_ = off("bert.embeddings.LayerNorm.bias");
  for (int l = 0; l < config_.layers; ++l) {
    std::string pre = "bert.encoder.layer." + std::to_string(l) + ".";
    lp_.push_back({off(pre + "attention.self.query.weight"), off(pre + "attention.self.query.bias"),
                   off(pre + "attention.output.dense.weight"),
                   off(pre + "attention.output.dense.bias"),
                   off(pre + "attention.output.LayerNorm.weight"),
                   off(pre + "attention.output.LayerNorm.bias"),
                   off(pre + "intermediate.dense.weight"), off(pre + "intermediate.dense.bias"),
                   off(pre + "output.dense.weight"), off(pre + "output.dense.bias"),
                   off(pre + "output.LayerNorm.weight"), off(pre + "output.LayerNorm.bias")});
  }
  if (config_.num_labels > 0) {
    pool_w_ = off("bert.pooler.dense.weight");
    pool_b_ = off("bert.pooler.dense.bias");
    cls_w_ = off("classifier.weight");
    cls_b_ = off("classifier.bias");
  }
  if (config_.mlm_head) {
    mlm_w_ = off("cls.predictions.transform.dense.weight");
    mlm_b_ = off("cls.predictions.transform.dense.bias");
    mlm_ln_w_ = off("cls.predictions.transform.LayerNorm.weight");
    mlm_ln_b_ = off("cls.predictions.transform.LayerNorm.bias");
    mlm_bias_ = off("cls.predictions.bias");
  }
  zero_row_ = this->backend().alloc(size_t(config_.hidden) * dtype_size(dtype));
  init_weights(seed);
  KOLO_CHECK_ARG(batch > 0 && seq > 0, "Bert: batch ", batch, " and seq ", seq,
                 " must be positive");
  int T = batch * seq;
  plan(batch, seq, config_.mlm_head ? std::max(1, T / 5) : 0);  // ~15% masked, with headroom
}

Bert::~Bert() {
  backend().free(zero_row_);
  delete acts_;
}

void Bert::init_weights(uint64_t seed) {
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  // Tensor by tensor, so the fp32 staging is one tensor, not the whole model (BERT-large on
  // 8 ranks of one host would otherwise stage 8 x 1.3 GB at once).
  std::vector<float> values;
  for (const ParamInfo& p : layout().params()) {
    values.assign(p.numel, 0.0f);
    if (ends_with(p.name, "LayerNorm.weight")) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else if (!ends_with(p.name, "bias")) {  // weights and embeddings
      InitRng rng(seed, p.name);
      for (float& v : values) v = config_.init_std * rng.normal();
    }
    write_floats(param(p.name), values.data(), p.numel);
  }
}

void Bert::check_batch(const TokenBatch& b) const {
  const size_t T = size_t(b.batch) * b.seq;
  KOLO_CHECK_ARG(b.batch > 0 && b.seq > 0 && b.seq <= config_.max_position, "TokenBatch: batch ",
                 b.batch, " must be positive and seq ", b.seq, " in [1, max_position ",
                 config_.max_position, "]");
  auto check_ints = [T](const std::vector<int32_t>& v, const char* field, size_t n, int32_t hi,
                        bool optional, bool ignore_ok) {
    if (optional && v.empty()) return;
    KOLO_CHECK_ARG(v.size() == n, "TokenBatch: ", field, " has ", v.size(), " entries, expected ",
                   n, (n == T ? " (batch * seq)" : " (batch)"));
    for (int32_t x : v)
      KOLO_CHECK_ARG((x >= 0 && x < hi) || (ignore_ok && x == kIgnoreIndex), "TokenBatch: ", field,
                     " value ", x, " outside [0, ", hi, ")",
                     (ignore_ok ? " and not kIgnoreIndex (-100)" : ""));
  };
  check_ints(b.input_ids, "input_ids", T, config_.vocab_size, false, false);
  check_ints(b.token_type_ids, "token_type_ids", T, config_.type_vocab, true, false);
  check_ints(b.attention_mask, "attention_mask", T, 2, true, false);
  // A sequence without real tokens would softmax over keys that are all -inf.
  for (int s = 0; s < b.batch && !b.attention_mask.empty(); ++s) {
    auto first = b.attention_mask.begin() + size_t(s) * b.seq;
    KOLO_CHECK_ARG(std::find(first, first + b.seq, 1) != first + b.seq, "TokenBatch: sequence ", s,
                   " has attention_mask 0 everywhere (needs at least one real token)");
  }
  // Labels for a head the model does not have are ignored, not checked.
  if (config_.mlm_head) check_ints(b.mlm_labels, "mlm_labels", T, config_.vocab_size, true, true);
  if (config_.num_labels > 0)
    check_ints(b.labels, "labels", size_t(b.batch), config_.num_labels, true, true);
}

void Bert::plan(int B, int S, int M) {
  // Round the masked-row capacity up so that varying mask counts rarely regrow the arena.
  int T = B * S, Mcap = std::min(T, (M + 127) / 128 * 128);
  ArenaCarver measure(nullptr);
  carve(measure, B, S, Mcap);
  ArenaCarver real(ensure_arena(measure.used()));
  carve(real, B, S, Mcap);
}

void Bert::carve(ArenaCarver& c, int B, int S, int M) {
  const size_t T = size_t(B) * S, C = config_.hidden, I = config_.intermediate,
               V = config_.vocab_size, NL = config_.num_labels, es = dtype_size(dtype());
  const size_t probs = size_t(B) * config_.heads * S * S;
  Acts& a = *acts_;
  a.emb = c.take(T * C * es);
  a.emb_ln = c.take(T * C * es);
  a.h0 = c.take(T * C * es);
  a.emb_mean = c.take<float>(T * 4);
  a.emb_rstd = c.take<float>(T * 4);
  const int L = config_.layers;
  a.layers.resize(interval_ > 0 ? std::min(interval_, L) : L);
  a.segment_inputs.resize(interval_ > 0 ? (L + interval_ - 1) / interval_ - 1 : 0);
  for (void*& x : a.segment_inputs) x = c.take(T * C * es);
  for (LayerActs& l : a.layers) {
    l.qkv = c.take(T * 3 * C * es);
    l.att = c.take(T * C * es);
    l.probs = c.take(probs * es);
    l.r1 = c.take(T * C * es);
    l.a = c.take(T * C * es);
    l.f1 = c.take(T * I * es);
    l.g = c.take(T * I * es);
    l.r2 = c.take(T * C * es);
    l.y = c.take(T * C * es);
    l.mean1 = c.take<float>(T * 4);
    l.rstd1 = c.take<float>(T * 4);
    l.mean2 = c.take<float>(T * 4);
    l.rstd2 = c.take<float>(T * 4);
  }
  for (void** s : {&a.gy, &a.bA, &a.bB, &a.bC}) *s = c.take(T * C * es);
  a.b4a = c.take(T * I * es);
  a.b4b = c.take(T * I * es);
  a.bqkv = c.take(T * 3 * C * es);
  if (config_.mlm_head) {
    for (void** s : {&a.m_h, &a.m_t, &a.m_u, &a.m_v, &a.m_d1, &a.m_d2}) *s = c.take(M * C * es);
    // Also the logits' gradient: mlm_backward() writes it over them.
    a.m_logits = c.take(M * V * es);
    for (float** s : {&a.m_mean, &a.m_rstd, &a.m_losses}) *s = c.take<float>(M * 4);
  }
  if (NL > 0) {
    for (void** s : {&a.c_h, &a.c_p, &a.c_pt, &a.c_pd, &a.c_d1, &a.c_d2}) *s = c.take(B * C * es);
    a.c_logits = c.take(B * NL * es);
    a.c_dlogits = c.take(B * NL * es);
    a.c_losses = c.take<float>(B * 4);
  }
}

float Bert::forward(const TokenBatch& batch) {
  check_batch(batch);
  B_ = batch.batch;
  S_ = batch.seq;
  ids_ = batch.input_ids;
  types_ = batch.token_type_ids;
  mask_ = batch.attention_mask;
  has_mlm_ = config_.mlm_head && !batch.mlm_labels.empty();
  has_cls_ = config_.num_labels > 0 && !batch.labels.empty();
  KOLO_CHECK_ARG(has_mlm_ || has_cls_, "TokenBatch has no labels for the heads of this model ",
                 "(mlm_head ", config_.mlm_head, ", num_labels ", config_.num_labels, ")");
  masked_rows_.clear();
  masked_labels_.clear();
  if (has_mlm_) {
    for (size_t t = 0; t < batch.mlm_labels.size(); ++t) {
      if (batch.mlm_labels[t] == kIgnoreIndex) continue;
      masked_rows_.push_back(static_cast<int32_t>(t));
      masked_labels_.push_back(batch.mlm_labels[t]);
    }
  }
  M_ = static_cast<int>(masked_rows_.size());
  cls_labels_ = batch.labels;
  cls_rows_.resize(B_);
  for (int b = 0; b < B_; ++b) cls_rows_[b] = b * S_;  // the [CLS] token of each sequence

  Acts& a = *acts_;
  a.ph = dropout_p(config_.hidden_dropout);
  a.pa = dropout_p(config_.attention_dropout);
  a.seed = dropout_seed();
  plan(B_, S_, M_);
  embed_forward();
  const void* x = a.x0;
  for (int l = 0; l < config_.layers; ++l) {
    LayerActs& acts = layer_acts(l);
    layer_forward(l, x, acts);
    x = acts.y;
    // Checkpointing: the next segment's input outlives the slots it was computed in.
    if (interval_ > 0 && (l + 1) % interval_ == 0 && l + 1 < config_.layers) {
      void* keep = const_cast<void*>(segment_input((l + 1) / interval_));
      backend().convert(keep, dtype(), x, dtype(), size_t(B_) * S_ * config_.hidden);
      x = keep;
    }
  }
  mlm_correct_ = 0;
  mlm_loss_ = (has_mlm_ && M_ > 0) ? mlm_forward() : 0.0f;
  masked_ = M_;
  cls_loss_ = has_cls_ ? cls_forward() : 0.0f;
  forwarded_ = true;
  return mlm_loss_ + cls_loss_;
}

void Bert::set_checkpoint_interval(int interval) {
  KOLO_CHECK_ARG(interval >= 0, "activation checkpointing interval ", interval,
                 " is out of range (>= 0; 0: off)");
  interval_ = std::min(interval, config_.layers);
  release_arena();  // the next forward sizes it for the new plan
  forwarded_ = false;
}

Bert::LayerActs& Bert::layer_acts(int l) {
  return acts_->layers[interval_ > 0 ? l % interval_ : l];
}

const void* Bert::segment_input(int j) const {
  return j == 0 ? acts_->x0 : acts_->segment_inputs[j - 1];
}

const void* Bert::encoder_output() {
  return layer_acts(config_.layers - 1).y;
}

void Bert::backward(float dloss) {
  KOLO_CHECK_ARG(forwarded_, "Bert::backward called before forward");
  Acts& a = *acts_;
  const size_t T = size_t(B_) * S_, C = config_.hidden;
  backend().zero(a.gy, T * C * dtype_size(dtype()));
  // Each head scatters its gradient into the rows it read (masked tokens, [CLS] tokens).
  // The MLM decoder is tied to the word embeddings: that gradient is final only after the
  // embeddings' own backward, so it is announced with them.
  if (has_mlm_ && M_ > 0) mlm_backward(dloss);
  if (has_mlm_) grads_ready("cls.predictions.");
  if (has_cls_) {
    cls_backward(dloss);
    grads_ready("classifier.");
    grads_ready("bert.pooler.");
  }
  const int L = config_.layers, k = interval_ > 0 ? interval_ : L;
  const int segments = (L + k - 1) / k;
  for (int j = segments - 1; j >= 0; --j) {
    const int first = j * k, end = std::min(L, first + k);
    // The last segment's activations are still in their slots; the others are recomputed
    // from the segment's input, with the forward's dropout masks.
    const void* x = segment_input(j);
    for (int l = first; l < end && j != segments - 1; ++l) {
      layer_forward(l, x, layer_acts(l));
      x = layer_acts(l).y;
    }
    for (int l = end - 1; l >= first; --l) {
      layer_backward(l, l > first ? layer_acts(l - 1).y : segment_input(j), layer_acts(l), a.gy);
      grads_ready(layer_prefix(l));
    }
  }
  embed_backward(a.gy);
  grads_ready("bert.embeddings.");
  forwarded_ = false;  // the MLM logits are gradients now
}

}  // namespace kolo::trainer
