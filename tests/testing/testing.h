// Test helpers: seeded random tensors and a comparison that checks shape
// first, then NaN/Inf agreement, then max-abs / max-rel error against
// tolerances kept in one table (tolerances.h).
#pragma once

#include <attn/core/tensor.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// Passes when fn() throws attn::Error whose message contains every one of
// `parts`; the failure names the missing part and the whole message.
::testing::AssertionResult throws_error_containing(const std::function<void()>& fn,
                                                   const std::vector<std::string>& parts);

#define EXPECT_ERROR_CONTAINS(stmt, ...) \
  EXPECT_TRUE(::attn::testing::throws_error_containing([&] { stmt; }, __VA_ARGS__))

// Path of a file under the source tree (for fixtures).
std::string source_path(const std::string& relative);

// The whole file as bytes; "" when it cannot be opened (tests then fail on the content).
std::string read_text(const std::string& path);

}  // namespace attn::testing
