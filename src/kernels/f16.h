// IEEE binary16 (GGUF's F16 tensors and block scales, the f16 KV cache) to float.
#pragma once

#include <cstdint>

namespace attn::kernels {

// IEEE binary16 bits → float, exact for every value (subnormals, inf, NaN).
float f16_bits_to_float(uint16_t h);

}  // namespace attn::kernels
