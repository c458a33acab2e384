#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/core/precision.h>

#include <atomic>
#include <string>

namespace attn {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_precision{kUnset};

}  // namespace

MatmulPrecision parse_matmul_precision(std::string_view s) {
  if (s == "highest" || s == "fp32") return MatmulPrecision::highest;
  if (s == "bf16") return MatmulPrecision::bf16;
  throw Error(detail::concat("matmul precision: expected highest, fp32 or bf16; got '", std::string(s), "'"));
}

MatmulPrecision matmul_precision() {
  int p = g_precision.load(std::memory_order_relaxed);
  if (p == kUnset) {
    const MatmulPrecision from_env = runtime_config().matmul_precision;
    int expected = kUnset;
    g_precision.compare_exchange_strong(expected, static_cast<int>(from_env));
    p = g_precision.load(std::memory_order_relaxed);
  }
  return static_cast<MatmulPrecision>(p);
}

void set_matmul_precision(MatmulPrecision p) { g_precision.store(static_cast<int>(p)); }

const char* matmul_precision_name(MatmulPrecision p) {
  return p == MatmulPrecision::bf16 ? "bf16" : "highest";
}

void reset_matmul_precision() { g_precision.store(kUnset); }

}  // namespace attn
