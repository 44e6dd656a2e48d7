// Executor::run_single: the ops that are not fused (allgather, broadcast, alltoall,
// reduce_scatter, barrier, join), each one collective on the process set's communicator.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "fusion/executor.h"
#include "fusion/op_plans.h"
#include "timeline/timeline.h"

namespace kolo::engine {
namespace {

void allgather(Communicator& comm, Pending& p, const Response& r) {
  const Exchange e = allgather_plan(p.request, r);
  auto& out = p.state->output;
  out.resize(std::accumulate(e.recv.begin(), e.recv.end(), size_t{0}) *
             dtype_size(p.request.dtype));
  comm.allgatherv(p.input.data, p.input.count(), out.data(), e.recv, p.request.dtype);
  p.state->output_shape = with_rows(p.request.shape, e.rows);
}

void alltoall(Communicator& comm, Pending& p, const Response& r) {
  const Exchange e = alltoall_plan(p.request, r, static_cast<size_t>(comm.rank()),
                                   static_cast<size_t>(comm.size()));
  auto& out = p.state->output;
  out.resize(std::accumulate(e.recv.begin(), e.recv.end(), size_t{0}) *
             dtype_size(p.request.dtype));
  comm.alltoallv(p.input.data, e.send, out.data(), e.recv, p.request.dtype);
  p.state->output_shape = with_rows(p.request.shape, e.rows);
}

// The Communicator's reduce_scatter takes equal blocks (op_plans.h's RowSplit).
void reduce_scatter(Communicator& comm, Pending& p) {
  const Request& q = p.request;
  const RowSplit split = row_split(q, static_cast<size_t>(comm.size()));
  const size_t me = static_cast<size_t>(comm.rank()), esize = dtype_size(q.dtype);
  const size_t row = split.row, block = split.block, mine = split.count(me);
  const char* in = static_cast<const char*>(p.input.data);
  std::vector<char> padded;
  if (split.extra != 0 || q.prescale != 1.0) {
    padded.assign(split.n * block * row * esize, 0);
    for (size_t r = 0; r < split.n; ++r)
      fusion::pack(padded.data() + r * block * row * esize, q.dtype,
                   in + split.first(r) * row * esize, q.dtype, split.count(r) * row, q.prescale);
    in = padded.data();
  }
  auto& out = p.state->output;
  out.resize(std::max<size_t>(block * row * esize, 1));
  comm.reduce_scatter(in, out.data(), block * row, q.dtype, q.op);
  out.resize(mine * row * esize);
  if (q.postscale != 1.0)
    fusion::unpack(out.data(), q.dtype, out.data(), q.dtype, mine * row, q.postscale);
  p.state->output_shape = with_rows(q.shape, static_cast<int64_t>(mine));
}

}  // namespace

void Executor::run_single(ProcessSet& set, const Response& r) {
  Communicator& comm = *set.comm;
  if (r.type == OpType::kJoin) {
    set.joins_completed.fetch_add(1);  // before the joiner wakes: its next barrier counts anew
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
    if (p.request.device) {
      single_device(set, p, r);
    } else {
      switch (r.type) {
        case OpType::kAllgather: allgather(comm, p, r); break;
        case OpType::kAlltoall: alltoall(comm, p, r); break;
        case OpType::kReduceScatter: reduce_scatter(comm, p); break;
        case OpType::kBroadcast:
          comm.broadcast(p.input.data, p.input.count(), p.request.dtype, p.request.root);
          if (p.output.data && p.output.data != p.input.data)
            std::memcpy(p.output.data, p.input.data, p.input.bytes());
          break;
        case OpType::kBarrier: comm.barrier(); break;
        default: break;
      }
    }
  }
  stats_->responses += 1;
  stats_->bytes_submitted += p.input.bytes();
  stats_->bytes_sent += p.input.bytes();
  finish(set, r, Status::success());  // last: the caller may read stats now
}

}  // namespace kolo::engine
