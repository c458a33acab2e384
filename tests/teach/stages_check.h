// What every model's stages document must satisfy (tests/teach/stages_test.cc and
// stages_slow_test.cc): the arithmetic of the stages from the document alone, and the weights
// equal to an engine capture [H, N, N].
#pragma once

#include <attn/io/json.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

namespace attn::teach::stages_check {

using json::Value;

inline double at2(const Value& m, std::size_t i, std::size_t j) { return m.at(i).at(j).as_double(); }

// What must hold in any model's stages, from the document alone.
inline void check_arithmetic(const Value& s) {
  const auto N = static_cast<std::size_t>(s.at("n").as_int64());
  const auto D = static_cast<std::size_t>(s.at("d_k").as_int64());
  const double scale = s.at("scale").as_double();
  ASSERT_EQ(s.at("tokens").size(), N);
  ASSERT_EQ(s.at("q").size(), N);
  ASSERT_EQ(s.at("q").at(0).size(), D);
  for (std::size_t i = 0; i < N; ++i) {
    double sum = 0;
    for (std::size_t j = 0; j < N; ++j) {
      double dot = 0;
      for (std::size_t d = 0; d < D; ++d) dot += at2(s.at("q"), i, d) * at2(s.at("k"), j, d);
      EXPECT_NEAR(at2(s.at("scores"), i, j), dot, 1e-9 * (1 + std::fabs(dot)));
      EXPECT_NEAR(at2(s.at("scaled"), i, j), dot * scale, 1e-9 * (1 + std::fabs(dot)));
      const bool allow = s.at("allow").at(i).at(j).as_bool();
      EXPECT_EQ(s.at("masked").at(i).at(j).is_null(), !allow);
      if (!allow) {
        EXPECT_EQ(at2(s.at("weights"), i, j), 0.0) << i << "," << j;
      }
      EXPECT_NEAR(at2(s.at("weights_double"), i, j), at2(s.at("weights"), i, j), 2e-5);
      sum += at2(s.at("weights"), i, j);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_NEAR(s.at("row_sums").at(i).as_double(), sum, 1e-12);
    for (std::size_t d = 0; d < D; ++d) {  // weights × V from the weights and V shown
      double z = 0;
      for (std::size_t j = 0; j < N; ++j) z += at2(s.at("weights"), i, j) * at2(s.at("v"), j, d);
      EXPECT_NEAR(at2(s.at("out"), i, d), z, 1e-9 * (1 + std::fabs(z)));
    }
  }
  EXPECT_LT(s.at("max_abs_diff").as_double(), 2e-5);
  // The tutorial's table next to the softmax of its scores: not a softmax.
  EXPECT_FALSE(s.at("tutorial").at("is_softmax").as_bool());
}

inline void expect_weights_equal(const Value& s, const std::vector<float>& w, std::size_t N, std::size_t head) {
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < N; ++j)
      EXPECT_NEAR(at2(s.at("weights"), i, j), w[(head * N + i) * N + j], 1e-6) << i << "," << j;
}

}  // namespace attn::teach::stages_check
