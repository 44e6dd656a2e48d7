// Executor: fusion of allreduces (pack with prescale and cast, one collective, unpack with
// postscale, 1/n for averages and the cast back) and the dispatch of the other ops.
#include "fusion/executor.h"

#include <algorithm>
#include <cstring>

#include "comm/reduce/reduce.h"
#include "timeline/timeline.h"

namespace kolo::engine {
namespace {

bool fusable(const Response& a, const Response& b) {
  const Request &p = a.params, &q = b.params;
  return b.kind == Response::Kind::kExecute && b.type == OpType::kAllreduce && p.dtype == q.dtype &&
         p.op == q.op && p.prescale == q.prescale && p.postscale == q.postscale &&
         p.compression == q.compression && p.device == q.device && a.joined == b.joined;
}

}  // namespace

size_t wire_bytes(const Response& r, size_t i) {
  return fusion::align_up(static_cast<size_t>(r.counts[i]) *
                          dtype_size(wire_dtype(r.params.dtype, r.params.compression)));
}

size_t wire_bytes(const Response& r) {
  size_t total = 0;
  for (size_t i = 0; i < r.names.size(); ++i) total += wire_bytes(r, i);
  return total;
}

DType wire_dtype(DType dtype, Compression compression) {
  const bool floating = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  if (!floating || compression == Compression::kNone) return dtype;
  return compression == Compression::kFp16 ? DType::kFloat16 : DType::kBFloat16;
}

void Executor::run(ProcessSet& set, const std::vector<const Response*>& responses) {
  for (size_t i = 0; i < responses.size();) {
    const Response& r = *responses[i];
    if (r.kind == Response::Kind::kError) {
      finish(set, r, Status::failure(ErrorCode::kMismatch, r.error));
      ++i;
    } else if (r.type != OpType::kAllreduce) {
      run_single(set, r);
      ++i;
    } else if (unfused(r)) {
      run_unfused(set, r);
      ++i;
    } else {
      // The longest run of compatible allreduces that fits the fusion threshold (a group is
      // never split, even when it alone is larger).
      std::vector<const Response*> group{&r};
      size_t bytes = wire_bytes(r);
      for (++i; i < responses.size() && fusable(r, *responses[i]) && !unfused(*responses[i]); ++i) {
        const size_t more = wire_bytes(*responses[i]);
        if (bytes + more > options_.fusion_threshold) break;
        group.push_back(responses[i]);
        bytes += more;
      }
      allreduce_fused(set, group);
    }
  }
}

// Large tensors gain nothing from fusion (their collective already amortises its latency) and
// would pay two extra copies: they are reduced straight from input to output when nothing
// needs the pack pass (no scaling, no compression, no joined ranks contributing zeros).
bool Executor::unfused(const Response& r) const {
  const Request& p = r.params;
  return r.kind == Response::Kind::kExecute && r.type == OpType::kAllreduce &&
         r.names.size() == 1 && r.joined.empty() && p.prescale == 1.0 && p.postscale == 1.0 &&
         p.compression == Compression::kNone &&
         static_cast<size_t>(r.counts[0]) * dtype_size(p.dtype) >= kUnfusedBytes;
}

void Executor::run_unfused(ProcessSet& set, const Response& r) {
  auto it = set.pending.find(r.names[0]);
  if (it == set.pending.end()) return;  // this rank joined: nothing to reduce
  Pending& p = it->second;
  Communicator& comm = *set.comm;
  timeline_->end(r.names[0], "QUEUE");
  {
    timeline::Span span(timeline_, r.names[0], "ALLREDUCE", [&] {
      const Algorithm a = comm.choose_algorithm(Collective::kAllreduce, p.input.bytes());
      return nlohmann::json{{"algorithm", algorithm_name(a)},
                            {"transport", transport_name(comm.transport())},
                            {"bytes", p.input.bytes()},
                            {"tensors", 1}};
    });
    if (p.request.device) {
      DeviceSet& dev = device_set(set, p.input.device);
      dev.wait_ready(p.ready);
      dev.allreduce(p.input.data, p.output.data, p.input.count(), p.request.dtype, p.request.op);
      dev.synchronize();
    } else {
      comm.allreduce(p.input.data, p.output.data, p.input.count(), p.request.dtype, p.request.op);
    }
  }
  stats_->bytes_sent += p.input.bytes();
  stats_->bytes_submitted += p.input.bytes();
  stats_->responses += 1;
  finish(set, r, Status::success());
}

void Executor::allreduce_fused(ProcessSet& set, const std::vector<const Response*>& group) {
  const Request& p = group[0]->params;
  const DType wire = wire_dtype(p.dtype, p.compression);
  size_t total = 0, tensors = 0;
  for (const Response* r : group) {
    total += wire_bytes(*r);
    tensors += r->names.size();
  }
  // Each member's pending op, looked up once (end: this rank joined and contributes zeros).
  std::vector<PendingMap::iterator> members;
  for_each_tensor(
      group, [&](const Response& r, size_t i) { members.push_back(set.pending.find(r.names[i])); });
  DeviceSet* dev = nullptr;
  if (p.device) {
    auto held = std::find_if(members.begin(), members.end(),
                             [&](auto it) { return it != set.pending.end(); });
    dev = &device_set(set, held == members.end() ? -1 : (*held)->second.input.device);
  }
  char* buf = dev ? dev->reserve(total) : buffer_.reserve(total);
  if (dev)
    pack_device(*dev, set, group, members, buf);
  else
    pack_all(set, group, members, buf);
  Communicator& comm = *set.comm;
  if (timeline_->active()) {
    const char* algorithm = algorithm_name(comm.choose_algorithm(Collective::kAllreduce, total));
    for (auto it : members) {
      if (it == set.pending.end()) continue;
      timeline_->begin(it->first, "ALLREDUCE",
                       {{"algorithm", algorithm},
                        {"transport", transport_name(comm.transport())},
                        {"bytes", total},
                        {"tensors", tensors}});
    }
  }
  // Host integers average in the reduction, exactly (the sum divided, truncating toward zero):
  // a 1/n postscale goes through a double, which rounds int64 sums past 2^53.
  const bool scaled_average = p.op == ReduceOp::kAverage && (dev || is_floating(wire));
  const ReduceOp op = scaled_average ? ReduceOp::kSum : p.op;
  if (dev)
    dev->allreduce(buf, buf, total / dtype_size(wire), wire, op);
  else
    comm.allreduce(buf, buf, total / dtype_size(wire), wire, op);
  // Statistics first: a caller may read them as soon as its handle completes.
  stats_->bytes_sent += total;
  stats_->responses += tensors;
  if (tensors > 1) {
    stats_->fused_collectives += 1;
    stats_->fused_tensors += tensors;
  }
  double post = p.postscale;
  if (scaled_average) post /= comm.size();
  if (dev)
    unpack_device(*dev, set, group, members, buf, post);
  else
    unpack_all(set, group, members, buf, post);
  for (auto it : members)
    if (it != set.pending.end()) complete(set, it, Status::success());
}

void Executor::pack_all(ProcessSet& set, const std::vector<const Response*>& group,
                        const std::vector<PendingMap::iterator>& members, char* buf) {
  const Request& p = group[0]->params;
  const DType wire = wire_dtype(p.dtype, p.compression);
  const bool traced = timeline_->active();  // the phases' names are built only for a trace
  size_t at = 0, k = 0;
  for_each_tensor(group, [&](const Response& r, size_t i) {
    const size_t bytes = static_cast<size_t>(r.counts[i]) * dtype_size(wire);
    auto it = members[k++];
    if (it == set.pending.end()) {
      // This rank joined: it contributes what leaves the others' values unchanged.
      reduce::fill_identity(buf + at, bytes / dtype_size(wire), wire, p.op);
    } else {
      if (traced) timeline_->transition(it->first, "QUEUE", "PACK");
      fusion::pack(buf + at, wire, it->second.input.data, p.dtype, bytes / dtype_size(wire),
                   p.prescale);
      if (traced) timeline_->end(it->first, "PACK");
    }
    std::memset(buf + at + bytes, 0, wire_bytes(r, i) - bytes);
    at += wire_bytes(r, i);
  });
}

void Executor::unpack_all(ProcessSet& set, const std::vector<const Response*>& group,
                          const std::vector<PendingMap::iterator>& members, const char* buf,
                          double postscale) {
  const Request& p = group[0]->params;
  const DType wire = wire_dtype(p.dtype, p.compression);
  const bool traced = timeline_->active();  // the phases' names are built only for a trace
  size_t at = 0, k = 0, submitted = 0;
  for_each_tensor(group, [&](const Response& r, size_t i) {
    auto it = members[k++];
    if (it != set.pending.end()) {
      if (traced) timeline_->transition(it->first, "ALLREDUCE", "UNPACK");
      fusion::unpack(it->second.output.data, p.dtype, buf + at, wire,
                     static_cast<size_t>(r.counts[i]), postscale);
      if (traced) timeline_->end(it->first, "UNPACK");
      submitted += it->second.input.bytes();
    }
    at += wire_bytes(r, i);
  });
  // One locked add per group: a locked add per tensor waits for the copy's stores to drain
  // (perf attributed about 6% of a 100 x 4 KiB step's samples to it, skid included; the step
  // time's spread on the machine measured hid any change).
  stats_->bytes_submitted += submitted;
}

void Executor::finish(ProcessSet& set, const Response& response, const Status& status) {
  std::vector<std::string> groups;  // a failed member fails the rest of its group here too
  for (const auto& name : response.names)
    if (auto it = set.pending.find(name); it != set.pending.end()) {
      if (!status.ok && !it->second.request.group.empty())
        groups.push_back(it->second.request.group);
      complete(set, it, status);
    }
  if (groups.empty()) return;
  for (auto it = set.pending.begin(); it != set.pending.end();) {
    const auto next = std::next(it);  // release() unlinks `it` only
    if (std::find(groups.begin(), groups.end(), it->second.request.group) != groups.end())
      complete(set, it, status);
    it = next;
  }
}

void Executor::complete(ProcessSet& set, PendingMap::iterator op, const Status& status) {
  op->second.state->complete(status);
  set.release(op);
}

}  // namespace kolo::engine
