// Fuzz target: the trainer's configuration (trainer/config/train_config.h) on arbitrary text.
// Run: scripts/fuzz.sh fuzz_config 60. The input is a JSON config file, then command-line
// overrides each introduced by "\n--set " (key.path=value), as train_mnist / train_bert get
// them:
//   {"train_batch_size": 8}
//   --set optimizer.params.lr=3e-4
// Reading, overriding and validating raise kolo::Error only. An accepted config gives its
// optimizer and schedule settings, and can be written back as JSON (checkpoints store it).
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "trainer/config/train_config.h"
#include "trainer/optim/schedule.h"

namespace {

namespace kt = kolo::trainer;

constexpr std::string_view kSet = "\n--set ";

void use(const kt::TrainConfig& c) {
  (void)c.storage_dtype();
  (void)c.loss_scaler_options();
  (void)c.adamw_options();
  (void)c.sgd_options();
  const kt::ScheduleOptions schedule = c.schedule_options();
  try {
    const kt::LrSchedule lr(schedule);  // a run length may still be missing (total_num_steps)
    for (int64_t step : {int64_t{0}, schedule.warmup_steps, schedule.total_steps + 1})
      (void)lr.lr(step);
  } catch (const kolo::Error&) {
  }
  (void)c.raw.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t end = text.find(kSet);
  const std::string_view file = text.substr(0, end);
  try {
    nlohmann::json config = kt::read_config_file(kolo::fuzz::as_file(file.data(), file.size()));
    while (end != std::string_view::npos) {
      const size_t start = end + kSet.size();
      end = text.find(kSet, start);
      kt::apply_override(config, text.substr(start, end == text.npos ? end : end - start));
    }
    for (int world_size : {1, 3}) use(kt::parse_train_config(config, world_size, false));
  } catch (const kolo::Error&) {
  }
  return 0;
}
