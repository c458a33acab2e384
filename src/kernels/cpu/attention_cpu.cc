// TEMPORARY during bring-up: forwards to the reference. Replaced by the fused kernel.
#include "kernels/cpu/attention_cpu.h"
#include "kernels/ref/attention_ref.h"
namespace attn::kernels::cpu {
void attention_forward(const AttnArgs<float>& a, AttnOut<float>& o) { ref::attention_forward(a, o); }
void attention_backward(const AttnArgs<float>& a, const AttnGradArgs<float>& g) { ref::attention_backward(a, g); }
const char* isa_name() { return "scalar"; }
}
