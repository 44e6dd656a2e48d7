// Private to the Bert implementation files: element offsets of one encoder layer's parameters
// and the activation arena's pieces (what the forward saves for the backward, and scratch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "trainer/model/bert.h"

namespace kolo::trainer {

struct Bert::LayerParams {
  size_t qkv_w, qkv_b;  // query.weight | key.weight | value.weight: one [3C, C]; biases [3C]
  size_t ao_w, ao_b, ln1_w, ln1_b;
  size_t in_w, in_b, out_w, out_b, ln2_w, ln2_b;
};

// Per token, one layer saves 15C + the probabilities: qkv (3C), att (C), r1 = x + attention
// output (C), a = LN(r1) (C), f1 and g = gelu(f1) (4C each), r2 = a + FFN output (C),
// y = LN(r2) (C). Dropout outputs are never saved: the backward regenerates the masks.
struct Bert::LayerActs {
  void *qkv, *att, *probs, *r1, *a, *f1, *g, *r2, *y;
  float *mean1, *rstd1, *mean2, *rstd2;
};

struct Bert::Acts {
  float ph = 0, pa = 0;  // hidden and attention dropout of the last forward (0 in eval)
  uint64_t seed = 0;
  void *emb, *emb_ln, *h0;  // word+pos+type, its LayerNorm, after dropout
  float *emb_mean, *emb_rstd;
  const void* x0 = nullptr;           // the first layer's input: h0, or emb_ln without dropout
  std::vector<LayerActs> layers;      // one per layer, or `interval` slots when checkpointing
  std::vector<void*> segment_inputs;  // checkpointing: the input of segments 1, 2, ... [T, C]
  // Scratch [T, C] x 4, [T, I] x 2, [T, 3C]; gy carries the gradient down the layers.
  void *gy, *bA, *bB, *bC, *b4a, *b4b, *bqkv;
  // MLM head over the M gathered rows.
  void *m_h, *m_t, *m_u, *m_v, *m_logits, *m_d1, *m_d2;
  float *m_mean, *m_rstd, *m_losses;
  // Classification head over the B [CLS] rows.
  void *c_h, *c_p, *c_pt, *c_pd, *c_logits, *c_dlogits, *c_d1, *c_d2;
  float* c_losses;
  const void* c_in = nullptr;  // the classifier's input: c_pd, or c_pt without dropout
};

}  // namespace kolo::trainer
