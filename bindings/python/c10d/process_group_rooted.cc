// ProcessGroupKolo's rooted collectives (dist.reduce, dist.gather, dist.scatter), built on the
// Communicator's allreduce and alltoallv: a gather is an alltoallv in which every rank sends
// only to the root, a scatter one in which only the root sends.
#include "bindings/python/c10d/process_group.h"
#include "bindings/python/c10d/tensors.h"
#include "comm/base/error.h"

namespace kolo::c10d_backend {
namespace {

using ::c10d::OpType;

// An alltoallv run for a rooted collective, its errors named after that collective (a
// mismatch of sizes between ranks reads "gather to rank 0: alltoall on rank 1: ...").
void rooted_alltoallv(Communicator& comm, const char* what, int root, const void* send,
                      const std::vector<size_t>& send_counts, void* recv,
                      const std::vector<size_t>& recv_counts, DType dtype) {
  try {
    comm.alltoallv(send, send_counts, recv, recv_counts, dtype);
  } catch (const Error& e) {
    KOLO_THROW(e.code(), what, " rank ", root, ": ", e.message());
  }
}

}  // namespace

// The root reduces in place; the other ranks reduce a copy, so their tensors keep their values
// (as NCCL's reduce leaves them). The reduction itself is an allreduce, which would not notice
// ranks naming different roots: a two-element max compares them first.
c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::reduce(std::vector<at::Tensor>& tensors,
                                                          const ::c10d::ReduceOptions& opts) {
  check_timeout(opts.timeout, "reduce");
  const at::Tensor& t = single(tensors, "reduce");
  const int root = root_rank(opts.rootRank, size_, "reduce", opts.rootTensor);
  const ReduceOp op = reduce_op(opts.reduceOp);
  Buffer b =
      reduced(rank_ == root ? t : t.clone(at::MemoryFormat::Contiguous), op, "reduce: tensor");
  return enqueue(OpType::REDUCE, {t}, [b, t, op, root](Communicator& comm) {
    int64_t roots[2] = {root, -root};  // max and -min
    comm.allreduce(roots, roots, 2, DType::kInt64, ReduceOp::kMax);
    if (roots[0] != -roots[1])
      KOLO_THROW(ErrorCode::kMismatch, "reduce: the ranks name different roots (from ", -roots[1],
                 " to ", roots[0], "); rank ", comm.rank(), " names ", root);
    comm.allreduce(b.data(), b.data(), b.count, b.dtype, op);
    if (comm.rank() == root) copy_back(b, t);
  });
}

// outputs: on the root one list of one tensor per rank, each the size of the input; elsewhere
// empty.
c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::GatherOptions& opts) {
  check_timeout(opts.timeout, "gather");
  const int root = root_rank(opts.rootRank, size_, "gather");
  const at::Tensor& in = single(inputs, "gather: inputs");
  Buffer send = moved(in, "gather: input");
  std::vector<at::Tensor> out;
  if (rank_ == root) {
    out = per_rank_like(outputs, in, size_, "gather", "output", "input");
  } else {
    KOLO_CHECK_ARG(outputs.empty(), "gather: rank ", rank_, " is not the root (", root,
                   ") but passes an output list");
  }
  const size_t n = static_cast<size_t>(size_);
  std::vector<size_t> send_counts(n, 0), recv_counts(n, 0);
  send_counts[static_cast<size_t>(root)] = send.count;
  if (rank_ == root) recv_counts.assign(n, send.count);
  return enqueue(OpType::GATHER, out, [=](Communicator& comm) {
    const size_t received = out.empty() ? 0 : n * send.count;  // only the root receives
    at::Tensor flat = at::empty({static_cast<int64_t>(received / send.scale)}, in.options());
    rooted_alltoallv(comm, "gather to", root, send.data(), send_counts, flat.data_ptr(),
                     recv_counts, send.dtype);
    if (!out.empty()) split_into(flat, out);
  });
}

// inputs: on the root one list of one tensor per rank, each the size of the output; elsewhere
// empty.
c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ScatterOptions& opts) {
  check_timeout(opts.timeout, "scatter");
  const int root = root_rank(opts.rootRank, size_, "scatter");
  const at::Tensor& out = single(outputs, "scatter: outputs");
  Buffer recv = moved(out, "scatter: output");
  const size_t n = static_cast<size_t>(size_);
  std::vector<size_t> send_counts(n, 0), recv_counts(n, 0);
  recv_counts[static_cast<size_t>(root)] = recv.count;
  Buffer send = recv;  // a non-root sends nothing
  if (rank_ == root) {
    per_rank_like(inputs, out, size_, "scatter", "input", "output");
    send = moved(concatenated(inputs[0]), "scatter: inputs");
    send_counts.assign(n, recv.count);
  } else {
    KOLO_CHECK_ARG(inputs.empty(), "scatter: rank ", rank_, " is not the root (", root,
                   ") but passes an input list");
  }
  return enqueue(OpType::SCATTER, {out}, [=](Communicator& comm) {
    rooted_alltoallv(comm, "scatter from", root, send.data(), send_counts, recv.data(), recv_counts,
                     recv.dtype);
    copy_back(recv, out);
  });
}

}  // namespace kolo::c10d_backend
