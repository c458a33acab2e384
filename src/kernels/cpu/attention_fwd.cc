// TEMPORARY during bring-up: forwards to the reference. Replaced by the fused forward kernel.
#include "kernels/cpu/attention_cpu.h"
#include "kernels/ref/attention_ref.h"
namespace attn::kernels::cpu {
void attention_forward(const AttnArgs<float>& a, AttnOut<float>& o) { ref::attention_forward(a, o); }
const char* isa_name() { return "scalar"; }
}  // namespace attn::kernels::cpu
