// Shared by the tests of the ggml block-format kernels (kquant_test, q8k_test):
// random weight blocks whose f16 fields are finite values of a realistic size.
#pragma once

#include <attn/core/f16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/kquant.h"

namespace attn::testing {

// N rows of K weights in format f: random bytes, then every f16 field (d, and dmin where the
// format has one) set to a normal value of size ~scale (K-quant scales and mins are small integers
// times d, dmin, so their d is smaller).
inline std::vector<std::byte> random_kblocks(kernels::KFormat f, int64_t N, int64_t K, uint32_t seed) {
  using kernels::KFormat;
  const int64_t be = kernels::kformat_block_elems(f), bb = kernels::kformat_block_bytes(f);
  const int64_t nblk = N * K / be;
  std::mt19937 rng(seed);
  std::vector<std::byte> out(static_cast<std::size_t>(nblk * bb));
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  std::vector<int> halves;
  switch (f) {
    case KFormat::q4_1:
    case KFormat::q5_1:
    case KFormat::q4_k:
    case KFormat::q5_k:
      halves = {0, 2};
      break;
    case KFormat::q6_k:
      halves = {208};
      break;
    default:
      halves = {0};
  }
  std::normal_distribution<float> nd(0.0f, f == KFormat::q4_k || f == KFormat::q5_k ? 0.01f : 0.05f);
  for (int64_t b = 0; b < nblk; ++b)
    for (int off : halves) {
      const uint16_t h = f32_to_f16(nd(rng));
      std::memcpy(out.data() + b * bb + off, &h, 2);
    }
  return out;
}

}  // namespace attn::testing
