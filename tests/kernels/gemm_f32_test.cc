// sgemm_f32 (attn's own fp32 GEMM) against the fp64 product of the same operands on every
// path the CPU has (scalar oracle, AVX2, AVX-512), 1 to 3 threads, all four transposes,
// alpha/beta (beta = 0 with NaN in C), sizes off every register block and k block, padded
// leading dimensions and guard columns, op(B) packed and read in place (few rows); then bit for bit between
// the paths, between thread counts and between a product and its row or column blocks, which gemm_f32.h
// guarantees by construction (per element: fma over k in order, k blocks from K alone).
#include "kernels/cpu/gemm_f32.h"

#include <attn/core/parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "testing/testing.h"

namespace attn {
namespace {

using kernels::cpu::Isa;
using kernels::cpu::detail::F32GemmPath;

struct F32Case {
  std::string name;
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad = 0;  // every leading dimension = width + pad
  float alpha = 1.f, beta = 0.f;
};

void PrintTo(const F32Case& c, std::ostream* os) { *os << c.name; }

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C0;
};

Operands make(const F32Case& c, uint64_t seed) {
  Operands o;
  o.lda = (c.ta ? c.M : c.K) + c.pad;
  o.ldb = (c.tb ? c.K : c.N) + c.pad;
  o.ldc = c.N + c.pad;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  o.A.resize(static_cast<size_t>((c.ta ? c.K : c.M) * o.lda));
  o.B.resize(static_cast<size_t>((c.tb ? c.N : c.K) * o.ldb));
  o.C0.resize(static_cast<size_t>(c.M * o.ldc));
  for (float& x : o.A) x = u(rng);
  for (float& x : o.B) x = u(rng);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < o.ldc; ++j)  // guard columns past N: a value that must survive
      o.C0[i * o.ldc + j] = j >= c.N ? 777.f : c.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  return o;
}

std::vector<float> run(F32GemmPath path, const F32Case& c, const Operands& o) {
  std::vector<float> C = o.C0;
  kernels::cpu::detail::sgemm_f32_path(path, c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda,
                                       o.B.data(), o.ldb, c.beta, C.data(), o.ldc);
  return C;
}

// |C - exact| <= 2^-22 · (K + 2) · (|alpha| Σ|a b| + |beta c0|) + 1e-30 per element (fp32 fma accumulation).
::testing::AssertionResult check(const F32Case& c, const Operands& o, const std::vector<float>& C) {
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < o.ldc; ++j) {
      const float got = C[i * o.ldc + j];
      if (j >= c.N) {
        if (got != 777.f)
          return ::testing::AssertionFailure() << "guard column " << j << " of row " << i << " written";
        continue;
      }
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.ta ? o.A[k * o.lda + i] : o.A[i * o.lda + k];
        const double b = c.tb ? o.B[j * o.ldb + k] : o.B[k * o.ldb + j];
        sum += a * b;
        mag += std::abs(a * b);
      }
      const double c0 = c.beta == 0 ? 0.0 : o.C0[i * o.ldc + j];
      const double want = double(c.alpha) * sum + double(c.beta) * c0;
      const double bound =
          std::ldexp(1.0, -22) * double(c.K + 2) * (std::abs(c.alpha) * mag + std::abs(c.beta * c0)) + 1e-30;
      if (!(std::abs(got - want) <= bound))
        return ::testing::AssertionFailure()
               << "C[" << i << ", " << j << "] = " << got << ", want " << want << " (bound " << bound << ")";
    }
  return ::testing::AssertionSuccess();
}

std::vector<F32GemmPath> paths() {
  std::vector<F32GemmPath> p{F32GemmPath::scalar};
  if (kernels::cpu::isa_available(Isa::avx2)) p.push_back(F32GemmPath::avx2);
  if (kernels::cpu::isa_available(Isa::avx512)) p.push_back(F32GemmPath::avx512);
  return p;
}

const char* path_name(F32GemmPath p) {
  return p == F32GemmPath::avx512 ? "avx512" : p == F32GemmPath::avx2 ? "avx2" : "scalar";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class GemmF32 : public ::testing::TestWithParam<F32Case> {
 protected:
  void SetUp() override { saved_ = num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_P(GemmF32, EveryPathMatchesDoubleAndTheSameBits) {
  const F32Case& c = GetParam();
  const Operands o = make(c, 7 + static_cast<uint64_t>(c.M * 131 + c.N * 17 + c.K));
  set_num_threads(1);
  const std::vector<float> want = run(F32GemmPath::scalar, c, o);
  EXPECT_TRUE(check(c, o, want)) << "scalar";
  for (const F32GemmPath p : paths())
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const std::vector<float> got = run(p, c, o);
      EXPECT_TRUE(check(c, o, got)) << path_name(p) << ", " << threads << " threads";
      EXPECT_TRUE(same_bits(got, want))
          << path_name(p) << ", " << threads << " threads: not the scalar path's bits";
    }
}

// A product cut into row blocks and into column blocks (as ops' thread split does) gives the
// unsplit product's bits.
TEST_P(GemmF32, BlocksOfRowsAndColumnsGiveTheSameBits) {
  const F32Case& c = GetParam();
  if (c.M < 2 || c.N < 2) GTEST_SKIP() << "nothing to cut";
  const Operands o = make(c, 99);
  const F32GemmPath p = paths().back();
  const std::vector<float> whole = run(p, c, o);
  for (const bool rows : {true, false}) {
    std::vector<float> C = o.C0;
    const int64_t along = rows ? c.M : c.N, cut = along / 3 + 1;
    for (int64_t s = 0; s < along; s += cut) {
      const int64_t n = std::min(cut, along - s);
      if (rows)
        kernels::cpu::detail::sgemm_f32_path(p, c.ta, c.tb, n, c.N, c.K, c.alpha,
                                             c.ta ? o.A.data() + s : o.A.data() + s * o.lda, o.lda,
                                             o.B.data(), o.ldb, c.beta, C.data() + s * o.ldc, o.ldc);
      else
        kernels::cpu::detail::sgemm_f32_path(p, c.ta, c.tb, c.M, n, c.K, c.alpha, o.A.data(), o.lda,
                                             c.tb ? o.B.data() + s * o.ldb : o.B.data() + s, o.ldb, c.beta,
                                             C.data() + s, o.ldc);
    }
    EXPECT_TRUE(same_bits(C, whole)) << path_name(p) << (rows ? ": row blocks" : ": column blocks");
  }
}

std::vector<F32Case> cases() {
  std::vector<F32Case> v;
  int id = 0;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const std::string tt = std::string(ta ? "T" : "N") + (tb ? "T" : "N");
    auto add = [&](const char* what, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha, float beta) {
      v.push_back({tt + "_" + what + "_" + std::to_string(id++), ta, tb, M, N, K, pad, alpha, beta});
    };
    add("one", 1, 1, 1, 0, 1.f, 0.f);
    add("row", 1, 77, 33, 1, 1.f, 0.f);
    add("column", 45, 1, 19, 2, 1.f, 1.f);
    add("odd", 13, 37, 17, 3, 0.5f, 0.f);
    add("blocks", 12, 32, 16, 0, 1.f, 0.f);
    add("off_blocks", 25, 49, 769, 1, -1.5f, 0.75f);  // K past one k block (768): two blocks
    add("long_k", 7, 20, 1600, 0, 1.f, 1.f);          // three k blocks
    add("threads", 150, 130, 70, 2, 1.f, 0.f);        // past one 144-row block, several panels
    add("shared_a", 200, 100, 1000, 1, 1.f, 0.5f);    // two row blocks split over panels, two k blocks:
                                                      // op(A) packed once per k block, shared by the tasks
    add("wide", 30, 2100, 24, 0, 2.f, -1.f);          // past one 2048-column B block
    add("in_place_b", 90, 75, 300, 1, 1.f, 0.5f);     // at most 96 rows: op(B) NN read in place
    add("in_place_wide", 17, 2200, 40, 2, 1.f, 0.f);  // ... over several column blocks
  }
  v.push_back({"NN_k0", false, false, 5, 6, 0, 1, 1.f, 0.5f});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Table, GemmF32, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GemmF32Args, BadSizesThrow) {
  std::vector<float> a(64), b(64), c(64);
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::sgemm_f32(false, false, 4, 4, 4, 1.f, a.data(), 3, b.data(), 4, 0.f, c.data(), 4),
      {"sgemm_f32", "leading dimensions", "lda 3"});
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::sgemm_f32(false, false, -1, 4, 4, 1.f, a.data(), 4, b.data(), 4, 0.f, c.data(), 4),
      {"sgemm_f32", "M -1"});
}

}  // namespace
}  // namespace attn
