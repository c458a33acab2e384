// Non-finite checks (include/attn/io/finite.h).
#include <attn/core/error.h>
#include <attn/io/finite.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

namespace attn::io {
namespace {

constexpr int64_t kBlock = 4096;

// T: the stored element (float, double or a uint16_t bit pattern); U: its bits.
template <typename T, typename U, U kExp>
int64_t first_bad_bits(const T* p, int64_t n) {
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    U any = 0;
    for (int64_t i = b; i < e; ++i)
      any |= static_cast<U>((std::bit_cast<U>(p[i]) & kExp) == kExp);  // exp all ones
    if (any)
      for (int64_t i = b; i < e; ++i)
        if ((std::bit_cast<U>(p[i]) & kExp) == kExp) return i;
  }
  return -1;
}

std::string value_name(double x) { return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"; }

}  // namespace

int64_t first_non_finite(const float* p, int64_t n) {
  return first_bad_bits<float, uint32_t, 0x7f800000u>(p, n);
}
int64_t first_non_finite(const double* p, int64_t n) {
  return first_bad_bits<double, uint64_t, 0x7ff0000000000000ull>(p, n);
}
int64_t first_non_finite_f16(const uint16_t* p, int64_t n) {
  return first_bad_bits<uint16_t, uint16_t, 0x7c00>(p, n);
}
int64_t first_non_finite_bf16(const uint16_t* p, int64_t n) {
  return first_bad_bits<uint16_t, uint16_t, 0x7f80>(p, n);
}

void check_finite(const Tensor& t, const std::string& what) {
  if (!t.defined() || t.numel() == 0) return;
  const DType d = t.dtype();
  if (d != DType::f32 && d != DType::f64 && d != DType::bf16) return;
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  int64_t bad = -1;
  if (d == DType::f32) bad = first_non_finite(static_cast<const float*>(c.raw_data()), c.numel());
  if (d == DType::f64) bad = first_non_finite(static_cast<const double*>(c.raw_data()), c.numel());
  if (d == DType::bf16) bad = first_non_finite_bf16(static_cast<const uint16_t*>(c.raw_data()), c.numel());
  if (bad < 0) return;
  std::ostringstream index;
  int64_t rest = bad;
  std::vector<int64_t> idx(c.shape().size());
  for (std::size_t k = idx.size(); k-- > 0;) {
    idx[k] = rest % c.shape()[k];
    rest /= c.shape()[k];
  }
  index << "[";
  for (std::size_t k = 0; k < idx.size(); ++k) index << (k ? ", " : "") << idx[k];
  index << "]";
  double x = 0;
  if (d == DType::f32) x = static_cast<const float*>(c.raw_data())[bad];
  if (d == DType::f64) x = static_cast<const double*>(c.raw_data())[bad];
  if (d == DType::bf16) {
    const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(c.raw_data())[bad]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    x = f;
  }
  throw Error(what + " holds a non-finite value: element " + index.str() + " (flat index " +
              std::to_string(bad) + " of " + std::to_string(c.numel()) + ") is " + value_name(x) +
              "; expected every value finite");
}

void check_finite(const float* p, int64_t n, const std::string& what) {
  const int64_t bad = first_non_finite(p, n);
  if (bad < 0) return;
  throw Error(what + " is not finite: value " + std::to_string(bad) + " of " + std::to_string(n) + " is " +
              value_name(p[bad]) + "; expected every value finite");
}

}  // namespace attn::io
