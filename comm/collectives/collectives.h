// The collective algorithms, written against transport::Context. Counts are in elements;
// buffers are host memory. Communicator (comm/communicator.h) validates arguments and picks
// the algorithm; these functions assume valid input and a context of size >= 2.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"
#include "comm/transport/context.h"
#include "comm/transport/shared_memory.h"

namespace kolo::collectives {

using transport::Context;

// Pipelining granularity: every block is moved in segments of this many bytes (a multiple of
// every element size), so a rank forwards or reduces one segment while the next arrives.
inline constexpr size_t kSegmentBytes = 256 * 1024;

// Element range [offset, offset + count) of block b when `count` elements are split over
// `blocks` blocks as evenly as possible (the first count % blocks blocks get one more).
struct Block {
  size_t offset;
  size_t count;
};
Block even_block(size_t count, int blocks, int b);

// In place: reduce-scatter then allgather around the ring.
void ring_allreduce(Context& ctx, void* data, size_t count, DType dtype, ReduceOp op);
// Pipelined double binary tree (comm/collectives/tree.cc): two complementary binary trees
// each reduce and broadcast half of the buffer, so every rank sends and receives about one
// buffer's worth; latency grows with log2(size) instead of size.
void tree_allreduce(Context& ctx, void* data, size_t count, DType dtype, ReduceOp op);
// Recursive halving-doubling, Rabenseifner (comm/collectives/halving_doubling.cc):
// reduce-scatter by recursive halving, allgather by recursive doubling; sizes that are not a
// power of two fold the extra ranks into partners first.
void halving_doubling_allreduce(Context& ctx, void* data, size_t count, DType dtype, ReduceOp op);
// send holds size * recv_count elements; rank r receives the reduction of block r.
void ring_reduce_scatter(Context& ctx, const void* send, void* recv, size_t recv_count, DType dtype,
                         ReduceOp op);
// recv holds sum(counts) elements; block r (at the prefix sum of counts) must already hold
// rank r's contribution.
void ring_allgatherv(Context& ctx, void* recv, const std::vector<size_t>& counts, DType dtype);
// Pipelined chain from root.
void chain_broadcast(Context& ctx, void* data, size_t bytes, int root);
// Pairwise exchange; counts and displacements in bytes, indexed by peer.
void pairwise_alltoallv(Context& ctx, const char* send, const std::vector<size_t>& send_bytes,
                        const std::vector<size_t>& send_offsets, char* recv,
                        const std::vector<size_t>& recv_bytes,
                        const std::vector<size_t>& recv_offsets);
// Shared-memory collectives (comm/collectives/shm_direct.cc), for contexts with the
// shared-memory capability. low_latency needs count * dtype size <= small_slot_bytes(); the
// direct ones need direct_enabled(). send may equal recv.
void shm_low_latency_allreduce(transport::SharedMemory& ctx, const void* send, void* recv,
                               size_t count, DType dtype, ReduceOp op);
void shm_direct_allreduce(transport::SharedMemory& ctx, const void* send, void* recv, size_t count,
                          DType dtype, ReduceOp op);
void shm_direct_reduce_scatter(transport::SharedMemory& ctx, const void* send, void* recv,
                               size_t recv_count, DType dtype, ReduceOp op);
// send is this rank's block (it may be recv's block `rank`: in place). Peers' blocks are read
// from their send buffers, or streamed through the staging slots for ordinary buffers.
void shm_direct_allgatherv(transport::SharedMemory& ctx, const void* send, void* recv,
                           const std::vector<size_t>& counts, DType dtype);
void shm_direct_broadcast(transport::SharedMemory& ctx, void* data, size_t bytes, int root);
// Staged through the shm slots; byte counts and offsets indexed by peer; send != recv.
void shm_direct_alltoallv(transport::SharedMemory& ctx, const char* send,
                          const std::vector<size_t>& send_bytes,
                          const std::vector<size_t>& send_offsets, char* recv,
                          const std::vector<size_t>& recv_bytes,
                          const std::vector<size_t>& recv_offsets);

// Dissemination barrier: ceil(log2(size)) rounds of one-byte messages.
void dissemination_barrier(Context& ctx);

}  // namespace kolo::collectives
