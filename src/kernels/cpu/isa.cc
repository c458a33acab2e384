#include "kernels/cpu/isa.h"

#include <attn/core/config.h>
#include <attn/core/error.h>

#include <atomic>
#include <string>

#include "kernels/cpu/attention_cpu.h"

namespace attn::kernels::cpu {
namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // The *_avx512.cc files are compiled with F/BW/DQ/VL (+BF16 for the bf16 helpers, which check for it
  // separately), so all four are required before the compiler may use any of them.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma"))
    return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
#endif
  return Isa::scalar;
}

// min(detected, ATTN_ISA); a higher ATTN_ISA value leaves the detected set (runtime_config() has
// rejected unknown ones).
Isa from_env(Isa detected) {
  const std::optional<IsaLimit> limit = runtime_config().isa;
  if (!limit) return detected;
  const Isa want = *limit == IsaLimit::scalar ? Isa::scalar
                   : *limit == IsaLimit::avx2 ? Isa::avx2
                                              : Isa::avx512;
  return static_cast<int>(want) < static_cast<int>(detected) ? want : detected;
}

constexpr int kNotForced = -1;
std::atomic<int> g_forced{kNotForced};

}  // namespace

const char* isa_str(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

Isa detected_isa() {
  static const Isa d = detect();
  return d;
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool v = detected_isa() == Isa::avx512 && __builtin_cpu_supports("avx512vnni");
  return v;
#else
  return false;
#endif
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return has;
#else
  return false;
#endif
}

bool isa_available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(detected_isa()); }

Isa active_isa() {
  const int f = g_forced.load(std::memory_order_relaxed);
  if (f != kNotForced) return static_cast<Isa>(f);
  static const Isa env = from_env(detected_isa());
  return env;
}

void force_isa(std::optional<Isa> isa) {
  if (!isa) {
    g_forced.store(kNotForced);
    return;
  }
  ATTN_CHECK(isa_available(*isa), "force_isa: instruction set ", isa_str(*isa),
             " is not available on this CPU (best available: ", isa_str(detected_isa()), ")");
  g_forced.store(static_cast<int>(*isa));
}

const char* isa_name() { return isa_str(active_isa()); }

}  // namespace attn::kernels::cpu
