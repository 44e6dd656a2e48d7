// Where each named parameter lives inside a model's flat parameter buffer. Models register
// their tensors in a fixed order (Hugging Face names), so fusion buckets and ZeRO shards are
// contiguous element ranges of one buffer, and checkpoints map names to ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::trainer {

struct ParamInfo {
  std::string name;            // Hugging Face name, e.g. "bert.encoder.layer.0.output.dense.weight"
  std::vector<int64_t> shape;  // PyTorch shape ([out, in] for a linear weight)
  size_t offset = 0;           // first element inside the flat buffer
  size_t numel = 0;
  bool decay = true;  // AdamW weight decay applies (false: biases, LayerNorm, ...)
};

class ParamLayout {
 public:
  // Appends a tensor after the previous ones; offsets are rounded up to kAlign elements so
  // each tensor starts 64-byte aligned in every storage dtype. Returns its offset.
  size_t add(std::string name, std::vector<int64_t> shape, bool decay);
  // Appends a tensor directly after the previous one, with no padding, so consecutive tensors
  // form one matrix (BERT's query/key/value weights are one [3C, C] operand of a fused GEMM).
  size_t add_packed(std::string name, std::vector<int64_t> shape, bool decay);
  const std::vector<ParamInfo>& params() const { return params_; }
  const ParamInfo& find(const std::string& name) const;  // throws kInvalidArgument if absent
  size_t total() const { return total_; }                // elements, padding included
  size_t num_params() const;                             // elements, padding excluded
  // Elements the flat buffers hold: total() plus zeroed slack, so that the buffer cuts into
  // `world` equal blocks of a multiple of kAlign elements for any world <= kMaxPartitions
  // (ZeRO's reduce-scatter and allgather work on equal blocks).
  size_t capacity() const { return total_ + kAlign * kMaxPartitions; }

  // The tensors inside [begin, end) with offsets from begin; a tensor that straddles a bound is
  // cut to its part inside (shape: one dimension, its element count there). A ZeRO rank's
  // optimizer and master weights live on such a slice of the model's layout.
  ParamLayout slice(size_t begin, size_t end) const;

  static constexpr size_t kAlign = 32;
  static constexpr size_t kMaxPartitions = 1024;

 private:
  size_t append(std::string name, std::vector<int64_t> shape, bool decay, size_t align);

  std::vector<ParamInfo> params_;
  size_t total_ = 0;
};

}  // namespace kolo::trainer
