// Executor: fusion of allreduces (pack with prescale and cast, one collective, unpack with
// postscale, 1/n for averages and the cast back) and the single-tensor ops.
#include "comm/engine/executor.h"

#include <cstring>

#include "comm/base/log.h"
#include "timeline/timeline.h"

namespace kolo::engine {
namespace {

bool fusable(const Response& a, const Response& b) {
  const Request &p = a.params, &q = b.params;
  return b.kind == Response::Kind::kExecute && b.type == OpType::kAllreduce && p.dtype == q.dtype &&
         p.op == q.op && p.prescale == q.prescale && p.postscale == q.postscale &&
         p.compression == q.compression && a.joined == b.joined;
}

size_t wire_bytes(const Response& r) {
  return fusion::align_up(static_cast<size_t>(r.counts[0]) *
                          dtype_size(wire_dtype(r.params.dtype, r.params.compression)));
}

}  // namespace

DType wire_dtype(DType dtype, Compression compression) {
  const bool floating = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  if (!floating || compression == Compression::kNone) return dtype;
  return compression == Compression::kFp16 ? DType::kFloat16 : DType::kBFloat16;
}

void Executor::run(ProcessSet& set, const std::vector<Response>& responses) {
  for (size_t i = 0; i < responses.size();) {
    const Response& r = responses[i];
    if (r.kind == Response::Kind::kError || r.type != OpType::kAllreduce) {
      if (r.kind == Response::Kind::kError)
        finish(set, r, {ErrorCode::kMismatch, false, r.error});
      else
        run_single(set, r);
      ++i;
      continue;
    }
    if (run_unfused(set, r)) {
      ++i;
      continue;
    }
    // The longest run of compatible allreduces that fits the fusion threshold.
    std::vector<const Response*> group{&r};
    size_t bytes = wire_bytes(r);
    for (++i; i < responses.size() && fusable(r, responses[i]) && !unfused(responses[i]); ++i) {
      size_t more = wire_bytes(responses[i]);
      if (bytes + more > options_.fusion_threshold) break;
      group.push_back(&responses[i]);
      bytes += more;
    }
    allreduce_group(set, group);
  }
}

// Large tensors gain nothing from fusion (their collective already amortises its latency) and
// would pay two extra copies: they are reduced straight from input to output when nothing
// needs the pack pass (no scaling, no compression, no joined ranks contributing zeros).
bool Executor::unfused(const Response& r) const {
  const Request& p = r.params;
  return r.kind == Response::Kind::kExecute && r.type == OpType::kAllreduce && r.joined.empty() &&
         p.prescale == 1.0 && p.postscale == 1.0 && p.compression == Compression::kNone &&
         static_cast<size_t>(r.counts[0]) * dtype_size(p.dtype) >= kUnfusedBytes;
}

bool Executor::run_unfused(ProcessSet& set, const Response& r) {
  if (!unfused(r)) return false;
  auto it = set.pending.find(r.names[0]);
  if (it == set.pending.end()) return false;
  Pending& p = it->second;
  if (timeline_->active()) timeline_->end(r.names[0], "QUEUE");
  if (timeline_->active())
    timeline_->begin(
        r.names[0], "ALLREDUCE",
        {{"algorithm", algorithm_name(set.comm->choose_algorithm("allreduce", p.input.bytes()))},
         {"transport", transport_name(set.comm->transport())},
         {"bytes", p.input.bytes()},
         {"tensors", 1}});
  set.comm->allreduce(p.input.data, p.output.data, p.input.count(), p.request.dtype, p.request.op);
  if (timeline_->active()) timeline_->end(r.names[0], "ALLREDUCE");
  stats_->bytes_sent += p.input.bytes();
  stats_->bytes_submitted += p.input.bytes();
  stats_->responses += 1;
  finish(set, r, {ErrorCode::kInternal, true, ""});
  return true;
}

void Executor::allreduce_group(ProcessSet& set, const std::vector<const Response*>& group) {
  const Request& p = group[0]->params;
  const DType wire = wire_dtype(p.dtype, p.compression);
  const size_t wsize = dtype_size(wire);
  size_t total = 0;
  for (auto* r : group) total += wire_bytes(*r);
  char* buf = buffer_.reserve(total);
  size_t at = 0;
  for (auto* r : group) {
    const std::string& name = r->names[0];
    const size_t count = static_cast<size_t>(r->counts[0]);
    auto it = set.pending.find(name);
    if (timeline_->active() && it != set.pending.end()) timeline_->end(name, "QUEUE");
    if (timeline_->active()) timeline_->begin(name, "PACK");
    if (it == set.pending.end())
      std::memset(buf + at, 0, count * wsize);  // joined: zeros
    else
      fusion::pack(buf + at, wire, it->second.input.data, p.dtype, count, p.prescale);
    std::memset(buf + at + count * wsize, 0, wire_bytes(*r) - count * wsize);
    if (timeline_->active()) timeline_->end(name, "PACK");
    at += wire_bytes(*r);
  }
  const ReduceOp op = p.op == ReduceOp::kAverage ? ReduceOp::kSum : p.op;
  const char* algorithm = algorithm_name(set.comm->choose_algorithm("allreduce", total));
  for (auto* r : group)
    if (timeline_->active())
      timeline_->begin(r->names[0], "ALLREDUCE",
                       {{"algorithm", algorithm},
                        {"transport", transport_name(set.comm->transport())},
                        {"bytes", total},
                        {"tensors", group.size()}});
  set.comm->allreduce(buf, buf, total / wsize, wire, op);
  double post = p.postscale;
  if (p.op == ReduceOp::kAverage) post /= set.comm->size();
  // Statistics first: a caller may read them as soon as its handle completes.
  stats_->bytes_sent += total;
  stats_->responses += group.size();
  if (group.size() > 1) {
    stats_->fused_collectives += 1;
    stats_->fused_tensors += group.size();
  }
  at = 0;
  for (auto* r : group) {
    const std::string& name = r->names[0];
    if (timeline_->active()) timeline_->end(name, "ALLREDUCE");
    auto it = set.pending.find(name);
    if (it != set.pending.end()) {
      if (timeline_->active()) timeline_->begin(name, "UNPACK");
      fusion::unpack(it->second.output.data, p.dtype, buf + at, wire,
                     static_cast<size_t>(r->counts[0]), post);
      if (timeline_->active()) timeline_->end(name, "UNPACK");
      stats_->bytes_submitted += it->second.input.bytes();
    }
    at += wire_bytes(*r);
    finish(set, *r, {ErrorCode::kInternal, true, ""});
  }
}

void Executor::finish(ProcessSet& set, const Response& response, const Status& status) {
  for (const auto& name : response.names) {
    auto it = set.pending.find(name);
    if (it == set.pending.end()) continue;
    it->second.state->complete(status);
    set.remove(name);
  }
}

}  // namespace kolo::engine
