// Shared by the tests of the 8-bit-activation kernels (q8k_test: the row products; q8k_gemm_test: the
// GEMM): activations quantized by the kernel under test, and the exact inputs of the power-of-two checks.
#pragma once

#include <attn/core/f16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/q8k.h"
#include "kernels/kquant_test_util.h"

namespace attn::testing {

// M rows of K activations quantized to 8 bits (the storage behind rows).
struct Q8Activations {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> bsum;
  kernels::Q8KRows rows;
};

inline Q8Activations q8_quantize(kernels::Q8Kind kind, const std::vector<float>& x, int64_t M, int64_t K) {
  Q8Activations r;
  const int64_t B = kernels::q8k_block(kind);
  r.q.resize(M * K), r.d.resize(M * K / B), r.bsum.resize(M * K / 16);
  kernels::cpu::q8k_quantize(kind, x.data(), M, K, K, r.q.data(), r.d.data(), r.bsum.data());
  r.rows = {kind, M, K, r.q.data(), r.d.data(), r.bsum.data(), K, K / B, K / 16};
  return r;
}

// Inputs on which every f32 operation of the kernels is exact: N x K weights in format f with random
// quants and every f16 scale (d, dmin) 2^-6; M x K activations with random quants in [-127, 127], every
// block scale 2^-3 (the integer sums stay below 2^24). A kernel must then equal the oracle bit for bit.
struct ExactQ8Inputs {
  std::vector<std::byte> w;
  Q8Activations x;
};

inline ExactQ8Inputs exact_q8_inputs(kernels::KFormat f, int64_t M, int64_t N, int64_t K) {
  using kernels::KFormat;
  ExactQ8Inputs in;
  in.w = random_kblocks(f, N, K, 5);
  const int64_t be = kernels::kformat_block_elems(f), bb = kernels::kformat_block_bytes(f);
  std::vector<int> halves = {0};
  if (f == KFormat::q4_1 || f == KFormat::q4_k || f == KFormat::q5_k) halves = {0, 2};
  if (f == KFormat::q6_k) halves = {208};
  const uint16_t h = f32_to_f16(1.0f / 64);
  for (int64_t b = 0; b < N * K / be; ++b)
    for (int off : halves) std::memcpy(in.w.data() + b * bb + off, &h, 2);
  const kernels::Q8Kind kind = kernels::q8k_kind_for(f);
  const int64_t B = kernels::q8k_block(kind);
  Q8Activations& xq = in.x;
  xq.q.resize(M * K), xq.d.assign(M * K / B, 0.125f), xq.bsum.assign(M * K / 16, 0);
  std::mt19937 rng(3);
  for (int64_t i = 0; i < M * K; ++i) {
    xq.q[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    xq.bsum[i / 16] += xq.q[i];
  }
  xq.rows = {kind, M, K, xq.q.data(), xq.d.data(), xq.bsum.data(), K, K / B, K / 16};
  return in;
}

}  // namespace attn::testing
