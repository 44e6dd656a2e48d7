// The per-element arithmetic of the optimizers (optim/adamw.h, optim/sgd.h), in one place for
// the host optimizers, the CPU backend's update kernels and the CUDA ones (host and device code
// alike). The CPU files that use it are compiled without floating-point contraction, so host
// and CPU-backend updates give the same bits; CUDA contracts into FMAs (within rounding).
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define KOLO_OPTIM_HD __host__ __device__
#else
#define KOLO_OPTIM_HD
#endif

namespace kolo::trainer {

// One AdamW / Adam step's scalars for one tensor (torch.optim.AdamW with amsgrad off).
struct AdamWScalars {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float shrink = 1.0f;     // decoupled weight decay: 1 - lr * wd (1 when not decoupled)
  float l2 = 0.0f;         // L2 weight decay added to the gradient (0 when decoupled)
  float step_size = 0.0f;  // lr / (1 - beta1^t)
  float bc2_sqrt = 1.0f;   // sqrt(1 - beta2^t)
};

// One SGD step's scalars for one tensor (torch.optim.SGD, dampening 0).
struct SgdScalars {
  float lr = 0.0f;
  float weight_decay = 0.0f;  // this tensor's (0 when ParamInfo.decay is off)
  float momentum = 0.0f;      // > 0: a momentum buffer is kept
  bool nesterov = false;
};

// p, m, v: one element of the master weights and the two moments; g: its gradient, already
// multiplied by every scale (unscale, average, clipping).
KOLO_OPTIM_HD inline void adamw_element(float& p, float& m, float& v, float g,
                                        const AdamWScalars& s) {
  const float gi = g + s.l2 * p;
  p *= s.shrink;
  m += (gi - m) * (1.0f - s.beta1);  // torch's lerp_(grad, 1 - beta1)
  v = v * s.beta2 + (1.0f - s.beta2) * gi * gi;
  const float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
  p -= s.step_size * (m / denom);
}

// buf: the element's momentum buffer, or null without momentum. The buffer starts at zero, so
// the first step gives buf = g as torch's clone does.
KOLO_OPTIM_HD inline void sgd_element(float& p, float* buf, float g, const SgdScalars& s) {
  float d = g + s.weight_decay * p;
  if (buf != nullptr) {
    *buf = s.momentum * *buf + d;
    d = s.nesterov ? d + s.momentum * *buf : *buf;
  }
  p -= s.lr * d;
}

}  // namespace kolo::trainer
