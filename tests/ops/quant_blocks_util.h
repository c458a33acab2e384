// Shared by the tests of the quantized-product ops (quant_dot_test, quant_matmul_test): random weight
// blocks in a ggml format whose f16 scales (d, and dmin where the format has one) are finite values of
// a realistic size (normal, sd 0.02).
#pragma once

#include <attn/core/f16.h>
#include <attn/ops/quantized.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace attn::testing {

inline std::vector<std::byte> quant_blocks(ops::QuantFormat f, int64_t N, int64_t K, uint32_t seed) {
  using ops::QuantFormat;
  const int64_t be = ops::quant_block_elems(f), bb = ops::quant_block_bytes(f), nblk = N * K / be;
  std::mt19937 rng(seed);
  std::vector<std::byte> out(nblk * bb);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  std::vector<int> halves = {0};
  if (f == QuantFormat::q4_k || f == QuantFormat::q5_k || f == QuantFormat::q4_1 || f == QuantFormat::q5_1)
    halves = {0, 2};
  if (f == QuantFormat::q6_k) halves = {208};
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (int64_t b = 0; b < nblk; ++b)
    for (int off : halves) {
      const uint16_t h = f32_to_f16(nd(rng));
      std::memcpy(out.data() + b * bb + off, &h, 2);
    }
  return out;
}

}  // namespace attn::testing
