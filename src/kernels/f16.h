// Rounding floats to IEEE binary16 (GGUF's block scales, the f16 KV cache). The conversion back is
// io::f16_to_f32 (attn/io/safetensors.h).
#pragma once

#include <cstdint>

namespace attn::kernels {

// x rounded to the nearest IEEE binary16 value (ties to even), as a float; overflow gives ±inf.
float round_to_f16(float x);

}  // namespace attn::kernels
