// How closely two tensors of vectors agree, row by row: the worst cosine over the rows of two [N, C]
// tensors (or [B, L, C] viewed as rows of C), which row it is, and the largest absolute difference.
// Shared by the embedding parity tests (e5 against the package's engine, e5 Q4_1 against f32).
#pragma once

#include <attn/core/tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace attn::testing {

struct RowAgreement {
  double worst_cosine = 1, max_abs = 0;
  int64_t worst = -1;  // the row of the worst cosine
};

inline RowAgreement row_agreement(const Tensor& got, const Tensor& want, int64_t C) {
  RowAgreement a;
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  const int64_t N = want.numel() / C;
  for (int64_t i = 0; i < N; ++i) {
    double dot = 0, ng = 0, nw = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double x = g[i * C + c], y = w[i * C + c];
      dot += x * y, ng += x * x, nw += y * y;
      a.max_abs = std::max(a.max_abs, std::abs(x - y));
    }
    const double cos = dot / std::sqrt(ng * nw);
    if (cos < a.worst_cosine) a.worst_cosine = cos, a.worst = i;
  }
  return a;
}

}  // namespace attn::testing
