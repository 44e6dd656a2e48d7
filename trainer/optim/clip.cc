// clip_factor: torch's clip coefficient, clamped to 1.
#include "trainer/optim/clip.h"

namespace kolo::trainer {

float clip_factor(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return static_cast<float>(coef > 1.0 ? 1.0 : coef);  // NaN stays NaN, as torch's clamp
}

}  // namespace kolo::trainer
