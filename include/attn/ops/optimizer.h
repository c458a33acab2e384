// Fused optimizer updates on raw f32 buffers (train::AdamW, include/attn/train/optim.h).
// NO AUTOGRAD: they change parameters and optimizer state in place, outside the graph.
#pragma once

#include <cstdint>

namespace attn::ops {

// The per-step scalars of one AdamW update, rounded to f32 once (as torch passes them to its f32
// kernels): with lr, beta1, beta2, eps, weight decay wd and bias corrections bc1 = 1 − beta1^t,
// bc2 = 1 − beta2^t:
//   decay = 1 − lr·wd, w1 = 1 − beta1, b2 = beta2, w2 = 1 − beta2, bc2_sqrt = sqrt(bc2),
//   neg_step = −lr / bc1; do_decay: whether this tensor takes weight decay.
struct AdamWScalars {
  bool do_decay = false;
  float decay = 1, w1 = 0, b2 = 0, w2 = 0, bc2_sqrt = 1, eps = 0, neg_step = 0;
};

// One AdamW step on n elements, p, g, m, v: [n] (p, m, v updated in place):
//   p ← do_decay ? p · decay : p;  m ← m + w1 · (g − m);  v ← v · b2 + w2 · g · g
//   p ← p + neg_step · m / (sqrt(v) / bc2_sqrt + eps)
// The AVX-512 kernel when the CPU has it, else the scalar one: the same f32 operations in the same
// order (no fused multiply-add), so the two give bit-identical results.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);

}  // namespace attn::ops
