// The AVX-512 and AVX2 AdamW kernels against the scalar one: bit-identical, every tail length.
#include "kernels/cpu/adamw.h"

#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"
#include "testing/testing.h"

namespace attn {
namespace {

struct KernelRow {
  int64_t n;
  bool decay;
};

class AdamWKernel : public ::testing::TestWithParam<KernelRow> {};

using UpdateFn = void (*)(float*, const float*, float*, float*, int64_t, const kernels::cpu::AdamWScalars&);

void expect_scalar_bits(UpdateFn fn, const KernelRow& row) {
  const auto [n, decay] = row;
  auto vec = [&](uint64_t seed, double lo, double hi) {
    const Tensor t = testing::random_uniform({n}, seed, lo, hi);
    return std::vector<float>(t.data<float>(), t.data<float>() + n);
  };
  const std::vector<float> g = vec(1, -3, 3);
  std::vector<float> p1 = vec(2, -1, 1), m1 = vec(3, -0.1, 0.1), v1 = vec(4, 0, 0.01);
  std::vector<float> p2 = p1, m2 = m1, v2 = v1;
  const kernels::cpu::AdamWScalars s{decay, 0.999f, 0.1f, 0.999f, 0.001f, 0.0447f, 1e-8f, -0.0123f};
  for (int rep = 0; rep < 3; ++rep) {
    kernels::cpu::adamw_update_scalar(p1.data(), g.data(), m1.data(), v1.data(), n, s);
    fn(p2.data(), g.data(), m2.data(), v2.data(), n, s);
  }
  EXPECT_EQ(0, std::memcmp(p1.data(), p2.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(m1.data(), m2.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(v1.data(), v2.data(), n * 4));
}

TEST_P(AdamWKernel, Avx512EqualsScalarBitForBit) {
  if (!kernels::cpu::isa_available(kernels::cpu::Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  expect_scalar_bits(&kernels::cpu::adamw_update_avx512, GetParam());
}

TEST_P(AdamWKernel, Avx2EqualsScalarBitForBit) {
  if (!kernels::cpu::isa_available(kernels::cpu::Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  expect_scalar_bits(&kernels::cpu::adamw_update_avx2, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Sizes, AdamWKernel,
                         ::testing::Values(KernelRow{1, true}, KernelRow{15, false}, KernelRow{16, true},
                                           KernelRow{17, true}, KernelRow{100, false},
                                           KernelRow{4099, true}));

}  // namespace
}  // namespace attn
