// kernels::cpu::column_sums_block_avx512 against the column sums computed in double
// from the same seeded inputs: bit for bit (the same double adds in row order,
// rounded once), every block width from 1 to 64 columns and a strided matrix.
#include "kernels/cpu/column_sums.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/isa.h"
#include "testing/testing.h"

namespace attn {
namespace {

struct ColCase {
  int64_t R, ldx, n;
};

void PrintTo(const ColCase& c, std::ostream* os) { *os << "R" << c.R << " ldx" << c.ldx << " n" << c.n; }

class ColumnSums : public ::testing::TestWithParam<ColCase> {};

TEST_P(ColumnSums, Avx512MatchesDoubleSums) {
  if (!kernels::cpu::isa_available(kernels::cpu::Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const ColCase c = GetParam();
  const Tensor x = testing::random_uniform({c.R, c.ldx}, 21, -4, 4);
  const float* px = x.data<float>();
  std::vector<float> want(c.n);
  for (int64_t j = 0; j < c.n; ++j) {
    double s = 0;
    for (int64_t r = 0; r < c.R; ++r) s += px[r * c.ldx + j];
    want[j] = static_cast<float>(s);
  }
  std::vector<float> got(c.n + 8, -7.f);  // the floats past n must stay untouched
  kernels::cpu::column_sums_block_avx512(px, c.R, c.ldx, c.n, got.data());
  for (int64_t j = 0; j < c.n; ++j) EXPECT_EQ(got[j], want[j]) << "column " << j;
  for (int64_t j = c.n; j < c.n + 8; ++j) EXPECT_EQ(got[j], -7.f) << "past the block, " << j;
}

std::vector<ColCase> cases() {
  std::vector<ColCase> v;
  for (int64_t n : {1, 7, 8, 9, 16, 31, 33, 63, 64}) v.push_back({37, 64, n});
  v.push_back({1, 64, 64});
  v.push_back({0, 64, 20});       // no rows: zeros
  v.push_back({2048, 1000, 64});  // long columns, rows 1000 apart
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ColumnSums, ::testing::ValuesIn(cases()));

}  // namespace
}  // namespace attn
