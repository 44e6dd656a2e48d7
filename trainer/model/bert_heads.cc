// Bert's heads. Both read rows of the last hidden state through the embedding kernel used as
// a row gather (ids = row numbers, zero position/type tables) and scatter their input gradient
// back the same way, so the MLM head runs on the masked rows only.
//   MLM:            dense -> gelu -> LayerNorm -> decoder (word embeddings^T) + bias -> CE
//   classification: pooler dense -> tanh -> dropout -> classifier -> CE
#include "comm/base/error.h"
#include "trainer/metrics/classification.h"
#include "trainer/model/bert_internal.h"

namespace kolo::trainer {

float Bert::mlm_forward() {
  // The decoder is tied to the word embeddings.
  const ParamsInUse head = use_params("cls.predictions."), tied = use_params("bert.embeddings.");

  Backend& k = backend();
  Acts& a = *acts_;
  const DType dt = dtype();
  const int M = M_, C = config_.hidden, V = config_.vocab_size;
  auto W = [this](size_t off) { return at(params(), off); };
  k.embed_forward(a.m_h, masked_rows_.data(), nullptr, encoder_output(), zero_row_, zero_row_, M, 1,
                  C, dt);
  k.linear_forward(a.m_t, a.m_h, W(mlm_w_), W(mlm_b_), M, C, C, dt);
  k.gelu_forward(a.m_u, a.m_t, size_t(M) * C, dt);
  k.layernorm_forward(a.m_v, a.m_mean, a.m_rstd, a.m_u, W(mlm_ln_w_), W(mlm_ln_b_), M, C,
                      config_.layer_norm_eps, dt);
  k.linear_forward(a.m_logits, a.m_v, W(emb_word_), W(mlm_bias_), M, C, V, dt);  // tied decoder
  std::vector<int32_t> pred(M);
  float loss = k.cross_entropy_forward(a.m_losses, pred.data(), a.m_logits, masked_labels_.data(),
                                       M, V, kIgnoreIndex, dt);
  for (int i = 0; i < M; ++i) mlm_correct_ += pred[i] == masked_labels_[i];
  return loss;
}

void Bert::mlm_backward(float dloss) {
  // The decoder is tied to the word embeddings.
  const ParamsInUse head = use_params("cls.predictions."), tied = use_params("bert.embeddings.");

  Backend& k = backend();
  Acts& a = *acts_;
  const DType dt = dtype();
  const int M = M_, C = config_.hidden, V = config_.vocab_size;
  auto W = [this](size_t off) { return at(params(), off); };
  auto G = [this](size_t off) { return at(grads(), off); };
  // The logits' gradient goes over the logits, which nothing reads after this: one M x V
  // buffer instead of two (backward() then asks for a new forward).
  k.cross_entropy_backward(a.m_logits, a.m_logits, masked_labels_.data(), M, V, kIgnoreIndex, dloss,
                           dt);
  // The decoder's weight gradient accumulates into the word embeddings' gradient (tied).
  k.linear_backward(a.m_d1, G(emb_word_), G(mlm_bias_), a.m_logits, a.m_v, W(emb_word_), M, C, V,
                    dt);
  k.layernorm_backward(a.m_d2, G(mlm_ln_w_), G(mlm_ln_b_), a.m_d1, a.m_u, a.m_mean, a.m_rstd,
                       W(mlm_ln_w_), M, C, dt);
  k.gelu_backward(a.m_d1, a.m_d2, a.m_t, size_t(M) * C, dt);
  k.linear_backward(a.m_d2, G(mlm_w_), G(mlm_b_), a.m_d1, a.m_h, W(mlm_w_), M, C, C, dt);
  k.embed_backward(a.gy, nullptr, nullptr, a.m_d2, masked_rows_.data(), nullptr, M, 1, C, dt);
}

float Bert::cls_forward() {
  const ParamsInUse pooler = use_params("bert.pooler."), head = use_params("classifier.");

  Backend& k = backend();
  Acts& a = *acts_;
  const DType dt = dtype();
  const int B = B_, C = config_.hidden, NL = config_.num_labels;
  auto W = [this](size_t off) { return at(params(), off); };
  k.embed_forward(a.c_h, cls_rows_.data(), nullptr, encoder_output(), zero_row_, zero_row_, B, 1, C,
                  dt);
  k.linear_forward(a.c_p, a.c_h, W(pool_w_), W(pool_b_), B, C, C, dt);
  k.tanh_forward(a.c_pt, a.c_p, size_t(B) * C, dt);
  a.c_in = a.c_pt;
  if (a.ph > 0) {
    k.dropout_forward(a.c_pd, a.c_pt, size_t(B) * C, a.ph, a.seed,
                      site_offset(1 + 3 * config_.layers), dt);
    a.c_in = a.c_pd;
  }
  k.linear_forward(a.c_logits, a.c_in, W(cls_w_), W(cls_b_), B, C, NL, dt);
  return k.cross_entropy_forward(a.c_losses, nullptr, a.c_logits, cls_labels_.data(), B, NL,
                                 kIgnoreIndex, dt);
}

void Bert::cls_backward(float dloss) {
  const ParamsInUse pooler = use_params("bert.pooler."), head = use_params("classifier.");

  Backend& k = backend();
  Acts& a = *acts_;
  const DType dt = dtype();
  const int B = B_, C = config_.hidden, NL = config_.num_labels;
  const size_t BC = size_t(B) * C;
  auto W = [this](size_t off) { return at(params(), off); };
  auto G = [this](size_t off) { return at(grads(), off); };
  k.cross_entropy_backward(a.c_dlogits, a.c_logits, cls_labels_.data(), B, NL, kIgnoreIndex, dloss,
                           dt);
  k.linear_backward(a.c_d1, G(cls_w_), G(cls_b_), a.c_dlogits, a.c_in, W(cls_w_), B, C, NL, dt);
  void* d = a.c_d1;      // gradient so far
  void* spare = a.c_d2;  // the other scratch buffer
  if (a.ph > 0) {
    k.dropout_backward(spare, d, BC, a.ph, a.seed, site_offset(1 + 3 * config_.layers), dt);
    std::swap(d, spare);
  }
  k.tanh_backward(spare, d, a.c_pt, BC, dt);
  std::swap(d, spare);
  k.linear_backward(spare, G(pool_w_), G(pool_b_), d, a.c_h, W(pool_w_), B, C, C, dt);
  k.embed_backward(a.gy, nullptr, nullptr, spare, cls_rows_.data(), nullptr, B, 1, C, dt);
}

std::vector<float> Bert::logits() const {
  KOLO_CHECK_ARG(config_.num_labels > 0 && has_cls_,
                 "Bert::logits: the last forward ran no classification head");
  return read_floats(acts_->c_logits, size_t(B_) * config_.num_labels);
}

std::vector<int32_t> Bert::predictions() const {
  KOLO_CHECK_ARG(config_.num_labels > 0 && has_cls_,
                 "Bert::predictions: the last forward ran no classification head");
  std::vector<int32_t> pred(B_);
  backend().argmax_rows(pred.data(), acts_->c_logits, B_, config_.num_labels, dtype());
  return pred;
}

}  // namespace kolo::trainer
