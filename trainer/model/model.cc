// Model: flat parameter and gradient buffers through the Backend, the activation arena,
// weight save/load via tensor_io, and the seeded initialisation generator.
#include "trainer/model/model.h"

#include <cmath>

#include "comm/base/convert.h"
#include "comm/base/error.h"

namespace kolo::trainer {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Model::Model(Backend& backend, DType dtype, ParamLayout layout)
    : backend_(backend), dtype_(dtype), layout_(std::move(layout)) {
  KOLO_CHECK_ARG(is_storage_dtype(dtype), "model storage dtype ", dtype_name(dtype),
                 " is not supported (accepted: ", kStorageDTypeNames, ")");
  // capacity(): the zeroed slack past total() lets ZeRO cut the buffers into equal blocks.
  params_ = backend_.alloc(buffer_bytes());
  grads_ = backend_.alloc(buffer_bytes());
}

Model::~Model() {
  backend_.free(params_);
  backend_.free(grads_);
  if (arena_ != nullptr) backend_.free(arena_);
}

void* Model::param(const std::string& name) {
  return at(params_, layout_.find(name).offset);
}
void* Model::grad(const std::string& name) {
  return at(grads_, layout_.find(name).offset);
}

Model::ParamsInUse::ParamsInUse(const ParamsHook& hook, std::string prefix)
    : hook_(hook), prefix_(std::move(prefix)) {
  if (hook_) hook_(prefix_, true);
}

Model::ParamsInUse::~ParamsInUse() {
  if (hook_) hook_(prefix_, false);
}

void Model::zero_grad() {
  backend_.zero(grads_, buffer_bytes());
}

void Model::save(const std::string& path, const std::map<std::string, std::string>& metadata,
                 std::string* sha256) const {
  if (backend_.device() == Device::kCpu) {
    save_layout(path, layout_, params_, dtype_, metadata, sha256);
    return;
  }
  // Device weights are written from a host copy.
  std::vector<char> host(param_bytes());
  backend_.copy_to_host(host.data(), params_, host.size());
  save_layout(path, layout_, host.data(), dtype_, metadata, sha256);
}

LoadReport Model::load(const std::string& path, bool strict) {
  if (backend_.device() == Device::kCpu) return load_layout(path, layout_, params_, dtype_, strict);
  // Into a host copy of the current weights (tensors a non-strict load skips keep theirs).
  std::vector<char> host(param_bytes());
  backend_.copy_to_host(host.data(), params_, host.size());
  LoadReport report = load_layout(path, layout_, host.data(), dtype_, strict);
  backend_.copy_from_host(params_, host.data(), host.size());
  return report;
}

void Model::upload_params(const std::vector<float>& values) {
  KOLO_ASSERT(values.size() == layout_.total());
  write_floats(params_, values.data(), values.size());
}

void Model::write_floats(void* dst, const float* values, size_t n) {
  if (backend_.device() == Device::kCpu) {
    backend_.convert(dst, dtype_, values, DType::kFloat32, n);
    return;
  }
  std::vector<char> host(n * dtype_size(dtype_));
  kolo::convert(host.data(), dtype_, values, DType::kFloat32, n);
  backend_.copy_from_host(dst, host.data(), host.size());
}

std::vector<float> Model::read_floats(const void* src, size_t n) const {
  std::vector<float> out(n);
  if (backend_.device() == Device::kCpu) {
    kolo::convert(out.data(), DType::kFloat32, src, dtype_, n);
    return out;
  }
  std::vector<char> host(n * dtype_size(dtype_));
  backend_.copy_to_host(host.data(), src, host.size());
  kolo::convert(out.data(), DType::kFloat32, host.data(), dtype_, n);
  return out;
}

void Model::release_arena() {
  if (arena_ != nullptr) backend_.free(arena_);
  arena_ = nullptr;
  arena_bytes_ = 0;
}

char* Model::ensure_arena(size_t bytes) {
  if (bytes > arena_bytes_) {
    release_arena();
    arena_ = static_cast<char*>(backend_.alloc(bytes));
    arena_bytes_ = bytes;
  }
  return arena_;
}

InitRng::InitRng(uint64_t seed, const std::string& name) : state_(seed) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the name picks the stream
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  state_ ^= h;
  splitmix64(state_);
}

float InitRng::uniform() {
  return static_cast<float>(splitmix64(state_) >> 40) * (1.0f / 16777216.0f);
}

float InitRng::normal() {
  double u1 = (static_cast<double>(splitmix64(state_) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  double u2 = static_cast<double>(splitmix64(state_) >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

}  // namespace kolo::trainer
