// The encoder's product entry (ops/weight_matrix.h: DenseMatrix, dense_linear) and its attention entry
// (ops/inference.h: encoder_self_attention), under every ISA this CPU has: each kernel the entry chooses
// (the 8-bit products on the quantized twin, the packed small-M kernel, the packed GEMM, BLAS) and each
// output (write, bias + GELU, accumulate) against a plain double product; a part of a batch against the
// whole batch's rows; the attention's two paths against a double softmax.
#include <attn/core/parallel.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>
#include <attn/ops/weight_matrix.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "kernels/isa_test_util.h"
#include "ops/quant_blocks_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

using ops::DenseKernel;
using ops::DenseOutput;

std::vector<float> normal(int64_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = nd(rng);
  return x;
}

double gelu(double u) { return 0.5 * u * (1.0 + std::erf(u / std::sqrt(2.0))); }

// W [N, K] as the dequantized values of random Q4_1 blocks, so the f32 matrix and its quantized twin are
// the same weights.
struct Weights {
  int64_t N, K;
  std::vector<std::byte> q41;
  std::vector<float> w;  // [N, K]
  Weights(int64_t n, int64_t k, uint32_t seed) : N(n), K(k) {
    q41 = testing::quant_blocks(ops::QuantFormat::q4_1, N, K, seed);
    const ops::QuantMatrix q(ops::QuantFormat::q4_1, q41.data(), N, K);
    w.resize(static_cast<std::size_t>(N * K));
    ops::quant_unpack_rows(q, 0, N, w.data());
  }
  ops::DenseMatrix dense(bool twin) const {
    Tensor wt = Tensor::empty({K, N});
    float* p = wt.data<float>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) p[k * N + n] = w[n * K + k];
    ops::DenseMatrix m = ops::DenseMatrix::from_transposed(wt);
    if (twin) m.add_quantized(q41);
    return m;
  }
};

struct Case {
  int64_t M, batch_rows, quantized_max_rows;
};

TEST(DenseLinear, EachKernelAndOutputAgainstThePlainProduct) {
  const int64_t N = 40, K = 96;
  const Weights W(N, K, 3);
  const std::vector<float> bias = normal(N, 4, 0.1f);
  const int64_t ldx = K + 5, ldy = N + 3;  // row strides past the row
  const Case cases[] = {
      {5, 0, 8},      // the quantized twin (where the 8-bit kernel runs)
      {7, 0, 0},      // small-M
      {256, 0, 0},    // small-M at its largest
      {300, 0, 0},    // the GEMM
      {17, 300, 0},   // a part of a batch of 300 rows: the GEMM
      {5, 300, 300},  // a part of a batch over the twin's limit... which is 300: the twin
  };
  for (const auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    const ops::DenseMatrix m = W.dense(true);
    EXPECT_EQ(m.packed(), ops::packed_weight_fast());
    EXPECT_EQ(m.has_quantized(), ops::q8_dot_fast());
    std::set<DenseKernel> seen;
    for (const Case& c : cases) {
      const ops::DenseLinearOptions opt{c.batch_rows, c.quantized_max_rows};
      const DenseKernel kernel = ops::dense_kernel(m, c.batch_rows > 0 ? c.batch_rows : c.M, opt);
      seen.insert(kernel);
      const bool q8 = kernel == DenseKernel::q8;
      const std::vector<float> x = normal(c.M * ldx, static_cast<uint32_t>(c.M));
      for (const DenseOutput out : {DenseOutput::write, DenseOutput::write_gelu, DenseOutput::accumulate}) {
        SCOPED_TRACE(std::string(kernels::cpu::isa_str(isa)) + " M " + std::to_string(c.M) + " " +
                     ops::dense_kernel_name(kernel) + " output " + std::to_string(static_cast<int>(out)));
        std::vector<float> y(static_cast<std::size_t>(c.M * ldy), 0.25f);
        ops::DenseScratch s;
        ops::dense_linear(m, x.data(), c.M, ldx, y.data(), ldy, bias.data(), out, opt, s);
        for (int64_t r = 0; r < c.M; ++r) {
          for (int64_t n = 0; n < N; ++n) {
            double dot = bias[n], mag = std::fabs(bias[n]);
            for (int64_t k = 0; k < K; ++k) {
              dot += static_cast<double>(x[r * ldx + k]) * W.w[n * K + k];
              mag += std::fabs(static_cast<double>(x[r * ldx + k]) * W.w[n * K + k]);
            }
            const double want = out == DenseOutput::write_gelu   ? gelu(dot)
                                : out == DenseOutput::accumulate ? 0.25 + dot
                                                                 : dot;
            // f32 sums within float rounding; 8-bit activations within their rounding (1/254 of each |x|).
            const double tol = q8 ? 0.01 * mag + 1e-4 : 1e-5 * mag + 1e-6;
            ASSERT_NEAR(y[r * ldy + n], want, tol) << "row " << r << " column " << n;
          }
          for (int64_t n = N; n < ldy; ++n) ASSERT_EQ(y[r * ldy + n], 0.25f) << "past the row, row " << r;
        }
      }
    }
    // Every kernel this ISA has was taken: the twin where the 8-bit kernel runs, and the packed kernels
    // where the weights are packed (AVX2, AVX-512), else BLAS.
    if (m.has_quantized()) {
      EXPECT_TRUE(seen.count(DenseKernel::q8));
    }
    if (m.packed()) {
      EXPECT_TRUE(seen.count(DenseKernel::small));
      EXPECT_TRUE(seen.count(DenseKernel::gemm_packed));
    } else {
      EXPECT_TRUE(seen.count(DenseKernel::gemm));
    }
    kernels::cpu::force_isa(std::nullopt);
  }
}

// The fused encoder layers run a batch's products on parts of it (groups of sequences) told the batch's
// rows: where the packed GEMM reads the panels in place, each part's rows are the whole call's, bit for bit.
TEST(DenseLinear, APartOfABatchGivesTheBatchRows) {
  const int64_t N = 72, K = 64, M = 300;
  const Weights W(N, K, 5);
  const std::vector<float> bias = normal(N, 6, 0.1f), x = normal(M * K, 7);
  for (const auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    const ops::DenseMatrix m = W.dense(false);
    const ops::DenseLinearOptions opt{M, 0};
    int compared = 0;
    for (const DenseOutput out : {DenseOutput::write, DenseOutput::write_gelu, DenseOutput::accumulate}) {
      ops::DenseScratch s;
      std::vector<float> whole(M * N, 0.5f), part(M * N, 0.5f);
      ops::dense_linear(m, x.data(), M, K, whole.data(), N, bias.data(), out, opt, s);
      for (int64_t r0 = 0; r0 < M; r0 += 130) {
        const int64_t rows = std::min<int64_t>(130, M - r0);
        if (ops::dense_kernel(m, M, opt) != DenseKernel::gemm_packed || !ops::gemm_packed_in_place(rows, N))
          continue;
        ops::dense_linear(m, x.data() + r0 * K, rows, K, part.data() + r0 * N, N, bias.data(), out, opt, s);
        EXPECT_EQ(0, std::memcmp(part.data() + r0 * N, whole.data() + r0 * N, rows * N * sizeof(float)))
            << kernels::cpu::isa_str(isa) << " rows from " << r0 << ", output " << static_cast<int>(out);
        ++compared;
      }
    }
    // Where the weights are packed and the GEMM reads them in place, every part was compared.
    if (m.packed() && ops::gemm_packed_in_place(40, N)) {
      EXPECT_EQ(compared, 9) << kernels::cpu::isa_str(isa);
    }
    kernels::cpu::force_isa(std::nullopt);
  }
}

TEST(DenseLinear, Errors) {
  const Weights W(8, 32, 1);
  ops::DenseMatrix m = W.dense(false);
  std::vector<float> x(4 * 32), y(4 * 8), b(8);
  ops::DenseScratch s;
  EXPECT_ERROR_CONTAINS(
      ops::dense_linear(m, x.data(), 4, 16, y.data(), 8, b.data(), DenseOutput::write, {}, s),
      {"ldx >= K = 32", "ldx 16"});
  EXPECT_ERROR_CONTAINS(
      ops::dense_linear(m, x.data(), 4, 32, y.data(), 8, nullptr, DenseOutput::write, {}, s), {"bias"});
  EXPECT_ERROR_CONTAINS(
      ops::dense_linear(m, x.data(), 4, 32, y.data(), 8, b.data(), DenseOutput::write, {.batch_rows = 2}, s),
      {"batch_rows 2", "4 rows"});
  EXPECT_ERROR_CONTAINS(m.add_quantized(std::vector<std::byte>(10)), {"10 bytes", "expected 160"});
  EXPECT_ERROR_CONTAINS(ops::DenseMatrix::from_transposed(Tensor::empty({3})), {"[K, N]"});
  ops::DenseMatrix empty;
  EXPECT_ERROR_CONTAINS(
      ops::dense_linear(empty, x.data(), 4, 32, y.data(), 8, b.data(), DenseOutput::write, {}, s), {"empty"});
}

// ctx [B, L, H, D] against a double softmax over each sequence's keys; probs [B, H, L, L] too.
void expect_attention(const Tensor& qkv, const std::vector<int64_t>& lengths, const Tensor& ctx,
                      const Tensor& probs, double scale) {
  const int64_t B = qkv.size(0), L = qkv.size(1), H = qkv.size(3), D = qkv.size(4);
  const float* p = qkv.data<float>();
  auto at = [&](int64_t b, int64_t l, int64_t j, int64_t h, int64_t d) {
    return static_cast<double>(p[(((b * L + l) * 3 + j) * H + h) * D + d]);
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> s(L, 0.0);
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j < lengths[b]; ++j) {
          for (int64_t d = 0; d < D; ++d) s[j] += at(b, i, 0, h, d) * at(b, j, 1, h, d);
          s[j] *= scale;
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j < lengths[b]; ++j) z += (s[j] = std::exp(s[j] - mx));
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < lengths[b]; ++j) o += s[j] / z * at(b, j, 2, h, d);
          ASSERT_NEAR(ctx.data<float>()[((b * L + i) * H + h) * D + d], o, 1e-5)
              << "b " << b << " h " << h << " row " << i << " d " << d;
        }
        if (!probs.defined()) continue;
        for (int64_t j = 0; j < L; ++j)
          ASSERT_NEAR(probs.data<float>()[((b * H + h) * L + i) * L + j], j < lengths[b] ? s[j] / z : 0.0,
                      1e-6)
              << "b " << b << " h " << h << " row " << i << " key " << j;
      }
}

TEST(EncoderSelfAttention, BothPathsAgainstADoubleSoftmax) {
  const std::vector<int64_t> lengths = {7, 3, 1};
  for (const auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    for (const int64_t D : {16, 12}) {  // 12: no vector body (AVX2 needs a multiple of 8, AVX-512 16)
      SCOPED_TRACE(std::string(kernels::cpu::isa_str(isa)) + " D " + std::to_string(D));
      const int64_t B = 3, L = 7, H = 2;
      const Tensor qkv = testing::random_uniform({B, L, 3, H, D}, static_cast<uint64_t>(D), -1.0, 1.0);
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      for (const bool capture : {false, true}) {
        const Tensor ctx = Tensor::empty({B, L, H, D});
        const Tensor probs = ops::encoder_self_attention(qkv, lengths, ctx, scale, capture);
        EXPECT_EQ(probs.defined(), capture);
        if (capture) {
          EXPECT_EQ(probs.shape(), (Shape{B, H, L, L}));
        }
        expect_attention(qkv, lengths, ctx, probs, scale);
      }
    }
    kernels::cpu::force_isa(std::nullopt);
  }
  const Tensor ctx = Tensor::empty({1, 2, 1, 8});
  EXPECT_ERROR_CONTAINS(ops::encoder_self_attention(Tensor::empty({1, 2, 1, 8}), {2}, ctx, 1.0, false),
                        {"[B, L, 3, H, D]"});
  EXPECT_ERROR_CONTAINS(ops::encoder_self_attention(Tensor::empty({1, 2, 3, 1, 12}), {2}, ctx, 1.0, true),
                        {"ctx", "[1, 2, 1, 12]"});
}

}  // namespace
}  // namespace attn
