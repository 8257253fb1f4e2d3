// Optimizer kernels (see optimizer.h). Plain loops over contiguous arrays that GCC vectorizes at
// -O3 (this file is built with -O3); no allocation, no per-element branches.
#include "pserver/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/denormals.h"

namespace tessera {
namespace {

// Each kernel also writes the new values to `out` when kOut (in the same pass, while they are in
// registers: a pull reply waiting for them costs no second pass over the block).
template <bool kOut>
void Sgd(float* __restrict w, const float* __restrict g, float scale, size_t n, float lr, float wd,
         float* __restrict out) {
  if (wd == 0) {
    const float k = lr * scale;
    for (size_t i = 0; i < n; ++i) {
      w[i] -= k * g[i];
      if constexpr (kOut) out[i] = w[i];
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    w[i] -= lr * (g[i] * scale + wd * w[i]);
    if constexpr (kOut) out[i] = w[i];
  }
}

template <bool kOut>
void Momentum(float* __restrict w, const float* __restrict g, float scale, size_t n, const OptimizerConfig& c,
              float* __restrict v, float* __restrict out) {
  const float lr = c.lr, mu = c.momentum, wd = c.weight_decay;
  if (c.nesterov) {
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i] * scale + wd * w[i];
      v[i] = mu * v[i] + gi;
      w[i] -= lr * (gi + mu * v[i]);
      if constexpr (kOut) out[i] = w[i];
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i] * scale + wd * w[i];
      v[i] = mu * v[i] + gi;
      w[i] -= lr * v[i];
      if constexpr (kOut) out[i] = w[i];
    }
  }
}

template <bool kOut>
void Adagrad(float* __restrict w, const float* __restrict g, float scale, size_t n, const OptimizerConfig& c,
             float* __restrict a, float* __restrict out) {
  const float lr = c.lr, wd = c.weight_decay, eps = c.eps;
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] * scale + wd * w[i];
    a[i] += gi * gi;
    w[i] -= lr * gi / (std::sqrt(a[i]) + eps);
    if constexpr (kOut) out[i] = w[i];
  }
}

template <bool kOut>
void Adam(float* __restrict w, const float* __restrict g, float scale, size_t n, const OptimizerConfig& c,
          float* __restrict m, float* __restrict v, int64_t t, float* __restrict out) {
  const float b1 = c.beta1, b2 = c.beta2, wd = c.weight_decay, eps = c.eps;
  const double td = static_cast<double>(t);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), td));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(b2), td));
  const float step = c.lr / bc1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] * scale + wd * w[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    w[i] -= step * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
    if constexpr (kOut) out[i] = w[i];
  }
}

// FTRL-Proximal: z and n per coordinate; the weight follows from them (0 where |z| <= l1).
template <bool kOut>
void Ftrl(float* __restrict w, const float* __restrict g, float scale, size_t n, const OptimizerConfig& c,
          float* __restrict z, float* __restrict acc, float* __restrict out) {
  const float inv_alpha = 1.0f / c.lr, beta = c.ftrl_beta, l1 = c.l1, l2 = c.l2, wd = c.weight_decay;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * scale + wd * w[i];
    const float grown = acc[i] + gi * gi;
    const float root = std::sqrt(grown);
    z[i] += gi - (root - std::sqrt(acc[i])) * inv_alpha * w[i];
    acc[i] = grown;
    const float over = std::fabs(z[i]) - l1;
    w[i] = over > 0 ? -std::copysign(over, z[i]) / ((beta + root) * inv_alpha + l2) : 0.0f;
    if constexpr (kOut) out[i] = w[i];
  }
}

template <bool kOut>
void Update(const OptimizerConfig& c, float* w, const float* g, float scale, size_t n, float* s1, float* s2,
            int64_t t, float* out) {
  switch (c.type) {
    case OptimizerConfig::Type::kSgd:
      return Sgd<kOut>(w, g, scale, n, c.lr, c.weight_decay, out);
    case OptimizerConfig::Type::kMomentum:
      return Momentum<kOut>(w, g, scale, n, c, s1, out);
    case OptimizerConfig::Type::kAdagrad:
      return Adagrad<kOut>(w, g, scale, n, c, s1, out);
    case OptimizerConfig::Type::kAdam:
      return Adam<kOut>(w, g, scale, n, c, s1, s2, t, out);
    case OptimizerConfig::Type::kFtrl:
      return Ftrl<kOut>(w, g, scale, n, c, s1, s2, out);
  }
}

}  // namespace

namespace {

// Whether a zero gradient leaves an element and its state as they are (ShardStore's
// ZeroGradientKeepsValues: sgd and adagrad without weight decay).
bool SkipsZeros(const OptimizerConfig& c) {
  return c.weight_decay == 0 &&
         (c.type == OptimizerConfig::Type::kSgd || c.type == OptimizerConfig::Type::kAdagrad);
}

bool AllZero(const float* g, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (g[i] != 0.0f) return false;
  }
  return true;
}

// Runs of a gradient checked for zeros: a sparsified push (top-k) leaves most of them zero.
constexpr size_t kZeroRun = 512;

}  // namespace

void ApplyUpdate(const OptimizerConfig& c, float* w, const float* g, float scale, size_t n, float* s1,
                 float* s2, int64_t t, float* out) {
  const ScopedFlushDenormals flush;  // decaying state must not crawl through denormals
  if (SkipsZeros(c) && n > kZeroRun) {
    // Runs of zeros change nothing: skipped (the values copied where a reply waits for them).
    for (size_t i = 0; i < n; i += kZeroRun) {
      const size_t m = std::min(kZeroRun, n - i);
      float* o = out ? out + i : nullptr;
      if (AllZero(g + i, m)) {
        if (o) std::memcpy(o, w + i, m * sizeof(float));
      } else if (o) {
        Update<true>(c, w + i, g + i, scale, m, s1 ? s1 + i : nullptr, s2 ? s2 + i : nullptr, t, o);
      } else {
        Update<false>(c, w + i, g + i, scale, m, s1 ? s1 + i : nullptr, s2 ? s2 + i : nullptr, t, nullptr);
      }
    }
    return;
  }
  if (out) return Update<true>(c, w, g, scale, n, s1, s2, t, out);
  Update<false>(c, w, g, scale, n, s1, s2, t, nullptr);
}

void InitState(const OptimizerConfig& c, float* s1, float* s2, size_t n) {
  const float a0 = c.type == OptimizerConfig::Type::kAdagrad ? c.initial_accumulator : 0.0f;
  if (s1)
    for (size_t i = 0; i < n; ++i) s1[i] = a0;
  if (s2)
    for (size_t i = 0; i < n; ++i) s2[i] = 0.0f;
}

}  // namespace tessera
