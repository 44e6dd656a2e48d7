// ProcessGroupKolo's collectives: each checks its tensors on the caller's thread and queues a
// call of the Communicator; lists of tensors go through one concatenated buffer.
#include "bindings/python/c10d/process_group.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "bindings/python/c10d/store.h"
#include "bindings/python/c10d/tensors.h"
#include "comm/base/error.h"

namespace kolo::c10d_backend {
namespace {

using ::c10d::OpType;

bool all_equal(const std::vector<size_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

// alltoall_base's counts: `splits` rows of `t` per rank (equal parts when empty), in elements
// of the buffer's dtype.
std::vector<size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                 size_t scale, const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const size_t per_row = rows == 0 ? 0 : static_cast<size_t>(t.numel() / rows) * scale;
  if (splits.empty()) {
    KOLO_CHECK_ARG(rows % size == 0, "alltoall_base: ", what, " has ", rows,
                   " rows, not a multiple of the group's size ", size, " (pass split sizes)");
    return std::vector<size_t>(static_cast<size_t>(size),
                               static_cast<size_t>(rows / size) * per_row);
  }
  KOLO_CHECK_ARG(splits.size() == static_cast<size_t>(size), "alltoall_base: ", what,
                 " splits has ", splits.size(), " entries; expected one per rank (", size, ")");
  for (int64_t s : splits)  // every negative one named, wherever it is in the list
    KOLO_CHECK_ARG(s >= 0, "alltoall_base: ", what, " split ", s, " is negative");
  int64_t total = 0;
  std::vector<size_t> result;
  for (int64_t s : splits) {
    // Each split at most the rows there are, so neither the sum nor s * per_row can wrap.
    KOLO_CHECK_ARG(s <= rows, "alltoall_base: ", what, " split ", s,
                   " is more than the tensor's rows (", rows, ")");
    total += s;
    result.push_back(static_cast<size_t>(s) * per_row);
  }
  KOLO_CHECK_ARG(total == rows, "alltoall_base: ", what, " splits add up to ", total, " rows, but ",
                 what, " has ", rows);
  return result;
}

}  // namespace

ProcessGroupKolo::ProcessGroupKolo(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : ::c10d::ProcessGroup(rank, size), timeout_(timeout) {
  CommunicatorOptions options;
  options.timeout = timeout;
  // Where torch's store listens is torch's business: across hosts the tcp transport listens on
  // a routable address, which kolo allows with a job secret (KOLO_SECRET) or KOLO_INSECURE=1.
  options.store_on_loopback = false;
  comm_ = Communicator::create(std::make_shared<C10dStore>(store), rank, size, options);
  // The worker thread waits while DDP's backward computes on the same cores: no busy polling.
  comm_->set_busy_polling(false);
  options.transport = comm_->transport();
  p2p_ = std::make_unique<P2p>(store, rank, size, options);
  init();
}

ProcessGroupKolo::~ProcessGroupKolo() = default;

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::enqueue(OpType type,
                                                           std::vector<at::Tensor> outputs,
                                                           std::function<void(Communicator&)> run) {
  auto work = c10::make_intrusive<Work>(rank_, type, std::move(outputs));
  queue_.submit(work, [comm = comm_.get(), run = std::move(run)] { run(*comm); });
  return work;
}

void ProcessGroupKolo::check_timeout(std::chrono::milliseconds timeout, const char* op) const {
  KOLO_CHECK_ARG(timeout == ::c10d::kUnsetTimeout || timeout == timeout_, op, ": a timeout of ",
                 timeout.count(), " ms for one call; kolo's process group has one timeout (",
                 timeout_.count(), " ms), set by init_process_group(timeout=...) or new_group");
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::broadcast(std::vector<at::Tensor>& tensors,
                                                             const ::c10d::BroadcastOptions& opts) {
  check_timeout(opts.timeout, "broadcast");
  const at::Tensor& t = single(tensors, "broadcast");
  const int root = root_rank(opts.rootRank, size_, "broadcast", opts.rootTensor);
  Buffer b = moved(t, "broadcast: tensor");
  return enqueue(OpType::BROADCAST, {t}, [b, t, root](Communicator& comm) {
    comm.broadcast(b.data(), b.count, b.dtype, root);
    copy_back(b, t);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::allreduce(std::vector<at::Tensor>& tensors,
                                                             const ::c10d::AllreduceOptions& opts) {
  check_timeout(opts.timeout, "allreduce");
  const at::Tensor& t = single(tensors, "allreduce");
  const ReduceOp op = reduce_op(opts.reduceOp);
  Buffer b = reduced(t, op, "allreduce: tensor");
  return enqueue(OpType::ALLREDUCE, {t}, [b, t, op](Communicator& comm) {
    comm.allreduce(b.data(), b.data(), b.count, b.dtype, op);
    copy_back(b, t);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) {
  check_timeout(opts.timeout, "allreduce_coalesced");
  KOLO_CHECK_ARG(!tensors.empty(), "allreduce_coalesced: no tensors");
  const ReduceOp op = reduce_op(opts.reduceOp);
  for (const at::Tensor& t : tensors) {
    reduced(t, op, "allreduce_coalesced: a tensor");
    same_dtype(tensors[0], t, "allreduce_coalesced");
  }
  Buffer b = reduced(concatenated(tensors), op, "allreduce_coalesced");
  return enqueue(OpType::ALLREDUCE_COALESCED, tensors, [b, tensors, op](Communicator& comm) {
    comm.allreduce(b.data(), b.data(), b.count, b.dtype, op);
    split_into(b.tensor, tensors);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  check_timeout(opts.timeout, "allgather");
  const at::Tensor& in = single(inputs, "allgather: inputs");
  KOLO_CHECK_ARG(outputs.size() == 1, "allgather: outputs holds ", outputs.size(),
                 " lists; kolo takes one list (of one tensor per rank)");
  std::vector<at::Tensor> out = outputs[0];
  one_per_rank(out, size_, "allgather: the output list");
  for (const at::Tensor& t : out) {
    moved(t, "allgather: an output");
    same_dtype(in, t, "allgather: input and outputs");
  }
  Buffer send = moved(in, "allgather: input");
  std::vector<size_t> recv_counts = counts(out, send.scale);
  KOLO_CHECK_ARG(recv_counts[static_cast<size_t>(rank_)] == send.count,
                 "allgather: this rank's "
                 "output holds ",
                 out[static_cast<size_t>(rank_)].numel(), " elements but its input ", in.numel());
  return enqueue(OpType::ALLGATHER, out, [send, out, recv_counts](Communicator& comm) {
    const size_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
    at::Tensor flat = at::empty({static_cast<int64_t>(total / send.scale)}, out[0].options());
    if (all_equal(recv_counts))
      comm.allgather(send.data(), flat.data_ptr(), send.count, send.dtype);
    else
      comm.allgatherv(send.data(), send.count, flat.data_ptr(), recv_counts, send.dtype);
    split_into(flat, out);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::_allgather_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::AllgatherOptions& opts) {
  check_timeout(opts.timeout, "_allgather_base");
  same_dtype(input, output, "_allgather_base: input and output");
  Buffer send = moved(input, "_allgather_base: input"),
         recv = moved(output, "_allgather_base: output");
  KOLO_CHECK_ARG(recv.count == send.count * static_cast<size_t>(size_),
                 "_allgather_base: the "
                 "output holds ",
                 output.numel(),
                 " elements; expected the group's size times the "
                 "input's, ",
                 input.numel() * size_);
  at::Tensor out = output;
  return enqueue(OpType::_ALLGATHER_BASE, {out}, [send, recv, out](Communicator& comm) {
    comm.allgather(send.data(), recv.data(), send.count, send.dtype);
    copy_back(recv, out);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  check_timeout(opts.timeout, "reduce_scatter");
  const at::Tensor& out = single(outputs, "reduce_scatter: outputs");
  const ReduceOp op = reduce_op(opts.reduceOp);
  Buffer recv = reduced(out, op, "reduce_scatter: output");
  const auto& in = per_rank_like(inputs, out, size_, "reduce_scatter", "input", "output");
  Buffer send = reduced(concatenated(in), op, "reduce_scatter");
  return enqueue(OpType::REDUCE_SCATTER, {out}, [send, recv, out, op](Communicator& comm) {
    comm.reduce_scatter(send.data(), recv.data(), recv.count, recv.dtype, op);
    copy_back(recv, out);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) {
  check_timeout(opts.timeout, "_reduce_scatter_base");
  same_dtype(input, output, "_reduce_scatter_base: input and output");
  const ReduceOp op = reduce_op(opts.reduceOp);
  Buffer send = reduced(input, op, "_reduce_scatter_base: input");
  Buffer recv = reduced(output, op, "_reduce_scatter_base: output");
  KOLO_CHECK_ARG(send.count == recv.count * static_cast<size_t>(size_),
                 "_reduce_scatter_base: "
                 "the input holds ",
                 input.numel(),
                 " elements; expected the group's size times "
                 "the output's, ",
                 output.numel() * size_);
  at::Tensor out = output;
  return enqueue(OpType::_REDUCE_SCATTER_BASE, {out}, [send, recv, out, op](Communicator& comm) {
    comm.reduce_scatter(send.data(), recv.data(), recv.count, recv.dtype, op);
    copy_back(recv, out);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const ::c10d::AllToAllOptions& opts) {
  check_timeout(opts.timeout, "alltoall_base");
  same_dtype(input, output, "alltoall_base: input and output");
  Buffer send = moved(input, "alltoall_base: input"), recv = moved(output, "alltoall_base: output");
  std::vector<size_t> send_counts = split_counts(input, input_splits, size_, send.scale, "input");
  std::vector<size_t> recv_counts =
      split_counts(output, output_splits, size_, recv.scale, "output");
  at::Tensor out = output;
  return enqueue(OpType::ALLTOALL_BASE, {out}, [=](Communicator& comm) {
    if (all_equal(send_counts) && send_counts == recv_counts)
      comm.alltoall(send.data(), recv.data(), send_counts[0], send.dtype);
    else
      comm.alltoallv(send.data(), send_counts, recv.data(), recv_counts, send.dtype);
    copy_back(recv, out);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const ::c10d::AllToAllOptions& opts) {
  check_timeout(opts.timeout, "alltoall");
  one_per_rank(inputs, size_, "alltoall: the input list");
  one_per_rank(outputs, size_, "alltoall: the output list");
  for (size_t p = 0; p < inputs.size(); ++p) {
    moved(inputs[p], "alltoall: an input");
    moved(outputs[p], "alltoall: an output");
    same_dtype(inputs[0], inputs[p], "alltoall: inputs");
    same_dtype(inputs[0], outputs[p], "alltoall: inputs and outputs");
  }
  Buffer send = moved(concatenated(inputs), "alltoall: inputs");
  std::vector<size_t> send_counts = counts(inputs, send.scale);
  std::vector<size_t> recv_counts = counts(outputs, send.scale);
  std::vector<at::Tensor> out = outputs;
  return enqueue(OpType::ALLTOALL, out, [=](Communicator& comm) {
    const size_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
    at::Tensor flat = at::empty({static_cast<int64_t>(total / send.scale)}, out[0].options());
    comm.alltoallv(send.data(), send_counts, flat.data_ptr(), recv_counts, send.dtype);
    split_into(flat, out);
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupKolo::barrier(const ::c10d::BarrierOptions& opts) {
  check_timeout(opts.timeout, "barrier");
  // Queued behind every earlier call, so its completion also means theirs.
  return enqueue(OpType::BARRIER, {}, [](Communicator& comm) { comm.barrier(); });
}

}  // namespace kolo::c10d_backend
