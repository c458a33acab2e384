// IEEE 754 binary16 ("half", f16) <-> float: the one conversion of the tree. Safetensors F16
// tensors, GGUF block scales (Q4_1, Q8_0, F16 tensors), the quantized kernels' activation scales
// and the f16 KV cache of Llama all go through these three functions (the AVX-512 kernels convert
// 16 lanes at once with vcvtps2ph / vcvtph2ps, which give the same bits).
//
// They are out of line on purpose: src/kernels/cpu/*_avx512.cc call them, and an inline function
// used there could be emitted as a weak symbol compiled for AVX-512 that the linker might pick for
// every caller (scripts/check-isa-objects.sh rejects that).
#pragma once

#include <cstdint>

namespace attn {

// Half-precision bits -> float, exactly (subnormals, ±0, ±inf and NaN payloads kept).
float f16_to_f32(uint16_t bits);

// float -> the bits of the nearest half (ties to even); overflow gives ±inf, NaN a quiet NaN.
uint16_t f32_to_f16(float x);

// x rounded to the nearest half (ties to even), as a float: f16_to_f32(f32_to_f16(x)) for every
// non-NaN x (NaN comes back unchanged), computed without the bit repacking.
float round_to_f16(float x);

}  // namespace attn
