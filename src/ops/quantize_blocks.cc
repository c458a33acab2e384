// Weights to Q8_0 / Q4_0 blocks (include/attn/ops/quantized.h: quantize_blocks).
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/ops/quantized.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

namespace attn::ops {
namespace {

void put_half(std::byte* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// One block of 32 values: 34 bytes (f16 d, 32 int8).
void block_q8_0(const float* x, std::byte* out) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(out, d);
  for (int i = 0; i < 32; ++i) {
    const float v = std::round(x[i] * id);
    out[2 + i] = static_cast<std::byte>(static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f)));
  }
}

// One block of 32 values: 18 bytes (f16 d, 16 bytes: element i in the low nibble of byte i, element
// 16 + i in the high one).
void block_q4_0(const float* x, std::byte* out) {
  float amax = 0, m = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), m = x[i];
  const float d = m / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(out, d);
  for (int i = 0; i < 16; ++i) {
    const auto q = [&](float v) {
      return static_cast<uint8_t>(std::min(15, static_cast<int>(v * id + 8.5f)));
    };
    out[2 + i] = static_cast<std::byte>(q(x[i]) | (q(x[16 + i]) << 4));
  }
}

}  // namespace

std::vector<std::byte> quantize_blocks(QuantFormat format, const float* w, int64_t N, int64_t K) {
  ATTN_CHECK(format == QuantFormat::q8_0 || format == QuantFormat::q4_0,
             "quantize_blocks: expected Q8_0 or Q4_0, got ", quant_format_name(format));
  ATTN_CHECK(N > 0 && K > 0 && K % kQuantBlock == 0,
             "quantize_blocks: need N > 0 and K a positive multiple of 32; got [", N, ", ", K, "]");
  ATTN_CHECK(w != nullptr, "quantize_blocks: no values");
  const int64_t bb = quant_block_bytes(format), nb = K / kQuantBlock, rb = nb * bb;
  std::vector<std::byte> out(static_cast<std::size_t>(N * rb));
  std::atomic<int64_t> bad{N};
  parallel_for(N, std::max<int64_t>(1, 65536 / K), [&](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* row = w + n * K;
      bool finite = true;
      for (int64_t k = 0; k < K; ++k) finite &= std::isfinite(row[k]);
      if (!finite) {
        int64_t cur = bad.load();
        while (n < cur && !bad.compare_exchange_weak(cur, n)) {
        }
        continue;
      }
      for (int64_t b = 0; b < nb; ++b) {
        std::byte* o = out.data() + n * rb + b * bb;
        if (format == QuantFormat::q8_0)
          block_q8_0(row + b * kQuantBlock, o);
        else
          block_q4_0(row + b * kQuantBlock, o);
      }
    }
  });
  ATTN_CHECK(bad.load() == N, "quantize_blocks: row ", bad.load(), " of [", N, ", ", K,
             "] holds a value that is not finite; expected every value finite");
  return out;
}

}  // namespace attn::ops
