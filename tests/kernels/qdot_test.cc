// Int8-activation products (kernels/cpu/qdot.h): repacking, the 8-bit activation quantization and the
// integer dot kernels on every ISA (AVX512-VNNI where the CPU has it, else the portable loops) against
// the double reference computed from the same quantized blocks, table-driven.
#include "kernels/cpu/qdot.h"

#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/isa_test_util.h"
#include "kernels/qblocks_test_util.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using kernels::QFormat;
using kernels::cpu::Isa;

struct QdCase {
  std::string name;
  QFormat format;
  int64_t M, N, K;
  int64_t pad_y = 0;
  bool accumulate = false;
  int threads = 1;
};

std::vector<QdCase> cases() {
  std::vector<QdCase> v;
  for (QFormat f : {QFormat::q4_1, QFormat::q8_0}) {
    const std::string p = f == QFormat::q4_1 ? "q4_1_" : "q8_0_";
    v.push_back({p + "1x1x32_one_block", f, 1, 1, 32});
    v.push_back({p + "1x5x64_one_pair", f, 1, 5, 64});
    v.push_back({p + "1x7x96_odd_blocks", f, 1, 7, 96, 2});
    v.push_back({p + "1x37x576_decode", f, 1, 37, 576, 0, true});
    v.push_back({p + "2x19x544_17_blocks", f, 2, 19, 544, 3});
    v.push_back({p + "3x9x1024_32_blocks_acc", f, 3, 9, 1024, 0, true});
    v.push_back({p + "1x33x1536_2threads", f, 1, 33, 1536, 1, false, 2});
    v.push_back({p + "4x70x1056_33_blocks_3threads", f, 4, 70, 1056, 0, true, 3});
    v.push_back({p + "7x13x576_rows_in_fours_and_rest", f, 7, 13, 576, 1, true});
    v.push_back({p + "16x24x1536_a_batch_of_16", f, 16, 24, 1536, 0, false, 2});
  }
  return v;
}

// Activations: uniform in [-1, 1), one all-zero block and one block with a single large value.
std::vector<float> random_x(int64_t M, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(M * K);
  for (float& v : x) v = u(rng);
  if (K >= 64) {
    std::fill_n(x.begin() + 32, 32, 0.0f);
    x[5] = 37.5f;
  }
  return x;
}

struct Q8Buf {
  std::vector<int8_t> q;
  std::vector<float> d, s, sum;
  int64_t ldq, ldb;
  Q8Buf(int64_t M, int64_t K) {
    ldb = kernels::q8_padded_blocks(K) + 1;  // row strides wider than needed
    ldq = ldb * 32;
    q.assign(M * ldq, 99);
    d.assign(M * ldb, -1.0f);
    s.assign(M * ldb, -1.0f);
    sum.assign(M * ldb, -1.0f);
  }
  kernels::Q8Rows rows() { return {q.data(), d.data(), s.data(), sum.data(), ldq, ldb}; }
};

TEST(QDotPack, UnpackGivesTheDequantizedWeights) {
  for (QFormat f : {QFormat::q4_1, QFormat::q8_0})
    for (int64_t K : {32, 64, 96, 544, 1536}) {
      const int64_t N = 5;
      const std::vector<std::byte> w = testing::random_blocks(f, N, K, 3);
      std::vector<std::byte> packed(N * kernels::qdot_row_bytes(f, K));
      kernels::qdot_pack(f, w.data(), N, K, packed.data());
      std::vector<float> a(N * K), e(N * K);
      kernels::qdot_unpack(f, packed.data(), N, K, a.data());
      io::dequantize(testing::ggml_type_of(f), w.data(), N * K, e.data());
      for (int64_t i = 0; i < N * K; ++i) ASSERT_EQ(a[i], e[i]) << "K=" << K << " i=" << i;
    }
}

struct QuantCase {
  std::string name;
  int64_t M, K;
};
using QuantizeQ8 = testing::IsaCaseTest<QuantCase>;

// Every ISA gives the definition's values exactly: d = f16(max|x| / 127), |x/d0 - q| <= 1/2 (d0 the
// unrounded scale), sum = Σq, s = f16(d0·sum), padding blocks zero.
TEST_P(QuantizeQ8, MatchesTheDefinition) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const int64_t ldx = c.K + 3;
  std::vector<float> x = random_x(c.M, ldx, 21);
  Q8Buf out(c.M, c.K);
  kernels::cpu::quantize_q8(x.data(), c.M, c.K, ldx, out.rows());
  const int64_t nb = c.K / 32, nbp = kernels::q8_padded_blocks(c.K);
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t b = 0; b < nbp; ++b) {
      const float* xb = x.data() + m * ldx + b * 32;
      const int8_t* qb = out.q.data() + m * out.ldq + b * 32;
      const int64_t o = m * out.ldb + b;
      if (b >= nb) {
        EXPECT_EQ(out.d[o], 0.0f);
        EXPECT_EQ(out.sum[o], 0.0f);
        for (int i = 0; i < 32; ++i) EXPECT_EQ(qb[i], 0);
        continue;
      }
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const double d0 = amax / 127.0f;
      EXPECT_EQ(out.d[o], round_to_f16(static_cast<float>(d0))) << "m=" << m << " b=" << b;
      int64_t isum = 0;
      for (int i = 0; i < 32; ++i) {
        isum += qb[i];
        EXPECT_LE(std::abs(qb[i]), 127);
        if (amax > 0)
          EXPECT_LE(std::fabs(xb[i] / d0 - qb[i]), 0.5 + 1e-4) << "m=" << m << " i=" << b * 32 + i;
        else
          EXPECT_EQ(qb[i], 0);
      }
      EXPECT_EQ(out.sum[o], static_cast<float>(isum));
      EXPECT_EQ(out.s[o], round_to_f16(static_cast<float>(d0) * static_cast<float>(isum)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, QuantizeQ8,
    ::testing::Combine(::testing::Values(QuantCase{"1x32", 1, 32}, QuantCase{"1x96", 1, 96},
                                         QuantCase{"3x576", 3, 576}, QuantCase{"2x1536", 2, 1536}),
                       ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<QuantCase>);

// The scalar, AVX2 and AVX-512 quantizations agree bit for bit (one rounding rule), on every ISA
// the CPU has.
TEST(QuantizeQ8Isa, PathsAgreeExactly) {
  const int64_t M = 4, K = 1536;
  std::vector<float> x = random_x(M, K, 5);
  Q8Buf a(M, K);
  kernels::cpu::force_isa(Isa::scalar);
  kernels::cpu::quantize_q8(x.data(), M, K, K, a.rows());
  for (const Isa isa : testing::available_isas()) {
    Q8Buf b(M, K);
    kernels::cpu::force_isa(isa);
    kernels::cpu::quantize_q8(x.data(), M, K, K, b.rows());
    EXPECT_EQ(a.q, b.q) << kernels::cpu::isa_str(isa);
    EXPECT_EQ(a.d, b.d) << kernels::cpu::isa_str(isa);
    EXPECT_EQ(a.s, b.s) << kernels::cpu::isa_str(isa);
    EXPECT_EQ(a.sum, b.sum) << kernels::cpu::isa_str(isa);
  }
  kernels::cpu::force_isa(std::nullopt);
}

using QDot = testing::IsaCaseTest<QdCase>;

TEST_P(QDot, MatchesReferenceFromTheSameBlocks) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(c.threads);
  const std::vector<std::byte> w = testing::random_blocks(c.format, c.N, c.K, 7);
  std::vector<std::byte> packed(c.N * kernels::qdot_row_bytes(c.format, c.K));
  kernels::qdot_pack(c.format, w.data(), c.N, c.K, packed.data());
  std::vector<float> x = random_x(c.M, c.K, 11);
  Q8Buf xq(c.M, c.K);
  kernels::cpu::quantize_q8(x.data(), c.M, c.K, c.K, xq.rows());
  const int64_t ldy = c.N + c.pad_y;
  const Tensor init = testing::random_uniform({c.M, ldy}, 13);
  Tensor y = init.clone();
  Tensor ref = Tensor::zeros({c.M, ldy});
  kernels::cpu::qdot_matmul(c.format, packed.data(), c.N, c.K, xq.rows(), c.M, y.data<float>(), ldy,
                            c.accumulate);
  kernels::ref::qdot_matmul(c.format, packed.data(), c.N, c.K, xq.rows(), c.M, ref.data<float>(), ldy);
  float* rp = ref.data<float>();
  const float* ip = init.data<float>();
  for (int64_t i = 0; i < c.M * ldy; ++i) {
    if (i % ldy >= c.N)  // the padding past N in each output row is untouched
      rp[i] = ip[i];
    else if (c.accumulate)
      rp[i] = static_cast<float>(static_cast<double>(rp[i]) + ip[i]);
  }
  EXPECT_ALL_CLOSE(y, ref, testing::tol::kQDot);
  // And it is a product of the weights with x: close to the f32 product, within the 8-bit rounding of x.
  std::vector<float> wf(c.N * c.K);
  kernels::qdot_unpack(c.format, packed.data(), c.N, c.K, wf.data());
  double worst = 0;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double e = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        e += static_cast<double>(wf[n * c.K + k]) * x[m * c.K + k];
        mag += std::fabs(wf[n * c.K + k]);
      }
      double a = rp[m * ldy + n];
      if (c.accumulate) a -= ip[m * ldy + n];
      worst = std::max(worst, std::fabs(a - e) / mag);
    }
  // |x - q·d| <= d/2 + f16 rounding of d, d = max|x|/127 <= 37.5/127 in the block holding the outlier.
  EXPECT_LT(worst, 0.16) << "max |y - W·x| / Σ|w| over the rows";
}

INSTANTIATE_TEST_SUITE_P(Table, QDot,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<QdCase>);

// A row of the product is the same bits however many rows are multiplied with it (batched decoding
// relies on it: a sequence's tokens do not depend on which others share its step), on every ISA.
// The second shape is a prompt pass large enough to be cut into cache tiles over rows and columns
// (qdot_rows_with: about 96 KiB of activation rows by 64 KiB of weight rows).
TEST(QDotRows, ARowsResultDoesNotDependOnItsNeighbours) {
  struct Shape {
    int64_t M, N;
  };
  for (const Isa isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    for (const Shape shape : {Shape{7, 5}, Shape{300, 200}})
      for (QFormat f : {QFormat::q4_1, QFormat::q8_0}) {
        const int64_t M = shape.M, N = shape.N, K = 576;
        const std::vector<std::byte> w = testing::random_blocks(f, N, K, 3);
        std::vector<std::byte> packed(N * kernels::qdot_row_bytes(f, K));
        kernels::qdot_pack(f, w.data(), N, K, packed.data());
        std::vector<float> x = random_x(M, K, 4);
        Q8Buf xq(M, K);
        kernels::cpu::quantize_q8(x.data(), M, K, K, xq.rows());
        std::vector<float> all(M * N), one(N);
        kernels::cpu::qdot_rows(f, packed.data(), 0, N, K, xq.rows(), M, all.data(), N, false);
        for (int64_t m = 0; m < M; ++m) {
          const kernels::Q8RowsConst r(xq.q.data() + m * xq.ldq, xq.d.data() + m * xq.ldb,
                                       xq.s.data() + m * xq.ldb, xq.sum.data() + m * xq.ldb, xq.ldq, xq.ldb);
          kernels::cpu::qdot_rows(f, packed.data(), 0, N, K, r, 1, one.data(), N, false);
          for (int64_t n = 0; n < N; ++n)
            EXPECT_EQ(one[n], all[m * N + n]) << kernels::cpu::isa_str(isa) << " row " << m << " col " << n;
        }
      }
  }
  kernels::cpu::force_isa(std::nullopt);
}

TEST(QDotArgs, BadSizesThrow) {
  std::vector<std::byte> w(20 * 4);
  std::vector<int8_t> q(64);
  std::vector<float> d(2), y(4);
  const kernels::Q8RowsConst x(q.data(), d.data(), d.data(), d.data(), 64, 2);
  EXPECT_ERROR_CONTAINS(kernels::cpu::qdot_matmul(QFormat::q4_1, w.data(), 2, 48, x, 1, y.data(), 2, false),
                        {"multiple of 32", "48"});
  EXPECT_ERROR_CONTAINS(kernels::cpu::qdot_matmul(QFormat::q4_1, w.data(), 2, 64, x, 1, y.data(), 1, false),
                        {"ldy", "N=2"});
  const kernels::Q8RowsConst narrow(q.data(), d.data(), d.data(), d.data(), 32, 2);  // ldq < 64
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::qdot_matmul(QFormat::q8_0, w.data(), 1, 64, narrow, 2, y.data(), 1, false),
      {"activation strides", "64"});
  std::vector<float> xf(48);
  Q8Buf out(1, 64);
  EXPECT_ERROR_CONTAINS(kernels::cpu::quantize_q8(xf.data(), 1, 48, 48, out.rows()),
                        {"multiple of 32", "48"});
}

}  // namespace
}  // namespace attn
