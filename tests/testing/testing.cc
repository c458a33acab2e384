#include "testing/testing.h"

#include <attn/core/error.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

namespace attn::testing {

Tensor random_uniform(const Shape& shape, uint64_t seed, double lo, double hi, DType dtype) {
  Tensor t = Tensor::empty(shape, DType::f64);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return dtype == DType::f64 ? t : t.to(dtype);
}

Tensor random_mask(const Shape& shape, uint64_t seed, double p_true) {
  Tensor t = Tensor::empty(shape, DType::u8);
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution dist(p_true);
  uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng) ? 1 : 0;
  return t;
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure()
           << "undefined tensor: actual " << actual.str() << ", expected " << expected.str();
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape mismatch: actual " << shape_str(actual.shape())
                                         << ", expected " << shape_str(expected.shape());
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  double worst = 0, max_abs = 0, max_rel = 0;
  int64_t worst_i = -1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool an = std::isnan(a[i]), en = std::isnan(e[i]);
    if (an || en) {
      if (an != en)
        return ::testing::AssertionFailure()
               << "NaN mismatch at flat index " << i << ": actual " << a[i] << ", expected " << e[i];
      continue;
    }
    if (std::isinf(a[i]) || std::isinf(e[i])) {
      if (a[i] != e[i])
        return ::testing::AssertionFailure()
               << "Inf mismatch at flat index " << i << ": actual " << a[i] << ", expected " << e[i];
      continue;
    }
    const double diff = std::abs(a[i] - e[i]);
    max_abs = std::max(max_abs, diff);
    if (e[i] != 0) max_rel = std::max(max_rel, diff / std::abs(e[i]));
    const double excess = diff - (tol.abs + tol.rel * std::abs(e[i]));
    if (excess > worst) {
      worst = excess;
      worst_i = static_cast<int64_t>(i);
    }
  }
  if (worst_i >= 0)
    return ::testing::AssertionFailure()
           << "values differ: worst at flat index " << worst_i << " actual " << a[worst_i] << " expected "
           << e[worst_i] << " (tol abs " << tol.abs << " rel " << tol.rel << "); max abs err " << max_abs
           << ", max rel err " << max_rel << ", shape " << shape_str(actual.shape());
  return ::testing::AssertionSuccess() << "max abs err " << max_abs << ", max rel err " << max_rel;
}

std::string source_path(const std::string& relative) { return std::string(ATTN_SOURCE_DIR) + "/" + relative; }

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

::testing::AssertionResult throws_error_containing(const std::function<void()>& fn,
                                                   const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& part : parts)
      if (msg.find(part) == std::string::npos)
        return ::testing::AssertionFailure() << "error message lacks '" << part << "': " << msg;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "expected attn::Error, nothing was thrown";
}

}  // namespace attn::testing
