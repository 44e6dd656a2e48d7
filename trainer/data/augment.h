// Training-time augmentation of MNIST images: each image is translated by a random whole
// number of pixels in x and y (zero fill), which is what lets an MLP generalise from the
// 8,337 training digits (see docs/data.md).
#pragma once

#include <cstdint>
#include <span>

#include "trainer/data/batch.h"
#include "trainer/data/rng.h"

namespace kolo::trainer {

// Shifts every 28x28 image of `batch` in place by dx, dy drawn uniformly from
// [-max_shift, max_shift], image i's from Rng(mix_seed(seed, epoch, samples[i])) (its index in
// the training set): a sample's shift does not depend on the micro-batch it lands in, so runs
// at any world size or accumulation with the same global batch train on the same images.
// max_shift 0 leaves the batch unchanged.
void random_shift_images(FeatureBatch& batch, int max_shift, uint64_t seed, uint64_t epoch,
                         std::span<const size_t> samples);

}  // namespace kolo::trainer
