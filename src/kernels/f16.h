// IEEE binary16 (GGUF's F16 tensors and block scales, the f16 KV cache) to float.
#pragma once

#include <cstdint>

namespace attn::kernels {

// IEEE binary16 bits → float, exact for every value (subnormals, inf, NaN).
float f16_bits_to_float(uint16_t h);

// x rounded to the nearest IEEE binary16 value (ties to even), as a float; overflow gives ±inf.
float round_to_f16(float x);

}  // namespace attn::kernels
