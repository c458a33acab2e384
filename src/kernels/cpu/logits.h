// Row reductions over logits for decoding (ops::row_argmax_logsumexp, ops::row_logsumexp in
// include/attn/ops/inference.h; models::generate).
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

// log Σ_t exp(x[t]) over one row of V logits (max-shifted; accumulated in double in
// the scalar path, in fp32 lanes then double in the AVX-512 and AVX2 paths). x: [V].
double row_logsumexp(const float* x, int64_t V);

// Greedy's two reductions of a row in one call: the first maximum (ties go to the lower id,
// as std::max_element) and log Σ_t exp(x[t]) (as row_logsumexp). x: [V], no NaN.
struct ArgmaxLse {
  int64_t token;
  double lse;
};
ArgmaxLse row_argmax_logsumexp(const float* x, int64_t V);

double row_logsumexp_scalar(const float* x, int64_t V);
ArgmaxLse row_argmax_logsumexp_scalar(const float* x, int64_t V);
ArgmaxLse row_argmax_logsumexp_avx512(const float* x, int64_t V);  // logits_avx512.cc
double row_logsumexp_avx512(const float* x, int64_t V);            // logits_avx512.cc
ArgmaxLse row_argmax_logsumexp_avx2(const float* x, int64_t V);    // logits_avx2.cc
double row_logsumexp_avx2(const float* x, int64_t V);              // logits_avx2.cc

}  // namespace attn::kernels::cpu
