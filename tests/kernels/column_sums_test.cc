// kernels::cpu::column_sums_block_avx512 and _avx2 against the column sums computed in double
// from the same seeded inputs: bit for bit (the same double adds in row order,
// rounded once), every block width from 1 to 64 columns and a strided matrix.
#include "kernels/cpu/column_sums.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "kernels/cpu/isa.h"
#include "testing/testing.h"

namespace attn {
namespace {

struct ColCase {
  int64_t R, ldx, n;
};

void PrintTo(const ColCase& c, std::ostream* os) { *os << "R" << c.R << " ldx" << c.ldx << " n" << c.n; }

class ColumnSums : public ::testing::TestWithParam<std::tuple<ColCase, kernels::cpu::Isa>> {};

TEST_P(ColumnSums, MatchesDoubleSums) {
  const auto& [c, isa] = GetParam();
  if (!kernels::cpu::isa_available(isa))
    GTEST_SKIP() << "no " << kernels::cpu::isa_str(isa) << " on this CPU";
  const auto block = isa == kernels::cpu::Isa::avx512 ? &kernels::cpu::column_sums_block_avx512
                                                      : &kernels::cpu::column_sums_block_avx2;
  const Tensor x = testing::random_uniform({c.R, c.ldx}, 21, -4, 4);
  const float* px = x.data<float>();
  std::vector<float> want(c.n);
  for (int64_t j = 0; j < c.n; ++j) {
    double s = 0;
    for (int64_t r = 0; r < c.R; ++r) s += px[r * c.ldx + j];
    want[j] = static_cast<float>(s);
  }
  std::vector<float> got(c.n + 8, -7.f);  // the floats past n must stay untouched
  block(px, c.R, c.ldx, c.n, got.data());
  for (int64_t j = 0; j < c.n; ++j) EXPECT_EQ(got[j], want[j]) << "column " << j;
  for (int64_t j = c.n; j < c.n + 8; ++j) EXPECT_EQ(got[j], -7.f) << "past the block, " << j;
}

std::vector<ColCase> cases() {
  std::vector<ColCase> v;
  for (int64_t n : {1, 3, 4, 5, 7, 8, 9, 16, 31, 32, 33, 63, 64}) v.push_back({37, 64, n});
  v.push_back({1, 64, 64});
  v.push_back({0, 64, 20});       // no rows: zeros
  v.push_back({2048, 1000, 64});  // long columns, rows 1000 apart
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ColumnSums,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::Values(kernels::cpu::Isa::avx2,
                                                              kernels::cpu::Isa::avx512)));

}  // namespace
}  // namespace attn
