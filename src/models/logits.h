// Row reductions over logits for decoding (src/models/generate.cc).
#pragma once

#include <cstdint>

namespace attn::models::detail {

// log Σ_t exp(x[t]) over one row of V logits (max-shifted; accumulated in double in
// the scalar path, in fp32 lanes then double in the AVX-512 path). x: [V].
double row_logsumexp(const float* x, int64_t V);

double row_logsumexp_scalar(const float* x, int64_t V);
double row_logsumexp_avx512(const float* x, int64_t V);  // logits_avx512.cc

}  // namespace attn::models::detail
