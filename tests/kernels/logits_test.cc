// The fused reductions of decoding over a row of logits (kernels/cpu/logits.h; ops::row_logsumexp and
// ops::row_argmax_logsumexp, used by models::generate): scalar, AVX-512 and the dispatch against double.
// Moved from tests/models/generate_test.cc with the kernel (src/models/logits* -> src/kernels/cpu/).
#include "kernels/cpu/logits.h"

#include <attn/core/random.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/isa.h"
#include "testing/testing.h"

namespace attn {
namespace {

// ---- logsumexp of a row (scalar, AVX-512 and AVX2) --------------------------------------------------

class RowLogSumExp : public ::testing::TestWithParam<int64_t> {};

TEST_P(RowLogSumExp, MatchesDoubleReference) {
  const int64_t V = GetParam();
  Rng rng(static_cast<uint64_t>(V));
  std::vector<float> x(static_cast<std::size_t>(V));
  for (auto& v : x) v = static_cast<float>(rng.uniform() * 30 - 15);
  if (V > 3) x[2] = -std::numeric_limits<float>::infinity();  // a masked logit
  double mx = -INFINITY, s = 0;
  for (float v : x) mx = std::max(mx, static_cast<double>(v));
  for (float v : x) s += std::exp(static_cast<double>(v) - mx);
  const double want = mx + std::log(s);
  EXPECT_NEAR(kernels::cpu::row_logsumexp_scalar(x.data(), V), want, 1e-9 * std::abs(want) + 1e-9);
  if (kernels::cpu::isa_available(kernels::cpu::Isa::avx512)) {
    EXPECT_NEAR(kernels::cpu::row_logsumexp_avx512(x.data(), V), want, 1e-5);
  }
  if (kernels::cpu::isa_available(kernels::cpu::Isa::avx2)) {
    EXPECT_NEAR(kernels::cpu::row_logsumexp_avx2(x.data(), V), want, 1e-5);
    std::vector<float> masked(static_cast<std::size_t>(V), -std::numeric_limits<float>::infinity());
    EXPECT_EQ(kernels::cpu::row_logsumexp_avx2(masked.data(), V), -INFINITY);
  }
  std::vector<float> none(static_cast<std::size_t>(V), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(kernels::cpu::row_logsumexp(none.data(), V), -INFINITY);
}

INSTANTIATE_TEST_SUITE_P(Lengths, RowLogSumExp, ::testing::Values(1, 5, 15, 16, 17, 100, 8000));

// ---- greedy's fused argmax + log-sum-exp (scalar, AVX-512 and AVX2) ---------------------------------

struct ArgmaxCase {
  std::string name;
  int64_t V;
  std::vector<int64_t> ties;  // positions set to the row maximum (ties: the lowest id must win)
  bool all_masked;            // every logit -inf
};
void PrintTo(const ArgmaxCase& c, std::ostream* os) { *os << c.name; }

class RowArgmaxLse : public ::testing::TestWithParam<ArgmaxCase> {};

TEST_P(RowArgmaxLse, MatchesMaxElementAndDoubleLogSumExp) {
  const ArgmaxCase& c = GetParam();
  Rng rng(static_cast<uint64_t>(c.V) + 11);
  std::vector<float> x(static_cast<std::size_t>(c.V));
  for (auto& v : x) v = static_cast<float>(rng.uniform() * 30 - 15);
  if (c.V > 3) x[1] = -std::numeric_limits<float>::infinity();
  for (int64_t t : c.ties) x[t] = 16.0f;  // above every random logit
  if (c.all_masked) std::fill(x.begin(), x.end(), -std::numeric_limits<float>::infinity());
  const int64_t want_token = std::max_element(x.begin(), x.end()) - x.begin();
  double mx = -INFINITY, s = 0;
  for (float v : x) mx = std::max(mx, static_cast<double>(v));
  for (float v : x) s += mx == -INFINITY ? 0.0 : std::exp(static_cast<double>(v) - mx);
  const double want_lse = mx == -INFINITY ? mx : mx + std::log(s);
  if (!c.ties.empty()) {
    ASSERT_EQ(want_token, c.ties.front());
  }
  using Fn = kernels::cpu::ArgmaxLse (*)(const float*, int64_t);
  std::vector<std::pair<std::string, Fn>> fns = {{"scalar", kernels::cpu::row_argmax_logsumexp_scalar},
                                                 {"dispatch", kernels::cpu::row_argmax_logsumexp}};
  if (kernels::cpu::isa_available(kernels::cpu::Isa::avx512))
    fns.push_back({"avx512", kernels::cpu::row_argmax_logsumexp_avx512});
  if (kernels::cpu::isa_available(kernels::cpu::Isa::avx2))
    fns.push_back({"avx2", kernels::cpu::row_argmax_logsumexp_avx2});
  for (const auto& [name, fn] : fns) {
    const kernels::cpu::ArgmaxLse got = fn(x.data(), c.V);
    EXPECT_EQ(got.token, want_token) << name;
    if (c.all_masked) {
      EXPECT_EQ(got.lse, -INFINITY) << name;
    } else {
      EXPECT_NEAR(got.lse, want_lse, 1e-5 * std::abs(want_lse) + 1e-5) << name;
      // bitwise what generate() used before (max_element + row_logsumexp)
      EXPECT_EQ(got.lse, name == "scalar"   ? kernels::cpu::row_logsumexp_scalar(x.data(), c.V)
                         : name == "avx512" ? kernels::cpu::row_logsumexp_avx512(x.data(), c.V)
                         : name == "avx2"   ? kernels::cpu::row_logsumexp_avx2(x.data(), c.V)
                                            : kernels::cpu::row_logsumexp(x.data(), c.V))
          << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, RowArgmaxLse,
                         ::testing::Values(ArgmaxCase{"v1", 1, {}, false}, ArgmaxCase{"v5", 5, {}, false},
                                           ArgmaxCase{"v16", 16, {}, false},
                                           ArgmaxCase{"v17_tail", 17, {16}, false},
                                           ArgmaxCase{"v100_tie_two_lanes", 100, {37, 53}, false},
                                           ArgmaxCase{"v100_tie_same_lane", 100, {20, 36, 99}, false},
                                           ArgmaxCase{"v8000_tie_first_and_last", 8000, {0, 7999}, false},
                                           ArgmaxCase{"v8000", 8000, {}, false},
                                           ArgmaxCase{"v33_all_masked", 33, {}, true}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace attn
