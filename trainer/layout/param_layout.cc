// ParamLayout: appends named tensors to a flat buffer at aligned offsets.
#include "trainer/layout/param_layout.h"

#include <algorithm>

#include "comm/base/error.h"

namespace kolo::trainer {

size_t ParamLayout::add(std::string name, std::vector<int64_t> shape, bool decay) {
  return append(std::move(name), std::move(shape), decay, kAlign);
}

size_t ParamLayout::add_packed(std::string name, std::vector<int64_t> shape, bool decay) {
  return append(std::move(name), std::move(shape), decay, 1);
}

size_t ParamLayout::num_params() const {
  size_t n = 0;
  for (const ParamInfo& p : params_) n += p.numel;
  return n;
}

size_t ParamLayout::append(std::string name, std::vector<int64_t> shape, bool decay, size_t align) {
  for (const ParamInfo& p : params_)
    KOLO_CHECK_ARG(p.name != name, "parameter ", name, " registered twice");
  size_t numel = 1;
  for (int64_t d : shape) {
    KOLO_CHECK_ARG(d > 0, "parameter ", name, ": dimension ", d, " must be positive");
    numel *= static_cast<size_t>(d);
  }
  size_t offset = (total_ + align - 1) / align * align;
  params_.push_back(ParamInfo{std::move(name), std::move(shape), offset, numel, decay});
  total_ = offset + numel;
  return offset;
}

ParamLayout ParamLayout::slice(size_t begin, size_t end) const {
  KOLO_CHECK_ARG(begin <= end && end <= total_, "layout slice [", begin, ", ", end,
                 ") is not inside [0, ", total_, ")");
  ParamLayout out;
  out.total_ = end - begin;
  for (const ParamInfo& p : params_) {
    const size_t first = std::max(p.offset, begin), last = std::min(p.offset + p.numel, end);
    if (first >= last) continue;
    std::vector<int64_t> shape = p.shape;
    if (first != p.offset || last != p.offset + p.numel)
      shape = {static_cast<int64_t>(last - first)};
    out.params_.push_back(
        ParamInfo{p.name, std::move(shape), first - begin, last - first, p.decay});
  }
  return out;
}

const ParamInfo& ParamLayout::find(const std::string& name) const {
  for (const ParamInfo& p : params_)
    if (p.name == name) return p;
  KOLO_THROW(ErrorCode::kInvalidArgument, "no parameter named '", name, "'");
}

}  // namespace kolo::trainer
