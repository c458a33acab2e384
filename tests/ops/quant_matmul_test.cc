// ops::quant_matmul / QuantPanels (include/attn/ops/quantized.h, issue 19): the 8-bit-activation GEMM
// of the prompt pass against ops::quant_dot_rows (the decode product: the same activations, the same
// integer sums, so they differ by f32 rounding only) for every format, on 1 and 2 threads, odd token
// and row counts, accumulation; and the errors for what it does not take.
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/ops/quantized.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/quant_blocks_util.h"
#include "testing/testing.h"

namespace attn::ops {
namespace {

class ThreadsGuard {
 public:
  ThreadsGuard() : n_(num_threads()) {}
  ~ThreadsGuard() { set_num_threads(n_); }

 private:
  int n_;
};

TEST(QuantMatmul, EveryFormatEqualsTheDecodeProductOnOneAndTwoThreads) {
  ThreadsGuard keep;
  for (QuantFormat f : {QuantFormat::q4_0, QuantFormat::q4_1, QuantFormat::q5_0, QuantFormat::q8_0,
                        QuantFormat::q4_k, QuantFormat::q5_k, QuantFormat::q6_k}) {
    const int64_t N = 53, K = 768;
    const std::vector<std::byte> wb = testing::quant_blocks(f, N, K, 9);
    const QuantMatrix w(f, wb.data(), N, K);
    const QuantPanels p(w);
    EXPECT_EQ(p.rows(), N);
    EXPECT_EQ(p.cols(), K);
    // Four panels of 16 rows: a byte per weight (a nibble for Q4_0, Q4_1 and Q4_K, 5 bits for Q5_0 and
    // Q5_K, 6 bits for Q6_K) and the scales.
    const bool nibbles = f == QuantFormat::q4_0 || f == QuantFormat::q4_1 || f == QuantFormat::q4_k;
    const bool five = f == QuantFormat::q5_0 || f == QuantFormat::q5_k;
    const int64_t bits = nibbles ? 4 : five ? 5 : f == QuantFormat::q6_k ? 6 : 8;
    EXPECT_GE(p.bytes(), 4 * 2 * bits * K);
    EXPECT_LE(p.bytes(), 4 * 2 * (bits + 2) * K);
    for (int64_t M : {1, 19, 40}) {
      std::vector<float> x(M * K);
      std::mt19937 rng(4 + M);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (float& v : x) v = nd(rng);
      QuantActivations xq;
      xq.quantize(f, x.data(), M, K, K);
      // the size of the sums (Σ |w|·|x| per row and token): f32 rounding is relative to it
      std::vector<float> wd(N * K);
      quant_unpack_rows(w, 0, N, wd.data());
      std::vector<double> mag(M * N, 0.0);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) mag[m * N + n] += std::fabs(wd[n * K + k] * x[m * K + k]);
      std::vector<float> want(M * (N + 3), 0.5f);
      quant_dot_rows(w, 0, N, xq, want.data(), N + 3, true);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        std::vector<float> y(M * (N + 3), 0.5f);
        quant_matmul(p, xq, y.data(), N + 3, true);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N + 3; ++n) {
            const float g = y[m * (N + 3) + n], e = want[m * (N + 3) + n];
            if (n >= N)
              ASSERT_EQ(g, 0.5f) << "column " << n << " past N was written";
            else
              ASSERT_NEAR(g, e, 4e-6 * mag[m * N + n] + 1e-6)
                  << quant_format_name(f) << " M " << M << " token " << m << " row " << n << " threads "
                  << threads;
          }
        std::vector<float> y0(M * N, 123.0f);
        quant_matmul(p, xq, y0.data(), N, false);
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_NEAR(y0[i] + 0.5f, want[i / N * (N + 3) + i % N], 4e-6 * mag[i] + 1e-6);
      }
    }
  }
}

TEST(QuantMatmul, FormatsAndShapesItDoesNotTakeAreErrors) {
  const std::vector<std::byte> w51 = testing::quant_blocks(QuantFormat::q5_1, 4, 64, 1);
  EXPECT_ERROR_CONTAINS(QuantPanels(QuantMatrix(QuantFormat::q5_1, w51.data(), 4, 64)),
                        {"QuantPanels", "Q5_1"});
  const std::vector<std::byte> wk = testing::quant_blocks(QuantFormat::q4_k, 4, 256, 2);
  const QuantPanels p(QuantMatrix(QuantFormat::q4_k, wk.data(), 4, 256));
  std::vector<float> x(2 * 512, 1.0f), y(2 * 4);
  QuantActivations x0;
  x0.quantize(QuantFormat::q8_0, x.data(), 2, 256, 256);  // Q8_0 blocks against Q4_K weights
  EXPECT_ERROR_CONTAINS(quant_matmul(p, x0, y.data(), 4, false), {"Q8_0", "Q4_K"});
  QuantActivations x1;
  x1.quantize(QuantFormat::q4_k, x.data(), 2, 512, 512);  // K 512 against 256
  EXPECT_ERROR_CONTAINS(quant_matmul(p, x1, y.data(), 4, false), {"512", "256"});
  QuantActivations x2;
  x2.quantize(QuantFormat::q4_k, x.data(), 2, 256, 256);
  EXPECT_ERROR_CONTAINS(quant_matmul(p, x2, y.data(), 3, false), {"row stride >= N", "ldy 3"});
  EXPECT_ERROR_CONTAINS(quant_matmul(QuantPanels(), x2, y.data(), 4, false), {"empty"});
}

// g19c: a prompt-sized activation matrix is quantized with its rows split over the pool: the same bytes
// as one thread, for both block kinds; a value that is not finite is still named by its row.
TEST(QuantMatmul, QuantizeSplitsRowsWithTheSameBytes) {
  const int threads = num_threads();
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const int64_t M = 203, K = 512;
  std::vector<float> x(M * K);
  for (float& v : x) v = nd(rng);
  for (QuantFormat f : {QuantFormat::q8_0, QuantFormat::q4_k}) {
    QuantActivations one, two;
    set_num_threads(1);
    one.quantize(f, x.data(), M, K, K);
    set_num_threads(2);
    two.quantize(f, x.data(), M, K, K);
    const int64_t B = one.k_kind() ? 256 : 32;
    EXPECT_EQ(std::memcmp(one.q(), two.q(), M * K), 0) << quant_format_name(f);
    EXPECT_EQ(std::memcmp(one.d(), two.d(), M * K / B * sizeof(float)), 0) << quant_format_name(f);
    EXPECT_EQ(std::memcmp(one.bsum(), two.bsum(), M * K / 16 * sizeof(int32_t)), 0) << quant_format_name(f);
  }
  x[150 * K + 7] = NAN;
  try {
    QuantActivations a;
    a.quantize(QuantFormat::q8_0, x.data(), M, K, K);
    ADD_FAILURE() << "a NaN was quantized";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("row 150"), std::string::npos) << e.what();
  }
  set_num_threads(threads);
}

}  // namespace
}  // namespace attn::ops
