// How a kolo process group hands torch tensors to kolo's Communicator: the argument checks
// (dense CPU tensors, kolo's dtypes and reduce ops) and the contiguous buffers the worker fills.
// Every check throws kolo::Error(kInvalidArgument) on the caller's thread, before anything is
// queued, so a bad call fails at once (as InvalidArgumentError, a ValueError, in Python).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"

namespace kolo::c10d_backend {

// A tensor as the Communicator sees it: contiguous CPU memory, a kolo dtype and a count.
struct Buffer {
  at::Tensor tensor;  // the caller's tensor when contiguous, else a contiguous copy of it
  DType dtype = DType::kUInt8;
  size_t count = 0;  // elements of `dtype`
  size_t scale = 1;  // elements of `dtype` per tensor element (the element size for bytes)
  void* data() const { return tensor.data_ptr(); }
};

// For reductions with `op`: refuses dtypes kolo does not reduce, and floats for the bitwise
// ops; bool tensors take the bitwise ops (as uint8). `what` names the tensor in errors.
Buffer reduced(const at::Tensor& t, ReduceOp op, const std::string& what);
// For ops that only move data: any dtype; those kolo does not know travel as bytes.
Buffer moved(const at::Tensor& t, const std::string& what);
// Copies a result into `target` when `b` is a copy of it (a non-contiguous target).
void copy_back(const Buffer& b, const at::Tensor& target);

// The one tensor of a c10d tensor list (one per device; kolo's tensors are on the CPU).
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const std::string& what);
// A list of one tensor per rank.
void one_per_rank(const std::vector<at::Tensor>& tensors, int size, const std::string& what);
void same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& what);
// The per-rank tensors of reduce_scatter, gather and scatter: `lists` must hold one list of
// one dense tensor per rank, each of `like`'s dtype and element count. Errors read "<op>: an
// <kind> holds ..., the <like_kind> ...". Returns the list.
const std::vector<at::Tensor>& per_rank_like(const std::vector<std::vector<at::Tensor>>& lists,
                                             const at::Tensor& like, int size,
                                             const std::string& op, const std::string& kind,
                                             const std::string& like_kind);
// A collective's root, checked against the group's ranks; `root_tensor` (broadcast's and
// reduce's option) must be 0, since kolo takes one tensor per call.
int root_rank(int64_t root, int size, const std::string& what, int64_t root_tensor = 0);
ReduceOp reduce_op(const ::c10d::ReduceOp& op);

// Element counts of `tensors` (times `scale`), and their concatenation as one contiguous
// tensor (a copy) and back.
std::vector<size_t> counts(const std::vector<at::Tensor>& tensors, size_t scale);
at::Tensor concatenated(const std::vector<at::Tensor>& tensors);
void split_into(const at::Tensor& flat, const std::vector<at::Tensor>& targets);

}  // namespace kolo::c10d_backend
