// What allreduce_bw measures at one size: the collective, how a byte size becomes element
// counts (nccl-tests' convention: the size is the largest buffer), the host buffers, and the
// deterministic input pattern with the check that counts wrong output elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "comm/base/algorithm.h"
#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"

namespace kolo::bench {

// kolo::Collective (comm/base/algorithm.h), all but the barrier.
std::optional<Collective> parse_collective(std::string_view text);
inline constexpr const char* kCollectiveNames =
    "allreduce, reduce_scatter, allgather, broadcast, alltoall";
// Whether the collective takes a reduce op (the others print "none").
bool reduces(Collective coll);
// busbw = algbw * bus_factor: 2(n-1)/n for allreduce, (n-1)/n for reduce_scatter, allgather and
// alltoall, 1 for broadcast.
double bus_factor(Collective coll, int nranks);

struct BenchCase {
  Collective coll = Collective::kAllreduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int nranks = 1;
  int rank = 0;
  size_t bytes = 0;  // the largest buffer; the "size(B)" column
  size_t count = 0;  // bytes / element size; the "count" column
  // Elements per rank block: the reduce_scatter result, the allgather contribution, one
  // alltoall peer's share. Equal to count for allreduce and broadcast.
  size_t block = 0;
  // --inplace 1, as with MPI_IN_PLACE: allreduce reduces recv into itself; allgather finds each
  // rank's block already at its place in recv, so no rank copies its own block.
  bool in_place = false;
};

// The case for `bytes` rounded down to whole elements (and whole blocks per rank); nullopt when
// nothing is left.
std::optional<BenchCase> make_case(Collective coll, DType dtype, ReduceOp op, int nranks, int rank,
                                   size_t bytes);

// A send and a receive buffer of `bytes` each, page aligned; broadcast works in recv(). With
// `shared` they come from kolo::alloc_shared (--alloc shared), which peers on the host map.
class Buffers {
 public:
  Buffers(size_t bytes, bool shared);
  // What Buffers(bytes, ...) allocates: both buffers, each rounded up to whole pages.
  static size_t footprint(size_t bytes);
  void* send() { return send_.get(); }
  void* recv() { return recv_.get(); }
  const void* send() const { return send_.get(); }
  const void* recv() const { return recv_.get(); }

 private:
  struct Free {
    bool shared = false;
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> send_, recv_;
};

// Bytes of memory this host can still give a process without swapping or the OOM killer:
// MemAvailable, or less where the process's cgroup (v2) has a lower limit left.
size_t available_host_memory();

// What the collective reads from: send(), or for an in-place allgather this rank's block of
// recv().
void* send_buffer(const BenchCase& c, Buffers& buffers);

// Writes every rank's input pattern and clears the output (zero is never a valid result), so a
// collective that writes nothing is caught.
void fill_inputs(const BenchCase& c, Buffers& buffers);
// Elements of this rank's output that differ from the expected values (fp16/bf16 and avg within
// a rounding tolerance, everything else exactly).
int64_t count_wrong(const BenchCase& c, const Buffers& buffers);

}  // namespace kolo::bench
