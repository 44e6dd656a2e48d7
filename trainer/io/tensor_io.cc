// save_layout / load_layout: one safetensors entry per ParamLayout tensor, dtypes converted by
// kolo::convert (file data may sit at any alignment, which it allows).
#include "trainer/io/tensor_io.h"

#include <algorithm>
#include <cmath>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "comm/base/text.h"
#include "trainer/io/safetensors.h"

namespace kolo::trainer {
namespace {

bool is_float(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat16 || dt == DType::kBFloat16 ||
         dt == DType::kFloat64;
}

// How many of `n` values (`dtype`) at `data` are inf or NaN.
size_t count_nonfinite(const uint8_t* data, DType dtype, size_t n) {
  constexpr size_t kPiece = 4096;
  float piece[kPiece];
  size_t bad = 0;
  for (size_t i = 0; i < n; i += kPiece) {
    const size_t count = std::min(kPiece, n - i);
    kolo::convert(piece, DType::kFloat32, data + i * dtype_size(dtype), dtype, count);
    for (size_t j = 0; j < count; ++j) bad += !std::isfinite(piece[j]);
  }
  return bad;
}

}  // namespace

void check_finite(const std::string& file, const std::string& tensor, const void* data, DType dtype,
                  size_t n) {
  const size_t bad = count_nonfinite(static_cast<const uint8_t*>(data), dtype, n);
  KOLO_CHECK_ARG(bad == 0, file, ": tensor '", tensor, "' holds ", bad, " of ", n,
                 " values that are inf or NaN as ", dtype_name(dtype));
}

void save_layout(const std::string& path, const ParamLayout& layout, const void* data, DType dtype,
                 const std::map<std::string, std::string>& metadata, std::string* sha256) {
  save_layout_as(path, layout, data, dtype, dtype, metadata, sha256);
}

void save_layout_as(const std::string& path, const ParamLayout& layout, const void* data,
                    DType dtype, DType file_dtype,
                    const std::map<std::string, std::string>& metadata, std::string* sha256) {
  const auto* base = static_cast<const uint8_t*>(data);
  std::vector<uint8_t> converted;  // only when the file dtype differs
  if (file_dtype != dtype) {
    KOLO_CHECK_ARG(is_float(dtype) && is_float(file_dtype), path, ": cannot save ",
                   dtype_name(dtype), " tensors as ", dtype_name(file_dtype),
                   " (only between floating-point dtypes)");
    converted.resize(layout.total() * dtype_size(file_dtype));
    kolo::convert(converted.data(), file_dtype, data, dtype, layout.total());
    base = converted.data();
  }
  std::vector<TensorRef> refs;
  for (const ParamInfo& p : layout.params())
    refs.push_back({p.name, file_dtype, p.shape, base + p.offset * dtype_size(file_dtype)});
  write_safetensors(path, refs, metadata, sha256);
}

LoadReport load_layout(const std::string& path, const ParamLayout& layout, void* data, DType dtype,
                       bool strict) {
  SafetensorsFile file(path);
  LoadReport report;
  auto* base = static_cast<uint8_t*>(data);
  for (const ParamInfo& p : layout.params()) {
    const SafetensorsFile::Entry* e = file.get(p.name);
    if (e == nullptr) {
      report.missing.push_back(p.name);
      continue;
    }
    KOLO_CHECK_ARG(e->shape == p.shape, path, ": tensor '", p.name, "' has shape ",
                   shape_text(e->shape), ", the model expects ", shape_text(p.shape));
    KOLO_CHECK_ARG(is_float(e->dtype), path, ": tensor '", p.name, "' has dtype ",
                   dtype_name(e->dtype), ", expected a floating-point dtype");
    uint8_t* into = base + p.offset * dtype_size(dtype);
    kolo::convert(into, dtype, e->data, e->dtype, p.numel);
    // Weights that are not finite (a diverged run's, or values past the model's dtype) would
    // make every step overflow.
    check_finite(path, p.name, into, dtype, p.numel);
    report.loaded.push_back(p.name);
  }
  for (const SafetensorsFile::Entry& e : file.tensors()) {
    bool known = false;
    for (const ParamInfo& p : layout.params()) known = known || p.name == e.name;
    if (!known) report.unexpected.push_back(e.name);
  }
  // A non-strict load still needs one tensor of the layout: a file that matches none (its names
  // under another prefix, a different model's) would leave every weight at its initialisation.
  if (report.loaded.empty() && !layout.params().empty()) {
    const std::string& wanted = layout.params().front().name;
    KOLO_CHECK_ARG(!file.tensors().empty(), path, ": holds no tensors (the model has ",
                   layout.params().size(), ", e.g. '", wanted, "')");
    KOLO_THROW(ErrorCode::kInvalidArgument, path, ": none of its ", file.tensors().size(),
               " tensors is one of the model's ", layout.params().size(), " (the file has e.g. '",
               file.tensors().front().name, "', the model '", wanted,
               "'): the names differ (another prefix, another model's file?)");
  }
  if (strict) {
    KOLO_CHECK_ARG(report.missing.empty(), path, ": missing tensors: ", join_text(report.missing));
    KOLO_CHECK_ARG(report.unexpected.empty(), path,
                   ": unexpected tensors: ", join_text(report.unexpected));
  }
  return report;
}

}  // namespace kolo::trainer
