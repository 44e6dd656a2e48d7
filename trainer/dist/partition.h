// ZeRO's partition of the flat buffers: `world` equal blocks of a multiple of
// ParamLayout::kAlign elements, rank r owning [r * block, (r + 1) * block) clipped to the
// layout's total (the blocks reach into the buffers' zeroed slack, ParamLayout::capacity()).
#pragma once

#include <cstddef>

#include "comm/base/dtype.h"
#include "trainer/layout/param_layout.h"

namespace kolo::trainer {

struct Partition {
  size_t block = 0;           // elements per rank: world * block <= layout.capacity()
  size_t begin = 0, end = 0;  // this rank's range inside [0, layout.total())
};

// Throws kInvalidArgument when world exceeds ParamLayout::kMaxPartitions.
Partition partition_of(const ParamLayout& layout, int world, int rank);

// The squared L2 norm of a full gradient buffer times `multiplier` as ZeRO ranks compute it: one
// partial sum per partition (squared_norm over the partition's slice), added in rank order. Every
// stage and world size of one run adds the same partials in the same order, so the clipping factor
// is the same to the bit whether a rank holds the whole gradient or only its partition.
double partitioned_squared_norm(const void* grads, DType dtype, float multiplier,
                                const ParamLayout& layout, int world);

}  // namespace kolo::trainer
