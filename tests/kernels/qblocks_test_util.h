// Random GGUF weight blocks for the quantized-product tests (qmatmul_test.cc, qdot_test.cc).
#pragma once

#include <attn/io/gguf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/qmatmul.h"

namespace attn::testing {

// N rows of K weights in format f, as blocks: d in [2^-6, 2^-3] (an exact IEEE half, positive), m in
// ±[2^-6, 2^-3] (Q4_1), quants uniform.
inline std::vector<std::byte> random_blocks(kernels::QFormat f, int64_t N, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t nb = N * K / 32, bb = kernels::qformat_block_bytes(f);
  std::vector<std::byte> out(nb * bb);
  auto half = [&]() -> uint16_t {
    return static_cast<uint16_t>(((rng() & 1) << 15) | ((9 + rng() % 4) << 10) | (rng() & 0x3ff));
  };
  for (int64_t b = 0; b < nb; ++b) {
    std::byte* p = out.data() + b * bb;
    const uint16_t d = half() & 0x7fff;  // positive scale
    std::memcpy(p, &d, 2);
    int64_t off = 2;
    if (f == kernels::QFormat::q4_1) {
      const uint16_t m = half();
      std::memcpy(p + 2, &m, 2);
      off = 4;
    }
    for (int64_t i = off; i < bb; ++i) p[i] = static_cast<std::byte>(rng() & 0xff);
  }
  return out;
}

// The GGUF tensor type of a quantized format (for io::dequantize).
inline io::GgmlType ggml_type_of(kernels::QFormat f) {
  return f == kernels::QFormat::q4_1 ? io::GgmlType::Q4_1 : io::GgmlType::Q8_0;
}

}  // namespace attn::testing
