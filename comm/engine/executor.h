// Runs the responses of one cycle on a process set's communicator, identically on every rank:
// fuses consecutive compatible allreduces into the fusion buffer, runs the other ops one by
// one, fills outputs and completes handles.
#pragma once

#include <vector>

#include "comm/engine/state.h"
#include "fusion/pack.h"

namespace kolo::timeline {
class Timeline;
}

namespace kolo::engine {

class Executor {
 public:
  Executor(const EngineOptions& options, timeline::Timeline* timeline, EngineStats* stats)
      : options_(options), timeline_(timeline), stats_(stats) {}
  void run(ProcessSet& set, const std::vector<Response>& responses);

 private:
  // Tensors of at least this many bytes skip the fusion buffer (see executor.cc).
  static constexpr size_t kUnfusedBytes = 128 * 1024;
  bool unfused(const Response& response) const;
  bool run_unfused(ProcessSet& set, const Response& response);
  void allreduce_group(ProcessSet& set, const std::vector<const Response*>& group);
  void run_single(ProcessSet& set, const Response& response);
  void finish(ProcessSet& set, const Response& response, const Status& status);

  const EngineOptions& options_;
  timeline::Timeline* timeline_;
  EngineStats* stats_;
  fusion::FusionBuffer buffer_;
};

DType wire_dtype(DType dtype, Compression compression);

}  // namespace kolo::engine
