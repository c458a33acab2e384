// Column sums of a row-major float matrix, accumulated in double (the bias
// gradient of linear: db[o] = sum_r g[r, o]).
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

// Columns handled by one call.
inline constexpr int64_t kColumnSumsBlock = 64;

// out[j] = sum over r = 0..R-1, in that order, of x[r * ldx + j], for j < n
// (n <= kColumnSumsBlock), each sum in double and rounded to float once: the
// same value as the scalar loop. x: [R, ldx] (the first n columns read).
void column_sums_block_avx512(const float* x, int64_t R, int64_t ldx, int64_t n, float* out);
// The same sums on AVX2 (4 double lanes per register; the same bits).
void column_sums_block_avx2(const float* x, int64_t R, int64_t ldx, int64_t n, float* out);

}  // namespace attn::kernels::cpu
