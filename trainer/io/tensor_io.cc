// save_layout / load_layout: one safetensors entry per ParamLayout tensor, host dtype
// conversion with the scalar fp16/bf16 conversions of comm/reduce.
#include "trainer/io/tensor_io.h"

#include <cstring>
#include <sstream>

#include "comm/base/error.h"
#include "comm/reduce/reduce.h"
#include "trainer/io/safetensors.h"

namespace kolo::trainer {
namespace {

bool is_float(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat16 || dt == DType::kBFloat16 ||
         dt == DType::kFloat64;
}

// Loads element i of a floating-point buffer as float (memcpy: file data is unaligned).
float load_float(const uint8_t* p, size_t i, DType dt) {
  switch (dt) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<float>(v);
    }
    default: {
      uint16_t bits;
      std::memcpy(&bits, p + 2 * i, 2);
      return dt == DType::kFloat16 ? reduce::half_to_float(bits) : reduce::bfloat16_to_float(bits);
    }
  }
}

void store_float(uint8_t* p, size_t i, DType dt, float v) {
  switch (dt) {
    case DType::kFloat32: std::memcpy(p + 4 * i, &v, 4); return;
    case DType::kFloat64: {
      double d = v;
      std::memcpy(p + 8 * i, &d, 8);
      return;
    }
    default: {
      uint16_t bits =
          dt == DType::kFloat16 ? reduce::float_to_half(v) : reduce::float_to_bfloat16(v);
      std::memcpy(p + 2 * i, &bits, 2);
    }
  }
}

std::string join(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << names[i];
  return out.str();
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

}  // namespace

void convert_host(void* dst, DType dst_dt, const void* src, DType src_dt, size_t n) {
  if (dst_dt == src_dt) {
    std::memmove(dst, src, n * dtype_size(src_dt));
    return;
  }
  KOLO_CHECK_ARG(is_float(dst_dt) && is_float(src_dt), "cannot convert ", dtype_name(src_dt),
                 " to ", dtype_name(dst_dt), " (only between floating-point dtypes)");
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) store_float(d, i, dst_dt, load_float(s, i, src_dt));
}

void save_layout(const std::string& path, const ParamLayout& layout, const void* data, DType dtype,
                 const std::map<std::string, std::string>& metadata) {
  save_layout_as(path, layout, data, dtype, dtype, metadata);
}

void save_layout_as(const std::string& path, const ParamLayout& layout, const void* data,
                    DType dtype, DType file_dtype,
                    const std::map<std::string, std::string>& metadata) {
  const auto* base = static_cast<const uint8_t*>(data);
  std::vector<uint8_t> converted;  // only when the file dtype differs
  if (file_dtype != dtype) {
    converted.resize(layout.total() * dtype_size(file_dtype));
    convert_host(converted.data(), file_dtype, data, dtype, layout.total());
    base = converted.data();
  }
  std::vector<TensorRef> refs;
  for (const ParamInfo& p : layout.params())
    refs.push_back({p.name, file_dtype, p.shape, base + p.offset * dtype_size(file_dtype)});
  write_safetensors(path, refs, metadata);
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
    convert_host(base + p.offset * dtype_size(dtype), dtype, e->data, e->dtype, p.numel);
    report.loaded.push_back(p.name);
  }
  for (const SafetensorsFile::Entry& e : file.tensors()) {
    bool known = false;
    for (const ParamInfo& p : layout.params()) known = known || p.name == e.name;
    if (!known) report.unexpected.push_back(e.name);
  }
  if (strict) {
    KOLO_CHECK_ARG(report.missing.empty(), path, ": missing tensors: ", join(report.missing));
    KOLO_CHECK_ARG(report.unexpected.empty(), path,
                   ": unexpected tensors: ", join(report.unexpected));
  }
  return report;
}

}  // namespace kolo::trainer
