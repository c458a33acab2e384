#include "kernels/f16.h"

#include <cmath>
#include <cstring>

namespace attn::kernels {

float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

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
