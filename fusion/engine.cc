// Engine: submission from any thread, and the background loop. Each cycle, per process set:
//   1. every rank marks the cache positions of its pending requests; one MIN-allreduce of those
//      bytes (plus flags: nobody has uncached work, somebody joined, nobody shuts down) gives
//      the tensors ready everywhere;
//   2. if any rank has uncached work or has joined, ranks allgather their pending requests;
//      rank 0's Coordinator decides and broadcasts the ordered responses;
//   3. every rank executes cache hits, then the responses, identically (executor.cc).
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "comm/base/log.h"
#include "comm/base/text.h"
#include "comm/bootstrap/store.h"
#include "fusion/engine_impl.h"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;

namespace {

// Forks this process has made children through: a child sees one more than its parent had, so
// the per-op check is one relaxed load (getpid is a system call, ~0.1 us, on every op).
std::atomic<uint64_t> g_forks{0};

uint64_t fork_count() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { g_forks.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  return g_forks.load(std::memory_order_relaxed);
}

// Fails a queued op that never reached its set, and lets go of what it held.
void fail_queued(Pending& p, ErrorCode code, const std::string& why) {
  p.state->fail(code, why);
  p.state.reset();
  p.ready.reset();
}

}  // namespace

Engine::Impl::Impl(std::shared_ptr<Communicator> comm, EngineOptions opts)
    : world_(std::move(comm)),
      options_(std::move(opts)),
      pid_(static_cast<int>(::getpid())),
      forks_(fork_count()),
      yield_to_app_(waiters_drive(options_.progress, world_->local_size(), world_->host_cpus())) {
  check_settings_agree();
  sets_.push_back(std::make_shared<ProcessSet>(0, world_->split(0, world_->rank()), options_));
  set_ranks_.push_back("all " + std::to_string(world_->size()));
  removed_.push_back(false);
  start_timeline_everywhere();
  executor_ = std::make_unique<Executor>(options_, &timeline_, &stats_);
  driver_ = std::make_shared<Driver>();
  driver_->impl = this;
  driver_->help = &Impl::help;
  thread_ = std::thread([this] { loop(); });
}

Engine::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> run(driver_->mutex);  // waits for a helper's iteration
    driver_->impl = nullptr;
  }
  timeline_.stop();
}

bool Engine::Impl::help(Driver& driver) {
  std::unique_lock<std::mutex> run(driver.mutex, std::try_to_lock);
  if (!run.owns_lock() || driver.impl == nullptr) return false;
  return driver.impl->iterate(true) != Pass::kStopped;
}

namespace {

struct OpWhat {
  const Request& r;
};
std::ostream& operator<<(std::ostream& out, const OpWhat& w) {
  return out << op_type_name(w.r.type) << " of '" << w.r.name << "'";
}

// Device tensors: a backend to run them, input and output on one device, and scaling and
// compression its kernels take (float32, float16, bfloat16; other dtypes unscaled).
void check_device(const Request& r, const Memory& input, const Memory& output,
                  const DeviceBackend* device) {
  const int id = std::max(input.device, output.device);
  KOLO_CHECK_ARG(device != nullptr, "tensor '", r.name, "' is in device memory (device ", id,
                 "); this engine has no device backend (EngineOptions::device, "
                 "kolo_engine_cuda's cuda_device_backend())");
  KOLO_CHECK_ARG(output.data == nullptr || input.device == output.device, "tensor '", r.name,
                 "': input on device ", input.device, ", output on device ", output.device,
                 "; both must be on the same device");
  KOLO_CHECK_ARG(!is_bitwise(r.op), "tensor '", r.name, "' (device): reduce op ", op_name(r.op),
                 " has no NCCL equivalent; reduce it from host memory");
  // The conversions the device pack and unpack will make (an average scales by 1/n).
  const DType wire = wire_dtype(r.dtype, r.compression);
  const double post = r.postscale * (r.op == ReduceOp::kAverage ? 0.5 : 1.0);
  try {
    fusion::cuda::convert_path(r.dtype, wire, r.prescale);
    fusion::cuda::convert_path(wire, r.dtype, post);
  } catch (const Error& e) {
    KOLO_THROW(ErrorCode::kInvalidArgument, op_type_name(r.type), " of '", r.name,
               "' (device): ", e.message());
  }
}

// What the loop would otherwise trust: a bad value here used to end the engine thread for good.
void check_submission(const Request& r, const Memory& input, const Memory& output,
                      const DeviceBackend* device) {
  const OpWhat what{r};  // formatted only into an error message (this runs for every op)
  KOLO_CHECK_ARG(static_cast<int>(r.dtype) < kNumDTypes, what, ": dtype ",
                 static_cast<int>(r.dtype), " is not a kolo dtype (0-", kNumDTypes - 1, ")");
  KOLO_CHECK_ARG(static_cast<int>(r.op) < kNumReduceOps, what, ": reduce op ",
                 static_cast<int>(r.op), " is not a kolo reduce op (0-", kNumReduceOps - 1, ")");
  KOLO_CHECK_ARG(static_cast<int>(r.compression) <= static_cast<int>(Compression::kBf16), what,
                 ": compression ", static_cast<int>(r.compression), " is not none, fp16 or bf16");
  KOLO_CHECK_ARG(std::isfinite(r.prescale) && std::isfinite(r.postscale), what,
                 ": prescale and postscale must be finite (", r.prescale, ", ", r.postscale, ")");
  if (is_bitwise(r.op)) {  // bits are combined as they are: nothing to scale or compress
    KOLO_CHECK_ARG(op_takes(r.op, r.dtype), what, ": reduce op ", op_name(r.op),
                   " works on the bits of integers, not on ", dtype_name(r.dtype), " elements");
    KOLO_CHECK_ARG(r.prescale == 1.0 && r.postscale == 1.0 && r.compression == Compression::kNone,
                   what, ": reduce op ", op_name(r.op),
                   " takes no prescale, postscale or compression (got ", r.prescale, ", ",
                   r.postscale, ", compression ", static_cast<int>(r.compression), ")");
  }
  // At most 2^60 bytes even as fp32 staging (prescale and compression convert to fp32).
  const size_t limit = (size_t{1} << 60) / std::max<size_t>(dtype_size(r.dtype), 4);
  size_t count = 1;
  for (int64_t d : r.shape) {
    KOLO_CHECK_ARG(d >= 0, what, ": negative dimension ", d, " in shape ", shape_text(r.shape));
    KOLO_CHECK_ARG(!__builtin_mul_overflow(count, static_cast<size_t>(d), &count) && count <= limit,
                   what, ": shape ", shape_text(r.shape), " has too many elements");
  }
  if (input.device >= 0 || output.device >= 0) check_device(r, input, output, device);
  KOLO_CHECK_ARG(input.data != nullptr || count == 0, "tensor '", r.name, "' has no data");
  KOLO_CHECK_ARG(r.type != OpType::kAllreduce || output.data != nullptr || count == 0, what,
                 ": the output buffer is null");
}

// alltoall: no splits means equal ones; there must be one per rank of the set, none negative,
// adding up to the rows.
void check_alltoall_splits(Request& r, int set_size) {
  const int64_t rows = r.shape.empty() ? 1 : r.shape[0];
  if (r.splits.empty()) {
    KOLO_CHECK_ARG(rows % set_size == 0, "alltoall of '", r.name, "': ", rows,
                   " rows do not divide evenly over ", set_size, " ranks; pass splits");
    r.splits.assign(static_cast<size_t>(set_size), rows / set_size);
  }
  KOLO_CHECK_ARG(r.splits.size() == static_cast<size_t>(set_size), "alltoall of '", r.name,
                 "': ", r.splits.size(), " splits for a process set of ", set_size,
                 " ranks; pass one per rank");
  for (int64_t split : r.splits)  // a negative split would pass the sum check below
    KOLO_CHECK_ARG(split >= 0 && split <= rows, "alltoall of '", r.name, "': split ", split,
                   " is not in [0, ", rows, "]");
  const int64_t sum = std::accumulate(r.splits.begin(), r.splits.end(), int64_t{0});
  KOLO_CHECK_ARG(sum == rows, "alltoall of '", r.name, "': the splits add up to ", sum,
                 " rows, but the tensor has ", rows);
}

}  // namespace

// Alltoall splits and broadcast roots fit the set's size (under mutex_).
void Engine::Impl::check_against_set(Request& r, const Memory& input, int set) {
  const int set_size = sets_[set]->comm ? sets_[set]->comm->size() : world_->size();
  if (r.type == OpType::kAlltoall) check_alltoall_splits(r, set_size);
  KOLO_CHECK_ARG(r.type != OpType::kBroadcast || (r.root >= 0 && r.root < set_size),
                 "broadcast of '", r.name, "': root ", r.root, " is not in [0, ", set_size, ")");
  if (r.device) {  // one device per set on a rank: the set's stream and buffer live there
    std::atomic<int>& device = sets_[set]->device_id;  // written here only, under mutex_
    const int known = device.load();
    KOLO_CHECK_ARG(known < 0 || known == input.device, "tensor '", r.name, "' is on device ",
                   input.device, " but process set ", set, " runs on device ", known, " on rank ",
                   world_->rank());
    if (known < 0) device.store(input.device);
  }
}

void Engine::Impl::prune_names(int set) {
  Names& names = active_[set];
  if (names.states.size() < names.prune_at) return;
  std::erase_if(names.states, [](const auto& entry) {
    auto state = entry.second.lock();
    return !state || state->is_done();
  });
  names.prune_at = std::max<size_t>(1024, 2 * names.states.size());
}

std::weak_ptr<Handle::State>& Engine::Impl::claim_name(const std::string& name, int set) {
  auto& slot = active_[set].states[name];
  auto state = slot.lock();
  KOLO_CHECK_ARG(!state || state->is_done(), "tensor '", name, "' is already pending on rank ",
                 world_->rank(), " (duplicate name; wait for the first op before reusing it)");
  return slot;
}

void Engine::Impl::enqueue(const Request& request, const Memory& input, const Memory& output,
                           int set, std::shared_ptr<Handle::State> state) {
  if (timeline_.active()) timeline_.begin(request.name, "NEGOTIATE");
  std::shared_ptr<void> ready;
  if (request.device) ready = options_.device->ready(input.device, input.stream);
  if (queued_ == queue_.size()) queue_.emplace_back();
  auto& [queued_set, p] = queue_[queued_++];
  queued_set = set;
  p.request = request;  // a copy into the slot's capacity
  p.input = input;
  p.output = output;
  p.state = std::move(state);
  p.ready = std::move(ready);
}

bool Engine::Impl::forked() const {
  return fork_count() != forks_;
}

void Engine::Impl::check_process() const {
  if (!forked()) return;
  KOLO_THROW(ErrorCode::kInvalidArgument, "kolo was initialised in process ", pid_,
             " and this is process ", ::getpid(),
             ", a fork of it: a forked child cannot use its parent's kolo (its ops would run the "
             "parent's collectives); use kolo in the parent, or exec in the child and initialise "
             "kolo there as a job of its own");
}

// The path of every single op (allreduce, allgather, ...): no vectors around the one op.
Handle Engine::Impl::submit(Request& request, const Memory& input, const Memory& output, int set) {
  check_process();
  check_submission(request, input, output, options_.device.get());
  auto state = std::make_shared<Handle::State>();
  state->driver = driver_;
  driver_->touch();
  std::lock_guard<std::mutex> lock(mutex_);
  check_set(set);
  check_against_set(request, input, set);
  Handle handle(state);
  if (dead_) {
    state->fail(death_code_, "engine stopped: " + death_);
    return handle;
  }
  prune_names(set);
  claim_name(request.name, set) = state;
  enqueue(request, input, output, set, std::move(state));
  if (idle_) wake_.notify_one();  // a busy or settling loop takes the queue anyway
  return handle;
}

std::vector<Handle> Engine::Impl::submit_all(std::vector<Submission> ops, int set, bool one_state) {
  check_process();
  // Everything is checked before anything is queued: a refused member leaves no other member
  // of its group waiting for it.
  for (const Submission& op : ops)
    check_submission(op.request, op.input, op.output, options_.device.get());
  std::vector<std::shared_ptr<Handle::State>> states;
  for (size_t i = 0; i < ops.size(); ++i) {
    states.push_back(one_state && i > 0 ? states[0] : std::make_shared<Handle::State>());
    states.back()->driver = driver_;
  }
  driver_->touch();
  std::lock_guard<std::mutex> lock(mutex_);
  check_set(set);
  for (Submission& op : ops) check_against_set(op.request, op.input, set);
  std::vector<Handle> handles(states.begin(), states.end());
  if (dead_) {
    for (auto& state : states) state->fail(death_code_, "engine stopped: " + death_);
    return handles;
  }
  prune_names(set);
  std::vector<std::weak_ptr<Handle::State>*> slots;  // nodes: they stay where they are
  for (size_t i = 0; i < ops.size(); ++i) {
    slots.push_back(&claim_name(ops[i].request.name, set));
    for (size_t j = 0; j < i; ++j)
      KOLO_CHECK_ARG(ops[j].request.name != ops[i].request.name, "tensor '", ops[i].request.name,
                     "' is already pending on rank ", world_->rank(),
                     " (duplicate name; wait for the first op before reusing it)");
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    *slots[i] = states[i];
    enqueue(ops[i].request, ops[i].input, ops[i].output, set, states[i]);
  }
  if (idle_) wake_.notify_one();
  return handles;
}

void Engine::Impl::loop() {
  // Microsecond sleeps need a small timer slack (the default 50 us would dominate them).
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  using std::chrono::microseconds;
  auto idle_wait = microseconds(0);
  while (true) {
    bool woken;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      idle_ = true;
      woken = wake_.wait_for(lock, idle_wait, [&] { return stopping_ || dead_ || queued_ > 0; });
      idle_ = false;
      // Let the burst that woke us come in (a backward pass hands over gradient after
      // gradient); a thread that submits and then waits takes the work itself meanwhile.
      if (woken) settle(lock);
      defer(lock);  // also before an idle cycle: peers need it only once this rank is quiet
    }
    Pass pass = Pass::kIdle;
    if (driver_->waiters.load() == 0) {
      std::lock_guard<std::mutex> run(driver_->mutex);
      // A waiter may already have done what this wake-up was for (Handle::wait helps).
      if (!woken || has_work()) pass = iterate(false);
    }
    if (pass == Pass::kStopped) return;
    // While idle, a cycle every few ms: ranks that wait take part in them (a collective's
    // deadline counts from its last progress), and busy ranks' ops wake the loop anyway.
    idle_wait = pass == Pass::kBusy
                    ? microseconds(0)
                    : std::clamp(idle_wait * 2, microseconds(1000), microseconds(5000));
  }
}

bool Engine::Impl::has_work() {
  std::vector<std::shared_ptr<ProcessSet>> sets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || dead_ || queued_ > 0) return true;
    sets.assign(sets_.begin(), sets_.begin() + static_cast<std::ptrdiff_t>(active_sets_));
  }
  for (const auto& set : sets)  // pending and joined change under driver_->mutex only
    if (set && (!set->pending.empty() || set->joined)) return true;
  return false;
}

Engine::Impl::Pass Engine::Impl::iterate(bool helping) {
  std::vector<std::shared_ptr<ProcessSet>> sets;
  bool stopping;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (dead_) return Pass::kStopped;
    take_queue();
    sets.assign(sets_.begin(), sets_.begin() + static_cast<std::ptrdiff_t>(active_sets_));
    stopping = stopping_;
  }
  bool busy = false;
  try {
    for (auto& set : sets) {
      if (!set || !set->comm) continue;
      set->comm->set_busy_polling(helping);
      busy = cycle(*set) || busy;
    }
  } catch (const Error& e) {
    fail_everything(e.code(), e.message());  // the cause's code: timeout, peer lost, ...
    return Pass::kStopped;
  } catch (const std::exception& e) {
    fail_everything(ErrorCode::kInternal, e.what());
    return Pass::kStopped;
  }
  if (stopping) {
    fail_everything(ErrorCode::kPeerLost, "the engine was shut down");
    return Pass::kStopped;
  }
  ++stats_.cycles;
  return busy ? Pass::kBusy : Pass::kIdle;
}

void Engine::Impl::settle(std::unique_lock<std::mutex>& lock) {
  if (options_.cycle_time_ms <= 0) return;
  const auto window = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.cycle_time_ms));
  // Only a stop wakes this wait (submissions notify an idle loop only).
  wake_.wait_for(lock, window, [&] { return stopping_ || dead_; });
}

void Engine::Impl::defer(std::unique_lock<std::mutex>& lock) {
  // A rank without a spare core: a cycle run here would take its time from the application's
  // compute, and a thread that waits drives the cycles itself. Peers waiting in a cycle see
  // this rank once the application goes quiet or waits, and never later than kMaxDeferMs.
  if (!yield_to_app_) return;
  using Ms = std::chrono::duration<double, std::milli>;
  const auto grace = std::chrono::duration_cast<Clock::duration>(Ms(options_.waiter_grace_ms));
  const auto latest =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(Ms(EngineOptions::kMaxDeferMs));
  while (!stopping_ && !dead_) {
    const Clock::time_point touched(
        Clock::duration(driver_->touched.load(std::memory_order_relaxed)));
    const auto until = std::min(touched + grace, latest);
    if (Clock::now() >= until) return;
    wake_.wait_until(lock, until, [&] { return stopping_ || dead_; });
  }
}

void Engine::Impl::take_queue() {
  for (size_t i = 0; i < queued_; ++i) {
    auto& [set, p] = queue_[i];
    if (!sets_[static_cast<size_t>(set)]) {  // removed by now (remove_process_set)
      fail_queued(p, ErrorCode::kInvalidArgument, removed_text(set));
      continue;
    }
    ProcessSet& ps = *sets_[static_cast<size_t>(set)];
    p.seq = ps.submitted++;
    if (p.request.type == OpType::kJoin) {
      ps.joined = true;
      ps.join_state = std::move(p.state);
    } else {
      ps.hold(p);
    }
  }
  queued_ = 0;
}

void Engine::Impl::fail_everything(ErrorCode code, const std::string& why) {
  KOLO_LOG(kDebug, "engine stops: ", why);
  std::lock_guard<std::mutex> lock(mutex_);
  dead_ = true;
  death_code_ = code;
  death_ = why;
  // Each op's error names it: `why` often names the engine's own collective (a negotiation's
  // "allreduce of 4 B" while the application waited for an allgather).
  auto of = [&](const Request& r) {
    return std::string(op_type_name(r.type)) + " '" + r.name + "' was pending: " + why;
  };
  for (auto& set : sets_) {
    if (!set) continue;
    for (auto& [name, p] : set->pending) p.state->fail(code, of(p.request));
    set->pending.clear();
    if (set->join_state) set->join_state->fail(code, "a join was pending: " + why);
  }
  for (size_t i = 0; i < queued_; ++i) {
    Pending& p = queue_[i].second;
    fail_queued(p, code, of(p.request));
  }
  queued_ = 0;
}

bool Engine::Impl::cycle(ProcessSet& set) {
  // One byte per cache entry (the same count on every rank: the caches are identical), then
  // the flags.
  const size_t cap = set.cache.size();
  // kAllHaveNewSet (world set only): every rank has registered a process set that is not
  // active yet, so all activate it after this same cycle and cycle the sets in lockstep.
  // kAllRemovedOne (world set only): every rank has removed a process set it still cycles.
  enum Flag { kNoUncached, kNotJoined, kRunning, kAllHaveNewSet, kAllRemovedOne, kFlags };
  std::vector<uint8_t> bits(cap + kFlags, 0);
  bool uncached = false, stopping = false;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [name, p] : set.pending) {
    auto pos = set.cache.lookup(p.request);
    if (pos && p.cached_since == std::chrono::steady_clock::time_point{}) p.cached_since = now;
    if (pos && now - p.cached_since < set.renegotiate_after)
      bits[*pos] = 1;
    else
      uncached = true;  // not cached, or cached but waiting too long: negotiated
  }
  bits[cap + kNoUncached] = uncached ? 0 : 1;
  bits[cap + kNotJoined] = set.joined ? 0 : 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Only the world set, which every rank cycles first in every iteration, decides a stop: a
    // stop seen in a smaller set would leave the ranks outside it in the next world cycle.
    stopping = set.id == 0 && stopping_;
    bits[cap + kRunning] = stopping ? 0 : 1;
    bits[cap + kAllHaveNewSet] = set.id == 0 && sets_.size() > active_sets_ ? 1 : 0;
    bits[cap + kAllRemovedOne] = set.id == 0 && removals_.size() > retired_ ? 1 : 0;
  }
  set.comm->allreduce(bits.data(), bits.data(), bits.size(), DType::kUInt8, ReduceOp::kMin);
  if (!bits[cap + kRunning]) {
    // Every rank learns the stop in this same cycle; one more reduction names who stopped.
    int32_t who = stopping ? set.comm->rank() : -1;
    set.comm->allreduce(&who, &who, 1, DType::kInt32, ReduceOp::kMax);
    if (stopping)
      throw Error(ErrorCode::kPeerLost,
                  "this rank's engine was shut down (shutdown, or the "
                  "program ending) while the op was pending");
    throw Error(ErrorCode::kPeerLost, "rank " + std::to_string(who) +
                                          " shut its engine down (it called shutdown, ended, or "
                                          "failed; its own output says why)");
  }
  if (bits[cap + kAllHaveNewSet]) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++active_sets_;  // cycled from the next iteration on, on every rank
  }
  if (bits[cap + kAllRemovedOne]) retire_next_removed();
  const bool someone_joined = !bits[cap + kNotJoined];
  // Cache hits are run from the cache itself (not copied: a step's worth of tensors per cycle);
  // the cache changes only after the run.
  std::vector<const Response*> responses;
  if (!someone_joined)
    for (size_t pos = 0; pos < cap; ++pos)
      if (bits[pos]) responses.push_back(&set.cache.at(pos));
  stats_.cache_hits += responses.size();
  std::vector<Response> negotiated;
  if (!bits[cap + kNoUncached] || someone_joined) {
    std::set<std::string> hit;
    for (const Response* r : responses) hit.insert(r->names[0]);
    negotiated = negotiate(set, set.joined, hit);
    for (const Response& r : negotiated) responses.push_back(&r);
  }
  if (responses.empty()) return !set.pending.empty() || set.joined;
  if (timeline_.active())  // agreed everywhere: each tensor now waits for its turn
    for (const Response* r : responses)
      for (const auto& name : r->names)
        if (set.pending.count(name)) timeline_.transition(name, "NEGOTIATE", "QUEUE");
  executor_->run(set, responses);
  for (const Response& r : negotiated) set.cache.put(r);
  return true;
}

std::vector<Response> Engine::Impl::negotiate(ProcessSet& set, bool joined,
                                              const std::set<std::string>& skip) {
  ++stats_.negotiations;
  Communicator& comm = *set.comm;
  std::vector<const Pending*> ordered;  // in submission order
  for (const auto& [name, p] : set.pending)
    if (!skip.count(name)) ordered.push_back(&p);
  std::sort(ordered.begin(), ordered.end(),
            [](const Pending* a, const Pending* b) { return a->seq < b->seq; });
  std::vector<Request> mine;
  for (const Pending* p : ordered) mine.push_back(p->request);
  const std::vector<std::string> all = allgather_bytes(comm, encode_requests(mine, joined));
  std::string reply;
  if (set.coordinator) {
    const size_t n = all.size();
    std::vector<std::vector<Request>> lists(n);
    std::vector<bool> joins(n);
    std::map<std::string, std::vector<bool>> marked;  // the names still waiting keep theirs
    for (size_t r = 0; r < n; ++r) {
      bool j = false;
      lists[r] = decode_requests(all[r], &j);
      joins[r] = j;
      if (!timeline_.active()) continue;
      for (const auto& q : lists[r]) {
        auto& ranks = marked[q.name];
        if (ranks.empty()) {
          auto earlier = set.marked_ready.find(q.name);
          ranks = earlier != set.marked_ready.end() ? earlier->second : std::vector<bool>(n);
        }
        if (!ranks[r]) timeline_.instant(q.name, "ready rank " + std::to_string(r));
        ranks[r] = true;
      }
    }
    const std::vector<Response> decided = set.coordinator->decide(lists, joins);
    for (const Response& r : decided)
      for (const auto& name : r.names) marked.erase(name);  // a later op of the name starts anew
    set.marked_ready = std::move(marked);
    reply = encode_responses(decided);
  }
  int64_t reply_size = static_cast<int64_t>(reply.size());
  comm.broadcast(&reply_size, 1, DType::kInt64, 0);
  reply.resize(static_cast<size_t>(reply_size));
  comm.broadcast(reply.data(), reply.size(), DType::kUInt8, 0);
  return decode_responses(reply);
}

std::string Engine::Impl::next_barrier_name(int set) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Counted from the set's last completed join: a barrier refused because some rank had joined
  // was counted only on the ranks that called it, and the counts must agree again once every
  // rank has joined (else every later barrier waits under names that differ).
  const bool known =
      set >= 0 && static_cast<size_t>(set) < sets_.size() && sets_[static_cast<size_t>(set)];
  const uint64_t joins = known ? sets_[static_cast<size_t>(set)]->joins_completed.load() : 0;
  BarrierCount& count = barriers_[set];
  if (count.joins != joins) count = BarrierCount{joins, 0};
  return "barrier." + std::to_string(count.next++);
}

}  // namespace kolo::engine
