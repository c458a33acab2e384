// sgemm_bf16 (bf16 operands, fp32 accumulation) against the fp64 product of the same
// bf16-rounded operands, on both paths (scalar oracle, AVX-512 when the CPU has AVX512_BF16),
// 1 and 2 threads, all four transposes, alpha/beta, edge sizes and padded leading dimensions;
// the packing kernels bit for bit against attn::bf16; and the MatmulPrecision setting.
#include "kernels/cpu/gemm_bf16.h"

#include <attn/core/dtype.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16_kernels.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using kernels::cpu::detail::Bf16GemmPath;

struct GemmCase {
  std::string name;
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // leading dimension = width + pad
  float alpha = 1.f, beta = 0.f;
};

double round_bf16(float x) { return bf16::to_float(bf16::from_float(x)); }

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C0;  // A: [M, K] or [K, M]; B: [K, N] or [N, K]; C0: [M, N] with row stride ldc
};

Operands make_operands(const GemmCase& c, uint64_t seed) {
  Operands o;
  o.lda = (c.ta ? c.M : c.K) + c.pad_a;
  o.ldb = (c.tb ? c.K : c.N) + c.pad_b;
  o.ldc = c.N + c.pad_c;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  o.A.resize(static_cast<size_t>((c.ta ? c.K : c.M) * o.lda + 1));
  o.B.resize(static_cast<size_t>((c.tb ? c.N : c.K) * o.ldb + 1));
  o.C0.resize(static_cast<size_t>(c.M * o.ldc + 1));
  for (float& x : o.A) x = u(rng);
  for (float& x : o.B) x = u(rng);
  for (float& x : o.C0) x = c.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  return o;
}

float op_a(const GemmCase& c, const Operands& o, int64_t i, int64_t k) {
  return c.ta ? o.A[k * o.lda + i] : o.A[i * o.lda + k];
}
float op_b(const GemmCase& c, const Operands& o, int64_t k, int64_t j) {
  return c.tb ? o.B[j * o.ldb + k] : o.B[k * o.ldb + j];
}

// Checks C (row stride ldc) against alpha · op(A)·op(B) + beta · C0 in fp64 with the operands rounded
// (round_operands) or not; the error bound is tol.abs + tol.rel · scale · (|alpha| Σ|a b| + |beta c0|).
::testing::AssertionResult check_product(const GemmCase& c, const Operands& o, const std::vector<float>& C,
                                         bool round_operands, testing::Tolerance tol, double scale) {
  double worst = 0;
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = round_operands ? round_bf16(op_a(c, o, i, k)) : op_a(c, o, i, k);
        const double b = round_operands ? round_bf16(op_b(c, o, k, j)) : op_b(c, o, k, j);
        sum += a * b;
        mag += std::abs(a * b);
      }
      const double c0 = c.beta == 0 ? 0.0 : o.C0[i * o.ldc + j];
      const double want = c.alpha * sum + c.beta * c0;
      const double bound = tol.abs + tol.rel * scale * (std::abs(c.alpha) * mag + std::abs(c.beta * c0));
      const double got = C[i * o.ldc + j];
      const double err = std::abs(got - want);
      if (!(err <= bound))
        return ::testing::AssertionFailure() << "C[" << i << ", " << j << "] = " << got << ", want " << want
                                             << " (|diff| " << err << " > bound " << bound << ")";
      worst = std::max(worst, err / bound);
    }
  // Padding past N in each row of C must be untouched.
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < o.ldc; ++j)
      if (!(std::isnan(C[i * o.ldc + j]) && std::isnan(o.C0[i * o.ldc + j])) &&
          C[i * o.ldc + j] != o.C0[i * o.ldc + j])
        return ::testing::AssertionFailure() << "padding C[" << i << ", " << j << "] was written";
  return ::testing::AssertionSuccess() << "worst error / bound " << worst;
}

std::vector<GemmCase> gemm_cases() {
  struct Size {
    int64_t M, N, K;
  };
  // Edge sizes around the 12×32 register block, the 384 k block, the 144-row block and the
  // 2048-column B block, several row blocks (401 rows); K = 1 and odd K pad the last k-pair.
  const Size sizes[] = {{1, 1, 1},      {2, 2, 2},      {7, 31, 33},  {31, 33, 7},
                        {33, 100, 257}, {100, 257, 31}, {13, 65, 1},  {12, 32, 385},
                        {150, 40, 800}, {3, 2100, 9},   {401, 40, 50}};
  std::vector<GemmCase> v;
  for (const Size& s : sizes)
    for (int t = 0; t < 4; ++t) {
      GemmCase c;
      c.ta = t & 1;
      c.tb = t & 2;
      c.M = s.M;
      c.N = s.N;
      c.K = s.K;
      c.name = std::string(c.ta ? "T" : "N") + (c.tb ? "T" : "N") + "_" + std::to_string(s.M) + "x" +
               std::to_string(s.N) + "x" + std::to_string(s.K);
      v.push_back(c);
    }
  // alpha/beta and leading dimensions wider than the rows.
  auto add = [&](std::string name, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pa, int64_t pb,
                 int64_t pcc, float alpha, float beta) {
    v.push_back(GemmCase{std::move(name), ta, tb, M, N, K, pa, pb, pcc, alpha, beta});
  };
  add("NN_alpha_beta", false, false, 45, 70, 130, 0, 0, 0, -0.75f, 0.5f);
  add("TT_alpha_beta", true, true, 29, 37, 390, 0, 0, 0, 2.f, -1.f);
  add("NT_beta1_padded", false, true, 40, 50, 60, 3, 5, 7, 1.f, 1.f);
  add("TN_padded_kblocks", true, false, 26, 90, 1000, 17, 1, 9, 0.5f, 0.f);
  add("NN_padded_beta0", false, false, 14, 33, 20, 2, 30, 11, 1.f, 0.f);
  add("TT_K0_beta", true, true, 5, 6, 0, 0, 0, 2, 1.f, 0.25f);
  add("NN_K0_beta0", false, false, 5, 6, 0, 0, 0, 0, 1.f, 0.f);
  return v;
}

class GemmBf16 : public ::testing::TestWithParam<std::tuple<GemmCase, Bf16GemmPath, int>> {
 protected:
  void SetUp() override { threads_ = num_threads(); }
  void TearDown() override { set_num_threads(threads_); }
  int threads_ = 1;
};

TEST_P(GemmBf16, MatchesFp64OnRoundedOperands) {
  const auto& [c, path, threads] = GetParam();
  if (path == Bf16GemmPath::avx512 && !kernels::cpu::bf16_gemm_available())
    GTEST_SKIP() << "no AVX512_BF16 (or AVX-512 not active) here";
  set_num_threads(threads);
  const Operands o = make_operands(c, 7 + c.M * 131 + c.N * 17 + c.K);
  std::vector<float> C = o.C0;  // beta = 0: C holds NaN, which must not leak
  kernels::cpu::detail::sgemm_bf16_path(path, c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda,
                                        o.B.data(), o.ldb, c.beta, C.data(), o.ldc);
  EXPECT_TRUE(check_product(c, o, C, /*round_operands=*/true, testing::tol::kGemmBf16Accum,
                            std::sqrt(static_cast<double>(c.K) + 1)));
}

std::string gemm_name(const ::testing::TestParamInfo<std::tuple<GemmCase, Bf16GemmPath, int>>& info) {
  const auto& [c, path, threads] = info.param;
  return c.name + (path == Bf16GemmPath::scalar ? "_scalar" : "_avx512") + "_t" + std::to_string(threads);
}

INSTANTIATE_TEST_SUITE_P(Table, GemmBf16,
                         ::testing::Combine(::testing::ValuesIn(gemm_cases()),
                                            ::testing::Values(Bf16GemmPath::scalar, Bf16GemmPath::avx512),
                                            ::testing::Values(1, 2)),
                         gemm_name);

// The packing kernels of both paths round exactly as attn::bf16 (ties to even, denormals,
// NaN stays NaN, ±Inf), for row- and column-contiguous sources and partial panels.
TEST(GemmBf16Pack, BothPathsRoundLikeAttnBf16) {
  if (!kernels::cpu::bf16_gemm_available()) GTEST_SKIP() << "no AVX512_BF16 here";
  const auto& scalar = kernels::cpu::detail::bf16_gemm_scalar_kernels();
  const auto& fast = kernels::cpu::detail::bf16_gemm_avx512_kernels();
  const float specials[] = {0.f,
                            -0.f,
                            1.f,
                            1.00390625f,  // 1 + 2^-8: a tie, rounds to even (1)
                            1.01171875f,  // 1 + 3·2^-8: a tie, rounds up
                            -3.3e-39f,    // denormal
                            1e-45f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(),
                            65504.5f};
  const int kc = 37, w = 45, ld = 50;  // odd kc, w not a multiple of 12 or 32
  std::vector<float> src(static_cast<size_t>(ld) * 64);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (size_t i = 0; i < src.size(); ++i) src[i] = i % 5 == 0 ? specials[(i / 5) % 12] : u(rng);
  for (int W : {kernels::cpu::detail::kBf16Mr, kernels::cpu::detail::kBf16Nr}) {
    const size_t n = static_cast<size_t>((w + W - 1) / W) * ((kc + 1) / 2) * W;
    for (bool cols : {false, true}) {
      std::vector<uint32_t> a(n, 0xdeadbeef), b(n, 0xdeadbeef);
      (cols ? scalar.pack_cols : scalar.pack_rows)(src.data(), ld, kc, w, W, a.data());
      (cols ? fast.pack_cols : fast.pack_rows)(src.data(), ld, kc, w, W, b.data());
      ASSERT_EQ(a, b) << "W " << W << (cols ? " pack_cols" : " pack_rows");
      // The scalar packing against attn::bf16, element by element.
      const int kp = (kc + 1) / 2;
      for (int c = 0; c < w; ++c)
        for (int k = 0; k < kc; ++k) {
          const float x = cols ? src[static_cast<size_t>(c) * ld + k] : src[static_cast<size_t>(k) * ld + c];
          const uint32_t pr = a[(static_cast<size_t>(c / W) * kp + k / 2) * W + c % W];
          ASSERT_EQ(static_cast<uint16_t>(k % 2 ? pr >> 16 : pr & 0xffff), bf16::from_float(x))
              << "W " << W << " c " << c << " k " << k;
        }
    }
  }
}

TEST(GemmBf16Errors, BadArgumentsThrow) {
  std::vector<float> a(16), b(16), c(16);
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::sgemm_bf16(false, false, 4, 4, 4, 1.f, a.data(), 3, b.data(), 4, 0.f, c.data(), 4),
      {"sgemm_bf16", "leading dimensions", "lda 3"});
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::sgemm_bf16(false, false, -1, 4, 4, 1.f, a.data(), 4, b.data(), 4, 0.f, c.data(), 4),
      {"sgemm_bf16", "M -1"});
}

// ---- the MatmulPrecision setting -------------------------------------------

// Bitwise equality (C holds NaN where beta = 0 left the padding alone).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ATTN_MATMUL_PRECISION is read once per process (runtime_config()), so the environment tests run
// this binary again with it set; the child checks its side when ATTN_PRECISION_TEST_CHILD is set
// (to the value it runs with, or "unset").
constexpr const char* kChildEnv = "ATTN_PRECISION_TEST_CHILD";

class MatmulPrecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv(kChildEnv) == nullptr) saved_ = matmul_precision();
  }
  void TearDown() override {
    if (std::getenv(kChildEnv) == nullptr) set_matmul_precision(saved_);
  }
  MatmulPrecision saved_ = MatmulPrecision::highest;
};

// Runs `test` of this binary with ATTN_MATMUL_PRECISION=value ("unset": without it); true if it passed.
bool run_child(const std::string& test, const std::string& value) {
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return false;
  const std::string env =
      value == "unset" ? "env -u ATTN_MATMUL_PRECISION " : "ATTN_MATMUL_PRECISION=" + value + " ";
  const std::string cmd = env + kChildEnv + "=" + value + " '" + self +
                          "' --gtest_filter=MatmulPrecisionTest." + test + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST_F(MatmulPrecisionTest, EnvironmentIsReadAtFirstUse) {
  if (const char* child = std::getenv(kChildEnv)) {
    const std::string value = child;
    const MatmulPrecision want = value == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::highest;
    EXPECT_EQ(matmul_precision(), want);
    setenv("ATTN_MATMUL_PRECISION", value == "bf16" ? "fp32" : "bf16", 1);
    EXPECT_EQ(matmul_precision(), want);  // read once
    reset_matmul_precision();
    EXPECT_EQ(matmul_precision(), want);  // once per process: forgetting the setter does not re-read it
    set_matmul_precision(want == MatmulPrecision::bf16 ? MatmulPrecision::highest : MatmulPrecision::bf16);
    EXPECT_NE(matmul_precision(), want);  // the setter wins over the environment
    reset_matmul_precision();
    EXPECT_EQ(matmul_precision(), want);
    return;
  }
  for (const std::string value : {"unset", "bf16", "fp32", "highest"})
    EXPECT_TRUE(run_child("EnvironmentIsReadAtFirstUse", value)) << "ATTN_MATMUL_PRECISION=" << value;
  set_matmul_precision(MatmulPrecision::bf16);  // the setter wins over the environment
  EXPECT_EQ(matmul_precision(), MatmulPrecision::bf16);
  EXPECT_STREQ(matmul_precision_name(MatmulPrecision::bf16), "bf16");
  EXPECT_STREQ(matmul_precision_name(MatmulPrecision::highest), "highest");
}

// A bad ATTN_MATMUL_PRECISION in the environment: tests/core/config_test.cc
// (RuntimeConfig.BadMatmulPrecisionThrowsFromTheSettingAndSgemm) runs test_core with it, since this
// binary makes tensors while it registers its parameterised tests, before any test could catch it.
TEST_F(MatmulPrecisionTest, BadValuesThrow) {
  EXPECT_ERROR_CONTAINS(parse_matmul_precision("half"), {"'half'", "bf16"});
  EXPECT_EQ(parse_matmul_precision("bf16"), MatmulPrecision::bf16);
  EXPECT_EQ(parse_matmul_precision("highest"), MatmulPrecision::highest);
}

// highest (the default) gives the fp32 BLAS result (within the fp32 accumulation bound of the
// unrounded product), the same bits before and after a bf16 detour; bf16 gives exactly
// sgemm_bf16's result, outside that fp32 bound but within the bf16 one.
TEST_F(MatmulPrecisionTest, SgemmFollowsTheSetting) {
  if (!kernels::cpu::bf16_gemm_available()) GTEST_SKIP() << "no AVX512_BF16 here: bf16 keeps fp32";
  set_matmul_precision(MatmulPrecision::highest);
  ASSERT_EQ(matmul_precision(), MatmulPrecision::highest);
  for (int t = 0; t < 4; ++t) {
    const GemmCase c{"setting", bool(t & 1), bool(t & 2), 70, 90, 300, 0, 0, 0, 1.f, 0.f};
    const Operands o = make_operands(c, 11 + t);
    auto run = [&](auto&& fn) {
      std::vector<float> C = o.C0;
      fn(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, C.data(), o.ldc);
      return C;
    };
    const std::vector<float> fp32_before = run(kernels::cpu::sgemm);
    EXPECT_TRUE(check_product(c, o, fp32_before, /*round_operands=*/false, testing::tol::kGemmBf16Accum,
                              std::sqrt(double(c.K))));
    set_matmul_precision(MatmulPrecision::bf16);
    const std::vector<float> bf = run(kernels::cpu::sgemm);
    EXPECT_TRUE(same_bits(bf, run(kernels::cpu::sgemm_bf16)));
    EXPECT_FALSE(same_bits(bf, fp32_before));
    EXPECT_TRUE(check_product(c, o, bf, /*round_operands=*/false, testing::tol::kGemmBf16VsFp32, 1.0));
    EXPECT_FALSE(check_product(c, o, bf, /*round_operands=*/false, testing::tol::kGemmBf16Accum,
                               std::sqrt(double(c.K))))
        << "bf16 results should be outside the fp32 tolerance";
    // Matrix-vector products stay on fp32 BLAS.
    const GemmCase v{"gemv", c.ta, c.tb, 1, 90, 300};
    const Operands ov = make_operands(v, 5);
    std::vector<float> y1(ov.C0), y2(ov.C0);
    kernels::cpu::sgemm(v.ta, v.tb, 1, 90, 300, 1.f, ov.A.data(), ov.lda, ov.B.data(), ov.ldb, 0.f, y1.data(),
                        ov.ldc);
    set_matmul_precision(MatmulPrecision::highest);
    kernels::cpu::sgemm(v.ta, v.tb, 1, 90, 300, 1.f, ov.A.data(), ov.lda, ov.B.data(), ov.ldb, 0.f, y2.data(),
                        ov.ldc);
    EXPECT_TRUE(same_bits(y1, y2));
    EXPECT_TRUE(same_bits(run(kernels::cpu::sgemm), fp32_before));
  }
}

}  // namespace
}  // namespace attn
