// Engine: submission from any thread, and the background loop. Each cycle, per process set:
//   1. every rank marks the cache positions of its pending requests; one MIN-allreduce of those
//      bytes (plus flags: nobody has uncached work, somebody joined, nobody shuts down) gives
//      the tensors ready everywhere;
//   2. if any rank has uncached work or has joined, ranks allgather their pending requests;
//      rank 0's Coordinator decides and broadcasts the ordered responses;
//   3. every rank executes cache hits, then the responses, identically (executor.cc).
#include <sys/prctl.h>

#include <algorithm>
#include <deque>
#include <numeric>
#include <set>
#include <thread>

#include "comm/base/log.h"
#include "comm/engine/executor.h"
#include "comm/engine/state.h"
#include "timeline/timeline.h"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;
// A submission burst has ended when nothing new arrived for this long.
constexpr auto kBurstGap = std::chrono::microseconds(10);

class Engine::Impl {
 public:
  Impl(std::shared_ptr<Communicator> comm, EngineOptions options);
  ~Impl();
  Handle submit(Request request, TensorView input, TensorView output, int set);
  int add_process_set(const std::vector<int>& ranks);

  std::shared_ptr<Communicator> world;
  EngineOptions options;
  timeline::Timeline timeline;
  mutable std::mutex mutex;
  EngineStats stats;                 // guarded by mutex for readers; written by the loop
  std::map<int, uint64_t> barriers;  // per process set: names barriers identically on all ranks

 private:
  void loop();
  bool cycle(ProcessSet& set);
  std::vector<Response> negotiate(ProcessSet& set, bool joined, const std::set<std::string>& skip);
  void fail_everything(const std::string& why);

  std::condition_variable wake_;
  std::deque<std::pair<int, Pending>> queue_;
  // Names submitted and not finished, per set (mutex): a name may be reused once its op is done.
  std::map<int, std::map<std::string, std::shared_ptr<Handle::State>>> active_;
  std::vector<std::shared_ptr<ProcessSet>> sets_;
  bool stopping_ = false, dead_ = false;
  std::string death_;
  std::unique_ptr<Executor> executor_;
  std::thread thread_;
};

Engine::Impl::Impl(std::shared_ptr<Communicator> comm, EngineOptions opts)
    : world(std::move(comm)), options(std::move(opts)) {
  sets_.push_back(std::make_shared<ProcessSet>(0, world->split(0, world->rank()), options));
  if (!options.timeline_path.empty()) {
    timeline.start(timeline::timeline_path_for_rank(options.timeline_path, world->rank()),
                   world->rank());
  }
  executor_ = std::make_unique<Executor>(options, &timeline, &stats);
  thread_ = std::thread([this] { loop(); });
}

Engine::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  timeline.stop();
}

Handle Engine::Impl::submit(Request request, TensorView input, TensorView output, int set) {
  auto state = std::make_shared<Handle::State>();
  KOLO_CHECK_ARG(input.device < 0, "tensor '", request.name,
                 "' is in device memory; this build handles host tensors only");
  KOLO_CHECK_ARG(input.data != nullptr || input.count() == 0, "tensor '", request.name,
                 "' has no data");
  std::lock_guard<std::mutex> lock(mutex);
  KOLO_CHECK_ARG(set >= 0 && set < static_cast<int>(sets_.size()) && sets_[set], "process set ",
                 set, " does not exist on rank ", world->rank());
  if (dead_) {
    state->fail(ErrorCode::kPeerLost, "engine stopped: " + death_);
    return Handle(state);
  }
  ProcessSet& ps = *sets_[static_cast<size_t>(set)];
  (void)ps;
  auto& previous = active_[set][request.name];
  KOLO_CHECK_ARG(!previous || previous->is_done(), "tensor '", request.name,
                 "' is already pending on rank ", world->rank(),
                 " (duplicate name; wait for the first op before reusing it)");
  previous = state;
  if (timeline.active()) timeline.begin(request.name, "NEGOTIATE");
  queue_.push_back({set, Pending{std::move(request), input, output, state}});
  wake_.notify_one();
  return Handle(state);
}

void Engine::Impl::loop() {
  // Microsecond sleeps need a small timer slack (the default 50 us would dominate them).
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  auto idle_wait = std::chrono::microseconds(0);
  while (true) {
    std::vector<std::shared_ptr<ProcessSet>> sets;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake_.wait_for(lock, idle_wait, [&] { return stopping_ || !queue_.empty(); });
      if (!queue_.empty() && options.cycle_time_ms > 0) {
        // Batch a burst of submissions: wait while they keep coming, at most the cycle time.
        const auto limit =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double, std::milli>(options.cycle_time_ms));
        size_t seen = queue_.size();
        for (auto quiet_since = Clock::now(); Clock::now() < limit;) {
          lock.unlock();
          std::this_thread::yield();  // lets the submitting threads run on a busy core
          lock.lock();
          if (queue_.size() != seen) {
            seen = queue_.size();
            quiet_since = Clock::now();
          } else if (Clock::now() - quiet_since >= kBurstGap) {
            break;
          }
        }
      }
      for (auto& [set, p] : queue_) {
        ProcessSet& ps = *sets_[static_cast<size_t>(set)];
        ps.order.push_back(p.request.name);
        if (p.request.type == OpType::kJoin) {
          ps.joined = true;
          ps.join_state = p.state;
        } else {
          ps.pending.emplace(p.request.name, std::move(p));
        }
      }
      queue_.clear();
      sets = sets_;
      stopping = stopping_;
    }
    bool busy = false;
    try {
      for (auto& set : sets)
        if (set && set->comm) busy = cycle(*set) || busy;
    } catch (const std::exception& e) {
      fail_everything(e.what());
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& [id, names] : active_)
        std::erase_if(names, [](const auto& entry) { return entry.second->is_done(); });
    }
    if (stopping) {
      fail_everything("the engine was shut down");
      return;
    }
    ++stats.cycles;
    // Idle ranks still take part in cycles that busy ranks start, a few ms apart at most.
    idle_wait = busy ? std::chrono::microseconds(0)
                     : std::min(idle_wait * 2 + std::chrono::microseconds(50),
                                std::chrono::microseconds(5000));
  }
}

void Engine::Impl::fail_everything(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex);
  dead_ = true;
  death_ = why;
  for (auto& set : sets_) {
    if (!set) continue;
    for (auto& [name, p] : set->pending) p.state->fail(ErrorCode::kPeerLost, why);
    set->pending.clear();
    if (set->join_state) set->join_state->fail(ErrorCode::kPeerLost, why);
  }
  for (auto& [set, p] : queue_) p.state->fail(ErrorCode::kPeerLost, why);
  queue_.clear();
}

bool Engine::Impl::cycle(ProcessSet& set) {
  const size_t cap = set.cache.capacity();
  enum Flag { kNoUncached, kNotJoined, kRunning, kFlags };
  std::vector<uint8_t> bits(cap + kFlags, 0);
  bool uncached = false;
  for (const auto& [name, p] : set.pending) {
    auto pos = set.cache.lookup(p.request);
    if (pos)
      bits[*pos] = 1;
    else
      uncached = true;
  }
  bits[cap + kNoUncached] = uncached ? 0 : 1;
  bits[cap + kNotJoined] = set.joined ? 0 : 1;
  {
    std::lock_guard<std::mutex> lock(mutex);
    bits[cap + kRunning] = stopping_ ? 0 : 1;
  }
  set.comm->allreduce(bits.data(), bits.data(), bits.size(), DType::kUInt8, ReduceOp::kMin);
  if (!bits[cap + kRunning]) throw Error(ErrorCode::kPeerLost, "a rank shut its engine down");
  const bool someone_joined = !bits[cap + kNotJoined];
  std::vector<Response> responses;
  if (!someone_joined)
    for (size_t pos = 0; pos < cap; ++pos)
      if (bits[pos]) responses.push_back(set.cache.at(pos));
  stats.cache_hits += responses.size();
  const size_t hits = responses.size();
  if (!bits[cap + kNoUncached] || someone_joined) {
    std::set<std::string> hit;
    for (const auto& r : responses) hit.insert(r.names[0]);
    auto negotiated = negotiate(set, set.joined, hit);
    responses.insert(responses.end(), negotiated.begin(), negotiated.end());
  }
  if (responses.empty()) return !set.pending.empty() || set.joined;
  for (const auto& r : responses)
    for (const auto& name : r.names)
      if (timeline.active() && set.pending.count(name)) {
        timeline.end(name, "NEGOTIATE");
        timeline.begin(name, "QUEUE");  // agreed everywhere, waiting for its turn
      }
  executor_->run(set, responses);
  for (size_t i = hits; i < responses.size(); ++i) set.cache.put(responses[i]);
  return true;
}

std::vector<Response> Engine::Impl::negotiate(ProcessSet& set, bool joined,
                                              const std::set<std::string>& skip) {
  ++stats.negotiations;
  Communicator& comm = *set.comm;
  std::vector<Request> mine;
  for (const auto& name : set.order)
    if (auto it = set.pending.find(name); it != set.pending.end() && !skip.count(name))
      mine.push_back(it->second.request);
  std::string bytes = encode_requests(mine, joined);
  const size_t n = static_cast<size_t>(comm.size());
  int64_t my_size = static_cast<int64_t>(bytes.size());
  std::vector<int64_t> sizes(n);
  comm.allgather(&my_size, sizes.data(), 1, DType::kInt64);
  std::vector<size_t> counts(sizes.begin(), sizes.end());
  std::string all(std::accumulate(counts.begin(), counts.end(), size_t{0}), '\0');
  comm.allgatherv(bytes.data(), bytes.size(), all.data(), counts, DType::kUInt8);
  std::string reply;
  if (set.coordinator) {
    std::vector<std::vector<Request>> lists(n);
    std::vector<bool> joins(n);
    size_t at = 0;
    for (size_t r = 0; r < n; ++r) {
      bool j = false;
      lists[r] = decode_requests(all.substr(at, counts[r]), &j);
      joins[r] = j;
      at += counts[r];
      if (timeline.active())
        for (const auto& q : lists[r]) timeline.instant(q.name, "ready rank " + std::to_string(r));
    }
    reply = encode_responses(set.coordinator->decide(lists, joins));
  }
  int64_t reply_size = static_cast<int64_t>(reply.size());
  comm.broadcast(&reply_size, 1, DType::kInt64, 0);
  reply.resize(static_cast<size_t>(reply_size));
  comm.broadcast(reply.data(), reply.size(), DType::kUInt8, 0);
  return decode_responses(reply);
}

int Engine::Impl::add_process_set(const std::vector<int>& ranks) {
  const bool member = std::find(ranks.begin(), ranks.end(), world->rank()) != ranks.end();
  int id;
  {
    std::lock_guard<std::mutex> lock(mutex);
    id = static_cast<int>(sets_.size());
  }
  auto comm = world->split(member ? 1 : kUndefinedColor, world->rank());
  std::lock_guard<std::mutex> lock(mutex);
  sets_.push_back(member ? std::make_shared<ProcessSet>(id, comm, options) : nullptr);
  return id;
}

}  // namespace kolo::engine

namespace kolo::engine {
namespace {

Request make_request(const std::string& name, OpType type, const TensorView& t,
                     const OpOptions& o) {
  Request r;
  r.name = name;
  r.type = type;
  r.dtype = t.dtype;
  r.shape = t.shape;
  r.op = o.op;
  r.prescale = o.prescale;
  r.postscale = o.postscale;
  r.compression = o.compression;
  r.root = o.root;
  r.splits = o.splits;
  r.group = o.group;
  return r;
}

}  // namespace

Engine::Engine(std::shared_ptr<Communicator> comm, EngineOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), std::move(options))) {}

Engine::~Engine() = default;

Handle Engine::allreduce(const std::string& name, TensorView input, TensorView output,
                         const OpOptions& options) {
  KOLO_CHECK_ARG(input.count() == output.count() && input.dtype == output.dtype, "allreduce of '",
                 name, "': output must match the input's dtype and size");
  return impl_->submit(make_request(name, OpType::kAllreduce, input, options), input, output,
                       options.process_set);
}

Handle Engine::grouped_allreduce(const std::vector<std::string>& names,
                                 const std::vector<TensorView>& tensors, const OpOptions& options,
                                 std::vector<Handle>* handles) {
  KOLO_CHECK_ARG(names.size() == tensors.size() && !names.empty(),
                 "grouped_allreduce needs one name per tensor");
  handles->clear();
  for (size_t i = 0; i < names.size(); ++i)
    handles->push_back(allreduce(names[i], tensors[i], tensors[i], options));
  return handles->back();
}

Handle Engine::allgather(const std::string& name, TensorView input, const OpOptions& options) {
  return impl_->submit(make_request(name, OpType::kAllgather, input, options), input, {},
                       options.process_set);
}

Handle Engine::broadcast(const std::string& name, TensorView tensor, int root,
                         const OpOptions& options) {
  OpOptions o = options;
  o.root = root;
  return impl_->submit(make_request(name, OpType::kBroadcast, tensor, o), tensor, tensor,
                       options.process_set);
}

Handle Engine::alltoall(const std::string& name, TensorView input, const OpOptions& options) {
  OpOptions o = options;
  const int n = communicator().size();
  const int64_t rows = input.shape.empty() ? 1 : input.shape[0];
  if (o.splits.empty()) {
    KOLO_CHECK_ARG(rows % n == 0, "alltoall of '", name, "': ", rows,
                   " rows do not divide evenly over ", n, " ranks; pass splits");
    o.splits.assign(static_cast<size_t>(n), rows / n);
  }
  KOLO_CHECK_EQ(static_cast<int64_t>(o.splits.size()), static_cast<int64_t>(n),
                ErrorCode::kInvalidArgument, "alltoall of '" + name + "': splits per rank");
  KOLO_CHECK_EQ(std::accumulate(o.splits.begin(), o.splits.end(), int64_t{0}), rows,
                ErrorCode::kInvalidArgument, "alltoall of '" + name + "': sum of splits vs rows");
  return impl_->submit(make_request(name, OpType::kAlltoall, input, o), input, {},
                       options.process_set);
}

Handle Engine::reducescatter(const std::string& name, TensorView input, const OpOptions& options) {
  return impl_->submit(make_request(name, OpType::kReduceScatter, input, options), input, {},
                       options.process_set);
}

Handle Engine::barrier(const OpOptions& options) {
  uint64_t sequence;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    sequence = impl_->barriers[options.process_set]++;
  }
  TensorView none{nullptr, DType::kUInt8, {0}, -1};
  return impl_->submit(
      make_request("barrier." + std::to_string(sequence), OpType::kBarrier, none, options), none,
      none, options.process_set);
}

Handle Engine::join(const OpOptions& options) {
  TensorView none{nullptr, DType::kUInt8, {0}, -1};
  return impl_->submit(make_request("join", OpType::kJoin, none, options), none, none,
                       options.process_set);
}

int Engine::add_process_set(const std::vector<int>& ranks) {
  return impl_->add_process_set(ranks);
}

void Engine::start_timeline(const std::string& path) {
  impl_->timeline.start(path, impl_->world->rank());
}

void Engine::stop_timeline() {
  impl_->timeline.stop();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

Communicator& Engine::communicator() const {
  return *impl_->world;
}

}  // namespace kolo::engine
