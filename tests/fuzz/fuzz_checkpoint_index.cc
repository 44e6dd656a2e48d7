// Fuzz target: a checkpoint's index.json (trainer/checkpoint/index_check.h) on arbitrary text,
// parsed as read_checkpoint_index parses it. Run: scripts/fuzz.sh fuzz_checkpoint_index 60.
// Parsing and checking raise kolo::Error only; an index that passes keeps the promises the
// loader and kolo_ckpt rely on: every tensor inside `total`, every shard range inside it, and
// reads of every field they use succeed with the checked types.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "trainer/checkpoint/index_check.h"
#include "trainer/io/json_text.h"

namespace kt = kolo::trainer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json index = kt::parse_json_or_discarded(text, "index.json");
    if (!index.is_object()) return 0;
    kt::check_checkpoint_index(index, "index.json");
    const auto total = index.at("total").get<size_t>();
    for (const nlohmann::json& t : index.at("layout")) {
      (void)t.at("name").get<std::string>();
      FUZZ_CHECK(t.at("offset").get<size_t>() + t.at("numel").get<size_t>() <= total);
    }
    for (const auto& [file, entry] : index.at("files").items()) {
      FUZZ_CHECK(file.find('/') == std::string::npos);
      (void)entry.at("sha256").get<std::string>();
      (void)entry.at("bytes").get<uint64_t>();
      if (entry.contains("begin"))
        FUZZ_CHECK(entry.at("begin").get<size_t>() <= entry.at("end").get<size_t>() &&
                   entry.at("end").get<size_t>() <= total);
    }
    const nlohmann::json& s = index.at("loss_scaler");
    (void)s.at("scale").get<float>();
    (void)index.at("step").get<int64_t>();
    (void)index.at("phase").get<std::string>();
  } catch (const kolo::Error&) {
  }
  return 0;
}
