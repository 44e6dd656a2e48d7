// Executor::run_single: the ops that are not fused (allgather, broadcast, alltoall,
// reduce_scatter, barrier, join), each one collective on the process set's communicator.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "fusion/executor.h"
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

// Rows split as evenly as possible (the first rows % n ranks get one more). The Communicator's
// reduce_scatter takes equal blocks, so uneven splits (and a prescale) go through a copy of the
// input with every rank's rows at the start of a block of ceil(rows / n) rows.
void reduce_scatter(Communicator& comm, Pending& p) {
  const Request& q = p.request;
  const size_t n = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  const size_t rows = q.shape.empty() ? 1 : static_cast<size_t>(q.shape[0]);
  const size_t row = row_elements(q.shape), esize = dtype_size(q.dtype);
  const size_t base = rows / n, extra = rows % n, block = base + (extra ? 1 : 0);
  const size_t mine = base + (me < extra ? 1 : 0);
  const char* in = static_cast<const char*>(p.input.data);
  std::vector<char> padded;
  if (extra != 0 || q.prescale != 1.0) {
    padded.assign(n * block * row * esize, 0);
    for (size_t r = 0; r < n; ++r) {
      const size_t first = r * base + std::min(r, extra), count = base + (r < extra ? 1 : 0);
      fusion::pack(padded.data() + r * block * row * esize, q.dtype, in + first * row * esize,
                   q.dtype, count * row, q.prescale);
    }
    in = padded.data();
  }
  auto& out = p.state->output;
  out.resize(std::max<size_t>(block * row * esize, 1));
  comm.reduce_scatter(in, out.data(), block * row, q.dtype, q.op);
  out.resize(mine * row * esize);
  if (q.postscale != 1.0)
    fusion::unpack(out.data(), q.dtype, out.data(), q.dtype, mine * row, q.postscale);
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
  timeline_->end(name, "QUEUE");
  {
    timeline::Span span(timeline_, name, op_type_name(r.type), [&] {
      return nlohmann::json{{"transport", transport_name(comm.transport())},
                            {"bytes", p.input.bytes()}};
    });
    switch (r.type) {
      case OpType::kAllgather: allgather(comm, p, r); break;
      case OpType::kAlltoall: alltoall(comm, p, r); break;
      case OpType::kReduceScatter: reduce_scatter(comm, p); break;
      case OpType::kBroadcast:
        if (p.request.device) {
          broadcast_device(set, p);
          break;
        }
        comm.broadcast(p.input.data, p.input.count(), p.request.dtype, p.request.root);
        if (p.output.data && p.output.data != p.input.data)
          std::memcpy(p.output.data, p.input.data, p.input.bytes());
        break;
      case OpType::kBarrier: comm.barrier(); break;
      default: break;
    }
  }
  stats_->responses += 1;
  stats_->bytes_submitted += p.input.bytes();
  stats_->bytes_sent += p.input.bytes();
  finish(set, r, Status::success());  // last: the caller may read stats now
}

}  // namespace kolo::engine
