// Evaluation metrics of the trainer: a confusion matrix with accuracy, precision, recall and F1
// (of one positive class, as scikit-learn's binary average), and masked-LM token accuracy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/base/dtype.h"

namespace kolo::trainer {

class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int num_classes);  // >= 2

  // Counts one prediction; both must be in [0, num_classes).
  void add(int label, int prediction);
  void add(const int32_t* labels, const int32_t* predictions, size_t n);
  void merge(const ConfusionMatrix& other);  // same size; e.g. after gathering from ranks
  void reset();

  int num_classes() const { return num_classes_; }
  int64_t count(int label, int prediction) const;
  // Every count, label-major (num_classes^2 of them): what data-parallel ranks sum to merge
  // their matrices; from_counts() makes a matrix of such a sum (checked: non-negative).
  const std::vector<int64_t>& counts() const { return counts_; }
  static ConfusionMatrix from_counts(
      int num_classes, const std::vector<int64_t>& counts);  // row: true label, column: prediction
  int64_t total() const { return total_; }

  // A metric with an empty denominator is 0 (scikit-learn's zero_division=0).
  double accuracy() const;
  double precision(int positive = 1) const;  // TP / (TP + FP)
  double recall(int positive = 1) const;     // TP / (TP + FN)
  double f1(int positive = 1) const;         // 2 P R / (P + R)

 private:
  int num_classes_;
  std::vector<int64_t> counts_;  // [label * num_classes + prediction]
  int64_t total_ = 0;
};

// Accuracy over the positions that carry a label: masked-LM positions are the ones whose label
// is not ignore_index (-100, PyTorch's and Hugging Face's convention).
class TokenAccuracy {
 public:
  explicit TokenAccuracy(int32_t ignore_index = -100) : ignore_index_(ignore_index) {}
  void add(const int32_t* labels, const int32_t* predictions, size_t n);
  void reset() { correct_ = counted_ = 0; }
  int64_t correct() const { return correct_; }
  int64_t counted() const { return counted_; }
  double accuracy() const;  // 0 when nothing was counted

 private:
  int32_t ignore_index_;
  int64_t correct_ = 0;
  int64_t counted_ = 0;
};

}  // namespace kolo::trainer
