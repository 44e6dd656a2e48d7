// Data parallelism for the trainer: ZeRO stages 0 to 3 over one flat parameter buffer and one
// flat gradient buffer (partition.h cuts both into equal blocks, rank r owning block r).
// Stage 0: as the backward finishes a group of tensors (Model's grads-ready hook) their
//   gradients are averaged through kolo's engine (grad_reducer.h) at the accumulation
//   boundary; every rank keeps the whole model state.
// Stage 1: at the accumulation boundary the gradients are reduce-scattered in one collective;
//   each rank updates the master weights and optimizer states of its block only; the updated
//   16-bit parameters are allgathered.
// Stage 2: every micro-batch's gradients are averaged through the engine during the backward
//   and, once back, everything outside this rank's block is discarded: the gradient buffer
//   holds the block (plus what is in flight, up to reduce_bucket_size elements). With
//   gradient accumulation each micro-batch's block is added into an fp32 block.
// Stage 3: as stage 2, and the parameters outside the block are resident only while the model
//   reads them (param_gatherer.h: gathered per group just in time, the next group prefetched).
// The step's scalars (overflow flag, norm, loss, throughput) are agreed across ranks.
// A model on a device (its backend's device() is not kCpu) takes every stage: its buffers go to
// the engine as device tensors (the engine's device backend: NCCL), stage 1's reduce-scatter and
// the parameter allgathers included. Discarding device memory only zeroes it (a cudaMalloc
// buffer has no per-page release), so there ZeRO stages 2 and 3 save the master weights' and
// optimizer's memory (host-side, train_step.h) but not the device buffers'.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "fusion/engine.h"
#include "trainer/config/train_config.h"
#include "trainer/dist/grad_reducer.h"
#include "trainer/dist/param_gatherer.h"
#include "trainer/dist/partition.h"
#include "trainer/model/model.h"

namespace kolo::trainer {

// A gradient buffer as the optimizer reads it.
struct GradSource {
  const void* data;  // this rank's range (its block, or everything below stage 1)
  DType dtype;       // the storage dtype, or float32 for stage 2/3's accumulation block
};

class DataParallel {
 public:
  // `comm` spans the job (size 1: no engine; every call is local). Refuses ZeRO settings this
  // trainer does not implement, naming the key. The model's parameters are broadcast from
  // rank 0, so every rank starts from the same bits whatever it loaded. `accumulation`:
  // micro-batches per optimizer step. A model on a device over several ranks needs `device`,
  // the engine's device backend.
  DataParallel(std::shared_ptr<Communicator> comm, Model& model, const ZeroConfig& zero,
               int accumulation = 1, std::shared_ptr<engine::DeviceBackend> device = nullptr);
  // The refusals of the constructor alone, for programs that check settings before connecting.
  static void check(const ZeroConfig& zero);
  // DeepSpeed's gradient_predivide_factor (TrainConfig::gradient_predivide()): each rank's
  // gradients are divided by `factor` before the reduction and the average multiplied by it
  // after, so that 16-bit partial sums stay in range (the world size makes the sum itself the
  // average). 1 (the default): the sum divided by the world size. Before the first step.
  void set_predivide(double factor);
  ~DataParallel();  // detaches the hooks
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
  // Bytes of the parameter and gradient buffers (and accumulation block) this rank keeps
  // resident between steps.
  size_t buffer_state_bytes() const;

  // Before each micro-batch's forward and backward; `last_of_step`: the last of its window.
  void begin_micro(bool last_of_step);
  // After the last backward of a step: finishes the reduction, so that grads() holds this
  // rank's range of the averaged gradient (summed over the micro-batches). Throws the engine's
  // error (a lost rank, a mismatch) otherwise.
  void finish_reduction();
  GradSource grads() const;
  // Zeroes the gradients for the next step (at stages 2 and 3 only the block stays resident).
  void zero_grads();

  // After the optimizer step: stages 1 and 2 allgather the updated parameters.
  void gather_params();
  // Stage 3: every parameter resident (for evaluation, saving, the next phase) until
  // release_params(). Other stages: nothing to do.
  void gather_all_params();
  void release_params();

  // Stage 3: how many gathers a prefetch started.
  size_t prefetched() const { return gatherer_ != nullptr ? gatherer_->prefetched() : 0; }

  // Agreement on scalars: every rank gets the same answer.
  bool any(bool flag);
  std::vector<double> sum(std::vector<double> values);
  // Every rank's `partial`, added in rank order (the same bits on every rank and at any stage).
  double ordered_sum(double partial);

 private:
  void fold_into_accumulator();
  void reduce_scatter_grads();
  void allgather_params();
  // A view of `elements` of the model's buffer at `data`, as the engine takes it (rows x
  // elements: the device and producing stream of a device model).
  engine::TensorView view(void* data, size_t elements, int64_t rows = 1) const;

  std::shared_ptr<Communicator> comm_;
  Model& model_;
  ZeroConfig zero_;
  int64_t stage_;
  Partition partition_;
  bool on_device_;                          // the model's buffers are device memory
  std::unique_ptr<engine::Engine> engine_;  // null at size 1, and at stage 1 on the host
  engine::OpOptions average_;               // the engine's options for the gradients' average
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<ParamGatherer> gatherer_;  // stage 3
  bool all_params_ = false;                  // stage 3 between gather_all and release
  bool reducing_ = false;                    // this backward's gradients go to the engine
  int micro_ = 0;                            // micro-batches begun in this step
  // Stage 2/3 with accumulation: this rank's block in fp32, in the model's memory, and a piece
  // of it for the conversions of 16-bit gradients into it.
  BackendBuffer accumulator_, scratch_;
};

}  // namespace kolo::trainer
