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

// A model on a device: a host copy of this rank's range of the parameters, for the host copy of
// the master weights that checkpoints read and write; empty on the host.
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
      on_device_(model.backend().device() != Device::kCpu),
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
  // broadcast rank 0's; a device's copies are taken the same way, its optimizer states start at
  // zero as the host's do.
  if (on_device_) {
    Backend& backend = model_.backend();
    const size_t n = range_.end - range_.begin;
    if (model_.dtype() != DType::kFloat32) {
      device_master_ = BackendBuffer(backend, n * sizeof(float));
      backend.convert(device_master_.data(), DType::kFloat32,
                      at(model_, model_.params(), range_.begin), model_.dtype(), n);
    }
    for (const OptimizerStateBuffer& state : optimizer_->state())
      device_state_.emplace_back(backend, state.data->size() * sizeof(float));
  }
  zero_grads();
}

float* TrainStep::device_master() {
  return device_master_.empty() ? static_cast<float*>(at(model_, model_.params(), range_.begin))
                                : static_cast<float*>(device_master_.data());
}

void TrainStep::state_to_host() {
  if (!on_device_) return;
  Backend& backend = model_.backend();
  backend.copy_to_host(precision_.master(), device_master(),
                       (range_.end - range_.begin) * sizeof(float));
  const std::vector<OptimizerStateBuffer> states = optimizer_->state();
  for (size_t k = 0; k < states.size(); ++k)
    backend.copy_to_host(states[k].data->data(), device_state_[k].data(), device_state_[k].bytes());
}

void TrainStep::state_from_host() {
  if (!on_device_) return;
  Backend& backend = model_.backend();
  backend.copy_from_host(device_master(), precision_.master(),
                         (range_.end - range_.begin) * sizeof(float));
  const std::vector<OptimizerStateBuffer> states = optimizer_->state();
  for (size_t k = 0; k < states.size(); ++k)
    backend.copy_from_host(device_state_[k].data(), states[k].data->data(),
                           device_state_[k].bytes());
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

void TrainStep::update_on_device(const GradSource& grads, float multiplier, float lr,
                                 float grad_scale) {
  Backend& backend = model_.backend();
  optimizer_->begin_step(lr);
  const size_t gsize = dtype_size(grads.dtype);
  float* master = device_master();
  std::vector<float*> state(device_state_.size());
  // One update per run of tensors that follow each other with no padding and share their weight
  // decay (Optimizer::update_on): BERT-base's 200 tensors are a few launches.
  const std::vector<ParamInfo>& params = layout_.params();
  for (size_t i = 0; i < params.size();) {
    ParamInfo run = params[i];
    for (++i; i < params.size() && params[i].offset == run.offset + run.numel &&
              params[i].decay == run.decay;
         ++i)
      run.numel += params[i].numel;
    for (size_t k = 0; k < state.size(); ++k)
      state[k] = static_cast<float*>(device_state_[k].data()) + run.offset;
    optimizer_->update_on(backend, run, master + run.offset,
                          static_cast<const char*>(grads.data) + run.offset * gsize, grads.dtype,
                          multiplier, grad_scale, state.data());
  }
  if (!device_master_.empty())  // phase 6: the 16-bit parameters from the master weights
    backend.convert(at(model_, model_.params(), range_.begin), model_.dtype(), master,
                    DType::kFloat32, range_.end - range_.begin);
}

void TrainStep::stop_if_diverged() const {
  const int64_t step = applied_steps() + skipped_steps();
  const char* remedy =
      " (the weights or activations are no longer finite: a smaller optimizer lr or "
      "weight_decay, warm-up, or gradient_clipping may help; earlier checkpoints are kept)";
  // Without a loss scale, nothing lowers to make the next step finite.
  KOLO_CHECK_ARG(model_.dtype() == DType::kFloat16, "optimizer step ", step,
                 ": the gradients hold inf or NaN in a ", dtype_name(model_.dtype()),
                 " run, which has no loss scale to lower: the training has diverged", remedy);
  KOLO_CHECK_ARG(!scaler_.below_minimum(), "optimizer step ", step,
                 ": the gradients overflow float16 even at fp16.min_loss_scale ",
                 scaler_.options().min_scale, ": the training has diverged", remedy);
}

StepResult TrainStep::finish() {
  StepResult result;
  result.loss_scale = scaler_.scale();
  result.lr = lr();
  if (parallel_ != nullptr) parallel_->finish_reduction();
  const GradSource grads =
      parallel_ != nullptr ? parallel_->grads() : GradSource{model_.grads(), model_.dtype()};
  const float multiplier = 1.0f / result.loss_scale;  // the seeds held 1 / accumulation
  // On a device one pass gives the overflow flag and this rank's part of the squared norm.
  bool overflow = false;
  double device_sumsq = 0.0;
  if (on_device_) {
    const double raw =
        model_.backend().sum_squares(grads.data, range_.end - range_.begin, grads.dtype, &overflow);
    device_sumsq = raw * static_cast<double>(multiplier) * static_cast<double>(multiplier);
  } else {
    overflow = precision_.check_overflow(grads.data, grads.dtype);
  }
  // Any rank's overflow skips the step on all of them (at stage 0 they agree already).
  if (parallel_ != nullptr) overflow = parallel_->any(overflow);
  result.applied = scaler_.update(overflow);
  if (overflow) stop_if_diverged();
  if (result.applied) {
    // The norm as partitions add it up (partition.h): the same bits at every stage on the host.
    double sumsq;
    if (on_device_)
      sumsq = sharded_ ? parallel_->ordered_sum(device_sumsq) : device_sumsq;
    else if (sharded_)
      sumsq = parallel_->ordered_sum(squared_norm(grads.data, grads.dtype, multiplier, layout_));
    else if (parallel_ != nullptr && parallel_->size() > 1)
      sumsq =
          partitioned_squared_norm(grads.data, grads.dtype, multiplier, layout_, parallel_->size());
    else
      sumsq = squared_norm(grads.data, grads.dtype, multiplier, layout_);
    result.grad_norm = std::sqrt(sumsq);
    const float factor = clip_factor(result.grad_norm, max_norm_);
    if (on_device_) {
      update_on_device(grads, multiplier, static_cast<float>(result.lr), factor);
    } else {
      precision_.step(*optimizer_, grads.data, grads.dtype, multiplier,
                      static_cast<float>(result.lr), factor);
      precision_.copy_master_to_params();
    }
    if (sharded_) parallel_->gather_params();
  }
  zero_grads();
  return result;
}

}  // namespace kolo::trainer
