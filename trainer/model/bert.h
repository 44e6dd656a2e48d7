// BERT (post-LN, exactly as Hugging Face's BertModel) over flat buffers, with a masked-LM head
// (decoder tied to the word embeddings, evaluated only on the masked rows) and a sequence
// classification head (pooler on [CLS] + classifier). Forward saves what the backward needs in
// one activation arena; every kernel call goes through the Backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/model/bert_config.h"
#include "trainer/model/model.h"

namespace kolo::trainer {

class Bert : public Model {
 public:
  // Initialised from `seed` (normal(init_std) weights, LayerNorm 1/0, biases 0). The arena is
  // sized for (batch, seq) and grows when a larger batch arrives.
  Bert(Backend& backend, const BertConfig& config, DType dtype, int batch, int seq,
       uint64_t seed = 0);
  ~Bert() override;

  const BertConfig& config() const { return config_; }

  // The sum of the losses of the heads the batch has labels for: the mean masked-LM loss over
  // positions with mlm_labels != kIgnoreIndex, and the mean classification loss over `labels`.
  float forward(const TokenBatch& batch);
  // Accumulates d(dloss * loss)/d(params) into grads() for the last forward (dloss carries the
  // loss scale of mixed precision).
  void backward(float dloss = 1.0f);

  // Of the last forward.
  float mlm_loss() const { return mlm_loss_; }
  float classification_loss() const { return cls_loss_; }
  int mlm_count() const { return masked_; }         // masked (labelled) positions
  int mlm_correct() const { return mlm_correct_; }  // of which the argmax is the label
  std::vector<float> logits() const;                // [batch, num_labels], fp32
  std::vector<int32_t> predictions() const;         // [batch] argmax class

  // Activation checkpointing: keep only the input of every `interval`-th encoder layer and
  // recompute the layers in between during backward (0: keep every layer's activations).
  // Dropout masks come from the counter-based generator, so the gradients are the same bits
  // either way. Takes effect at the next forward (the arena is sized again).
  void set_checkpoint_interval(int interval);
  int checkpoint_interval() const { return interval_; }

  // The parameters of `config` in buffer order (Hugging Face names; query/key/value packed).
  static ParamLayout make_layout(const BertConfig& config);

 private:
  struct LayerParams;  // element offsets of one encoder layer's tensors
  struct LayerActs;    // that layer's saved activations
  struct Acts;         // the whole arena, carved

  void init_weights(uint64_t seed);
  void check_batch(const TokenBatch& batch) const;
  void plan(int B, int S, int M);
  void carve(ArenaCarver& c, int B, int S, int M);
  uint64_t site_offset(int site) const { return static_cast<uint64_t>(site) << 40; }

  // The activations of encoder layer l: its own, or a slot a segment shares under
  // checkpointing. The input of segment j (layers [j * interval, ...)).
  LayerActs& layer_acts(int l);
  const void* segment_input(int j) const;
  const void* encoder_output();

  static std::string layer_prefix(int l);  // "bert.encoder.layer.<l>."

  void embed_forward();
  void layer_forward(int l, const void* x, LayerActs& a);
  void layer_backward(int l, const void* x, LayerActs& a, void* dy);
  void embed_backward(void* dh0);
  float mlm_forward();
  void mlm_backward(float dloss);
  float cls_forward();
  void cls_backward(float dloss);

  BertConfig config_;
  std::vector<LayerParams> lp_;
  size_t emb_word_, emb_pos_, emb_type_, emb_ln_w_, emb_ln_b_;
  size_t pool_w_ = 0, pool_b_ = 0, cls_w_ = 0, cls_b_ = 0;
  size_t mlm_w_ = 0, mlm_b_ = 0, mlm_ln_w_ = 0, mlm_ln_b_ = 0, mlm_bias_ = 0;
  void* zero_row_ = nullptr;  // [C] zeros: the position/type tables of row gathers

  Acts* acts_;
  // Copies of the last forward's integer inputs, which the backward reads again.
  std::vector<int32_t> ids_, types_, mask_;
  bool forwarded_ = false;
  int interval_ = 0;
  int B_ = 0, S_ = 0, M_ = 0;
  bool has_mlm_ = false, has_cls_ = false;
  std::vector<int32_t> masked_rows_, masked_labels_, cls_rows_, cls_labels_;
  float mlm_loss_ = 0, cls_loss_ = 0;
  int masked_ = 0, mlm_correct_ = 0;
};

}  // namespace kolo::trainer
