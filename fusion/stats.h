// The engine's counters: bumped by the loop thread, read by Engine::stats() from any thread,
// so each is atomic; stats() takes a snapshot.
#pragma once

#include <atomic>
#include <cstdint>

#include "fusion/engine.h"

namespace kolo::engine {

struct StatCounters {
  std::atomic<uint64_t> cycles{0}, negotiations{0}, cache_hits{0}, responses{0};
  std::atomic<uint64_t> fused_collectives{0}, fused_tensors{0};
  std::atomic<uint64_t> bytes_submitted{0}, bytes_sent{0};

  EngineStats snapshot() const {
    EngineStats s;
    s.cycles = cycles.load();
    s.negotiations = negotiations.load();
    s.cache_hits = cache_hits.load();
    s.responses = responses.load();
    s.fused_collectives = fused_collectives.load();
    s.fused_tensors = fused_tensors.load();
    s.bytes_submitted = bytes_submitted.load();
    s.bytes_sent = bytes_sent.load();
    return s;
  }
};

}  // namespace kolo::engine
