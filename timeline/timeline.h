// The timeline: a Chrome-trace JSON file (chrome://tracing, Perfetto) that shows, per tensor, the
// phases of each collective. Callers on any thread queue events; one background thread writes
// them, so a collective never waits on file IO.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace kolo::timeline {

// One timeline file per rank. Rows: "pid" is the rank (named "rank N"); each tensor gets its own
// row ("tid", a small integer assigned when the tensor is first seen in this file, named after
// the tensor). Timestamps are whole microseconds of a steady clock since start().
//
// The file is a JSON array that is kept closed ("[\n" ... "\n]") after every write, so it can be
// parsed while the run is still going. Each batch of events is one positioned write into the
// kernel (no user-space buffer to flush); nothing is fsync'ed.
class Timeline {
 public:
  Timeline();
  ~Timeline();  // stop()s
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Opens (truncating) `path` and writes the process metadata. A timeline that is already active
  // is stopped first. Throws kolo::Error kIo naming the path when the file cannot be written.
  void start(const std::string& path, int rank);
  // Writes every queued event and closes the file. Idempotent; events after it are dropped.
  void stop();
  // Cheap enough to test before building an event's arguments.
  bool active() const { return active_.load(std::memory_order_acquire); }

  // Duration events ("B"/"E") named `phase` on the tensor's row; must nest per tensor.
  // Arguments of the begin and the end are shown merged on the slice. `args` should be an object;
  // any other non-null value is written as {"value": args}.
  void begin(const std::string& tensor, const std::string& phase, nlohmann::json args = {});
  void end(const std::string& tensor, const std::string& phase, nlohmann::json args = {});
  // An instant ("i", scope thread) on the tensor's row, e.g. a rank that became ready.
  void instant(const std::string& tensor, const std::string& name, nlohmann::json args = {});
  // A process-wide instant ("i", scope "p") named "cycle" with args {"cycle": cycle}.
  void cycle_marker(uint64_t cycle);
  // Ends phase `from` and begins phase `to` on the tensor's row (e.g. NEGOTIATE -> QUEUE).
  void transition(const std::string& tensor, const std::string& from, const std::string& to);

 private:
  // What the writer needs to build one JSON object; kept small so the queue lock is short.
  struct Event {
    char ph;
    char scope;  // for instants: 't' or 'p'; 0 otherwise
    int tid;
    int64_t ts;
    std::string name;
    nlohmann::json args;
  };

  void record(char ph, char scope, const std::string* tensor, const std::string& name,
              nlohmann::json args);
  int tid_for(const std::string& tensor);  // needs mu_; queues the row's metadata when new
  void stop_locked();                      // needs control_mu_
  void writer_loop();
  nlohmann::json to_json(const Event& event) const;
  bool write_batch(const std::deque<Event>& batch);

  std::atomic<bool> active_{false};
  std::mutex control_mu_;  // serialises start() and stop()

  std::mutex mu_;  // guards everything below up to the writer's own state
  std::condition_variable cv_;
  std::deque<Event> queue_;
  std::unordered_map<std::string, int> tids_;
  bool accepting_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point origin_;

  // Fixed between start() and stop(); the file state is the writer thread's alone.
  int rank_ = 0;
  std::string path_;
  int fd_ = -1;
  int64_t end_offset_ = 0;  // file size; the file always ends with "\n]"
  bool failed_ = false;     // a write failed: later events are dropped, logged once
  std::thread writer_;
};

// A duration event for one scope on `tensor`'s row: begins when made, ends when destroyed.
// With a null or inactive timeline it records nothing, and the arguments (a callable returning
// the JSON object, called only when the timeline is active) are never built.
class Span {
 public:
  Span(Timeline* timeline, const std::string& tensor, const char* phase)
      : timeline_(timeline && timeline->active() ? timeline : nullptr),
        tensor_(tensor),
        phase_(phase) {
    if (timeline_) timeline_->begin(tensor_, phase_);
  }
  template <typename ArgsFn>
  Span(Timeline* timeline, const std::string& tensor, const char* phase, ArgsFn args)
      : timeline_(timeline && timeline->active() ? timeline : nullptr),
        tensor_(tensor),
        phase_(phase) {
    if (timeline_) timeline_->begin(tensor_, phase_, args());
  }
  ~Span() {
    if (timeline_) timeline_->end(tensor_, phase_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Timeline* timeline_;
  const std::string& tensor_;
  const char* phase_;
};

// The file for `rank` from a KOLO_TIMELINE value: every "%r" is replaced by the rank; without
// "%r", rank 0 uses the path as given and rank N > 0 appends ".rankN" (trace.json ->
// trace.json.rank1), so ranks sharing a directory never write the same file.
std::string timeline_path_for_rank(const std::string& pattern, int rank);

// An active Timeline writing to timeline_path_for_rank($KOLO_TIMELINE, rank), or nullptr when
// KOLO_TIMELINE is unset or empty. Throws as start() does.
std::unique_ptr<Timeline> timeline_from_env(int rank);

}  // namespace kolo::timeline
