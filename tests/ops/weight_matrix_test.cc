// The runtime's product entry (ops/weight_matrix.h): for quantized weights of every format, a row of
// linear_rows' result is the same bits whatever rows share the call (the batched step's invariance),
// under every ISA this CPU has; bias and accumulate; dense weights against a double reference.
#include <attn/ops/weight_matrix.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/isa_test_util.h"
#include "ops/quant_blocks_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

using ops::QuantFormat;

std::vector<float> random_rows(int64_t M, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(M * K);
  for (float& v : x) v = nd(rng);
  return x;
}

TEST(WeightMatrix, EachRowIsTheSameWhateverRowsShareTheCall) {
  const QuantFormat formats[] = {QuantFormat::q4_0, QuantFormat::q4_1, QuantFormat::q5_0, QuantFormat::q8_0,
                                 QuantFormat::q4_k, QuantFormat::q5_k, QuantFormat::q6_k};
  for (const auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    for (const QuantFormat f : formats) {
      SCOPED_TRACE(std::string(ops::quant_format_name(f)) + " " + kernels::cpu::isa_str(isa));
      // 30 rows: the GEMM's tiles of 3 (AVX2) or more tokens and its blocks of tokens, partial ones too.
      const int64_t N = 40, K = 512, M = 30;
      const std::vector<std::byte> blocks = testing::quant_blocks(f, N, K, 3);
      const ops::WeightMatrix w = ops::WeightMatrix::quantized(f, blocks.data(), N, K);
      // Every format here multiplies the GEMM's panels where its vector kernel runs.
      EXPECT_EQ(w.has_panels(), ops::quant_dot_fast());
      const std::vector<float> x = random_rows(M, K, 9);
      std::vector<float> bias(N);
      for (int64_t n = 0; n < N; ++n) bias[n] = 0.01f * static_cast<float>(n);
      ops::LinearScratch s;
      std::vector<float> all(M * N, 0.5f);
      const ops::LinearJob job{&w, all.data(), N, bias.data(), true};
      ops::linear_rows({&job, 1}, x.data(), M, K, s);
      for (int64_t m = 0; m < M; ++m) {
        std::vector<float> one(N, 0.5f);
        const ops::LinearJob j1{&w, one.data(), N, bias.data(), true};
        ops::linear_rows({&j1, 1}, x.data() + m * K, 1, K, s);
        EXPECT_EQ(0, std::memcmp(one.data(), all.data() + m * N, N * sizeof(float))) << "row " << m;
      }
      // Against the dequantized weights in double (8-bit activations: within their rounding).
      std::vector<float> wf(N * K);
      for (int64_t n = 0; n < N; ++n) w.row(n, wf.data() + n * K);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double ref = 0.5 + bias[n], mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            ref += static_cast<double>(wf[n * K + k]) * x[m * K + k];
            mag += std::fabs(static_cast<double>(wf[n * K + k]) * x[m * K + k]);
          }
          EXPECT_NEAR(all[m * N + n], ref, 0.02 * mag + 1e-5) << "row " << m << " column " << n;
        }
    }
    kernels::cpu::force_isa(std::nullopt);
  }
}

// Jobs of several formats in one call (a layer's q, k, v: K-quants with Q8_K activations beside Q8_0 ones)
// give each job's rows the bits that job gives alone, one row at a time, on every ISA.
TEST(WeightMatrix, JobsOfMixedFormatsGiveWhatEachGivesAlone) {
  const QuantFormat formats[] = {QuantFormat::q4_k, QuantFormat::q6_k, QuantFormat::q8_0, QuantFormat::q4_1};
  const int64_t Ns[] = {48, 21, 21, 33};
  const int64_t K = 256, M = 13;
  for (const auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    SCOPED_TRACE(kernels::cpu::isa_str(isa));
    std::vector<std::vector<std::byte>> blocks;
    std::vector<ops::WeightMatrix> ws;
    for (int i = 0; i < 4; ++i) blocks.push_back(testing::quant_blocks(formats[i], Ns[i], K, 11 + i));
    for (int i = 0; i < 4; ++i)
      ws.push_back(ops::WeightMatrix::quantized(formats[i], blocks[i].data(), Ns[i], K));
    const std::vector<float> x = random_rows(M, K, 5);
    std::vector<std::vector<float>> all(4);
    std::vector<ops::LinearJob> jobs;
    for (int i = 0; i < 4; ++i) {
      all[i].assign(static_cast<std::size_t>(M * Ns[i]), 0.25f);
      jobs.push_back({&ws[i], all[i].data(), Ns[i], nullptr, i % 2 == 1});
    }
    ops::LinearScratch s;
    ops::linear_rows(jobs, x.data(), M, K, s);
    for (int i = 0; i < 4; ++i)
      for (int64_t m = 0; m < M; ++m) {
        std::vector<float> one(static_cast<std::size_t>(Ns[i]), 0.25f);
        const ops::LinearJob j1{&ws[i], one.data(), Ns[i], nullptr, i % 2 == 1};
        ops::linear_rows({&j1, 1}, x.data() + m * K, 1, K, s);
        EXPECT_EQ(0, std::memcmp(one.data(), all[i].data() + m * Ns[i], one.size() * sizeof(float)))
            << ops::quant_format_name(formats[i]) << " row " << m;
      }
  }
  kernels::cpu::force_isa(std::nullopt);
}

// f32 weights (F32 / F16 / BF16 files, Hugging Face folders) through the packed product: each row the same
// bits alone as among 2 to 40 others, writing or accumulating, on every ISA (one row takes the multi-row
// body, not the one-row one, whose sums differ); and the panels give back the exact values.
TEST(WeightMatrix, DenseRowsAreTheSameWhateverRowsShareTheCall) {
  const int64_t N = 45, K = 200;  // a partial last panel, K not a multiple of 8 or 16
  const std::vector<float> wv = random_rows(N, K, 5);
  const ops::WeightMatrix w = ops::WeightMatrix::dense(wv, N, K);
  std::vector<float> back(N * K);
  w.rows_f32(0, N, back.data());
  EXPECT_EQ(0, std::memcmp(back.data(), wv.data(), wv.size() * sizeof(float)));
  std::vector<float> row(K);
  w.row(N - 1, row.data());
  EXPECT_EQ(0, std::memcmp(row.data(), wv.data() + (N - 1) * K, K * sizeof(float)));
  std::vector<float> bias(N);
  for (int64_t n = 0; n < N; ++n) bias[n] = 0.01f * static_cast<float>(n);
  for (const auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    for (const int64_t M : {int64_t{2}, int64_t{7}, int64_t{13}, int64_t{40}})
      for (const bool acc : {false, true}) {
        SCOPED_TRACE(std::string(kernels::cpu::isa_str(isa)) + " M " + std::to_string(M) +
                     (acc ? " accumulate" : " write"));
        const std::vector<float> x = random_rows(M, K, 9);
        ops::LinearScratch s;
        std::vector<float> all(M * N, 0.5f);
        const ops::LinearJob job{&w, all.data(), N, bias.data(), acc};
        ops::linear_rows({&job, 1}, x.data(), M, K, s);
        for (int64_t m = 0; m < M; ++m) {
          std::vector<float> one(N, 0.5f);
          const ops::LinearJob j1{&w, one.data(), N, bias.data(), acc};
          ops::linear_rows({&j1, 1}, x.data() + m * K, 1, K, s);
          ASSERT_EQ(0, std::memcmp(one.data(), all.data() + m * N, N * sizeof(float))) << "row " << m;
          for (int64_t n = 0; n < N; ++n) {
            double ref = (acc ? 0.5 : 0.0) + bias[n];
            for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(wv[n * K + k]) * x[m * K + k];
            ASSERT_NEAR(all[m * N + n], ref, 1e-4) << "row " << m << " column " << n;
          }
        }
      }
    kernels::cpu::force_isa(std::nullopt);
  }
}

TEST(WeightMatrix, DenseWeightsAndErrors) {
  const int64_t N = 5, K = 7, M = 3;
  const std::vector<float> wv = random_rows(N, K, 1), x = random_rows(M, K, 2);
  const ops::WeightMatrix w = ops::WeightMatrix::dense(wv, N, K);
  EXPECT_EQ(w.form(), "F32");
  std::vector<float> y(M * N);
  ops::LinearScratch s;
  const ops::LinearJob job{&w, y.data(), N};
  ops::linear_rows({&job, 1}, x.data(), M, K, s);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(wv[n * K + k]) * x[m * K + k];
      EXPECT_NEAR(y[m * N + n], ref, 1e-5);
    }
  EXPECT_THROW(ops::WeightMatrix::dense(wv, N, K + 1), Error);
  std::vector<std::byte> b(64);
  EXPECT_THROW(ops::WeightMatrix::quantized(QuantFormat::q8_0, b.data(), 1, 33), Error);
  const ops::WeightMatrix other = ops::WeightMatrix::dense(random_rows(2, K + 1, 3), 2, K + 1);
  const ops::LinearJob two[] = {{&w, y.data(), N}, {&other, y.data(), N}};
  EXPECT_THROW(ops::linear_rows(two, x.data(), M, K, s), Error);
}

TEST(WeightMatrix, QuantizeOwnsItsBlocksAndCountsTheirBytes) {
  const int64_t N = 5, K = 64;
  const std::vector<float> w = random_rows(N, K, 21);
  for (const QuantFormat f : {QuantFormat::q8_0, QuantFormat::q4_0}) {
    SCOPED_TRACE(ops::quant_format_name(f));
    const std::vector<std::byte> blocks = ops::quantize_blocks(f, w.data(), N, K);
    ops::WeightMatrix copy;
    {
      const ops::WeightMatrix m = ops::WeightMatrix::quantize(f, w.data(), N, K);
      EXPECT_TRUE(m.is_quantized());
      EXPECT_EQ(m.form(), ops::quant_format_name(f));
      EXPECT_EQ(m.owned_bytes(), static_cast<int64_t>(blocks.size()));
      EXPECT_EQ(m.weight_bytes(), N * K / 32 * ops::quant_block_bytes(f));
      copy = m;  // shares the blocks, which outlive m
    }
    const ops::WeightMatrix borrowed = ops::WeightMatrix::quantized(f, blocks.data(), N, K);
    // Borrowed blocks get the GEMM's panels where its vector kernel runs (then the products read only
    // those); owned blocks never do (a second copy of what load-time quantization made to save memory).
    EXPECT_FALSE(copy.has_panels());
    const bool packed = ops::quant_dot_fast();
    EXPECT_EQ(borrowed.has_panels(), packed);
    EXPECT_FALSE(borrowed.quant().has_q8());
    // Panels of 16 rows (5 rows: one, zero-padded): a byte (Q4_0: a nibble) per weight and the f16
    // scale per 32.
    const int64_t panel_bytes = (f == QuantFormat::q4_0 ? 8 : 16) * K + 16 * (K / 32) * 2;
    EXPECT_EQ(borrowed.owned_bytes(), packed ? panel_bytes : 0);
    EXPECT_EQ(borrowed.weight_bytes(), packed ? panel_bytes : copy.weight_bytes());
    std::vector<float> a(K), b(K);
    for (int64_t n = 0; n < N; ++n) {
      copy.row(n, a.data());
      borrowed.row(n, b.data());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "row " << n;
    }
    // The product through linear_rows equals the borrowed blocks' bit for bit (within float rounding
    // where they multiply the panels: another kernel, the same integer sums).
    const std::vector<float> x = random_rows(3, K, 22);
    std::vector<float> ya(3 * N), yb(3 * N);
    ops::LinearScratch s;
    const ops::LinearJob ja{&copy, ya.data(), N}, jb{&borrowed, yb.data(), N};
    ops::linear_rows({&ja, 1}, x.data(), 3, K, s);
    ops::linear_rows({&jb, 1}, x.data(), 3, K, s);
    if (!packed) {
      EXPECT_EQ(0, std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)));
    }
    for (std::size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(ya[i], yb[i], 1e-5f * (1.0f + std::fabs(ya[i])));
  }
  // f32: the packed panels (whole panels of 32 rows), or the values as given for a lookup-only table.
  EXPECT_EQ(ops::WeightMatrix::dense(std::vector<float>(w), N, K).weight_bytes(), (N + 31) / 32 * 32 * K * 4);
  EXPECT_EQ(ops::WeightMatrix::dense(std::vector<float>(w), N, K, false).weight_bytes(), N * K * 4);
  EXPECT_ERROR_CONTAINS(ops::WeightMatrix::quantize(QuantFormat::q5_0, w.data(), N, K), {"Q8_0 or Q4_0"});
}

}  // namespace
}  // namespace attn
