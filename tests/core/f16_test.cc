// The one binary16 conversion (attn/core/f16.h): decoding every bit pattern against an independent
// definition, encoding back, and round_to_f16 agreeing with the encode-decode round trip.
#include <attn/core/f16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace attn {
namespace {

uint32_t float_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

float bits_float(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// Moved from tests/io/safetensors_test.cc (the function was io::f16_to_f32).
TEST(F16, DecodingIsExactForEveryBitPattern) {
  // Independent definition: (−1)^s · 2^(e−15) · (1 + m/1024), subnormals 2^−14 · m/1024.
  for (uint32_t b = 0; b < 65536; ++b) {
    const int s = b >> 15, e = (b >> 10) & 31, m = b & 1023;
    double want;
    if (e == 31)
      want = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
    else if (e == 0)
      want = std::ldexp(m / 1024.0, -14);
    else
      want = std::ldexp(1 + m / 1024.0, e - 15);
    if (s) want = -want;
    const float got = f16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
      ASSERT_EQ(std::signbit(got), s == 1) << std::hex << b;
    }
  }
}

// Every half that is not NaN survives decode then encode bit for bit; NaN stays NaN.
TEST(F16, EncodingInvertsDecoding) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float x = f16_to_f32(h);
    if (std::isnan(x)) {
      const uint16_t back = f32_to_f16(x);
      ASSERT_EQ(back & 0x7c00u, 0x7c00u) << std::hex << b;
      ASSERT_NE(back & 0x3ffu, 0u) << std::hex << b;
    } else {
      ASSERT_EQ(f32_to_f16(x), h) << std::hex << b;
    }
  }
}

// Nearest, ties to even, at the edges: halfway cases, the largest half, overflow, subnormals.
TEST(F16, RoundsToNearestEven) {
  struct Case {
    float x;
    float want;
  };
  const Case cases[] = {
      {1.0f + 0x1.0p-11f, 1.0f},                            // halfway between 1 and 1 + 2^-10: even is 1
      {1.0f + 3 * 0x1.0p-11f, 1.0f + 0x1.0p-9f},            // halfway, even is the upper one
      {1.0f + 0x1.0p-11f + 0x1.0p-20f, 1.0f + 0x1.0p-10f},  // just above halfway
      {65504.0f, 65504.0f},                                 // the largest half
      {65519.0f, 65504.0f},                                 // below the halfway point to 65536
      {65520.0f, INFINITY},                                 // halfway: rounds to even, past the range
      {-70000.0f, -INFINITY},
      {0x1.0p-24f, 0x1.0p-24f},          // the smallest subnormal
      {0x1.0p-25f, 0.0f},                // halfway to 0: even is 0
      {0x1.8p-25f, 0x1.0p-24f},          // above halfway
      {3 * 0x1.0p-25f, 2 * 0x1.0p-24f},  // 1.5 subnormal steps: even is 2
      {-0.0f, -0.0f},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(c.x)), c.want) << c.x;
    EXPECT_EQ(round_to_f16(c.x), c.want) << c.x;
    EXPECT_EQ(std::signbit(round_to_f16(c.x)), std::signbit(c.want)) << c.x;
  }
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(round_to_f16(std::numeric_limits<float>::quiet_NaN())));
}

// round_to_f16 (float in, float out) is the encode-decode round trip for floats of every magnitude
// and for every float whose low 13 mantissa bits sit at or next to the halfway point.
TEST(F16, RoundToF16IsTheRoundTrip) {
  std::mt19937 rng(16);
  for (int i = 0; i < 200000; ++i) {
    float x = bits_float(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    if (i % 2 == 1) x = bits_float((float_bits(x) & ~0x1fffu) | (0x1000u + (rng() % 3) - 1));  // near ties
    ASSERT_EQ(float_bits(round_to_f16(x)), float_bits(f16_to_f32(f32_to_f16(x)))) << std::hexfloat << x;
  }
}

}  // namespace
}  // namespace attn
