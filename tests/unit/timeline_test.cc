// The timeline: events from several threads come out as a valid Chrome-trace JSON array, both
// while the timeline is still active and after stop(), with B/E pairs nested per tensor row,
// rows named after tensors, args kept and time never going backwards on a row.
#include "timeline/timeline.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/base/error.h"

namespace kolo::testing {
namespace {

using nlohmann::json;
using timeline::Timeline;
namespace fs = std::filesystem;

constexpr int kThreads = 4;
constexpr int kTensors = 20;
constexpr int kRounds = 3;
constexpr int kCycles = 10;

std::string tensor_name(int i) {
  return "grad/layer" + std::to_string(i);
}

json read_trace(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());  // throws on anything but complete JSON
}

// The writer is asynchronous: poll until the file holds `size` events (or give up after 5 s).
std::optional<json> wait_for_events(const fs::path& path, size_t size) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    json trace = read_trace(path);
    if (trace.is_array() && trace.size() >= size) return trace;
  } while (std::chrono::steady_clock::now() < deadline);
  return std::nullopt;
}

struct Summary {
  std::map<int, std::string> rows;    // tid -> thread_name
  std::map<std::string, int> counts;  // ph (instants as "i/t" or "i/p") -> events
  int slices = 0;                     // matched B/E pairs
};

// Checks the structure every timeline must have, and counts what it saw.
void check_trace(const json& trace, int rank, Summary* out) {
  ASSERT_TRUE(trace.is_array());
  std::map<int, std::vector<std::string>> open;
  std::map<int, int64_t> last_ts;
  for (const json& event : trace) {
    ASSERT_TRUE(event.is_object()) << event;
    EXPECT_EQ(event.at("pid"), rank);
    std::string ph = event.at("ph");
    std::string name = event.at("name");
    int tid = event.at("tid");
    int64_t ts = event.at("ts");
    EXPECT_GE(ts, last_ts[tid]) << event;  // a new row starts at 0
    last_ts[tid] = ts;
    if (ph == "M") {
      ++out->counts[ph];
      if (name == "thread_name") {
        EXPECT_EQ(out->rows.count(tid), 0u) << "row named twice: " << event;
        out->rows[tid] = event.at("args").at("name");
      }
      if (name == "process_name") {
        EXPECT_EQ(event.at("args").at("name"), "rank " + std::to_string(rank));
      }
      continue;
    }
    if (ph == "i") {
      std::string scope = event.at("s");
      ++out->counts["i/" + scope];
      EXPECT_TRUE(scope == "p" || out->rows.count(tid) == 1) << "unnamed row: " << event;
      continue;
    }
    ++out->counts[ph];
    EXPECT_EQ(out->rows.count(tid), 1u) << "unnamed row: " << event;
    if (ph == "B") {
      open[tid].push_back(name);
    } else {
      ASSERT_EQ(ph, "E") << event;
      ASSERT_FALSE(open[tid].empty()) << "E without B: " << event;
      EXPECT_EQ(open[tid].back(), name) << event;
      open[tid].pop_back();
      ++out->slices;
    }
  }
  for (const auto& [tid, stack] : open) EXPECT_TRUE(stack.empty()) << "unclosed B on tid " << tid;
}

// The args written by produce(), looked up through the row's name.
void check_args(const json& trace, const Summary& summary) {
  for (const json& event : trace) {
    if (event.at("ph") == "M") continue;
    json args = event.value("args", json());
    if (event.at("ph") == "i" && event.at("s") == "p") {
      EXPECT_EQ(event.at("name"), "cycle");
      EXPECT_TRUE(args.at("cycle").is_number_unsigned());
      continue;
    }
    const std::string& row = summary.rows.at(event.at("tid"));
    const std::string what =
        event.at("ph").get<std::string>() + ":" + event.at("name").get<std::string>();
    if (what == "B:negotiate") {
      EXPECT_EQ(tensor_name(args.at("tensor")), row);
    } else if (what == "B:allreduce") {
      EXPECT_EQ(args.at("bytes"), 1024 * std::stoi(row.substr(std::string("grad/layer").size())));
    } else if (what == "E:allreduce") {
      EXPECT_EQ(args.at("algorithm"), "ring");
    } else if (what == "i:ready") {
      int ready = args.at("ready_rank");
      EXPECT_TRUE(ready >= 0 && ready < kRounds) << event;
    }
  }
}

// One thread's share of the tensors: a collective slice with two nested phases and an instant.
void produce(Timeline* timeline, int thread) {
  for (int round = 0; round < kRounds; ++round) {
    for (int i = thread; i < kTensors; i += kThreads) {
      std::string tensor = tensor_name(i);
      timeline->begin(tensor, "collective");
      timeline->begin(tensor, "negotiate", {{"tensor", i}, {"round", round}});
      timeline->instant(tensor, "ready", {{"ready_rank", round}});
      timeline->end(tensor, "negotiate");
      timeline->begin(tensor, "allreduce", {{"bytes", 1024 * i}});
      timeline->end(tensor, "allreduce", {{"algorithm", "ring"}});
      timeline->end(tensor, "collective");
    }
  }
}

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("kolo_timeline_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TimelineTest, ThreadsProduceAValidTraceWhileActiveAndAfterStop) {
  const int rank = 3;
  const fs::path path = dir_ / "trace.json";
  Timeline timeline;
  timeline.start(path, rank);
  ASSERT_TRUE(timeline.active());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(produce, &timeline, t);
  for (uint64_t c = 0; c < kCycles; ++c) timeline.cycle_marker(c);
  for (auto& thread : threads) thread.join();

  const size_t metadata = 2 + 2 * kTensors;  // process name/sort + per row name/sort
  const size_t expected = metadata + kTensors * kRounds * 7 + kCycles;
  std::optional<json> live = wait_for_events(path, expected);
  ASSERT_TRUE(live.has_value()) << "the writer did not catch up while active";
  EXPECT_TRUE(timeline.active());
  timeline.stop();
  EXPECT_FALSE(timeline.active());
  json done = read_trace(path);
  EXPECT_EQ(*live, done);

  Summary summary;
  check_trace(done, rank, &summary);
  ASSERT_EQ(done.size(), expected);
  EXPECT_EQ(summary.counts["M"], static_cast<int>(metadata));
  EXPECT_EQ(summary.counts["B"], kTensors * kRounds * 3);
  EXPECT_EQ(summary.counts["E"], kTensors * kRounds * 3);
  EXPECT_EQ(summary.counts["i/t"], kTensors * kRounds);
  EXPECT_EQ(summary.counts["i/p"], kCycles);
  EXPECT_EQ(summary.slices, kTensors * kRounds * 3);
  std::set<std::string> names, expected_names;
  for (const auto& [tid, name] : summary.rows) names.insert(name);
  for (int i = 0; i < kTensors; ++i) expected_names.insert(tensor_name(i));
  EXPECT_EQ(names, expected_names);
  EXPECT_EQ(summary.rows.size(), expected_names.size());  // one row per tensor
  check_args(done, summary);
}

TEST_F(TimelineTest, RestartingWritesASecondFile) {
  Timeline timeline;
  timeline.start(dir_ / "a.json", 1);
  timeline.begin("x", "allreduce");
  timeline.end("x", "allreduce");
  timeline.start(dir_ / "b.json", 1);  // stops a.json first
  timeline.begin("y", "broadcast");
  timeline.end("y", "broadcast");
  timeline.stop();
  timeline.stop();  // idempotent

  Summary a, b;
  check_trace(read_trace(dir_ / "a.json"), 1, &a);
  check_trace(read_trace(dir_ / "b.json"), 1, &b);
  EXPECT_EQ(a.rows, (std::map<int, std::string>{{1, "x"}}));
  EXPECT_EQ(b.rows, (std::map<int, std::string>{{1, "y"}}));  // row numbers restart per file
  EXPECT_EQ(a.slices, 1);
  EXPECT_EQ(b.slices, 1);

  timeline.start(dir_ / "a.json", 2);  // truncates
  timeline.stop();
  Summary again;
  check_trace(read_trace(dir_ / "a.json"), 2, &again);
  EXPECT_TRUE(again.rows.empty());
  EXPECT_EQ(again.counts["M"], 2);
}

TEST_F(TimelineTest, UnwritablePathThrowsNamingIt) {
  const std::string path = (dir_ / "no-such-dir" / "trace.json").string();
  Timeline timeline;
  try {
    timeline.start(path, 0);
    FAIL() << "start() should throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  EXPECT_FALSE(timeline.active());
  timeline.begin("t", "p");             // dropped, no crash
  timeline.start(dir_ / "ok.json", 0);  // still usable
  EXPECT_TRUE(timeline.active());
}

TEST_F(TimelineTest, EventsWhileInactiveAreDropped) {
  const fs::path path = dir_ / "trace.json";
  {
    Timeline timeline;
    EXPECT_FALSE(timeline.active());
    timeline.begin("early", "p");
    timeline.cycle_marker(1);
    timeline.start(path, 0);
    timeline.begin("kept", "p", {{"k", 1}});
    timeline.end("kept", "p");
    timeline.stop();
    timeline.instant("late", "ready");
    timeline.start(path, 0);
    timeline.begin("flushed", "p");
    timeline.end("flushed", "p");
    // The destructor stops, which writes what is queued.
  }
  Summary summary;
  json trace = read_trace(path);
  check_trace(trace, 0, &summary);
  EXPECT_EQ(summary.rows, (std::map<int, std::string>{{1, "flushed"}}));
  EXPECT_EQ(summary.slices, 1);
  EXPECT_EQ(summary.counts["i/p"] + summary.counts["i/t"], 0);
}

TEST_F(TimelineTest, OddArgsAndNamesStillGiveValidJson) {
  const fs::path path = dir_ / "trace.json";
  Timeline timeline;
  timeline.start(path, 0);
  timeline.begin("bad\xff name", "p", 5);  // not UTF-8, and args not an object
  timeline.end("bad\xff name", "p", json::array({1, 2}));
  timeline.stop();
  json trace = read_trace(path);
  Summary summary;
  check_trace(trace, 0, &summary);
  EXPECT_EQ(summary.slices, 1);
  EXPECT_EQ(trace.at(trace.size() - 2).at("args"), (json{{"value", 5}}));
  EXPECT_EQ(trace.back().at("args"), (json{{"value", {1, 2}}}));
}

TEST_F(TimelineTest, PathsAndEnvironment) {
  using timeline::timeline_path_for_rank;
  EXPECT_EQ(timeline_path_for_rank("t.json", 0), "t.json");
  EXPECT_EQ(timeline_path_for_rank("t.json", 2), "t.json.rank2");
  EXPECT_EQ(timeline_path_for_rank("t%r.json", 0), "t0.json");
  EXPECT_EQ(timeline_path_for_rank("r%r/t%r.json", 12), "r12/t12.json");

  const char* saved = ::getenv("KOLO_TIMELINE");
  std::optional<std::string> old = saved ? std::optional<std::string>(saved) : std::nullopt;
  ::unsetenv("KOLO_TIMELINE");
  EXPECT_EQ(timeline::timeline_from_env(0), nullptr);
  ::setenv("KOLO_TIMELINE", (dir_ / "env%r.json").c_str(), 1);
  auto timeline = timeline::timeline_from_env(3);
  ASSERT_NE(timeline, nullptr);
  EXPECT_TRUE(timeline->active());
  timeline.reset();
  Summary summary;
  check_trace(read_trace(dir_ / "env3.json"), 3, &summary);
  if (old)
    ::setenv("KOLO_TIMELINE", old->c_str(), 1);
  else
    ::unsetenv("KOLO_TIMELINE");
}

}  // namespace
}  // namespace kolo::testing
