// Clipping by the global gradient norm, as torch.nn.utils.clip_grad_norm_: the factor every
// gradient is multiplied by. The norm comes from squared_norm (precision/mixed_precision.h),
// summed across ranks first when the gradients are sharded.
#pragma once

namespace kolo::trainer {

// min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (DeepSpeed gradient_clipping 0 means
// no clipping). A non-finite norm gives a non-finite or zero factor, as torch's does.
float clip_factor(double norm, double max_norm);

}  // namespace kolo::trainer
