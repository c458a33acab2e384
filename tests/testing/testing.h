// Test helpers: seeded random tensors and a comparison that checks shape
// first, then NaN/Inf agreement, then max-abs / max-rel error against
// tolerances kept in one table (tolerances.h).
#pragma once

#include <attn/core/tensor.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace attn::testing {

// Uniform values in [lo, hi) from a seeded generator (std::mt19937_64), f32.
Tensor random_uniform(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0,
                      DType dtype = DType::f32);
// Bernoulli(p_true) u8 tensor.
Tensor random_mask(const Shape& shape, uint64_t seed, double p_true);

struct Tolerance {
  double abs;
  double rel;
};

// Passes when every element satisfies |a - e| <= abs + rel * |e|, and NaN/Inf
// positions agree exactly. The failure message names the worst element.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol);

#define EXPECT_ALL_CLOSE(a, e, tol) EXPECT_TRUE(::attn::testing::all_close((a), (e), (tol)))

// Path of a file under the source tree (for fixtures).
std::string source_path(const std::string& relative);

}  // namespace attn::testing
