// ConfusionMatrix and TokenAccuracy. The predictions they count come from the backend's
// argmax_rows, or from the argmax cross_entropy_forward returns with the loss.
#include "trainer/metrics/classification.h"

#include "comm/base/convert.h"
#include "comm/base/error.h"

namespace kolo::trainer {

namespace {

double ratio(int64_t num, int64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

}  // namespace

ConfusionMatrix::ConfusionMatrix(int num_classes) : num_classes_(num_classes) {
  KOLO_CHECK_ARG(num_classes >= 2, "confusion matrix classes: ", num_classes,
                 " is out of range (>= 2)");
  counts_.assign(static_cast<size_t>(num_classes) * num_classes, 0);
}

void ConfusionMatrix::add(int label, int prediction) {
  KOLO_CHECK_ARG(label >= 0 && label < num_classes_, "confusion matrix: label ", label,
                 " is out of range [0, ", num_classes_, ")");
  KOLO_CHECK_ARG(prediction >= 0 && prediction < num_classes_, "confusion matrix: prediction ",
                 prediction, " is out of range [0, ", num_classes_, ")");
  ++counts_[static_cast<size_t>(label) * num_classes_ + prediction];
  ++total_;
}

void ConfusionMatrix::add(const int32_t* labels, const int32_t* predictions, size_t n) {
  for (size_t i = 0; i < n; ++i) add(labels[i], predictions[i]);
}

void ConfusionMatrix::merge(const ConfusionMatrix& other) {
  KOLO_CHECK_EQ(num_classes_, other.num_classes_, ErrorCode::kInvalidArgument,
                "confusion matrix merge: class count");
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
}

ConfusionMatrix ConfusionMatrix::from_counts(int num_classes, const std::vector<int64_t>& counts) {
  ConfusionMatrix m(num_classes);
  KOLO_CHECK_EQ(counts.size(), m.counts_.size(), ErrorCode::kInvalidArgument,
                "confusion matrix from counts: count of cells");
  for (size_t i = 0; i < counts.size(); ++i) {
    KOLO_CHECK_ARG(counts[i] >= 0, "confusion matrix from counts: cell ", i, " is ", counts[i]);
    m.counts_[i] = counts[i];
    m.total_ += counts[i];
  }
  return m;
}

void ConfusionMatrix::reset() {
  counts_.assign(counts_.size(), 0);
  total_ = 0;
}

int64_t ConfusionMatrix::count(int label, int prediction) const {
  KOLO_CHECK_ARG(label >= 0 && label < num_classes_ && prediction >= 0 && prediction < num_classes_,
                 "confusion matrix: cell (", label, ", ", prediction, ") is out of range [0, ",
                 num_classes_, ")");
  return counts_[static_cast<size_t>(label) * num_classes_ + prediction];
}

double ConfusionMatrix::accuracy() const {
  int64_t correct = 0;
  for (int c = 0; c < num_classes_; ++c) correct += count(c, c);
  return ratio(correct, total_);
}

double ConfusionMatrix::precision(int positive) const {
  int64_t predicted = 0;  // column sum: everything predicted positive
  for (int l = 0; l < num_classes_; ++l) predicted += count(l, positive);
  return ratio(count(positive, positive), predicted);
}

double ConfusionMatrix::recall(int positive) const {
  int64_t actual = 0;  // row sum: everything truly positive
  for (int p = 0; p < num_classes_; ++p) actual += count(positive, p);
  return ratio(count(positive, positive), actual);
}

double ConfusionMatrix::f1(int positive) const {
  const double p = precision(positive), r = recall(positive);
  return p + r == 0 ? 0.0 : 2 * p * r / (p + r);
}

void TokenAccuracy::add(const int32_t* labels, const int32_t* predictions, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (labels[i] == ignore_index_) continue;
    ++counted_;
    if (predictions[i] == labels[i]) ++correct_;
  }
}

double TokenAccuracy::accuracy() const {
  return ratio(correct_, counted_);
}

}  // namespace kolo::trainer
