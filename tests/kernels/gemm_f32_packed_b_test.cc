// sgemm_f32_packed_b (gemm_f32.h: op(B) given in linear_packed.h's 32-column panels, as BERT packs its
// weights once at load) bit for bit against sgemm_f32 with the plain op(B) on the same path (AVX-512:
// whole panels; AVX2: their 16-column halves), which gemm_f32.h guarantees by construction (the same k
// blocks and register block; only the packing of op(B) is skipped), over sizes off every register
// block, k block and panel, beta 0 (NaN in C) / 1 / 0.7,
// padded leading dimensions, 1 and 2 threads; and pack_linear_weight_t / unpack_linear_weight_t against
// the layout written out by hand.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/linear_packed.h"
#include "kernels/isa_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

using kernels::cpu::Isa;

std::vector<float> random_vec(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

TEST(PackLinearWeightT, LayoutAndInverse) {
  for (const auto& [K, N] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 31}, {5, 32}, {7, 33}, {20, 97}}) {
    const std::vector<float> wt = random_vec(K * N, 7);  // wt: [K, N]
    std::vector<float> packed(static_cast<size_t>(kernels::cpu::linear_packed_size(N, K)), -5.f);
    kernels::cpu::pack_linear_weight_t(wt.data(), K, N, packed.data());
    for (int64_t p = 0; p * 32 < N; ++p)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < 32; ++j) {
          const float want = p * 32 + j < N ? wt[static_cast<size_t>(k * N + p * 32 + j)] : 0.f;
          ASSERT_EQ(packed[static_cast<size_t>((p * K + k) * 32 + j)], want) << "K " << K << " N " << N;
        }
    // The [N, K] form of the same weight packs to the same panels.
    std::vector<float> w(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[static_cast<size_t>(n * K + k)] = wt[static_cast<size_t>(k * N + n)];
    std::vector<float> packed2(packed.size(), 9.f);
    kernels::cpu::pack_linear_weight(w.data(), N, K, packed2.data());
    ASSERT_EQ(packed, packed2);
    const int64_t ldw = N + 3;
    std::vector<float> back(static_cast<size_t>(K * ldw), 777.f);
    kernels::cpu::unpack_linear_weight_t(packed.data(), K, N, back.data(), ldw);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < ldw; ++n)
        ASSERT_EQ(back[static_cast<size_t>(k * ldw + n)], n < N ? wt[static_cast<size_t>(k * N + n)] : 777.f);
  }
}

struct PackedBCase {
  int64_t M, N, K;
  float beta;
  int64_t pad;
};

class GemmF32PackedB : public ::testing::TestWithParam<std::tuple<PackedBCase, Isa>> {
 protected:
  void SetUp() override {
    kernels::cpu::force_isa(std::get<1>(GetParam()));
    threads_ = num_threads();
  }
  void TearDown() override {
    set_num_threads(threads_);
    kernels::cpu::force_isa(std::nullopt);
  }
  int threads_ = 1;
};

TEST_P(GemmF32PackedB, SameBitsAsTheUnpackedProduct) {
  const auto& [c, isa] = GetParam();
  ASSERT_TRUE(kernels::cpu::f32_gemm_reads_packed_b());
  const auto path = isa == Isa::avx512 ? kernels::cpu::detail::F32GemmPath::avx512
                                       : kernels::cpu::detail::F32GemmPath::avx2;
  const int64_t lda = c.K + c.pad, ldc = c.N + c.pad;
  const std::vector<float> A = random_vec(c.M * lda, 11), B = random_vec(c.K * c.N, 12);
  std::vector<float> C0 = random_vec(c.M * ldc, 13);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < ldc; ++j)
      if (j >= c.N)
        C0[static_cast<size_t>(i * ldc + j)] = 777.f;  // guard columns
      else if (c.beta == 0)
        C0[static_cast<size_t>(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
  // The panels are read with aligned loads: 64-byte aligned storage, as a Tensor's.
  const auto size = static_cast<size_t>(kernels::cpu::linear_packed_size(c.N, c.K));
  const std::unique_ptr<float, decltype(&std::free)> packed(
      static_cast<float*>(std::aligned_alloc(64, (size * sizeof(float) + 63) / 64 * 64)), &std::free);
  kernels::cpu::pack_linear_weight_t(B.data(), c.K, c.N, packed.get());
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<float> want = C0, got = C0;
    kernels::cpu::detail::sgemm_f32_path(path, false, false, c.M, c.N, c.K, 1.f, A.data(), lda, B.data(), c.N,
                                         c.beta, want.data(), ldc);
    kernels::cpu::sgemm_f32_packed_b(c.M, c.N, c.K, 1.f, A.data(), lda, packed.get(), c.beta, got.data(),
                                     ldc);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " threads " << threads;
      ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(float)), 0)
          << "element " << i << " (row " << i / ldc << ", column " << i % ldc << "): " << got[i] << " vs "
          << want[i] << ", threads " << threads;
    }
  }
}

std::vector<PackedBCase> packed_b_cases() {
  return {
      {1, 1, 1, 0.f, 0},
      {5, 31, 7, 1.f, 2},
      {12, 32, 256, 0.f, 0},
      {13, 33, 257, 0.7f, 1},
      {96, 64, 100, 1.f, 0},
      {97, 384, 384, 1.f, 0},
      {150, 100, 513, 0.f, 3},
      {300, 1152, 384, 1.f, 0},
      {257, 384, 1536, 1.f, 0},
      {400, 2100, 40, 0.f, 0},
      {13, 33, 769, 0.7f, 1},  // two k blocks of 768 / 385
      // kF32RepackMinRows and more: AVX2 copies the panels into its own (an N tail, two k blocks)
      {512, 100, 300, 1.f, 1},
      {600, 47, 769, 0.f, 0},
  };
}

// The vector paths this CPU has (the scalar oracle does not read the panels).
std::vector<Isa> vector_isas() {
  std::vector<Isa> out;
  for (const Isa isa : testing::available_isas())
    if (isa != Isa::scalar) out.push_back(isa);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmF32PackedB,
                         ::testing::Combine(::testing::ValuesIn(packed_b_cases()),
                                            ::testing::ValuesIn(vector_isas())),
                         [](const ::testing::TestParamInfo<std::tuple<PackedBCase, Isa>>& i) {
                           const PackedBCase& c = std::get<0>(i.param);
                           // appended piece by piece: g++ 12 warns (-Wrestrict) on "m" + std::to_string(...)
                           std::string name = "m";
                           for (const std::string& part :
                                {std::to_string(c.M), "_n" + std::to_string(c.N), "_k" + std::to_string(c.K),
                                 "_beta" + std::to_string(static_cast<int>(c.beta * 10)),
                                 "_pad" + std::to_string(c.pad),
                                 std::string("_").append(kernels::cpu::isa_str(std::get<1>(i.param)))})
                             name += part;
                           return name;
                         });

TEST(GemmF32PackedBArgs, NeedsAVectorPathAndValidSizes) {
  alignas(64) float p[64] = {};
  std::vector<float> a(64, 1.f), c(64);
  kernels::cpu::force_isa(Isa::scalar);
  EXPECT_FALSE(kernels::cpu::f32_gemm_reads_packed_b());
  EXPECT_ERROR_CONTAINS(kernels::cpu::sgemm_f32_packed_b(2, 2, 2, 1.f, a.data(), 2, p, 0.f, c.data(), 2),
                        {"needs a vectorised path", "scalar"});
  kernels::cpu::force_isa(std::nullopt);
  if (kernels::cpu::f32_gemm_reads_packed_b()) {
    EXPECT_ERROR_CONTAINS(kernels::cpu::sgemm_f32_packed_b(2, 2, 3, 1.f, a.data(), 2, p, 0.f, c.data(), 2),
                          {"leading dimensions too small"});
  }
}

}  // namespace
}  // namespace attn
