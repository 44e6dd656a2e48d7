// What travels during negotiation. A Request is one rank's submission as the coordinator sees
// it (no pointers); a Response is the coordinator's decision, executed identically by every
// rank of the process set: which tensors, in which order, and the per-rank sizes some ops need.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/engine.h"

namespace kolo::engine {

struct Request {
  std::string name;
  OpType type = OpType::kAllreduce;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0, postscale = 1.0;
  Compression compression = Compression::kNone;
  int root = 0;
  std::vector<int64_t> splits;
  // Grouped allreduce: the group's key (its first member's name) and member count; empty and
  // 0 for an op of its own.
  std::string group;
  int32_t group_size = 0;
  bool device = false;  // the tensor is in device memory

  // Everything ranks must agree on, as text for mismatch messages.
  std::string signature() const;
  // The same fields as signature() compared directly (the cache asks per pending op and cycle).
  bool same_signature(const Request& other) const;
};

struct Response {
  enum class Kind : uint8_t { kExecute, kError };
  Kind kind = Kind::kExecute;
  OpType type = OpType::kAllreduce;
  std::vector<std::string> names;   // a grouped allreduce carries all its members
  std::string error;                // kError: the message every rank reports
  std::vector<int64_t> first_dims;  // allgather: rows from each rank
  std::vector<int64_t> splits;      // alltoall: size x size rows (sender-major)
  std::vector<int> joined;          // ranks that joined: they contribute zeros
  int64_t last_joined = -1;         // join: the last rank to join
  Request params;                   // the agreed parameters (of the first tensor)
  std::vector<int64_t> counts;      // element count of each name (joined ranks need it)
};

// Compact binary encoding (not JSON: this is the hot path of every negotiation).
std::string encode_requests(const std::vector<Request>& requests, bool joined);
std::vector<Request> decode_requests(const std::string& bytes, bool* joined);
std::string encode_responses(const std::vector<Response>& responses);
std::vector<Response> decode_responses(const std::string& bytes);

}  // namespace kolo::engine
