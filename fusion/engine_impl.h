// Engine::Impl, the engine's private state: the submission queue, the process sets, the loop
// thread and what it drives (executor, timeline, counters). Only fusion/ includes this.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fusion/executor.h"
#include "fusion/handle_state.h"
#include "fusion/process_set.h"
#include "fusion/stats.h"
#include "timeline/timeline.h"

namespace kolo::engine {

class Engine::Impl {
 public:
  Impl(std::shared_ptr<Communicator> comm, EngineOptions options);
  ~Impl();  // stops the loop; pending ops fail

  // One op as the caller submits it.
  struct Submission {
    Request request;
    Memory input, output;
  };
  // Queues an op for the loop (a copy of `request`, which the checks may complete: alltoall's
  // splits). Argument errors throw here, on the caller's thread.
  Handle submit(Request& request, const Memory& input, const Memory& output, int set);
  // Queues all of `ops` or, when any is refused, none. one_state: they share one completion
  // state (a grouped allreduce: every member's handle completes at the same instant).
  std::vector<Handle> submit_all(std::vector<Submission> ops, int set, bool one_state);
  int add_process_set(const std::vector<int>& ranks);
  void remove_process_set(int id);
  // "barrier.<n>": barriers are named by their sequence number in the set, the same on every
  // rank.
  std::string next_barrier_name(int set);

  // Runs one loop iteration on the calling thread (a thread waiting for a handle of this
  // engine) if no other thread is running one and the engine is alive; true when it ran one.
  static bool help(Driver& driver);

  Communicator& world() const { return *world_; }
  // A forked child shares its parent's communicator (the same shared memory and sockets) but
  // not the loop thread: ops from it would drive the parent's collectives. kInvalidArgument
  // naming both processes.
  void check_process() const;
  bool forked() const;  // this process is a fork of the one that made the engine
  timeline::Timeline& timeline() { return timeline_; }
  EngineStats stats() const { return stats_.snapshot(); }

 private:
  // Settings every rank must share, compared at construction (kMismatch naming both values).
  void check_settings_agree();
  // Opens each rank's timeline file where KOLO_TIMELINE names one; fails on every rank when any
  // rank's could not be opened.
  void start_timeline_everywhere();
  // Parts of submit and submit_all (mutex_ held): the checks that need the set, a name still
  // pending in the set, queueing.
  void check_set(int set);
  // At the world cycle where every rank has removed one more set (in the same order): fails its
  // pending ops and frees its communicator.
  void retire_next_removed();
  // "process set 3 (ranks [0,2]) was removed (remove_process_set)".
  std::string removed_text(int set) const;
  void check_against_set(Request& request, const Memory& input, int set);
  // The slot for `name` in the set's names, or kInvalidArgument when its op is still pending.
  std::weak_ptr<Handle::State>& claim_name(const std::string& name, int set);
  // Forgets the set's finished names once their table has doubled since it was last pruned.
  void prune_names(int set);
  void enqueue(const Request& request, const Memory& input, const Memory& output, int set,
               std::shared_ptr<Handle::State> state);
  void loop();
  // One iteration: take the queue, one cycle per active set. Runs with driver_->mutex held, on
  // the loop thread or (helping) a thread waiting for a handle, whose waits for peers may spin.
  enum class Pass { kIdle, kBusy, kStopped };
  Pass iterate(bool helping);
  // Queued or pending ops, a join or a stop: what makes an iteration worth running now. With
  // driver_->mutex held.
  bool has_work();
  // With mutex_ held (released while it sleeps): waits the cycle time after a wake-up, so that
  // one cycle takes what a burst of submissions brings in that time, unless the engine stops.
  void settle(std::unique_lock<std::mutex>& lock);
  // With mutex_ held (released while it sleeps): with yield_to_app_, waits while the application
  // is active (Driver::touched within the grace), for at most EngineOptions::kMaxDeferMs.
  void defer(std::unique_lock<std::mutex>& lock);
  // Moves the queue into the process sets; with mutex_ held.
  void take_queue();
  bool cycle(ProcessSet& set);
  std::vector<Response> negotiate(ProcessSet& set, bool joined, const std::set<std::string>& skip);
  // Fails every pending and queued op, and every later submission, with this error.
  void fail_everything(ErrorCode code, const std::string& why);

  std::shared_ptr<Communicator> world_;
  const EngineOptions options_;
  const int pid_;         // the process that made the engine
  const uint64_t forks_;  // and its fork count then (engine.cc)
  // The loop thread defers to the application (EngineOptions::Progress::kWaiter, or kAuto on a
  // host whose ranks leave no core spare).
  const bool yield_to_app_;
  timeline::Timeline timeline_;
  StatCounters stats_;

  // Held through add_process_set and remove_process_set: one call's collectives on the world
  // communicator at a time (taken before mutex_).
  std::mutex registry_mutex_;
  // Guards everything below: shared between submitting threads and the loop.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  // Submitted ops not yet taken by the loop: the first queued_ slots. The slots stay from step
  // to step and requests are copied into them, as take_queue copies them on into released
  // pending nodes, so strings and vectors keep their capacity: a step allocates none for them
  // after the first.
  std::vector<std::pair<int, Pending>> queue_;
  size_t queued_ = 0;
  // Names submitted on this rank, per set, with their ops' states: a name may be reused once
  // its op is done. Done entries stay (the next step submits the same names: no node is
  // allocated or freed) until prune_names. Weak: a finished op's results are not kept here.
  struct Names {
    std::unordered_map<std::string, std::weak_ptr<Handle::State>> states;
    size_t prune_at = 1024;
  };
  std::map<int, Names> active_;
  // Every registered set (null where this rank is not a member). The loop cycles the first
  // active_sets_ of them: a new set is activated at the same world cycle on every rank (the
  // world set's negotiation agrees on it), since ranks register it at different moments and
  // cycling it early on one rank would leave its peers in another collective.
  std::vector<std::shared_ptr<ProcessSet>> sets_;
  std::vector<std::string> set_ranks_;  // per set: its world ranks as text, for messages
  std::vector<bool> removed_;           // per set: remove_process_set was called here
  std::vector<int> removals_;           // the sets removed here, in call order
  size_t retired_ = 0;                  // how many of removals_ every rank has retired
  size_t active_sets_ = 1;
  // Per set: barriers submitted since the set's last completed join (`joins`).
  struct BarrierCount {
    uint64_t joins = 0, next = 0;
  };
  std::map<int, BarrierCount> barriers_;
  bool stopping_ = false, dead_ = false;
  bool idle_ = false;  // the loop waits for work: a submission wakes it
  ErrorCode death_code_ = ErrorCode::kPeerLost;
  std::string death_;

  std::unique_ptr<Executor> executor_;  // used under driver_->mutex only
  std::shared_ptr<Driver> driver_;      // shared with every handle's state
  std::thread thread_;
};

}  // namespace kolo::engine
