// TEMPORARY during bring-up: forwards to the reference. Replaced by the fused backward kernel.
#include "kernels/cpu/attention_cpu.h"
#include "kernels/ref/attention_ref.h"
namespace attn::kernels::cpu {
void attention_backward(const AttnArgs<float>& a, const AttnGradArgs<float>& g) { ref::attention_backward(a, g); }
}  // namespace attn::kernels::cpu
