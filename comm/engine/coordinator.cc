// Coordinator: readiness, agreement checks and stall inspection.
#include "comm/engine/coordinator.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "comm/base/log.h"

namespace kolo::engine {
namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  return s.str();
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? "," : "") << shape[i];
  return s.str() + "]";
}

// The first field on which `b` disagrees with `a` for this op type, or "" when they agree.
std::string disagreement(const Request& a, const Request& b, std::string* va, std::string* vb) {
  auto differ = [&](bool same, const char* field, std::string x, std::string y) {
    if (same) return std::string();
    *va = std::move(x);
    *vb = std::move(y);
    return std::string(field);
  };
  std::string f;
  if (!(f = differ(a.type == b.type, "op type", op_type_name(a.type), op_type_name(b.type)))
           .empty())
    return f;
  if (!(f = differ(a.dtype == b.dtype, "dtype", dtype_name(a.dtype), dtype_name(b.dtype))).empty())
    return f;
  const bool rows_may_differ = a.type == OpType::kAllgather || a.type == OpType::kAlltoall;
  auto tail = [](const std::vector<int64_t>& s) {
    return s.empty() ? s : std::vector<int64_t>(s.begin() + 1, s.end());
  };
  bool same_shape = rows_may_differ ? tail(a.shape) == tail(b.shape) : a.shape == b.shape;
  if (!(f = differ(same_shape, "shape", shape_text(a.shape), shape_text(b.shape))).empty())
    return f;
  if (!(f = differ(a.op == b.op, "reduce op", op_name(a.op), op_name(b.op))).empty()) return f;
  if (!(f = differ(a.root == b.root, "root", std::to_string(a.root), std::to_string(b.root)))
           .empty())
    return f;
  if (!(f = differ(a.prescale == b.prescale && a.postscale == b.postscale, "scale factors",
                   std::to_string(a.prescale) + "/" + std::to_string(a.postscale),
                   std::to_string(b.prescale) + "/" + std::to_string(b.postscale)))
           .empty())
    return f;
  return differ(a.compression == b.compression, "compression",
                std::to_string(static_cast<int>(a.compression)),
                std::to_string(static_cast<int>(b.compression)));
}

size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace

Coordinator::Coordinator(int size, double stall_check_seconds, double stall_shutdown_seconds)
    : size_(size),
      stall_check_seconds_(stall_check_seconds),
      stall_shutdown_seconds_(stall_shutdown_seconds) {}

std::vector<Response> Coordinator::decide(const std::vector<std::vector<Request>>& lists,
                                          const std::vector<bool>& joined) {
  for (int r = 0; r < size_; ++r)
    if (joined[static_cast<size_t>(r)] &&
        std::find(join_order_.begin(), join_order_.end(), r) == join_order_.end())
      join_order_.push_back(r);
  // Names in order of first appearance, scanning ranks in order: the same order everywhere.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Request*>> by_name;
  for (int r = 0; r < size_; ++r)
    for (const Request& q : lists[static_cast<size_t>(r)]) {
      auto& slot = by_name[q.name];
      if (slot.empty()) {
        slot.resize(static_cast<size_t>(size_), nullptr);
        order.push_back(q.name);
      }
      slot[static_cast<size_t>(r)] = &q;
    }
  std::vector<Response> out;
  std::map<std::string, std::vector<const Request*>> waiting;
  for (const auto& name : order) {
    const auto& by_rank = by_name[name];
    bool ready = true;
    for (int r = 0; r < size_; ++r)
      ready = ready && (by_rank[static_cast<size_t>(r)] || joined[static_cast<size_t>(r)]);
    if (!ready) {
      waiting[name] = by_rank;
      continue;
    }
    first_seen_.erase(name);
    warned_.erase(name);
    out.push_back(decide_ready(name, by_rank));
  }
  inspect_stalls(waiting, joined, out);
  if (static_cast<int>(join_order_.size()) == size_) {
    Response done;
    done.type = OpType::kJoin;
    done.names = {"join"};
    done.last_joined = join_order_.back();
    join_order_.clear();
    out.push_back(done);
  }
  return out;
}

Response Coordinator::decide_ready(const std::string& name,
                                   const std::vector<const Request*>& by_rank) const {
  Response resp;
  resp.names = {name};
  int first = 0;
  while (!by_rank[static_cast<size_t>(first)]) ++first;
  const Request& ref = *by_rank[static_cast<size_t>(first)];
  resp.type = ref.type;
  resp.params = ref;
  resp.counts = {static_cast<int64_t>(element_count(ref.shape))};
  for (int r = 0; r < size_; ++r) {
    const Request* q = by_rank[static_cast<size_t>(r)];
    if (!q) {
      resp.joined.push_back(r);
      continue;
    }
    std::string va, vb, field = disagreement(ref, *q, &va, &vb);
    if (!field.empty()) {
      resp.kind = Response::Kind::kError;
      resp.error = "tensor '" + name + "': " + field + " mismatch: rank " + std::to_string(first) +
                   " has " + va + ", rank " + std::to_string(r) + " has " + vb;
      return resp;
    }
    resp.first_dims.push_back(q->shape.empty() ? 1 : q->shape[0]);
    resp.splits.insert(resp.splits.end(), q->splits.begin(), q->splits.end());
  }
  if (!resp.joined.empty() && ref.type != OpType::kAllreduce) {
    resp.kind = Response::Kind::kError;
    resp.error = "tensor '" + name + "': ranks " + ranks_text(resp.joined) +
                 " have joined; only allreduce continues after join";
  }
  return resp;
}

void Coordinator::inspect_stalls(const std::map<std::string, std::vector<const Request*>>& pending,
                                 const std::vector<bool>& joined, std::vector<Response>& out) {
  const auto now = Clock::now();
  for (const auto& [name, by_rank] : pending) {
    auto seen = first_seen_.emplace(name, now).first->second;
    double waited = std::chrono::duration<double>(now - seen).count();
    std::vector<int> ready, missing;
    for (int r = 0; r < size_; ++r)
      (by_rank[static_cast<size_t>(r)] || joined[static_cast<size_t>(r)] ? ready : missing)
          .push_back(r);
    std::string what = "tensor '" + name + "' waits for ranks " + ranks_text(missing) +
                       " (ready on ranks " + ranks_text(ready) + ") for " +
                       detail::concat(std::round(waited * 10) / 10) + " s";
    if (stall_shutdown_seconds_ > 0 && waited >= stall_shutdown_seconds_) {
      Response err;
      err.kind = Response::Kind::kError;
      for (const Request* q : by_rank)
        if (q) err.type = q->type;
      err.names = {name};
      err.error = "stall: " + what + "; failed after KOLO_STALL_SHUTDOWN_SECONDS=" +
                  std::to_string(stall_shutdown_seconds_);
      out.push_back(err);
      first_seen_.erase(name);
      warned_.erase(name);
    } else if (waited >= stall_check_seconds_ && warned_.insert(name).second) {
      KOLO_LOG(kWarning, "stall: ", what, " (KOLO_STALL_CHECK_SECONDS)");
    }
  }
  // Forget names that vanished without completing (e.g. failed locally).
  for (auto it = first_seen_.begin(); it != first_seen_.end();)
    it = pending.count(it->first) ? std::next(it) : first_seen_.erase(it);
}

}  // namespace kolo::engine
