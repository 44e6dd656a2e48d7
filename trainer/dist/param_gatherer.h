// ZeRO stage 3's parameters: rank r keeps only its range of the flat 16-bit parameter buffer
// (its Partition); a group of tensors (a prefix the model announces through its params hook:
// an encoder layer, the embeddings, a head) is gathered from its owners through the engine's
// allgather just before the model reads it and discarded again (Backend::discard) when the
// last use ends. Tensors of fewer than `persistence_threshold` elements are never discarded
// (stage3_param_persistence_threshold: they are only refreshed with their group).
// Prefetch: the order in which groups were acquired in the last forward + backward is
// recorded; when a group is acquired at its recorded place, the gather of the next recorded
// group is started at once, so it travels while this one computes. `prefetch_elements`
// (stage3_prefetch_bucket_size; 0 turns prefetching off) caps the elements of groups gathered
// ahead.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "fusion/engine.h"
#include "trainer/dist/partition.h"
#include "trainer/model/model.h"

namespace kolo::trainer {

class ParamGatherer {
 public:
  ParamGatherer(engine::Engine& engine, Model& model, Partition own, size_t persistence_threshold,
                size_t prefetch_elements);

  // The model's params hook: acquire (gather unless resident) or release.
  void use(const std::string& prefix, bool acquire);
  // Before each forward + backward: the last pass's acquire order becomes the prefetch plan.
  void next_pass();
  // Every other rank's range discarded (after a whole-buffer gather, or at the start).
  void release_all();
  // Bytes this rank keeps resident between uses: its range and the persistent tensors.
  size_t resident_bytes() const;
  // Gathers a prefetch started.
  size_t prefetched() const { return prefetched_; }

 private:
  struct Group {
    size_t begin = 0, end = 0;  // element range of the group's tensors
    int uses = 0;
    bool resident = false;
    bool in_flight = false;
    engine::Handle handle;
  };
  Group& group(const std::string& prefix);
  void start(const std::string& prefix, Group& g);
  void complete(Group& g);
  void release(const Group& g);
  void prefetch_after(size_t position);

  engine::Engine& engine_;
  Model& model_;
  Partition own_;
  size_t persistence_threshold_;
  size_t prefetch_elements_;
  std::map<std::string, Group> groups_;
  std::vector<std::string> trace_;      // acquire order of the last complete pass
  std::vector<std::string> recording_;  // this pass so far
  size_t prefetched_ = 0;
};

}  // namespace kolo::trainer
