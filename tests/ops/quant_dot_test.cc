// ops::quant_dot_rows / QuantActivations (include/attn/ops/quantized.h, issue 19): the one door to the
// 8-bit-activation products of kernels/cpu/q8k.h. Each format against the f32-activation product of
// the same stored weights (ops::quant_linear_rows) within the activation-rounding bound, row ranges
// and accumulation, and the errors for formats and shapes it does not take.
#include <attn/core/f16.h>
#include <attn/ops/quantized.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/quant_blocks_util.h"
#include "testing/testing.h"

namespace attn::ops {
namespace {

TEST(QuantDot, EveryFormatIsCloseToTheF32ActivationProduct) {
  for (QuantFormat f : {QuantFormat::q4_0, QuantFormat::q4_1, QuantFormat::q5_0, QuantFormat::q8_0,
                        QuantFormat::q4_k, QuantFormat::q5_k, QuantFormat::q6_k}) {
    ASSERT_TRUE(quant_dot_supported(f)) << quant_format_name(f);
    const int64_t N = 11, K = 512, M = 2;
    const std::vector<std::byte> wb = testing::quant_blocks(f, N, K, 9);
    const QuantMatrix w(f, wb.data(), N, K);
    std::vector<float> x(M * K);
    std::mt19937 rng(4);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : x) v = nd(rng);
    QuantActivations xq;
    xq.quantize(f, x.data(), M, K, K);
    EXPECT_EQ(xq.k_kind(), f == QuantFormat::q4_k || f == QuantFormat::q5_k || f == QuantFormat::q6_k);
    std::vector<float> y(M * N, 0.0f), y32(M * N, 0.0f), wd(N * K);
    quant_dot_rows(w, 0, 5, xq, y.data(), N, false);  // two row ranges, the second accumulated onto 1.0
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 5; n < N; ++n) y[m * N + n] = 1.0f;
    quant_dot_rows(w, 5, N, xq, y.data(), N, true);
    quant_linear_rows(w, 0, N, x.data(), M, K, y32.data(), N);
    quant_unpack_rows(w, 0, N, wd.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        // half a step per activation value, steps of max|x| / 127 per block (<= 32 or 256 values)
        double bound = 0;
        for (int64_t k = 0; k < K; ++k) bound += std::fabs(wd[n * K + k]) * (4.5 / 127) * 0.6;
        const float want = y32[m * N + n] + (n >= 5 ? 1.0f : 0.0f);
        EXPECT_NEAR(y[m * N + n], want, bound) << quant_format_name(f) << " m " << m << " n " << n;
      }
  }
}

TEST(QuantDot, BadFormatsAndShapesAreErrors) {
  std::vector<float> x(2 * 256, 0.5f), y(8);
  QuantActivations xq;
  EXPECT_TRUE(quant_dot_supported(QuantFormat::q4_1));
  EXPECT_FALSE(quant_dot_supported(QuantFormat::q5_1));
  EXPECT_ERROR_CONTAINS(xq.quantize(QuantFormat::q5_1, x.data(), 1, 64, 64), {"Q5_1", "no 8-bit product"});
  EXPECT_ERROR_CONTAINS(xq.quantize(QuantFormat::q4_k, x.data(), 1, 100, 100), {"multiple of 256", "100"});
  xq.quantize(QuantFormat::q5_0, x.data(), 1, 256, 256);
  const std::vector<std::byte> wk = testing::quant_blocks(QuantFormat::q4_k, 2, 256, 2);
  const QuantMatrix w4k(QuantFormat::q4_k, wk.data(), 2, 256);
  EXPECT_ERROR_CONTAINS(quant_dot_rows(w4k, 0, 2, xq, y.data(), 2, false), {"Q8_0", "Q4_K"});
  xq.quantize(QuantFormat::q4_k, x.data(), 1, 256, 256);
  EXPECT_ERROR_CONTAINS(quant_dot_rows(w4k, 0, 3, xq, y.data(), 2, false), {"rows [n0, n1)"});
}

}  // namespace
}  // namespace attn::ops
