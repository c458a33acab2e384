// Fused optimizer updates (include/attn/ops/optimizer.h).
#include <attn/core/error.h>
#include <attn/ops/optimizer.h>

#include "kernels/cpu/adamw.h"

namespace attn::ops {

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  ATTN_CHECK(n >= 0, "adamw_update: n must be >= 0; got ", n);
  ATTN_CHECK(n == 0 || (p != nullptr && g != nullptr && m != nullptr && v != nullptr),
             "adamw_update: p, g, m and v must be non-null");
  const kernels::cpu::AdamWScalars k{s.do_decay, s.decay, s.w1, s.b2, s.w2, s.bc2_sqrt, s.eps, s.neg_step};
  kernels::cpu::adamw_update(p, g, m, v, n, k);
}

}  // namespace attn::ops
