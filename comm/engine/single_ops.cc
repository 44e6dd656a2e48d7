// Executor::run_single: the ops that are not fused (allgather, broadcast, alltoall,
// reducescatter, barrier, join), each one collective on the process set's communicator.
#include <cstring>
#include <numeric>

#include "comm/engine/executor.h"
#include "timeline/timeline.h"

namespace kolo::engine {
namespace {

size_t row_elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

void allgather(Communicator& comm, Pending& p, const Response& r) {
  const size_t row = row_elements(p.request.shape), esize = dtype_size(p.request.dtype);
  std::vector<size_t> counts;
  int64_t rows = 0;
  for (int64_t d : r.first_dims) {
    counts.push_back(static_cast<size_t>(d) * row);
    rows += d;
  }
  auto& out = p.state->output;
  out.resize(std::accumulate(counts.begin(), counts.end(), size_t{0}) * esize);
  comm.allgatherv(p.input.data, p.input.count(), out.data(), counts, p.request.dtype);
  p.state->output_shape = p.request.shape.empty() ? std::vector<int64_t>{rows} : p.request.shape;
  p.state->output_shape[0] = rows;
}

void alltoall(Communicator& comm, Pending& p, const Response& r) {
  const size_t n = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  const size_t row = row_elements(p.request.shape), esize = dtype_size(p.request.dtype);
  std::vector<size_t> send(n), recv(n);
  int64_t rows = 0;
  for (size_t q = 0; q < n; ++q) {
    send[q] = static_cast<size_t>(r.splits[me * n + q]) * row;
    recv[q] = static_cast<size_t>(r.splits[q * n + me]) * row;
    rows += r.splits[q * n + me];
  }
  auto& out = p.state->output;
  out.resize(std::accumulate(recv.begin(), recv.end(), size_t{0}) * esize);
  comm.alltoallv(p.input.data, send, out.data(), recv, p.request.dtype);
  p.state->output_shape = p.request.shape.empty() ? std::vector<int64_t>{rows} : p.request.shape;
  p.state->output_shape[0] = rows;
}

// Rows split as evenly as possible (the first rows % n ranks get one more); computed with an
// allreduce, then this rank keeps its rows.
void reducescatter(Communicator& comm, Pending& p) {
  const Request& q = p.request;
  const size_t n = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  const size_t rows = q.shape.empty() ? 1 : static_cast<size_t>(q.shape[0]);
  const size_t row = row_elements(q.shape), esize = dtype_size(q.dtype);
  std::vector<char> all(p.input.bytes() + 1);
  comm.allreduce(p.input.data, all.data(), p.input.count(), q.dtype, q.op);
  size_t base = rows / n, extra = rows % n;
  size_t first = me * base + std::min(me, extra), mine = base + (me < extra ? 1 : 0);
  p.state->output.assign(all.data() + first * row * esize,
                         all.data() + (first + mine) * row * esize);
  p.state->output_shape = q.shape.empty() ? std::vector<int64_t>{1} : q.shape;
  p.state->output_shape[0] = static_cast<int64_t>(mine);
}

}  // namespace

void Executor::run_single(ProcessSet& set, const Response& r) {
  Communicator& comm = *set.comm;
  if (r.type == OpType::kJoin) {
    if (set.join_state) {
      set.join_state->value = r.last_joined;
      set.join_state->succeed();
      set.join_state.reset();
    }
    set.joined = false;
    return;
  }
  auto it = set.pending.find(r.names[0]);
  if (it == set.pending.end()) return;
  Pending& p = it->second;
  const std::string& name = r.names[0];
  if (timeline_->active()) timeline_->end(name, "QUEUE");
  if (timeline_->active())
    timeline_->begin(name, op_type_name(r.type),
                     {{"transport", transport_name(comm.transport())}, {"bytes", p.input.bytes()}});
  switch (r.type) {
    case OpType::kAllgather: allgather(comm, p, r); break;
    case OpType::kAlltoall: alltoall(comm, p, r); break;
    case OpType::kReduceScatter: reducescatter(comm, p); break;
    case OpType::kBroadcast:
      comm.broadcast(p.input.data, p.input.count(), p.request.dtype, p.request.root);
      if (p.output.data && p.output.data != p.input.data)
        std::memcpy(p.output.data, p.input.data, p.input.bytes());
      break;
    case OpType::kBarrier: comm.barrier(); break;
    default: break;
  }
  if (timeline_->active()) timeline_->end(name, op_type_name(r.type));
  stats_->responses += 1;
  stats_->bytes_submitted += p.input.bytes();
  stats_->bytes_sent += p.input.bytes();
  finish(set, r, {ErrorCode::kInternal, true, ""});  // last: the caller may read stats now
}

}  // namespace kolo::engine
