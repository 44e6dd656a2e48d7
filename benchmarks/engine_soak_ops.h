// The ops of engine_soak: what each tensor name carries (a function of the name alone, so every
// rank agrees), how a rank fills and submits it, and the closed form its result must match
// bit for bit; plus the bad calls the engine must refuse. Inputs are small integers (element i
// is b(i) = (i + phase) % 4 + 1, scaled and offset per rank), exact in every dtype up to 7 ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/engine.h"

namespace kolo::soak {

enum class Kind { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReduceScatter };

struct Spec {
  Kind kind = Kind::kAllreduce;
  DType dtype = DType::kFloat32;
  int64_t rows = 1, cols = 1;  // allgather: rank r has rows + r % 2; alltoall: see split()
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1, postscale = 1;
  engine::Compression compression = engine::Compression::kNone;
  bool in_place = true;  // allreduce: the output is the input buffer
  int root = 0;          // broadcast
  size_t phase = 0;      // shifts the value pattern
};

// Tensor "t<name>": 55% allreduce (sum, avg, min, max; floats sometimes with a prescale or
// postscale of 0.5, fp32 / fp64 sometimes compressed to fp16 / bf16), 12% allgather, 12%
// broadcast, 11% alltoall, 10% reduce_scatter; any of 7 dtypes; 90% of 1-511 elements, 9%
// up to 16K, 1% of 128 KiB to 1 MiB.
Spec spec_of(int name, int world);
// The last rank's side of an injected mismatch (variant 0, 1, 2: dtype, shape, op type).
Spec mismatched(Spec spec, int variant);

// One submitted op and the buffers it uses until its handle completes.
struct Op {
  std::string name;
  Spec spec;
  bool injected = false;  // a mismatch: must fail with kMismatch on every rank
  std::vector<char> input, output;
  engine::Handle handle;
};

// Fills this rank's input and submits it; throws what the engine throws.
void submit(engine::Engine& eng, Op& op, int rank, int size);
// After the handle completed: "" when the op ended as it must, else what went wrong.
std::string check(const Op& op, int rank, int size);

// Bad calls, each refused on the caller's thread with kInvalidArgument and nothing queued.
inline constexpr int kBadCalls = 12;
// Makes bad call `which`: "" when it was refused as it must be, else what happened.
std::string try_bad_call(engine::Engine& eng, int which, int size);

}  // namespace kolo::soak
