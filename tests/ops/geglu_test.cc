// ops::geglu_tanh against the std::tanh form of GELU (as Gemma 3 used before), in double.
#include <attn/ops/geglu.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "testing/testing.h"

namespace attn::ops {
namespace {

TEST(GegluTanh, MatchesTheTanhFormOverTheWholeRange) {
  std::vector<float> g, u;
  for (int i = -4000; i <= 4000; ++i) g.push_back(static_cast<float>(i) * 0.005f);  // [-20, 20]
  for (float v : {-1e30f, -200.0f, -9.5f, -1e-30f, 0.0f, 1e-30f, 9.5f, 200.0f, 1e30f}) g.push_back(v);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::size_t i = 0; i < g.size(); ++i) u.push_back(i % 3 ? nd(rng) : 1.0f);
  std::vector<float> out = g;
  geglu_tanh(out.data(), u.data(), static_cast<int64_t>(out.size()));
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    const double want = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u[i];
    ASSERT_TRUE(std::isfinite(out[i])) << "x " << x;
    EXPECT_NEAR(out[i], want, 4e-7 * (std::fabs(x) + 1.0) * std::fabs(u[i]) + 1e-37) << "x " << x;
  }
}

TEST(GegluTanh, NullBuffersAreErrors) {
  std::vector<float> u(4);
  EXPECT_ERROR_CONTAINS(geglu_tanh(nullptr, u.data(), 4), {"geglu_tanh", "non-null"});
  geglu_tanh(nullptr, nullptr, 0);
}

}  // namespace
}  // namespace attn::ops
