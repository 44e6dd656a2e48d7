// BertConfig presets, validation and JSON (nlohmann-json) conversion.
#include "trainer/model/bert_config.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "trainer/io/json_text.h"

namespace kolo::trainer {
namespace {

struct Preset {
  const char* name;
  int layers, hidden, heads;
};
constexpr Preset kPresets[] = {
    {"tiny", 2, 128, 2},   {"mini", 4, 256, 4},   {"small", 4, 512, 8},
    {"medium", 8, 512, 8}, {"base", 12, 768, 12}, {"large", 24, 1024, 16},
};

template <typename T>
void read_key(const nlohmann::json& json, const char* key, T& field) {
  if (!json.contains(key)) return;
  const nlohmann::json& v = json[key];
  if constexpr (std::is_same_v<T, bool>) {
    KOLO_CHECK_ARG(v.is_boolean(), "BERT config: '", key, "' must be true or false");
  } else if constexpr (std::is_integral_v<T>) {
    KOLO_CHECK_ARG(v.is_number_integer(), "BERT config: '", key, "' must be an integer");
    // No silent narrowing: 2^32 + 128 must not become 128.
    const bool fits =
        v.is_number_unsigned()
            ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
            : v.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                  v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max());
    KOLO_CHECK_ARG(fits, "BERT config: '", key, "' = ", v.dump(), " is out of range");
  } else {
    KOLO_CHECK_ARG(v.is_number(), "BERT config: '", key, "' must be a number");
  }
  field = v.get<T>();
}

void check_range(const char* field, double value, double lo, double hi) {
  KOLO_CHECK_ARG(value >= lo && value <= hi, "BERT config: ", field, " = ", value, " outside [", lo,
                 ", ", hi, "]");
}

}  // namespace

void BertConfig::validate() const {
  check_range("vocab_size", vocab_size, 1, 1 << 24);
  check_range("hidden_size", hidden, 1, 1 << 16);
  check_range("num_hidden_layers", layers, 1, 1024);
  check_range("num_attention_heads", heads, 1, hidden);
  KOLO_CHECK_ARG(hidden % heads == 0, "BERT config: hidden_size ", hidden,
                 " is not a multiple of num_attention_heads ", heads);
  check_range("intermediate_size", intermediate, 1, 1 << 20);
  check_range("max_position_embeddings", max_position, 1, 1 << 20);
  check_range("type_vocab_size", type_vocab, 1, 1 << 16);
  check_range("layer_norm_eps", layer_norm_eps, 0, 1);
  check_range("hidden_dropout_prob", hidden_dropout, 0, 0.999);
  check_range("attention_probs_dropout_prob", attention_dropout, 0, 0.999);
  check_range("initializer_range", init_std, 0, 10);
  check_range("num_labels", num_labels, 0, 1 << 20);
  KOLO_CHECK_ARG(mlm_head || num_labels > 0,
                 "BERT config: no head (mlm_head is false and num_labels is 0)");
}

BertConfig bert_preset(std::string_view name) {
  std::string_view key = name;
  if (key.substr(0, 5) == "bert-") key.remove_prefix(5);
  if (key.size() > 8 && key.substr(key.size() - 8) == "-uncased") key.remove_suffix(8);
  for (const Preset& p : kPresets) {
    if (key != p.name) continue;
    BertConfig c;
    c.layers = p.layers;
    c.hidden = p.hidden;
    c.heads = p.heads;
    c.intermediate = 4 * p.hidden;
    return c;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "unknown BERT preset '", name,
             "' (accepted: tiny, mini, small, medium, base, large)");
}

BertConfig parse_bert_config(const nlohmann::json& json) {
  KOLO_CHECK_ARG(json.is_object(), "BERT config must be a JSON object or a preset name");
  BertConfig c = bert_preset("tiny");
  if (json.contains("preset")) {
    KOLO_CHECK_ARG(json["preset"].is_string(), "BERT config: 'preset' must be a string");
    c = bert_preset(json["preset"].get<std::string>());
  }
  bool hidden_given = json.contains("hidden_size");
  read_key(json, "vocab_size", c.vocab_size);
  read_key(json, "hidden_size", c.hidden);
  read_key(json, "num_hidden_layers", c.layers);
  read_key(json, "num_attention_heads", c.heads);
  if (hidden_given) c.intermediate = 4 * c.hidden;  // unless given explicitly below
  read_key(json, "intermediate_size", c.intermediate);
  read_key(json, "max_position_embeddings", c.max_position);
  read_key(json, "type_vocab_size", c.type_vocab);
  read_key(json, "layer_norm_eps", c.layer_norm_eps);
  read_key(json, "hidden_dropout_prob", c.hidden_dropout);
  read_key(json, "attention_probs_dropout_prob", c.attention_dropout);
  read_key(json, "initializer_range", c.init_std);
  read_key(json, "num_labels", c.num_labels);
  read_key(json, "mlm_head", c.mlm_head);
  if (json.contains("hidden_act"))
    KOLO_CHECK_ARG(json["hidden_act"] == "gelu", "BERT config: hidden_act ", json["hidden_act"],
                   " is not supported (accepted: gelu)");
  c.validate();
  return c;
}

BertConfig parse_bert_config(std::string_view text) {
  if (!text.empty() && text.front() == '{') {
    nlohmann::json json = parse_json_or_discarded(text, "BERT config");
    KOLO_CHECK_ARG(!json.is_discarded(), "BERT config: invalid JSON: ", text);
    return parse_bert_config(json);
  }
  return bert_preset(text);
}

nlohmann::json bert_config_to_json(const BertConfig& c) {
  return {{"model_type", "bert"},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"intermediate_size", c.intermediate},
          {"max_position_embeddings", c.max_position},
          {"type_vocab_size", c.type_vocab},
          {"layer_norm_eps", c.layer_norm_eps},
          {"hidden_dropout_prob", c.hidden_dropout},
          {"attention_probs_dropout_prob", c.attention_dropout},
          {"initializer_range", c.init_std},
          {"hidden_act", "gelu"},
          {"num_labels", c.num_labels},
          {"mlm_head", c.mlm_head}};
}

void check_same_bert(const BertConfig& checkpoint, const BertConfig& now, const std::string& where,
                     const std::string& index) {
  const nlohmann::json saved = bert_config_to_json(checkpoint), ours = bert_config_to_json(now);
  // Another shape is left to the load, which names the first tensor that differs.
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                          "max_position_embeddings", "type_vocab_size"})
    if (saved.at(key) != ours.at(key)) return;
  for (const char* key : {"num_attention_heads", "layer_norm_eps"})
    KOLO_CHECK_ARG(saved.at(key) == ours.at(key), where, ": kolo.model ", key, " ",
                   ours.at(key).dump(), " differs from the checkpoint's ", saved.at(key).dump(),
                   " (", index, "): its weights belong to that model; resume with the same ",
                   "kolo.model or start a new run");
}

}  // namespace kolo::trainer
