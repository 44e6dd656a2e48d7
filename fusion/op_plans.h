// What the non-fused ops move, worked out once for the host and the device executors: per-rank
// element counts of allgather and alltoall, reduce_scatter's rows per rank (as evenly as
// possible, the first rows % n ranks one more), and the shape of a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fusion/request.h"

namespace kolo::engine {

// Elements in one row: the product of the dimensions after the first.
size_t row_elements(const std::vector<int64_t>& shape);

// Elements from and to each rank, and the rows this rank ends with.
struct Exchange {
  std::vector<size_t> send, recv;  // allgather: send is unused
  int64_t rows = 0;
};
Exchange allgather_plan(const Request& q, const Response& r);
Exchange alltoall_plan(const Request& q, const Response& r, size_t rank, size_t size);

// reduce_scatter over n ranks: rank r holds rows [first(r), first(r) + count(r)); the
// collective runs on blocks of `block` rows, so uneven splits (and a prescale) go through a
// copy of the input with every rank's rows at the start of its block.
struct RowSplit {
  size_t n, row, base, extra, block;
  size_t first(size_t r) const { return r * base + (r < extra ? r : extra); }
  size_t count(size_t r) const { return base + (r < extra ? 1 : 0); }
};
RowSplit row_split(const Request& q, size_t n);

// The request's shape with `rows` as its first dimension ({rows} for a scalar).
std::vector<int64_t> with_rows(const std::vector<int64_t>& shape, int64_t rows);

}  // namespace kolo::engine
