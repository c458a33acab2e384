// Elementwise optimizer update kernels on raw fp32 pointers. The scalar and
// AVX-512 versions perform the same fp32 operations in the same order (no
// fused multiply-add), so they give bit-identical results.
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

// One AdamW step on n elements (see AdamW in include/attn/train/optim.h):
//   p ← do_decay ? p · decay : p;  m ← m + w1 · (g − m);  v ← v · b2 + w2 · g · g
//   p ← p + neg_step · m / (sqrt(v) / bc2_sqrt + eps)
struct AdamWScalars {
  bool do_decay;
  float decay, w1, b2, w2, bc2_sqrt, eps, neg_step;
};

// p, g, m, v: [n]
void adamw_update_scalar(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);
void adamw_update_avx512(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);
void adamw_update_avx2(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);
// The AVX-512 or AVX2 version when the CPU has it (kernels::cpu::active_isa), else scalar.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);

}  // namespace attn::kernels::cpu
