// kernels/cpu/geglu.h: tanh through exp, exp through 2^n · p(r), no libm call in the loop.
#include "kernels/cpu/geglu.h"

// The loop must vectorise: the clamp (a compare) counts as control flow while comparisons may trap.
#pragma GCC optimize("no-trapping-math")

#include <algorithm>
#include <bit>
#include <cstdint>

namespace attn::kernels::cpu {
namespace {
// e^x for x in [-87, 87] (the caller clamps): x = n·ln2 + r, |r| <= ln2/2, e^r by its Taylor series to
// r^7 (relative error < 2e-8 at |r| = 0.347), 2^n by the exponent bits.
inline float exp_clamped(float x) {
  // round to nearest (even) by the 1.5 · 2^23 shift: exact for |x · log2 e| < 2^22, no libm call
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693145751953125f - n * 1.42860682030941723212e-6f;  // ln2 in two parts
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}
}  // namespace

void geglu_tanh(float* g, const float* u, int64_t n) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    float t = 2.0f * k * x * (1.0f + 0.044715f * x * x);  // 2 · the tanh argument
    t = std::max(-80.0f, std::min(t, 80.0f));
    const float th = 1.0f - 2.0f / (1.0f + exp_clamped(t));
    g[i] = 0.5f * x * (1.0f + th) * u[i];
  }
}
}  // namespace attn::kernels::cpu
