#include "kernels/f16.h"

#include <cmath>
#include <cstring>

namespace attn::kernels {

float round_to_f16(float x) {
  const float a = std::fabs(x);
  if (!std::isfinite(a)) return x;
  if (a < 6.103515625e-05f) return std::nearbyint(x * 16777216.0f) / 16777216.0f;  // subnormal halves
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  float r;
  std::memcpy(&r, &bits, 4);
  return std::fabs(r) > 65504.0f ? std::copysign(INFINITY, x) : r;
}

}  // namespace attn::kernels
