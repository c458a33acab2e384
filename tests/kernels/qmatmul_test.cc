// The quantized-weight product (kernels/cpu/qmatmul.h) on every ISA against the double reference, and
// against dequantize-then-sgemm (the f32 path the model takes for prompts), table-driven.
#include "kernels/cpu/qmatmul.h"

#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/cpu/gemm.h"
#include "kernels/isa_test_util.h"
#include "kernels/qblocks_test_util.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using kernels::QFormat;
using kernels::cpu::Isa;

struct QCase {
  std::string name;
  QFormat format;
  int64_t M, N, K;
  int64_t pad_x = 0, pad_y = 0;  // extra row stride
  int threads = 1;
};

std::vector<QCase> cases() {
  std::vector<QCase> v;
  for (QFormat f : {QFormat::q4_1, QFormat::q8_0}) {
    const std::string p = f == QFormat::q4_1 ? "q4_1_" : "q8_0_";
    v.push_back({p + "1x1x32", f, 1, 1, 32});
    v.push_back({p + "decode_1x37x64", f, 1, 37, 64});
    v.push_back({p + "3x17x96_strided", f, 3, 17, 96, 5, 3});
    v.push_back({p + "8x16x576", f, 8, 16, 576});
    v.push_back({p + "9x33x160_2threads", f, 9, 33, 160, 0, 0, 2});
    v.push_back({p + "15x7x64", f, 15, 7, 64, 1, 0});
    v.push_back({p + "13x5x1536", f, 13, 5, 1536});
    v.push_back({p + "70x40x96_3threads", f, 70, 40, 96, 0, 2, 3});
  }
  return v;
}

using QMatmul = testing::IsaCaseTest<QCase>;

TEST_P(QMatmul, MatchesReferenceAndDequantizedSgemm) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(c.threads);
  const std::vector<std::byte> w = testing::random_blocks(c.format, c.N, c.K, 7);
  const int64_t ldx = c.K + c.pad_x, ldy = c.N + c.pad_y;
  const Tensor x = testing::random_uniform({c.M, ldx}, 11);
  Tensor y = Tensor::full({c.M, ldy}, 12345.0);
  Tensor ref = Tensor::full({c.M, ldy}, 12345.0);
  Tensor via_f32 = Tensor::full({c.M, ldy}, 12345.0);
  kernels::cpu::qmatmul(c.format, w.data(), c.N, c.K, x.data<float>(), c.M, ldx, y.data<float>(), ldy);
  kernels::ref::qmatmul(c.format, w.data(), c.N, c.K, x.data<float>(), c.M, ldx, ref.data<float>(), ldy);
  std::vector<float> wf(c.N * c.K);
  io::dequantize(testing::ggml_type_of(c.format), w.data(), c.N * c.K, wf.data());
  kernels::cpu::sgemm(false, true, c.M, c.N, c.K, 1.0f, x.data<float>(), ldx, wf.data(), c.K, 0.0f,
                      via_f32.data<float>(), ldy);
  EXPECT_ALL_CLOSE(y, ref, testing::tol::kQMatmul);
  EXPECT_ALL_CLOSE(y, via_f32, testing::tol::kQMatmul);
  // The padding past N in each output row is untouched.
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = c.N; n < ldy; ++n) EXPECT_EQ(y.at({m, n}), 12345.0);
}

INSTANTIATE_TEST_SUITE_P(Table, QMatmul,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<QCase>);

TEST(QMatmulArgs, BadSizesThrow) {
  std::vector<std::byte> w(20 * 4);
  std::vector<float> x(64), y(4);
  EXPECT_ERROR_CONTAINS(kernels::cpu::qmatmul(QFormat::q4_1, w.data(), 2, 48, x.data(), 1, 48, y.data(), 2),
                        {"multiple of 32", "48"});
  EXPECT_ERROR_CONTAINS(kernels::cpu::qmatmul(QFormat::q4_1, w.data(), 2, 64, x.data(), 1, 32, y.data(), 2),
                        {"ldx", "64"});
  EXPECT_ERROR_CONTAINS(kernels::ref::qmatmul(QFormat::q8_0, w.data(), 2, 32, x.data(), 1, 32, y.data(), 1),
                        {"ldy", "N=2"});
}

}  // namespace
}  // namespace attn
