// Scalar optimizer kernels and the dispatch (src/kernels/cpu/adamw.h).
#include "kernels/cpu/adamw.h"

#include <cmath>

#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {

void adamw_update_scalar(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  for (int64_t j = 0; j < n; ++j) {
    const float gj = g[j];
    const float pj = s.do_decay ? p[j] * s.decay : p[j];
    const float mj = m[j] + s.w1 * (gj - m[j]);
    const float vj = v[j] * s.b2 + s.w2 * gj * gj;
    const float denom = std::sqrt(vj) / s.bc2_sqrt + s.eps;
    m[j] = mj;
    v[j] = vj;
    p[j] = pj + s.neg_step * mj / denom;
  }
}

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  const Isa isa = active_isa();
  if (isa == Isa::avx512)
    adamw_update_avx512(p, g, m, v, n, s);
  else if (isa == Isa::avx2)
    adamw_update_avx2(p, g, m, v, n, s);
  else
    adamw_update_scalar(p, g, m, v, n, s);
}

}  // namespace attn::kernels::cpu
