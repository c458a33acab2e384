#include <attn/core/f16.h>

#include <cmath>
#include <cstring>

namespace attn {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // ±0
  } else {
    // Subnormal half: mant · 2^-24. Normalise it for the float format.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const float a = std::fabs(x);
  if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 6.103515625e-05f)                                         // subnormal halves: steps of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  std::memcpy(&b, &a, 4);
  b += 0xfffu + ((b >> 13) & 1u);  // round the 13 dropped mantissa bits to nearest even
  return static_cast<uint16_t>(sign | (((b >> 23) - 112u) << 10) | ((b >> 13) & 0x3ffu));
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

}  // namespace attn
