#include "kernels/cpu/logits.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {

double row_logsumexp_scalar(const float* x, int64_t V) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < V; ++t) mx = std::max(mx, x[t]);
  if (mx == -std::numeric_limits<float>::infinity()) return mx;
  double s = 0;
  for (int64_t t = 0; t < V; ++t) s += std::exp(static_cast<double>(x[t]) - mx);
  return mx + std::log(s);
}

ArgmaxLse row_argmax_logsumexp_scalar(const float* x, int64_t V) {
  return {std::max_element(x, x + V) - x, row_logsumexp_scalar(x, V)};
}

ArgmaxLse row_argmax_logsumexp(const float* x, int64_t V) {
  const Isa isa = active_isa();
  if (isa == Isa::avx512) return row_argmax_logsumexp_avx512(x, V);
  if (isa == Isa::avx2) return row_argmax_logsumexp_avx2(x, V);
  return row_argmax_logsumexp_scalar(x, V);
}

double row_logsumexp(const float* x, int64_t V) {
  const Isa isa = active_isa();
  if (isa == Isa::avx512) return row_logsumexp_avx512(x, V);
  if (isa == Isa::avx2) return row_logsumexp_avx2(x, V);
  return row_logsumexp_scalar(x, V);
}

}  // namespace attn::kernels::cpu
