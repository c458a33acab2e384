// The runtime's shared blocks the BERT encoders use (models/runtime/blocks.h): layer_norm_rows (residual,
// bias, LayerNorm) against a double LayerNorm, and sum_rows (the embeddings' sum) in its f32 order.
#include <attn/models/runtime/blocks.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

#include "testing/testing.h"

namespace attn {
namespace {

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = nd(rng);
  return x;
}

TEST(RuntimeBlocks, LayerNormRowsWithResidualAndBias) {
  const int64_t rows = 5, n = 37;  // off the vector width
  const std::vector<float> h0 = normal(rows * n, 1), y = normal(rows * n, 2), bias = normal(n, 3),
                           w = normal(n, 4), b = normal(n, 5);
  const double eps = 1e-12;
  for (const bool with_y : {false, true})
    for (const bool with_bias : {false, true}) {
      std::vector<float> h = h0;
      models::runtime::layer_norm_rows(h.data(), with_y ? y.data() : nullptr,
                                       with_bias ? bias.data() : nullptr, w.data(), b.data(), rows, n, eps);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> v(n);
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i) {
          v[i] = static_cast<double>(h0[r * n + i]) + (with_y ? y[r * n + i] : 0.0f) +
                 (with_bias ? bias[i] : 0.0f);
          mean += v[i] / n;
        }
        for (int64_t i = 0; i < n; ++i) var += (v[i] - mean) * (v[i] - mean) / n;
        for (int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(h[r * n + i], (v[i] - mean) / std::sqrt(var + eps) * w[i] + b[i], 1e-5)
              << "y " << with_y << " bias " << with_bias << " row " << r << " column " << i;
      }
    }
}

TEST(RuntimeBlocks, SumRowsLeftToRight) {
  const int64_t n = 19;
  const std::vector<float> a = normal(n, 6), p = normal(n, 7), t = normal(n, 8);
  std::vector<float> out(n), in_place = a, two(n);
  models::runtime::sum_rows(std::array<const float*, 3>{a.data(), p.data(), t.data()}, n, out.data());
  models::runtime::sum_rows(std::array<const float*, 3>{in_place.data(), p.data(), t.data()}, n,
                            in_place.data());
  models::runtime::sum_rows(std::array<const float*, 2>{a.data(), p.data()}, n, two.data());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], (a[i] + p[i]) + t[i]) << i;
    EXPECT_EQ(in_place[i], out[i]) << i;
    EXPECT_EQ(two[i], a[i] + p[i]) << i;
  }
  EXPECT_ERROR_CONTAINS(models::runtime::sum_rows({}, n, out.data()), {"at least one row"});
}

}  // namespace
}  // namespace attn
