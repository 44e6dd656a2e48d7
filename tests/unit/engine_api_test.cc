// The engine's public methods (fusion/engine_api.cc) at the door: an allreduce whose output
// overlaps its input other than in place is refused before it is queued and the engine goes
// on; ranks that disagree on compression are told the names; start_timeline() gives every
// rank a file of its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/unit/engine_testing.h"

namespace kolo::testing {
namespace {

namespace fs = std::filesystem;

// The op's failure message, or "" when it was accepted.
std::string refusal(const std::function<Handle()>& submit) {
  try {
    submit();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

// A partly overlapping output used to be accepted, then failed inside the engine's loop and
// stopped the engine on that rank ("engine stopped: ..." for every later op), while the other
// ranks waited out their deadline. Small tensors were fused (copied) and went through, so the
// outcome depended on the size: both sizes are refused now.
TEST(EngineApi, AnAllreduceWithOverlappingBuffersIsRefusedAndTheEngineGoesOn) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options(5));
    for (int64_t n : {int64_t{8}, int64_t{100000}}) {
      std::vector<float> x(static_cast<size_t>(n) + 1, 1.0f);
      TensorView head{x.data(), DType::kFloat32, {n}}, tail{x.data() + 1, DType::kFloat32, {n}};
      for (const auto& [in, out] : {std::pair{head, tail}, std::pair{tail, head}}) {
        const std::string message = refusal([&] { return eng.allreduce("ovl", in, out); });
        EXPECT_NE(message.find("allreduce of 'ovl'"), std::string::npos) << message;
        EXPECT_NE(message.find("overlap, but not in place (output == input)"), std::string::npos)
            << message;
      }
      // In place and disjoint buffers are accepted and reduce: the refusal left no trace, not
      // even the name.
      eng.allreduce("ovl", head, head).check();
      std::vector<float> out(static_cast<size_t>(n), 0.0f);
      eng.allreduce("disjoint", {x.data(), DType::kFloat32, {n}},
                    {out.data(), DType::kFloat32, {n}})
          .check();
      EXPECT_EQ(x[0], 2.0f);
      EXPECT_EQ(x[static_cast<size_t>(n) - 1], 2.0f);
      EXPECT_EQ(x[static_cast<size_t>(n)], 1.0f);  // past the tensor: untouched
      EXPECT_EQ(out[0], 4.0f);
      EXPECT_EQ(out[static_cast<size_t>(n) - 1], 4.0f);
    }
    return 0;
  });
}

// The mismatch named the compression by its enum value ("rank 0 has 0, rank 1 has 1").
TEST(EngineApi, ACompressionMismatchNamesBothCompressions) {
  auto messages = run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options(5));
    std::vector<float> f(16, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {16}};
    OpOptions o;
    o.compression = comm.rank() == 0 ? engine::Compression::kNone : engine::Compression::kBf16;
    const engine::Status s = status_of(eng.allreduce("cmp", fv, fv, o));
    EXPECT_EQ(s.code, ErrorCode::kMismatch);
    eng.allreduce("after", fv, fv).check();  // later ops are unaffected
    EXPECT_EQ(f[0], 2.0f);
    return s.message;
  });
  for (const std::string& m : messages)
    EXPECT_NE(m.find("tensor 'cmp': compression mismatch: rank 0 has none, rank 1 has bf16"),
              std::string::npos)
        << m;
}

// Engine::start_timeline() used the path as given on every rank, so the ranks of a job (the C
// API's kolo_timeline_start) wrote one file over each other; KOLO_TIMELINE made it per rank.
TEST(EngineApi, StartTimelineWritesAFileForEachRank) {
  const fs::path dir =
      fs::temp_directory_path() / ("kolo_engine_api_timeline_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* pattern : {"t.json", "r%r.json"}) {
    run_thread_ranks(2, TransportKind::kShm, [&](Communicator& comm) {
      Engine eng(borrowed(comm), quick_options(5));
      eng.start_timeline((dir / pattern).string());
      std::vector<float> f(16, 1.0f);
      eng.allreduce("traced", {f.data(), DType::kFloat32, {16}}, {f.data(), DType::kFloat32, {16}})
          .check();
      eng.stop_timeline();
      return 0;
    });
  }
  for (const char* file : {"t.json", "t.json.rank1", "r0.json", "r1.json"}) {
    std::ifstream in(dir / file);
    ASSERT_TRUE(in.good()) << file << " was not written";
    const auto events = nlohmann::json::parse(in);  // throws when two ranks wrote into it
    EXPECT_TRUE(events.is_array() && events.dump().find("traced") != std::string::npos) << file;
  }
  EXPECT_FALSE(fs::exists(dir / "r1.json.rank1"));  // the rank is applied once
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kolo::testing
