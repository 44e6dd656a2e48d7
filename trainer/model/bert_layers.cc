// Bert's embedding and encoder-layer passes, post-LN as in Hugging Face:
//   x -> qkv -> attention -> dense -> dropout -> + x -> LayerNorm = a
//   a -> intermediate -> gelu -> output -> dropout -> + a -> LayerNorm = y
// Dropout sites: 0 embeddings, 1 + 3l + {0 attention probs, 1 attention output, 2 FFN output}.
#include <string>

#include "comm/base/error.h"
#include "trainer/model/bert_internal.h"

namespace kolo::trainer {

void Bert::embed_forward() {
  const ParamsInUse in_use = use_params("bert.embeddings.");
  Backend& k = backend();
  Acts& a = *acts_;
  const DType dt = dtype();
  const int T = B_ * S_, C = config_.hidden;
  k.embed_forward(a.emb, ids_.data(), types_.empty() ? nullptr : types_.data(),
                  at(params(), emb_word_), at(params(), emb_pos_), at(params(), emb_type_), B_, S_,
                  C, dt);
  k.layernorm_forward(a.emb_ln, a.emb_mean, a.emb_rstd, a.emb, at(params(), emb_ln_w_),
                      at(params(), emb_ln_b_), T, C, config_.layer_norm_eps, dt);
  a.x0 = a.emb_ln;
  if (a.ph > 0) {
    k.dropout_forward(a.h0, a.emb_ln, size_t(T) * C, a.ph, a.seed, site_offset(0), dt);
    a.x0 = a.h0;
  }
}

void Bert::embed_backward(void* dh0) {
  const ParamsInUse in_use = use_params("bert.embeddings.");
  Backend& k = backend();
  Acts& a = *acts_;
  const DType dt = dtype();
  const int T = B_ * S_, C = config_.hidden;
  const void* d = dh0;
  if (a.ph > 0) {
    k.dropout_backward(a.bA, dh0, size_t(T) * C, a.ph, a.seed, site_offset(0), dt);
    d = a.bA;
  }
  k.layernorm_backward(a.bB, at(grads(), emb_ln_w_), at(grads(), emb_ln_b_), d, a.emb, a.emb_mean,
                       a.emb_rstd, at(params(), emb_ln_w_), T, C, dt);
  k.embed_backward(at(grads(), emb_word_), at(grads(), emb_pos_), at(grads(), emb_type_), a.bB,
                   ids_.data(), types_.empty() ? nullptr : types_.data(), B_, S_, C, dt);
}

std::string Bert::layer_prefix(int l) {
  return "bert.encoder.layer." + std::to_string(l) + ".";
}

void Bert::layer_forward(int l, const void* x, LayerActs& s) {
  const ParamsInUse in_use = use_params(layer_prefix(l));
  Backend& k = backend();
  Acts& a = *acts_;
  const LayerParams& p = lp_[l];
  const DType dt = dtype();
  const int T = B_ * S_, C = config_.hidden, I = config_.intermediate, NH = config_.heads;
  const size_t TC = size_t(T) * C;
  auto W = [this](size_t off) { return at(params(), off); };
  const int32_t* mask = mask_.empty() ? nullptr : mask_.data();

  k.linear_forward(s.qkv, x, W(p.qkv_w), W(p.qkv_b), T, C, 3 * C, dt);
  k.attention_forward(s.att, s.probs, s.qkv, mask, B_, S_, C, NH, a.pa, a.seed,
                      site_offset(1 + 3 * l), dt);
  // Without dropout the projections write straight into the residual sums.
  if (a.ph > 0) {
    k.linear_forward(a.bA, s.att, W(p.ao_w), W(p.ao_b), T, C, C, dt);
    k.dropout_forward(s.r1, a.bA, TC, a.ph, a.seed, site_offset(2 + 3 * l), dt);
  } else {
    k.linear_forward(s.r1, s.att, W(p.ao_w), W(p.ao_b), T, C, C, dt);
  }
  k.add(s.r1, s.r1, x, TC, dt);
  k.layernorm_forward(s.a, s.mean1, s.rstd1, s.r1, W(p.ln1_w), W(p.ln1_b), T, C,
                      config_.layer_norm_eps, dt);

  k.linear_forward(s.f1, s.a, W(p.in_w), W(p.in_b), T, C, I, dt);
  k.gelu_forward(s.g, s.f1, size_t(T) * I, dt);
  if (a.ph > 0) {
    k.linear_forward(a.bA, s.g, W(p.out_w), W(p.out_b), T, I, C, dt);
    k.dropout_forward(s.r2, a.bA, TC, a.ph, a.seed, site_offset(3 + 3 * l), dt);
  } else {
    k.linear_forward(s.r2, s.g, W(p.out_w), W(p.out_b), T, I, C, dt);
  }
  k.add(s.r2, s.r2, s.a, TC, dt);
  k.layernorm_forward(s.y, s.mean2, s.rstd2, s.r2, W(p.ln2_w), W(p.ln2_b), T, C,
                      config_.layer_norm_eps, dt);
}

// dy (the gradient of y, in a.gy) is replaced by the gradient of the layer input x.
void Bert::layer_backward(int l, const void* x, LayerActs& s, void* dy) {
  const ParamsInUse in_use = use_params(layer_prefix(l));
  Backend& k = backend();
  Acts& a = *acts_;
  const LayerParams& p = lp_[l];
  const DType dt = dtype();
  const int T = B_ * S_, C = config_.hidden, I = config_.intermediate, NH = config_.heads;
  const size_t TC = size_t(T) * C;
  auto W = [this](size_t off) { return at(params(), off); };
  auto G = [this](size_t off) { return at(grads(), off); };
  const int32_t* mask = mask_.empty() ? nullptr : mask_.data();

  // Feed-forward block: bA = d r2, which is also the residual gradient into a.
  k.layernorm_backward(a.bA, G(p.ln2_w), G(p.ln2_b), dy, s.r2, s.mean2, s.rstd2, W(p.ln2_w), T, C,
                       dt);
  const void* df2 = a.bA;
  if (a.ph > 0) {
    k.dropout_backward(a.bB, a.bA, TC, a.ph, a.seed, site_offset(3 + 3 * l), dt);
    df2 = a.bB;
  }
  k.linear_backward(a.b4a, G(p.out_w), G(p.out_b), df2, s.g, W(p.out_w), T, I, C, dt);
  k.gelu_backward(a.b4b, a.b4a, s.f1, size_t(T) * I, dt);
  k.linear_backward(a.bB, G(p.in_w), G(p.in_b), a.b4b, s.a, W(p.in_w), T, C, I, dt);
  k.add(a.bB, a.bB, a.bA, TC, dt);  // d a = FFN path + residual path

  // Attention block: bA = d r1, also the residual gradient into x.
  k.layernorm_backward(a.bA, G(p.ln1_w), G(p.ln1_b), a.bB, s.r1, s.mean1, s.rstd1, W(p.ln1_w), T, C,
                       dt);
  const void* dao = a.bA;
  if (a.ph > 0) {
    k.dropout_backward(a.bB, a.bA, TC, a.ph, a.seed, site_offset(2 + 3 * l), dt);
    dao = a.bB;
  }
  k.linear_backward(a.bC, G(p.ao_w), G(p.ao_b), dao, s.att, W(p.ao_w), T, C, C, dt);
  k.attention_backward(a.bqkv, a.bC, s.qkv, s.probs, mask, B_, S_, C, NH, a.pa, a.seed,
                       site_offset(1 + 3 * l), dt);
  k.linear_backward(dy, G(p.qkv_w), G(p.qkv_b), a.bqkv, x, W(p.qkv_w), T, C, 3 * C, dt);
  k.add(dy, dy, a.bA, TC, dt);
}

}  // namespace kolo::trainer
