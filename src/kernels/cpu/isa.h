// Run-time choice of the instruction set used by the fused CPU kernels.
//
// The best set the CPU supports is detected once (__builtin_cpu_supports).
// ATTN_ISA=avx512|avx2|scalar in the environment may only lower that choice
// (asking for more than the CPU has is ignored). Tests use force_isa() to run
// every available path in one process.
#pragma once

#include <optional>

namespace attn::kernels::cpu {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

// "scalar", "avx2" or "avx512".
const char* isa_str(Isa isa);

// Best instruction set this CPU supports (ignores ATTN_ISA and force_isa).
Isa detected_isa();

// True when `isa` can run here (isa <= detected_isa()).
bool isa_available(Isa isa);

// True when the CPU has AVX512-VNNI (vpdpbusd), used by the int8 dot kernels (kernels/cpu/qdot.h)
// on top of the avx512 set; the kernels check active_isa() == avx512 as well.
bool cpu_has_avx512_vnni();
// True when the CPU has AVX512_BF16 (vdpbf16ps), whatever ISA is active.
bool cpu_has_avx512_bf16();

// The instruction set the kernels use now: the forced one if any, else
// min(detected_isa(), ATTN_ISA).
Isa active_isa();

// Test hook: forces `isa` for every later kernel call (process-wide); throws
// attn::Error when it is not available here. std::nullopt restores the
// automatic choice.
void force_isa(std::optional<Isa> isa);

}  // namespace attn::kernels::cpu
