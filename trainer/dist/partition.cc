// partition_of and the partitioned norm.
#include "trainer/dist/partition.h"

#include <algorithm>

#include "comm/base/error.h"
#include "trainer/precision/mixed_precision.h"

namespace kolo::trainer {

Partition partition_of(const ParamLayout& layout, int world, int rank) {
  KOLO_CHECK_ARG(world >= 1 && static_cast<size_t>(world) <= ParamLayout::kMaxPartitions,
                 "ZeRO partitions: world size ", world, " is out of range [1, ",
                 ParamLayout::kMaxPartitions, "]");
  KOLO_CHECK_ARG(rank >= 0 && rank < world, "ZeRO partitions: rank ", rank, " of ", world);
  const size_t align = ParamLayout::kAlign, n = static_cast<size_t>(world);
  Partition p;
  p.block = ((layout.total() + n - 1) / n + align - 1) / align * align;
  p.begin = std::min(layout.total(), p.block * static_cast<size_t>(rank));
  p.end = std::min(layout.total(), p.begin + p.block);
  return p;
}

double partitioned_squared_norm(const void* grads, DType dtype, float multiplier,
                                const ParamLayout& layout, int world) {
  double sum = 0.0;
  for (int r = 0; r < world; ++r) {
    const Partition p = partition_of(layout, world, r);
    const char* first = static_cast<const char*>(grads) + p.begin * dtype_size(dtype);
    sum += squared_norm(first, dtype, multiplier, layout.slice(p.begin, p.end));
  }
  return sum;
}

}  // namespace kolo::trainer
