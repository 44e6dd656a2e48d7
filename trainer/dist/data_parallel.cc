// DataParallel: the engine's allreduces per tensor during backward, and the scalar agreements.
#include "trainer/dist/data_parallel.h"

#include <chrono>

#include "comm/base/error.h"
#include "trainer/dist/job.h"

namespace kolo::trainer {
namespace {

engine::EngineOptions engine_options(const ZeroConfig& zero, DType storage) {
  engine::EngineOptions o = engine::EngineOptions::from_env();
  // DeepSpeed counts bucket sizes in elements; the engine's threshold is in bytes.
  o.fusion_threshold = static_cast<size_t>(zero.reduce_bucket_size) * dtype_size(storage);
  return o;
}

}  // namespace

DataParallel::DataParallel(std::shared_ptr<Communicator> comm, Model& model, const ZeroConfig& zero)
    : comm_(std::move(comm)), model_(model), overlap_(zero.overlap_comm) {
  KOLO_CHECK_ARG(comm_ != nullptr, "DataParallel needs a communicator");
  KOLO_CHECK_ARG(zero.stage == 0, "zero_optimization.stage=", zero.stage,
                 ": this version of kolo's trainer implements stage 0 (data parallel, every "
                 "rank keeps the whole model state); accepted: 0");
  KOLO_CHECK_ARG(zero.reduce_bucket_size > 0,
                 "zero_optimization.reduce_bucket_size=", zero.reduce_bucket_size,
                 " is out of range (>= 1 elements)");
  submitted_.assign(model_.layout().params().size(), false);
  if (size() == 1) return;
  engine_ = std::make_unique<engine::Engine>(comm_, engine_options(zero, model_.dtype()));
  comm_->broadcast(model_.params(), model_.layout().total(), model_.dtype(), 0);
  model_.set_grads_ready_hook([this](const std::string& prefix) {
    if (reducing_ && overlap_) submit(prefix);
  });
}

void DataParallel::check(const ZeroConfig& zero) {
  KOLO_CHECK_ARG(zero.stage == 0, "zero_optimization.stage=", zero.stage,
                 ": this version of kolo's trainer implements stage 0 (data parallel, every "
                 "rank keeps the whole model state); accepted: 0");
  KOLO_CHECK_ARG(zero.reduce_bucket_size > 0,
                 "zero_optimization.reduce_bucket_size=", zero.reduce_bucket_size,
                 " is out of range (>= 1 elements)");
}

DataParallel::~DataParallel() {
  model_.set_grads_ready_hook(nullptr);
}

void DataParallel::begin_micro(bool last_of_step) {
  reducing_ = last_of_step && engine_ != nullptr;
}

void DataParallel::submit(const std::string& prefix) {
  const auto& params = model_.layout().params();
  engine::OpOptions average;
  average.op = ReduceOp::kAverage;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    if (submitted_[i] || p.name.compare(0, prefix.size(), prefix) != 0) continue;
    engine::TensorView grad{model_.grad(p.name), model_.dtype(), {static_cast<int64_t>(p.numel)}};
    handles_.push_back(engine_->allreduce(p.name, grad, grad, average));
    submitted_[i] = true;
  }
}

void DataParallel::finish_reduction() {
  if (engine_ == nullptr) return;
  submit("");  // what no hook announced, in layout order: the same on every rank
  for (const engine::Handle& h : handles_) h.check();
  handles_.clear();
  submitted_.assign(submitted_.size(), false);
  reducing_ = false;
}

bool DataParallel::any(bool flag) {
  if (size() == 1) return flag;
  uint8_t value = flag ? 1 : 0;
  comm_->allreduce(&value, &value, 1, DType::kUInt8, ReduceOp::kMax);
  return value != 0;
}

std::vector<double> DataParallel::sum(std::vector<double> values) {
  return sum_over_ranks(*comm_, std::move(values));
}

}  // namespace kolo::trainer
