// include/attn/ops/geglu.h: the door to kernels/cpu/geglu.h.
#include "kernels/cpu/geglu.h"

#include <attn/core/error.h>
#include <attn/ops/geglu.h>

#include "kernels/cpu/row_kernels.h"

namespace attn::ops {
void geglu_tanh(float* g, const float* u, int64_t n) {
  ATTN_CHECK(n >= 0 && (n == 0 || (g != nullptr && u != nullptr)),
             "geglu_tanh: expected n >= 0 and non-null buffers, got n ", n);
  kernels::cpu::geglu_tanh(g, u, n);
}

void swiglu(float* g, const float* u, int64_t n) {
  ATTN_CHECK(n >= 0 && (n == 0 || (g != nullptr && u != nullptr)),
             "swiglu: expected n >= 0 and non-null buffers, got n ", n);
  kernels::cpu::swiglu_forward_f32(g, u, g, n);  // elementwise: in place is safe
}
}  // namespace attn::ops
