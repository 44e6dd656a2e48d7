// Named tensors of a flat buffer <-> safetensors files: a ParamLayout gives each tensor's name,
// shape and element range, so weights, gradients and optimizer states of any model are saved
// and loaded under their Hugging Face names, converting the dtype on the way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/base/dtype.h"
#include "trainer/layout/param_layout.h"

namespace kolo::trainer {

// Writes every tensor of `layout` from the flat host buffer `data` (in `dtype`) to `path`,
// stored as `file_dtype` (the buffer's own dtype when file_dtype is not given). Dtypes convert
// with kolo::convert (comm/base/convert.h): rounded to nearest even, equal dtypes bitwise.
// `sha256` (optional) receives the file's SHA-256, computed while writing.
void save_layout(const std::string& path, const ParamLayout& layout, const void* data, DType dtype,
                 const std::map<std::string, std::string>& metadata = {},
                 std::string* sha256 = nullptr);
void save_layout_as(const std::string& path, const ParamLayout& layout, const void* data,
                    DType dtype, DType file_dtype,
                    const std::map<std::string, std::string>& metadata = {},
                    std::string* sha256 = nullptr);

// Refuses, naming the file, the tensor and the count, `n` values of `dtype` at `data` that hold
// an inf or a NaN (kolo::Error kInvalidArgument "<file>: tensor '<tensor>' holds 3 of 128 values
// that are inf or NaN as float16"): weights or optimizer states a run would continue from.
void check_finite(const std::string& file, const std::string& tensor, const void* data, DType dtype,
                  size_t n);

struct LoadReport {
  std::vector<std::string> loaded;      // layout tensors found in the file
  std::vector<std::string> missing;     // layout tensors absent from the file (left untouched)
  std::vector<std::string> unexpected;  // file tensors the layout does not have (ignored)
};

// Reads the tensors of `layout` from `path` into the flat host buffer `data` (in `dtype`),
// converting from the file's dtype. Shapes must match exactly. strict: a missing or unexpected
// tensor is an error naming them all; otherwise they are reported (e.g. a classifier head that
// a pretrained MLM checkpoint lacks), but a file that holds none of the layout's tensors is an
// error naming it in either mode.
LoadReport load_layout(const std::string& path, const ParamLayout& layout, void* data, DType dtype,
                       bool strict = true);

}  // namespace kolo::trainer
