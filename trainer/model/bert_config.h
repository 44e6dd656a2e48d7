// BERT hyper-parameters: the presets of Turc et al. (tiny ... large, intermediate = 4H) and
// parsing from a preset name or a JSON object (Hugging Face config.json keys).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace kolo::trainer {

struct BertConfig {
  int vocab_size = 30522;
  int hidden = 128;        // C
  int layers = 2;          // L
  int heads = 2;           // NH; hidden must be a multiple
  int intermediate = 512;  // feed-forward width, 4C in every preset
  int max_position = 512;
  int type_vocab = 2;
  float layer_norm_eps = 1e-12f;
  float hidden_dropout = 0.1f;     // embeddings, attention output, FFN output, pooler
  float attention_dropout = 0.1f;  // attention probabilities
  float init_std = 0.02f;          // normal init of weights and embeddings
  bool mlm_head = true;            // cls.predictions.* (decoder tied to word embeddings)
  int num_labels = 0;              // > 0: bert.pooler + classifier with this many classes

  void validate() const;  // throws kInvalidArgument naming the field and its accepted range
};

// "tiny" (L2/H128/A2), "mini" (L4/H256/A4), "small" (L4/H512/A8), "medium" (L8/H512/A8),
// "base" (L12/H768/A12), "large" (L24/H1024/A16); also "bert-base" and "bert-base-uncased".
BertConfig bert_preset(std::string_view name);

// A JSON object: optional "preset" (a name above) overridden by any of the Hugging Face keys
// vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
// max_position_embeddings, type_vocab_size, layer_norm_eps, hidden_dropout_prob,
// attention_probs_dropout_prob, initializer_range, num_labels, and kolo's "mlm_head".
// Without "preset", the keys override tiny. hidden_act, when given, must be "gelu".
BertConfig parse_bert_config(const nlohmann::json& json);
// A preset name, or a JSON object in text form when `text` starts with '{'.
BertConfig parse_bert_config(std::string_view text);

// A resume's check of the settings the weights' shapes do not show (the attention heads, the
// layer norm epsilon): throws kInvalidArgument "<where>: kolo.model <key> <now> differs from
// the checkpoint's <saved> (<index>)". Dropout and init may change; another shape passes (the
// load names the first tensor that differs).
void check_same_bert(const BertConfig& checkpoint, const BertConfig& now, const std::string& where,
                     const std::string& index);

// The config as a Hugging Face style config.json object (parse_bert_config reads it back).
nlohmann::json bert_config_to_json(const BertConfig& config);

}  // namespace kolo::trainer
