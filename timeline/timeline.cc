// Timeline: callers append small Event records to a queue under a short lock; a writer thread
// turns each batch into JSON and splices it in before the file's closing "]" with a single
// positioned write, so the file stays a complete JSON array between writes.
#include "timeline/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/log.h"

namespace kolo::timeline {
namespace {

using nlohmann::json;

// The file always ends with this; later batches overwrite it and write it again.
constexpr char kClose[] = "\n]";
constexpr int64_t kCloseSize = 2;

// Writes all of `text` at `offset`; false with errno set on failure.
bool write_at(int fd, const std::string& text, int64_t offset) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string errno_text() {
  return std::error_code(errno, std::generic_category()).message();
}

}  // namespace

Timeline::Timeline() = default;

Timeline::~Timeline() {
  stop();
}

void Timeline::start(const std::string& path, int rank) {
  std::lock_guard control(control_mu_);
  stop_locked();
  KOLO_CHECK_ARG(!path.empty(), "timeline: the file path is empty");
  KOLO_CHECK_ARG(rank >= 0, "timeline: rank ", rank, " is negative");

  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) KOLO_THROW_ERRNO("timeline: cannot open '", path, "' for writing");
  fd_ = fd;
  rank_ = rank;
  path_ = path;
  end_offset_ = 0;
  failed_ = false;

  // Written here rather than by the writer so that the file is valid JSON as soon as start()
  // returns, even if no event ever follows.
  std::deque<Event> header;
  header.push_back(Event{'M', 0, 0, 0, "process_name", {{"name", "rank " + std::to_string(rank)}}});
  header.push_back(Event{'M', 0, 0, 0, "process_sort_index", {{"sort_index", rank}}});
  if (!write_batch(header)) {
    std::string reason = errno_text();
    ::close(fd_);
    fd_ = -1;
    KOLO_THROW(ErrorCode::kIo, "timeline: cannot write '", path, "': ", reason);
  }

  {
    std::lock_guard lock(mu_);
    queue_.clear();
    tids_.clear();
    origin_ = std::chrono::steady_clock::now();
    accepting_ = true;
    stopping_ = false;
  }
  writer_ = std::thread([this] { writer_loop(); });
  active_.store(true, std::memory_order_release);
  KOLO_LOG(kInfo, "timeline: writing '", path, "'");
}

void Timeline::stop() {
  std::lock_guard control(control_mu_);
  stop_locked();
}

void Timeline::stop_locked() {
  if (!writer_.joinable()) return;
  active_.store(false, std::memory_order_release);
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    stopping_ = true;
  }
  cv_.notify_one();
  writer_.join();  // the writer drains the queue before it returns
  if (::close(fd_) != 0)
    KOLO_LOG(kWarning, "timeline: closing '", path_, "' failed: ", errno_text());
  fd_ = -1;
}

void Timeline::begin(const std::string& tensor, const std::string& phase, json args) {
  record('B', 0, &tensor, phase, std::move(args));
}

void Timeline::end(const std::string& tensor, const std::string& phase, json args) {
  record('E', 0, &tensor, phase, std::move(args));
}

void Timeline::instant(const std::string& tensor, const std::string& name, json args) {
  record('i', 't', &tensor, name, std::move(args));
}

void Timeline::transition(const std::string& tensor, const std::string& from,
                          const std::string& to) {
  if (!active()) return;
  end(tensor, from);
  begin(tensor, to);
}

void Timeline::cycle_marker(uint64_t cycle) {
  if (!active()) return;  // skip building the args
  record('i', 'p', nullptr, "cycle", {{"cycle", cycle}});
}

void Timeline::record(char ph, char scope, const std::string* tensor, const std::string& name,
                      json args) {
  if (!active()) return;
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (!accepting_) return;  // stop() won the race with the active() check above
    // The writer sleeps only on an empty queue, so only the push that ends emptiness wakes it.
    wake = queue_.empty();
    int tid = tensor != nullptr ? tid_for(*tensor) : 0;
    // Taken under the lock so that the file's order is also time order, per row and overall.
    int64_t ts = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - origin_)
                     .count();
    queue_.push_back(Event{ph, scope, tid, ts, name, std::move(args)});
  }
  if (wake) cv_.notify_one();
}

int Timeline::tid_for(const std::string& tensor) {
  // Row 0 is left to process-wide markers; tensors count from 1 in order of appearance.
  auto [it, inserted] = tids_.try_emplace(tensor, static_cast<int>(tids_.size()) + 1);
  int tid = it->second;
  if (inserted) {
    queue_.push_back(Event{'M', 0, tid, 0, "thread_name", {{"name", tensor}}});
    queue_.push_back(Event{'M', 0, tid, 0, "thread_sort_index", {{"sort_index", tid}}});
  }
  return tid;
}

void Timeline::writer_loop() {
  for (;;) {
    std::deque<Event> batch;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything queued has been handled
      batch.swap(queue_);
    }
    if (failed_ || write_batch(batch)) continue;
    // A full disk must not take the job down: report once, then drop events cheaply.
    failed_ = true;
    KOLO_LOG(kWarning, "timeline: writing '", path_, "' failed: ", errno_text(),
             "; the rest of the timeline is dropped");
    std::lock_guard lock(mu_);
    accepting_ = false;
  }
}

json Timeline::to_json(const Event& event) const {
  json out = {{"name", event.name},
              {"ph", std::string(1, event.ph)},
              {"ts", event.ts},
              {"pid", rank_},
              {"tid", event.tid}};
  if (event.scope != 0) out["s"] = std::string(1, event.scope);
  // Trace viewers show args only as an object; a bare value is kept under "value".
  if (event.args.is_object())
    out["args"] = event.args;
  else if (!event.args.is_null())
    out["args"] = {{"value", event.args}};
  return out;
}

bool Timeline::write_batch(const std::deque<Event>& batch) {
  // The first write opens the array; later ones replace the closing "\n]" with ",\n".
  bool first = end_offset_ == 0;
  std::string text = first ? "[\n" : ",\n";
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i > 0) text += ",\n";
    // Tensor names are not guaranteed UTF-8; replacing bad bytes beats throwing in the writer.
    text += to_json(batch[i]).dump(-1, ' ', false, json::error_handler_t::replace);
  }
  text += kClose;
  int64_t offset = first ? 0 : end_offset_ - kCloseSize;
  if (!write_at(fd_, text, offset)) return false;
  end_offset_ = offset + static_cast<int64_t>(text.size());
  return true;
}

std::string timeline_path_for_rank(const std::string& pattern, int rank) {
  std::string rank_text = std::to_string(rank);
  std::string path;
  bool substituted = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "%r") == 0) {
      path += rank_text;
      substituted = true;
      ++i;
    } else {
      path += pattern[i];
    }
  }
  if (!substituted && rank != 0) path += ".rank" + rank_text;
  return path;
}

std::unique_ptr<Timeline> timeline_from_env(int rank) {
  auto pattern = env::get("KOLO_TIMELINE");
  if (!pattern) return nullptr;
  auto timeline = std::make_unique<Timeline>();
  timeline->start(timeline_path_for_rank(*pattern, rank), rank);
  return timeline;
}

}  // namespace kolo::timeline
