// random_shift_images: integer translations of 28x28 images with zero fill.
#include "trainer/data/augment.h"

#include <algorithm>
#include <vector>

#include "comm/base/error.h"
#include "trainer/data/mnist.h"

namespace kolo::trainer {

void random_shift_images(FeatureBatch& batch, int max_shift, uint64_t seed, uint64_t epoch,
                         std::span<const size_t> samples) {
  KOLO_CHECK_ARG(max_shift >= 0 && max_shift < 28, "random_shift_images: max_shift ", max_shift,
                 " is out of range [0, 27]");
  KOLO_CHECK_EQ(batch.features, kMnistPixels, ErrorCode::kInvalidArgument,
                "random_shift_images: features per image");
  KOLO_CHECK_EQ(samples.size(), static_cast<size_t>(batch.batch), ErrorCode::kInvalidArgument,
                "random_shift_images: sample indices per image");
  if (max_shift == 0) return;
  const uint64_t span = static_cast<uint64_t>(2 * max_shift + 1);
  std::vector<float> shifted(kMnistPixels);
  for (int i = 0; i < batch.batch; ++i) {
    float* image = batch.inputs.data() + static_cast<size_t>(i) * kMnistPixels;
    Rng rng(mix_seed(seed, epoch, samples[static_cast<size_t>(i)]));
    const int dx = static_cast<int>(rng.below(span)) - max_shift;
    const int dy = static_cast<int>(rng.below(span)) - max_shift;
    std::fill(shifted.begin(), shifted.end(), 0.0f);
    for (int y = std::max(0, dy); y < std::min(28, 28 + dy); ++y)
      for (int x = std::max(0, dx); x < std::min(28, 28 + dx); ++x)
        shifted[y * 28 + x] = image[(y - dy) * 28 + (x - dx)];
    std::copy(shifted.begin(), shifted.end(), image);
  }
}

}  // namespace kolo::trainer
