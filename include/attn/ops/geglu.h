// GeGLU with the tanh form of GELU (Gemma's FFN), in place on raw buffers. INFERENCE ONLY: NO
// AUTOGRAD (issue 19: std::tanh per element was a fifth of Gemma 3's prompt pass).
//
//   g[i] = gelu_tanh(g[i]) · u[i],  gelu_tanh(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))
//
// tanh is evaluated as 1 − 2 / (1 + e^{2t}) with e^{2t} from a range reduction to 2^n · p(r), |r| ≤
// ln2/2, and a degree-7 polynomial: branch-free, so the loop vectorises. The error against the
// std::tanh form is below 4e-7 · (|x| + 1) · |u| (tests/ops/geglu_test.cc).
#pragma once

#include <cstdint>

namespace attn::ops {

void geglu_tanh(float* g, const float* u, int64_t n);

// SwiGLU in place (the FFN of Llama, Qwen, Mistral, Phi): g[i] = silu(g[i]) · u[i], silu(x) = x / (1 +
// e^−x), with the row kernels' vector sigmoid (kernels/cpu/row_kernels.h swiglu_forward_f32, the
// training path's forward; within 4e-7 of the std::exp form, and the same bits for an element wherever
// it sits in g). A std::exp per element was 5% of SmolLM2's 16-stream step.
void swiglu(float* g, const float* u, int64_t n);

}  // namespace attn::ops
