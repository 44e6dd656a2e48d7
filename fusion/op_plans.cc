// op_plans.h: counts and row splits of the non-fused ops.
#include "fusion/op_plans.h"

namespace kolo::engine {

size_t row_elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

Exchange allgather_plan(const Request& q, const Response& r) {
  Exchange e;
  const size_t row = row_elements(q.shape);
  for (int64_t d : r.first_dims) {
    e.recv.push_back(static_cast<size_t>(d) * row);
    e.rows += d;
  }
  return e;
}

Exchange alltoall_plan(const Request& q, const Response& r, size_t rank, size_t size) {
  Exchange e;
  const size_t row = row_elements(q.shape);
  for (size_t peer = 0; peer < size; ++peer) {
    e.send.push_back(static_cast<size_t>(r.splits[rank * size + peer]) * row);
    e.recv.push_back(static_cast<size_t>(r.splits[peer * size + rank]) * row);
    e.rows += r.splits[peer * size + rank];
  }
  return e;
}

RowSplit row_split(const Request& q, size_t n) {
  const size_t rows = q.shape.empty() ? 1 : static_cast<size_t>(q.shape[0]);
  const size_t base = rows / n, extra = rows % n;
  return {n, row_elements(q.shape), base, extra, base + (extra ? 1 : 0)};
}

std::vector<int64_t> with_rows(const std::vector<int64_t>& shape, int64_t rows) {
  std::vector<int64_t> out = shape.empty() ? std::vector<int64_t>{rows} : shape;
  out[0] = rows;
  return out;
}

}  // namespace kolo::engine
