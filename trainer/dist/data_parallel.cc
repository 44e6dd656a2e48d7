// DataParallel: the engine's allreduces per tensor during backward, and the scalar agreements.
#include "trainer/dist/data_parallel.h"

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
    : comm_(std::move(comm)), model_(model), stage_(zero.stage), overlap_(zero.overlap_comm) {
  KOLO_CHECK_ARG(comm_ != nullptr, "DataParallel needs a communicator");
  check(zero);
  const size_t total = model_.layout().total();
  partition_ =
      stage_ == 0 ? Partition{total, 0, total} : partition_of(model_.layout(), size(), rank());
  submitted_.assign(model_.layout().params().size(), false);
  if (size() == 1) return;
  comm_->broadcast(model_.params(), total, model_.dtype(), 0);
  if (stage_ > 0) return;  // stage 1 reduces with one reduce-scatter at the boundary
  engine_ = std::make_unique<engine::Engine>(comm_, engine_options(zero, model_.dtype()));
  model_.set_grads_ready_hook([this](const std::string& prefix) {
    if (reducing_ && overlap_) submit(prefix);
  });
}

std::string DataParallel::describe() const {
  if (stage_ == 0)
    return "ZeRO stage 0: gradients averaged through the engine " +
           std::string(overlap_ ? "during the backward (overlap_comm)" : "after the backward") +
           ", fused up to reduce_bucket_size; allgather_bucket_size and contiguous_gradients "
           "apply from stages 1 and 2";
  return "ZeRO stage 1: this rank updates elements [" + std::to_string(partition_.begin) + ", " +
         std::to_string(partition_.end) + ") of " + std::to_string(model_.layout().total()) +
         "; gradients reduce-scattered and parameters allgathered in one collective each over "
         "the flat buffer (reduce_bucket_size, allgather_bucket_size and overlap_comm are not "
         "used at stage 1)";
}

void DataParallel::check(const ZeroConfig& zero) {
  KOLO_CHECK_ARG(zero.stage == 0 || zero.stage == 1, "zero_optimization.stage=", zero.stage,
                 ": this version of kolo's trainer implements stages 0 (every rank keeps the "
                 "whole model state) and 1 (optimizer states and master weights partitioned); "
                 "accepted: 0, 1");
  KOLO_CHECK_ARG(zero.reduce_bucket_size > 0,
                 "zero_optimization.reduce_bucket_size=", zero.reduce_bucket_size,
                 " is out of range (>= 1 elements)");
}

DataParallel::~DataParallel() {
  model_.set_grads_ready_hook(nullptr);
}

void DataParallel::begin_micro(bool last_of_step) {
  reducing_ = last_of_step && engine_ != nullptr;  // stage 1 reduces after the backward
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
  if (size() > 1 && stage_ > 0) {
    // In place: rank r's block of the buffer receives block r averaged over the ranks.
    char* grads = static_cast<char*>(model_.grads());
    const size_t esize = dtype_size(model_.dtype());
    comm_->reduce_scatter(grads, grads + static_cast<size_t>(rank()) * partition_.block * esize,
                          partition_.block, model_.dtype(), ReduceOp::kAverage);
    return;
  }
  if (engine_ == nullptr) return;
  submit("");
  // What no hook announced, in layout order: the same on every rank.
  for (const engine::Handle& h : handles_) h.check();
  handles_.clear();
  submitted_.assign(submitted_.size(), false);
  reducing_ = false;
}

void DataParallel::gather_params() {
  if (size() == 1 || stage_ == 0) return;
  char* params = static_cast<char*>(model_.params());
  const size_t esize = dtype_size(model_.dtype());
  comm_->allgather(params + static_cast<size_t>(rank()) * partition_.block * esize, params,
                   partition_.block, model_.dtype());
}

double DataParallel::ordered_sum(double partial) {
  if (size() == 1) return partial;
  std::vector<double> all(static_cast<size_t>(size()));
  comm_->allgather(&partial, all.data(), 1, DType::kFloat64);
  double sum = 0.0;
  for (double x : all) sum += x;
  return sum;
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
