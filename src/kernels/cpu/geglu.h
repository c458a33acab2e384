// GeGLU (tanh GELU) on raw buffers: include/attn/ops/geglu.h. Portable code the compiler vectorises.
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {
void geglu_tanh(float* g, const float* u, int64_t n);
}  // namespace attn::kernels::cpu
