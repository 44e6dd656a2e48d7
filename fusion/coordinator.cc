// Coordinator: readiness, agreement checks and stall inspection.
#include "fusion/coordinator.h"

#include <algorithm>
#include <cmath>

#include "comm/base/log.h"
#include "comm/base/text.h"

namespace kolo::engine {
namespace {

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
  static const char* const kCompressionNames[] = {"none", "fp16", "bf16"};  // Compression
  auto compression = [](Compression c) { return kCompressionNames[static_cast<int>(c)]; };
  if (!(f = differ(a.compression == b.compression, "compression", compression(a.compression),
                   compression(b.compression)))
           .empty())
    return f;
  if (!(f = differ(a.device == b.device, "memory", a.device ? "device" : "host",
                   b.device ? "device" : "host"))
           .empty())
    return f;
  return differ(a.group == b.group && a.group_size == b.group_size, "group",
                a.group.empty() ? "none" : a.group + " of " + std::to_string(a.group_size),
                b.group.empty() ? "none" : b.group + " of " + std::to_string(b.group_size));
}

const Request& first_request(const std::vector<const Request*>& by_rank) {
  for (const Request* q : by_rank)
    if (q) return *q;
  KOLO_THROW(ErrorCode::kInternal, "a ready tensor without any request");
}

// The grouped allreduce a name belongs to on any rank ("" for none): a name that one rank
// groups and another does not is decided with the group, which then fails as a whole.
const std::string& group_of(const std::vector<const Request*>& by_rank) {
  for (const Request* q : by_rank)
    if (q && !q->group.empty()) return q->group;
  return first_request(by_rank).group;
}

size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace

Coordinator::Coordinator(int size, std::vector<int> world_ranks, double stall_check_seconds,
                         double stall_shutdown_seconds)
    : size_(size),
      world_ranks_(std::move(world_ranks)),
      stall_check_seconds_(stall_check_seconds),
      stall_shutdown_seconds_(stall_shutdown_seconds) {}

int Coordinator::job_rank(int r) const {
  return world_ranks_.empty() ? r : world_ranks_[static_cast<size_t>(r)];
}

std::string Coordinator::rank_text(int r) const {
  return "rank " + std::to_string(job_rank(r));
}

std::string Coordinator::ranks_text(const std::vector<int>& set_ranks) const {
  std::vector<int> job;
  for (int r : set_ranks) job.push_back(job_rank(r));
  return "ranks " + join_text(job);
}

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
  std::vector<std::string> groups;                          // in order of first appearance
  std::map<std::string, std::vector<std::string>> members;  // ready members of each group
  std::map<std::string, std::vector<std::string>> held;     // members any rank holds
  auto forget = [&](const std::string& name) {
    first_seen_.erase(name);
    warned_.erase(name);
  };
  for (const auto& name : order) {
    const auto& by_rank = by_name[name];
    for (const Request* q : by_rank)
      if (q && !q->group.empty()) {
        auto& names = held[q->group];
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      }
    bool ready = true;
    for (int r = 0; r < size_; ++r)
      ready = ready && (by_rank[static_cast<size_t>(r)] || joined[static_cast<size_t>(r)]);
    if (!ready) {
      waiting[name] = by_rank;
      continue;
    }
    if (const std::string& group = group_of(by_rank); !group.empty()) {
      if (members[group].empty()) groups.push_back(group);
      members[group].push_back(name);
      continue;
    }
    forget(name);
    out.push_back(decide_ready(name, by_rank));
  }
  // A group runs once every member is ready everywhere; until then its members wait. Ranks
  // that disagree on a ready member (or on the group itself: its size, its members) fail the
  // whole group at once, every member any rank holds, so none is left pending on one rank.
  for (const auto& group : groups) {
    const auto& ready = members[group];
    Response resp = decide_group(group, ready, by_name);
    const bool complete =
        static_cast<int32_t>(ready.size()) >= first_request(by_name[ready[0]]).group_size;
    if (resp.kind == Response::Kind::kError) {
      resp.names = held[group];
      if (std::string why = member_dtype_differs(resp.names, by_name); !why.empty())
        resp.error = "grouped allreduce '" + group + "': " + why;
    }
    if (resp.kind == Response::Kind::kError || complete) {
      for (const auto& name : resp.names) {
        forget(name);
        waiting.erase(name);
      }
      out.push_back(std::move(resp));
    } else {
      for (const auto& name : ready) waiting[name] = by_name[name];
    }
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
  const Request& ref = *by_rank[static_cast<size_t>(first)];  // == first_request(by_rank)
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
    if (field == "root") {  // set ranks, given as job ranks as the message's ranks are
      auto job_root = [&](int root) {
        return std::to_string(root >= 0 && root < size_ ? job_rank(root) : root);
      };
      va = job_root(ref.root);
      vb = job_root(q->root);
    }
    if (!field.empty()) {
      resp.kind = Response::Kind::kError;
      resp.error = "tensor '" + name + "': " + field + " mismatch: " + rank_text(first) + " has " +
                   va + ", " + rank_text(r) + " has " + vb;
      return resp;
    }
    resp.first_dims.push_back(q->shape.empty() ? 1 : q->shape[0]);
    resp.splits.insert(resp.splits.end(), q->splits.begin(), q->splits.end());
  }
  if (!resp.joined.empty() && ref.type != OpType::kAllreduce) {
    resp.kind = Response::Kind::kError;
    resp.error = "tensor '" + name + "': " +
                 (resp.joined.size() == 1 ? rank_text(resp.joined[0]) + " has"
                                          : ranks_text(resp.joined) + " have") +
                 " joined; only allreduce continues after join";
  }
  return resp;
}

std::string Coordinator::member_dtype_differs(
    const std::vector<std::string>& names,
    const std::map<std::string, std::vector<const Request*>>& by_name) const {
  for (const std::string& name : names) {
    const auto found = by_name.find(name);
    if (found == by_name.end()) continue;
    const Request* first = nullptr;
    int first_rank = -1;
    for (int r = 0; r < size_; ++r) {
      const Request* q = found->second[static_cast<size_t>(r)];
      if (q == nullptr) continue;
      if (first == nullptr) {
        first = q;
        first_rank = r;
      } else if (q->dtype != first->dtype) {
        return "member '" + name + "' is " + dtype_name(first->dtype) + " on " +
               rank_text(first_rank) + " and " + dtype_name(q->dtype) + " on " + rank_text(r) +
               " (a group's members share one dtype, so the ranks' groups differ)";
      }
    }
  }
  return "";
}

Response Coordinator::decide_group(
    const std::string& group, const std::vector<std::string>& names,
    std::map<std::string, std::vector<const Request*>>& by_name) const {
  Response resp = decide_ready(names[0], by_name[names[0]]);
  resp.names = names;
  const Request& ref = resp.params;
  for (size_t i = 1; i < names.size() && resp.kind == Response::Kind::kExecute; ++i) {
    Response member = decide_ready(names[i], by_name[names[i]]);
    const Request& q = member.params;
    if (member.kind == Response::Kind::kError) {
      resp.kind = Response::Kind::kError;
      resp.error = member.error;
    } else if (q.dtype != ref.dtype || q.op != ref.op || q.prescale != ref.prescale ||
               q.postscale != ref.postscale || q.compression != ref.compression ||
               q.device != ref.device) {
      resp.kind = Response::Kind::kError;
      resp.error = "grouped allreduce '" + group + "': member '" + names[i] + "' (" +
                   q.signature() + ") differs from '" + names[0] + "' (" + ref.signature() +
                   "); members must share dtype, op, scale factors, compression and memory";
    } else {
      resp.counts.push_back(member.counts[0]);
    }
  }
  if (resp.kind == Response::Kind::kError && resp.error.find(group) == std::string::npos)
    resp.error = "grouped allreduce '" + group + "': " + resp.error;
  return resp;
}

void Coordinator::inspect_stalls(const std::map<std::string, std::vector<const Request*>>& pending,
                                 const std::vector<bool>& joined, std::vector<Response>& out) {
  const auto now = Clock::now();
  // The first tensor past the shutdown deadline, and why: every pending one fails with it.
  std::string stalled_name, stalled;
  for (const auto& [name, by_rank] : pending) {
    auto seen = first_seen_.emplace(name, now).first->second;
    double waited = std::chrono::duration<double>(now - seen).count();
    std::vector<int> ready, missing;
    for (int r = 0; r < size_; ++r)
      (by_rank[static_cast<size_t>(r)] || joined[static_cast<size_t>(r)] ? ready : missing)
          .push_back(r);
    const std::string waiting_for =
        missing.empty() ? "the other members of its grouped allreduce (ready on every rank)"
                        : ranks_text(missing) + " (ready on " + ranks_text(ready) + ")";
    std::string what = "tensor '" + name + "' waits for " + waiting_for + " for " +
                       detail::concat(std::round(waited * 10) / 10) + " s";
    if (stall_shutdown_seconds_ > 0 && waited >= stall_shutdown_seconds_) {
      if (stalled.empty()) {
        stalled_name = name;
        stalled = "stall: " + what + "; failed after KOLO_STALL_SHUTDOWN_SECONDS=" +
                  detail::concat(stall_shutdown_seconds_);
      }
    } else if (waited >= stall_check_seconds_ && warned_.insert(name).second) {
      KOLO_LOG(kWarning, "stall: ", what, " (KOLO_STALL_CHECK_SECONDS)");
    }
  }
  // The ranks wait for each other's tensors (each submitted what the others never will, as
  // ranks that run different code do): every tensor pending anywhere fails with the first
  // stalled one, on every rank, so that no rank is left waiting for one of the others.
  if (!stalled.empty())
    for (const auto& [name, by_rank] : pending) {
      Response err;
      err.kind = Response::Kind::kError;
      for (const Request* q : by_rank)
        if (q) err.type = q->type;
      err.names = {name};
      err.error = name == stalled_name
                      ? stalled
                      : "tensor '" + name + "' fails with the stalled ones: " + stalled;
      out.push_back(err);
      first_seen_.erase(name);
      warned_.erase(name);
    }
  // Forget names that vanished without completing (e.g. failed locally).
  for (auto it = first_seen_.begin(); it != first_seen_.end();)
    it = pending.count(it->first) ? std::next(it) : first_seen_.erase(it);
}

}  // namespace kolo::engine
