// Fused CPU attention: FlashAttention-style tiling with online softmax, SIMD
// chosen at run time (AVX-512 / AVX2 / scalar), threads over
// batch × heads × query tiles, split-KV when there are too few query tiles.
// Extra memory is O(threads × tile); no Lq × Lk buffer is ever allocated.
//
// Contract (checked by src/ops/attention.cc before the call):
//  * q, k, v, out, dout have unit stride in their last dimension (D);
//  * lse, out, dq, dk, dv and weights are contiguous as described in
//    kernels/attention_args.h.
#pragma once

#include "kernels/attention_args.h"

namespace attn::kernels::cpu {

void attention_forward(const AttnArgs<float>& a, AttnOut<float>& o);
void attention_backward(const AttnArgs<float>& a, const AttnGradArgs<float>& g);

// True when attention_forward takes bf16 q/k/v directly (AttnArgs::bf16): the active instruction set
// is AVX-512 and the CPU has AVX512_BF16. Otherwise the caller converts bf16 inputs to f32.
bool fused_bf16_available();

// Name of the instruction set the kernels will use: "avx512", "avx2" or "scalar".
// ATTN_ISA=avx512|avx2|scalar in the environment forces a lower one.
const char* isa_name();

}  // namespace attn::kernels::cpu
