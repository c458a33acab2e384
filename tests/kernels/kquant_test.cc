// The K-quant / 5-bit products (kernels/cpu/kquant.h) on every ISA this CPU has against the double
// oracle, and the vector row unpack against io::dequantize bit for bit, table-driven over every format.
#include "kernels/cpu/kquant.h"

#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/isa_test_util.h"
#include "kernels/kquant_test_util.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using kernels::KFormat;
using kernels::cpu::Isa;

struct KCase {
  std::string name;
  KFormat format;
  int64_t M, N, K;
  int64_t pad_x = 0, pad_y = 0;
  bool accumulate = false;
};

std::vector<KCase> cases() {
  std::vector<KCase> v;
  const std::pair<KFormat, const char*> fs[] = {
      {KFormat::q4_0, "q4_0"}, {KFormat::q4_1, "q4_1"}, {KFormat::q5_0, "q5_0"}, {KFormat::q5_1, "q5_1"},
      {KFormat::q8_0, "q8_0"}, {KFormat::q4_k, "q4_k"}, {KFormat::q5_k, "q5_k"}, {KFormat::q6_k, "q6_k"}};
  for (const auto& [f, n] : fs) {
    const std::string p = std::string(n) + "_";
    const int64_t be = kernels::kformat_block_elems(f);
    v.push_back({p + "1x1", f, 1, 1, be});
    v.push_back({p + "decode_1x19", f, 1, 19, 2 * be, 0, 3});
    v.push_back({p + "5x7_strided", f, 5, 7, 3 * be, 5, 2});
    v.push_back({p + "9x4_accumulate", f, 9, 4, 4 * be, 0, 0, true});
  }
  return v;
}

using KQuant = testing::IsaCaseTest<KCase>;

TEST_P(KQuant, MatchesTheDoubleOracleAndUnpacksExactly) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const std::vector<std::byte> w = testing::random_kblocks(c.format, c.N, c.K, 19);
  const int64_t ldx = c.K + c.pad_x, ldy = c.N + c.pad_y;
  const Tensor x = testing::random_uniform({c.M, ldx}, 3);
  Tensor y = Tensor::full({c.M, ldy}, c.accumulate ? 0.5 : 12345.0);
  Tensor ref = Tensor::full({c.M, ldy}, 12345.0);
  kernels::cpu::kquant_matmul_rows(c.format, w.data(), 0, c.N, c.K, x.data<float>(), c.M, ldx,
                                   y.data<float>(), ldy, c.accumulate);
  kernels::ref::kquant_matmul(c.format, w.data(), c.N, c.K, x.data<float>(), c.M, ldx, ref.data<float>(),
                              ldy);
  if (c.accumulate)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) ref.data<float>()[m * ldy + n] += 0.5f;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = c.N; n < ldy; ++n) {
      EXPECT_EQ(y.data<float>()[m * ldy + n], c.accumulate ? 0.5f : 12345.0f);
      ref.data<float>()[m * ldy + n] = y.data<float>()[m * ldy + n];
    }
  EXPECT_ALL_CLOSE(y, ref, testing::tol::kQMatmul);

  std::vector<float> fast(c.N * c.K), want(c.N * c.K);
  kernels::cpu::kquant_unpack_rows(c.format, w.data(), 0, c.N, c.K, fast.data());
  io::dequantize(kernels::kformat_ggml_type(c.format), w.data(), c.N * c.K, want.data());
  for (int64_t i = 0; i < c.N * c.K; ++i) {
    uint32_t a, b;
    std::memcpy(&a, &fast[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << "element " << i << ": " << fast[i] << " vs " << want[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Table, KQuant,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<KCase>);

TEST(KQuantArgs, SizesOffTheBlockAreErrors) {
  const std::vector<std::byte> w = testing::random_kblocks(KFormat::q4_k, 1, 256, 1);
  std::vector<float> x(256), y(1);
  EXPECT_ERROR_CONTAINS(kernels::cpu::kquant_matmul_rows(KFormat::q4_k, w.data(), 0, 1, 128, x.data(), 1, 128,
                                                         y.data(), 1, false),
                        {"multiple of 256", "Q4_K"});
}

}  // namespace
}  // namespace attn
