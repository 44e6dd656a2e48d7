// Gradient averaging through kolo's engine, tensor by tensor as the backward announces groups
// of finished tensors (Model's grads-ready hook), under their Hugging Face names, in the
// storage dtype, fused by the engine up to its threshold.
// Stage 0 and 1 callers keep the whole averaged gradient. With `own` narrower than the buffer
// (ZeRO stages 2 and 3), once a tensor's average is back every part of it outside this rank's
// range is discarded (Backend::discard: it reads as zero and its pages go back to the system),
// so the gradient buffer holds this rank's range plus what is in flight: at most
// `max_in_flight` elements of other ranks' ranges (one tensor at least).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "fusion/engine.h"
#include "trainer/dist/partition.h"
#include "trainer/model/model.h"

namespace kolo::trainer {

class GradReducer {
 public:
  // `average`: the engine's options for each tensor (kAverage, with any prescale/postscale);
  // the caller's, read at each submit.
  GradReducer(engine::Engine& engine, Model& model, Partition own, size_t max_in_flight,
              const engine::OpOptions& average);

  // Submits the tensors named prefix... that this backward has not submitted yet ("" for all,
  // in layout order: the same on every rank).
  void submit(const std::string& prefix);
  // Submits the rest, waits for every average, releases what is not this rank's, and readies
  // the next backward. Throws the engine's error (a lost rank, a mismatch).
  void finish();

 private:
  struct Pending {
    size_t index;  // in the layout
    engine::Handle handle;
  };
  // Waits for the oldest pending tensor (when `wait`) or takes every finished one from the
  // front, releasing the parts outside `own_`.
  void retire(bool wait);
  void release(const ParamInfo& p);

  engine::Engine& engine_;
  Model& model_;
  Partition own_;
  const engine::OpOptions& average_;
  bool releases_;  // own_ is narrower than the buffer
  size_t max_in_flight_;
  size_t in_flight_ = 0;  // elements of pending tensors
  std::vector<bool> submitted_;
  std::deque<Pending> pending_;
};

}  // namespace kolo::trainer
