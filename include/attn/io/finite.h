// Non-finite values (NaN, ±inf) where they would otherwise become silent output:
// model weights at load and results before they are printed or written.
// One pass over the data: the test is an integer OR of exponent-field checks,
// which the compiler vectorises; the index of the first bad value is looked up
// only when a block holds one.
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <string>

namespace attn::io {

// Index of the first NaN or ±inf in p[0, n), or -1 when all are finite.
int64_t first_non_finite(const float* p, int64_t n);
int64_t first_non_finite(const double* p, int64_t n);
// Raw IEEE half (f16) and bfloat16 bit patterns.
int64_t first_non_finite_f16(const uint16_t* p, int64_t n);
int64_t first_non_finite_bf16(const uint16_t* p, int64_t n);

// Throws attn::Error "<what> holds a non-finite value: element [i, j, ...] (flat index N) is nan"
// when the float tensor `t` (f32, f64, bf16; any layout) holds NaN or ±inf; integer tensors pass.
void check_finite(const Tensor& t, const std::string& what);

// The same for values about to be printed or written: "<what> is not finite (value N of M is nan)".
void check_finite(const float* p, int64_t n, const std::string& what);

}  // namespace attn::io
