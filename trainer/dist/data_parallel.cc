// DataParallel: the engine's allreduces per tensor during backward, and the scalar agreements.
#include "trainer/dist/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "trainer/dist/job.h"

namespace kolo::trainer {
namespace {

engine::EngineOptions engine_options(const ZeroConfig& zero, DType storage,
                                     std::shared_ptr<engine::DeviceBackend> device) {
  engine::EngineOptions o = engine::EngineOptions::from_env();
  // Data-parallel ranks submit the same tensors in step: one that waits for another rank
  // longer than any collective may wait (KOLO_TIMEOUT_SECONDS) means the ranks submit
  // different tensors (another ZeRO stage or overlap setting) and would wait for ever; it
  // then fails on every rank. KOLO_STALL_SHUTDOWN_SECONDS, when set, decides instead.
  if (!env::get("KOLO_STALL_SHUTDOWN_SECONDS"))
    o.stall_shutdown_seconds = std::chrono::duration<double>(env::timeout()).count();
  // DeepSpeed counts bucket sizes in elements; the engine's threshold is in bytes.
  o.fusion_threshold = static_cast<size_t>(zero.reduce_bucket_size) * dtype_size(storage);
  o.device = std::move(device);
  return o;
}

// Rank 0's parameters to every rank; a model on a device goes through a host copy.
void broadcast_params(Communicator& comm, Model& model) {
  const size_t total = model.layout().total();
  if (model.backend().device() == Device::kCpu) {
    comm.broadcast(model.params(), total, model.dtype(), 0);
    return;
  }
  std::vector<char> host(model.param_bytes());
  model.backend().copy_to_host(host.data(), model.params(), host.size());
  comm.broadcast(host.data(), total, model.dtype(), 0);
  model.backend().copy_from_host(model.params(), host.data(), host.size());
}

// Elements of 16-bit gradients converted to fp32 at a time when folded into the accumulator.
constexpr size_t kFoldPiece = size_t{1} << 18;

}  // namespace

DataParallel::DataParallel(std::shared_ptr<Communicator> comm, Model& model, const ZeroConfig& zero,
                           int accumulation, std::shared_ptr<engine::DeviceBackend> device)
    : comm_(std::move(comm)),
      model_(model),
      zero_(zero),
      stage_(zero.stage),
      on_device_(model.backend().device() != Device::kCpu) {
  KOLO_CHECK_ARG(comm_ != nullptr, "DataParallel needs a communicator");
  check(zero);
  KOLO_CHECK_ARG(accumulation >= 1, "gradient_accumulation_steps=", accumulation,
                 " is out of range (>= 1)");
  average_.op = ReduceOp::kAverage;
  const size_t total = model_.layout().total();
  partition_ =
      stage_ == 0 ? Partition{total, 0, total} : partition_of(model_.layout(), size(), rank());
  if (size() == 1) return;
  KOLO_CHECK_ARG(!on_device_ || device != nullptr, "a model on ", model_.backend().name(), " over ",
                 size(), " ranks needs the engine's device backend (cuda_device_backend())");
  broadcast_params(*comm_, model_);
  // Stage 1 reduces with one reduce-scatter at the boundary: no engine on the host; a device
  // model's goes through the engine's device path.
  if (stage_ == 1 && !on_device_) return;
  engine_ = std::make_unique<engine::Engine>(
      comm_, engine_options(zero, model_.dtype(), std::move(device)));
  if (stage_ == 1) return;
  const bool shards = stage_ >= 2;
  reducer_ = std::make_unique<GradReducer>(
      *engine_, model_, shards ? partition_ : Partition{total, 0, total},
      shards ? static_cast<size_t>(zero.reduce_bucket_size) : SIZE_MAX, average_);
  model_.set_grads_ready_hook([this](const std::string& prefix) {
    if (reducing_ && zero_.overlap_comm) reducer_->submit(prefix);
  });
  if (shards && accumulation > 1) {
    const size_t block = partition_.end - partition_.begin;
    accumulator_ = BackendBuffer(model_.backend(), block * sizeof(float));
    if (model_.dtype() != DType::kFloat32)
      scratch_ = BackendBuffer(model_.backend(), std::min(block, kFoldPiece) * sizeof(float));
  }
  if (stage_ < 3) return;
  gatherer_ = std::make_unique<ParamGatherer>(
      *engine_, model_, partition_, static_cast<size_t>(zero.stage3_param_persistence_threshold),
      static_cast<size_t>(zero.stage3_prefetch_bucket_size));
  gatherer_->release_all();
  model_.set_params_hook([this](const std::string& prefix, bool acquire) {
    if (!all_params_) gatherer_->use(prefix, acquire);
  });
}

std::string DataParallel::describe() const {
  const std::string range = "elements [" + std::to_string(partition_.begin) + ", " +
                            std::to_string(partition_.end) + ") of " +
                            std::to_string(model_.layout().total());
  switch (stage_) {
    case 0:
      return "ZeRO stage 0: gradients averaged through the engine " +
             std::string(zero_.overlap_comm ? "during the backward (overlap_comm)"
                                            : "after the backward") +
             ", fused up to reduce_bucket_size; allgather_bucket_size and contiguous_gradients "
             "apply from stages 1 and 2";
    case 1:
      return "ZeRO stage 1: this rank updates " + range +
             "; gradients reduce-scattered and parameters allgathered in one collective each "
             "over the flat buffer (reduce_bucket_size, allgather_bucket_size and overlap_comm "
             "are not used at stage 1)";
    default: break;
  }
  std::string text = "ZeRO stage " + std::to_string(stage_) + ": this rank keeps the gradients" +
                     (stage_ == 3 ? " and 16-bit parameters" : "") + " of " + range +
                     "; every micro-batch's gradients averaged through the engine " +
                     (zero_.overlap_comm ? "during the backward (overlap_comm)"
                                         : "after the backward (overlap_comm false)") +
                     ", at most reduce_bucket_size elements of other ranks' ranges in flight; " +
                     (zero_.reduce_scatter ? "reduce_scatter is served by an allreduce per tensor "
                                             "(owner ranges cut tensors; twice a reduce-scatter's "
                                             "bytes)"
                                           : "allreduce per tensor (reduce_scatter false)") +
                     "; the flat gradient buffer is contiguous whatever contiguous_gradients says";
  if (stage_ == 2) return text + "; parameters allgathered after the step";
  return text + "; each layer's parameters gathered before its forward and backward and released " +
         "after, the next one prefetched (stage3_prefetch_bucket_size " +
         std::to_string(zero_.stage3_prefetch_bucket_size) +
         " elements), tensors under stage3_param_persistence_threshold " +
         std::to_string(zero_.stage3_param_persistence_threshold) + " elements kept whole";
}

size_t DataParallel::buffer_state_bytes() const {
  const size_t esize = dtype_size(model_.dtype());
  const size_t full = model_.layout().total() * esize;
  const size_t block = (partition_.end - partition_.begin) * esize;
  const size_t params = gatherer_ != nullptr ? gatherer_->resident_bytes() : full;
  const size_t grads = stage_ >= 2 && size() > 1 ? block : full;
  return params + grads + accumulator_.bytes();
}

void DataParallel::check(const ZeroConfig& zero) {
  KOLO_CHECK_ARG(zero.stage >= 0 && zero.stage <= 3, "zero_optimization.stage=", zero.stage,
                 " is not a ZeRO stage; accepted: 0, 1, 2, 3");
  KOLO_CHECK_ARG(zero.reduce_bucket_size > 0,
                 "zero_optimization.reduce_bucket_size=", zero.reduce_bucket_size,
                 " is out of range (>= 1 elements)");
  KOLO_CHECK_ARG(zero.allgather_bucket_size > 0,
                 "zero_optimization.allgather_bucket_size=", zero.allgather_bucket_size,
                 " is out of range (>= 1 elements)");
}

void DataParallel::set_predivide(double factor) {
  KOLO_CHECK_ARG(std::isfinite(factor) && factor > 0, "gradient_predivide_factor=", factor,
                 " is out of range (> 0)");
  average_.prescale = 1.0 / factor;
  average_.postscale = factor;
}

DataParallel::~DataParallel() {
  model_.set_grads_ready_hook(nullptr);
  model_.set_params_hook(nullptr);
}

void DataParallel::begin_micro(bool last_of_step) {
  if (reducer_ == nullptr) return;  // one rank, or stage 1 (reduces after the backward)
  if (stage_ == 0) {
    reducing_ = last_of_step;  // no communication on inner micro-steps
    return;
  }
  if (micro_ > 0) {  // the previous micro-batch's averages into the fp32 block
    reducer_->finish();
    fold_into_accumulator();
  }
  ++micro_;
  reducing_ = true;
  if (gatherer_ != nullptr) gatherer_->next_pass();
}

void DataParallel::finish_reduction() {
  if (size() == 1) return;
  if (stage_ == 1) {
    reduce_scatter_grads();
    return;
  }
  reducer_->finish();
  reducing_ = false;
  fold_into_accumulator();
  micro_ = 0;
}

void DataParallel::fold_into_accumulator() {
  if (accumulator_.empty()) return;
  Backend& backend = model_.backend();
  const DType dtype = model_.dtype();
  const size_t esize = dtype_size(dtype), n = partition_.end - partition_.begin;
  char* block = static_cast<char*>(model_.grads()) + partition_.begin * esize;
  float* sum = static_cast<float*>(accumulator_.data());
  if (dtype == DType::kFloat32) {
    backend.add(sum, sum, block, n, DType::kFloat32);
  } else {
    float* piece = static_cast<float*>(scratch_.data());
    for (size_t i = 0; i < n; i += kFoldPiece) {
      const size_t count = std::min(kFoldPiece, n - i);
      backend.convert(piece, DType::kFloat32, block + i * esize, dtype, count);
      backend.add(sum + i, sum + i, piece, count, DType::kFloat32);
    }
  }
  backend.zero(block, n * esize);
}

GradSource DataParallel::grads() const {
  if (!accumulator_.empty()) return {accumulator_.data(), DType::kFloat32};
  const char* base = static_cast<const char*>(model_.grads());
  return {base + partition_.begin * dtype_size(model_.dtype()), model_.dtype()};
}

void DataParallel::zero_grads() {
  if (stage_ < 2 || size() == 1) {
    model_.zero_grad();
    return;
  }
  const size_t esize = dtype_size(model_.dtype());
  char* base = static_cast<char*>(model_.grads());
  model_.backend().discard(base, partition_.begin * esize);
  model_.backend().zero(base + partition_.begin * esize,
                        (partition_.end - partition_.begin) * esize);
  model_.backend().discard(base + partition_.end * esize,
                           model_.buffer_bytes() - partition_.end * esize);
  if (!accumulator_.empty()) model_.backend().zero(accumulator_.data(), accumulator_.bytes());
}

engine::TensorView DataParallel::view(void* data, size_t elements, int64_t rows) const {
  return {data,
          model_.dtype(),
          {rows, static_cast<int64_t>(elements)},
          model_.backend().device_id(),
          model_.backend().device_stream()};
}

void DataParallel::reduce_scatter_grads() {
  // Rank r's block of the buffer receives block r averaged over the ranks.
  char* grads = static_cast<char*>(model_.grads());
  const size_t esize = dtype_size(model_.dtype()), block = partition_.block;
  char* mine = grads + static_cast<size_t>(rank()) * block * esize;
  if (!on_device_) {
    Backend& backend = model_.backend();
    const DType dt = model_.dtype();
    const size_t all = block * static_cast<size_t>(size());
    if (average_.prescale != 1.0)
      backend.convert(grads, dt, grads, dt, all, static_cast<float>(average_.prescale));
    comm_->reduce_scatter(grads, mine, block, dt, ReduceOp::kAverage);  // in place
    if (average_.postscale != 1.0)
      backend.convert(mine, dt, mine, dt, block, static_cast<float>(average_.postscale));
    return;
  }
  engine::Handle h =
      engine_->reduce_scatter("zero.gradients", view(grads, block, size()), average_);
  h.check();
  model_.backend().convert(mine, model_.dtype(), h.device_output(), model_.dtype(), block);
}

void DataParallel::allgather_params() {
  // Every rank's block of the flat buffer to every rank.
  char* params = static_cast<char*>(model_.params());
  const size_t esize = dtype_size(model_.dtype()), block = partition_.block;
  char* mine = params + static_cast<size_t>(rank()) * block * esize;
  if (!on_device_) {
    comm_->allgather(mine, params, block, model_.dtype());  // in place
    return;
  }
  engine::Handle h = engine_->allgather("zero.parameters", view(mine, block));
  h.check();
  model_.backend().convert(params, model_.dtype(), h.device_output(), model_.dtype(),
                           block * static_cast<size_t>(size()));
}

void DataParallel::gather_params() {
  if (size() == 1 || stage_ == 0 || stage_ == 3) return;
  allgather_params();
}

void DataParallel::gather_all_params() {
  if (gatherer_ == nullptr || all_params_) return;
  allgather_params();
  all_params_ = true;
}

void DataParallel::release_params() {
  if (gatherer_ == nullptr || !all_params_) return;
  gatherer_->release_all();
  all_params_ = false;
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
