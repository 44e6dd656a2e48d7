// Training-time augmentation of MNIST images: each image is translated by a random whole
// number of pixels in x and y (zero fill), which is what lets an MLP generalise from the
// 8,337 training digits (see docs/data.md).
#pragma once

#include <cstdint>

#include "trainer/data/batch.h"
#include "trainer/data/rng.h"

namespace kolo::trainer {

// Shifts every 28x28 image of `batch` in place by dx, dy drawn uniformly from
// [-max_shift, max_shift]. max_shift 0 leaves the batch unchanged.
void random_shift_images(FeatureBatch& batch, int max_shift, Rng& rng);

}  // namespace kolo::trainer
