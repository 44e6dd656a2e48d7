// TrainStep: the post-backward phases of trainer/precision/mixed_precision.h in their order.
#include "trainer/train/train_step.h"

#include <algorithm>
#include <cmath>

#include "trainer/optim/clip.h"
#include "trainer/train/summary.h"

namespace kolo::trainer {
namespace {

Partition range_of(const Model& model, const DataParallel* parallel) {
  const size_t total = model.layout().total();
  return parallel != nullptr ? parallel->partition() : Partition{total, 0, total};
}

// `elements` storage elements into a flat buffer of `model`.
void* at(const Model& model, void* base, size_t elements) {
  return static_cast<char*>(base) + elements * dtype_size(model.dtype());
}

// A model on a device: a host copy of this rank's range of the parameters, which the phases
// after backward work on (the optimizer and master weights are host code); empty on the host.
std::vector<char> host_mirror(Model& model, const Partition& range) {
  if (model.backend().device() == Device::kCpu) return {};
  std::vector<char> host((range.end - range.begin) * dtype_size(model.dtype()));
  model.backend().copy_to_host(host.data(), at(model, model.params(), range.begin), host.size());
  return host;
}

ScheduleOptions schedule_for(const TrainConfig& config, int64_t total_steps) {
  ScheduleOptions o = config.schedule_options();
  if (o.total_steps == 0) o.total_steps = std::max<int64_t>(total_steps, o.warmup_steps + 1);
  return o;
}

}  // namespace

TrainStep::TrainStep(Model& model, const TrainConfig& config, int64_t total_steps,
                     DataParallel* parallel)
    : model_(model),
      max_norm_(config.gradient_clipping),
      range_(range_of(model, parallel)),
      layout_(model.layout().slice(range_.begin, range_.end)),
      host_params_(host_mirror(model, range_)),
      precision_(layout_, model.dtype(),
                 host_params_.empty() ? at(model, model.params(), range_.begin)
                                      : static_cast<void*>(host_params_.data())),
      scaler_(config.loss_scaler_options()),
      schedule_(schedule_for(config, total_steps)),
      optimizer_(make_optimizer(config, layout_)),
      parallel_(parallel),
      sharded_(parallel != nullptr && parallel->stage() > 0 && parallel->size() > 1),
      formula_bytes_(zero_formula_bytes(model.num_params(), model.dtype(), config,
                                        parallel != nullptr ? parallel->size() : 1)) {
  // precision_ took its master copy from the parameters above, after DataParallel (made first)
  // broadcast rank 0's.
  zero_grads();
}

void TrainStep::zero_grads() {
  if (parallel_ != nullptr)
    parallel_->zero_grads();
  else
    model_.zero_grad();
}

void TrainStep::begin_micro(bool last_of_step) {
  if (parallel_ != nullptr) parallel_->begin_micro(last_of_step);
}

size_t TrainStep::model_state_bytes() {
  size_t bytes =
      (parallel_ != nullptr ? parallel_->buffer_state_bytes() : 2 * model_.param_bytes()) +
      precision_.owned_bytes();
  for (const OptimizerStateBuffer& buffer : optimizer_->state())
    bytes += buffer.data->size() * sizeof(float);
  return bytes;
}

StepResult TrainStep::finish(int accumulation) {
  StepResult result;
  result.loss_scale = scaler_.scale();
  result.lr = lr();
  if (parallel_ != nullptr) parallel_->finish_reduction();
  const GradSource source =
      parallel_ != nullptr ? parallel_->grads() : GradSource{model_.grads(), model_.dtype()};
  const void* grads = source.data;
  const DType dtype = source.dtype;
  if (!host_params_.empty()) {  // a model on a device: its gradients come to the host
    host_grads_.resize((range_.end - range_.begin) * dtype_size(dtype));
    model_.backend().copy_to_host(host_grads_.data(), grads, host_grads_.size());
    grads = host_grads_.data();
  }
  bool overflow = precision_.check_overflow(grads, dtype);
  // Any rank's overflow skips the step on all of them (at stage 0 they agree already).
  if (parallel_ != nullptr) overflow = parallel_->any(overflow);
  result.applied = scaler_.update(overflow);
  if (result.applied) {
    const float multiplier = 1.0f / (result.loss_scale * static_cast<float>(accumulation));
    // The norm as partitions add it up (partition.h): the same bits at every stage.
    double sumsq;
    if (sharded_)
      sumsq = parallel_->ordered_sum(squared_norm(grads, dtype, multiplier, layout_));
    else if (parallel_ != nullptr && parallel_->size() > 1)
      sumsq = partitioned_squared_norm(grads, dtype, multiplier, layout_, parallel_->size());
    else
      sumsq = squared_norm(grads, dtype, multiplier, layout_);
    result.grad_norm = std::sqrt(sumsq);
    const float factor = clip_factor(result.grad_norm, max_norm_);
    precision_.step(*optimizer_, grads, dtype, multiplier, static_cast<float>(result.lr), factor);
    precision_.copy_master_to_params();
    if (!host_params_.empty())
      model_.backend().copy_from_host(at(model_, model_.params(), range_.begin),
                                      host_params_.data(), host_params_.size());
    if (sharded_) parallel_->gather_params();
  }
  zero_grads();
  return result;
}

}  // namespace kolo::trainer
