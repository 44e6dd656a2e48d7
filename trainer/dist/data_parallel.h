// Data parallelism for the trainer, ZeRO stages 0 and 1.
// Stage 0: every rank keeps the whole model state; as the backward finishes a group of tensors
// (Model's grads-ready hook), their gradient ranges go to kolo's engine under their Hugging Face
// names, in the storage dtype, averaged over the ranks, fused up to
// zero_optimization.reduce_bucket_size.
// Stage 1: the flat buffers are cut into equal blocks (partition.h); at the accumulation boundary
// the gradients are reduce-scattered (rank r receives block r averaged), each rank updates the
// master weights and optimizer states of its block only, and the updated 16-bit parameters are
// allgathered. The step's scalars (overflow flag, norm, loss, throughput) are agreed across ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "fusion/engine.h"
#include "trainer/config/train_config.h"
#include "trainer/dist/partition.h"
#include "trainer/model/model.h"

namespace kolo::trainer {

class DataParallel {
 public:
  // `comm` spans the job (size 1: no engine; every call is local). Refuses ZeRO settings this
  // trainer does not implement, naming the key. The model's parameters are broadcast from
  // rank 0, so every rank starts from the same bits whatever it loaded.
  DataParallel(std::shared_ptr<Communicator> comm, Model& model, const ZeroConfig& zero);
  // The refusals of the constructor alone, for programs that check settings before connecting.
  static void check(const ZeroConfig& zero);
  ~DataParallel();  // detaches the hook
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  Communicator& communicator() const { return *comm_; }
  int64_t stage() const { return stage_; }
  // This rank's partition of the flat buffers (stage >= 1: what its optimizer updates).
  const Partition& partition() const { return partition_; }
  // What this rank does with the zero_optimization keys, in one line, for the programs to print.
  std::string describe() const;

  // Before each micro-batch's backward: only the last one of an accumulation window reduces.
  void begin_micro(bool last_of_step);
  // After the last backward of a step: submits what the hook has not (tensors this backward did
  // not touch, or everything when overlap_comm is off) and waits until every gradient is
  // averaged over the ranks. Throws the engine's error (a lost rank, a mismatch) otherwise.
  void finish_reduction();

  // Stage 1, after the optimizer step: every rank gets every partition of the parameters.
  void gather_params();

  // Agreement on scalars: every rank gets the same answer.
  bool any(bool flag);
  std::vector<double> sum(std::vector<double> values);
  // Every rank's `partial`, added in rank order (the same bits on every rank and at any stage).
  double ordered_sum(double partial);

 private:
  void submit(const std::string& prefix);

  std::shared_ptr<Communicator> comm_;
  Model& model_;
  int64_t stage_;
  bool overlap_;
  Partition partition_;
  std::unique_ptr<engine::Engine> engine_;  // null at size 1
  bool reducing_ = false;                   // this backward ends an accumulation window
  std::vector<bool> submitted_;             // by tensor index in the layout
  std::vector<engine::Handle> handles_;
};

}  // namespace kolo::trainer
