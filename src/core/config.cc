#include <attn/core/config.h>
#include <attn/core/error.h>

#include <cstdlib>
#include <string>

#include "core/allocator.h"

namespace attn {
namespace {

[[noreturn]] void bad_value(std::string_view name, std::string_view expected, const std::string& got) {
  throw Error(detail::concat(name, ": expected ", expected, "; got '", got, "'"));
}

// The variable's value; nullopt when unset or empty.
std::optional<std::string> value_of(const EnvLookup& lookup, std::string_view name) {
  std::optional<std::string> v = lookup(name);
  if (v && v->empty()) v.reset();
  return v;
}

// A whole number in [lo, hi] written in decimal digits (no sign, spaces or suffix).
int64_t whole_number(std::string_view name, const std::string& v, int64_t lo, int64_t hi) {
  const std::string expected = detail::concat("a whole number in [", lo, ", ", hi, "]");
  if (v.size() > 18) bad_value(name, expected, v);  // also keeps the sum below from overflowing
  int64_t n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') bad_value(name, expected, v);
    n = n * 10 + (c - '0');
  }
  if (n < lo || n > hi) bad_value(name, expected, v);
  return n;
}

template <typename T>
void read_whole(const EnvLookup& lookup, std::string_view name, int64_t lo, int64_t hi, T& field) {
  if (const auto v = value_of(lookup, name)) field = static_cast<T>(whole_number(name, *v, lo, hi));
}

}  // namespace

const std::vector<std::string>& runtime_config_variables() {
  static const std::vector<std::string> names = {
      "ATTN_NUM_THREADS",      "ATTN_SPIN_US",  "ATTN_ALLOCATOR",    "ATTN_ALLOCATOR_CACHE_MB",
      "ATTN_MATMUL_PRECISION", "ATTN_ISA",      "ATTN_GEMM_THREADS", "ATTN_LINEAR_SMALL_M",
      "ATTN_LINEAR_PACKED",    "ATTN_DATA_DIR", "ATTN_MODEL_DIR",    "ATTN_SGEMM"};
  return names;
}

RuntimeConfig parse_runtime_config(const EnvLookup& lookup) {
  RuntimeConfig c;
  if (const auto v = value_of(lookup, "ATTN_NUM_THREADS"))
    c.num_threads = static_cast<int>(whole_number("ATTN_NUM_THREADS", *v, 1, 1024));
  read_whole(lookup, "ATTN_SPIN_US", 0, 1000000, c.spin_us);
  if (const auto v = value_of(lookup, "ATTN_ALLOCATOR"))
    c.allocator = core::allocator_mode_from(v->c_str(), AllocatorMode::caching);  // throws for others
  read_whole(lookup, "ATTN_ALLOCATOR_CACHE_MB", 0, 1048576, c.allocator_cache_mb);
  if (const auto v = value_of(lookup, "ATTN_MATMUL_PRECISION")) {
    try {
      c.matmul_precision = parse_matmul_precision(*v);
    } catch (const Error&) {
      bad_value("ATTN_MATMUL_PRECISION", "highest, fp32 or bf16", *v);
    }
  }
  if (const auto v = value_of(lookup, "ATTN_ISA")) {
    if (*v == "scalar")
      c.isa = IsaLimit::scalar;
    else if (*v == "avx2")
      c.isa = IsaLimit::avx2;
    else if (*v == "avx512")
      c.isa = IsaLimit::avx512;
    else
      bad_value("ATTN_ISA", "scalar, avx2 or avx512", *v);
  }
  if (const auto v = value_of(lookup, "ATTN_GEMM_THREADS")) {
    if (*v == "attn")
      c.gemm_threads = GemmThreads::attn;
    else if (*v == "blas")
      c.gemm_threads = GemmThreads::blas;
    else
      bad_value("ATTN_GEMM_THREADS", "attn or blas", *v);
  }
  if (const auto v = value_of(lookup, "ATTN_SGEMM")) {
    if (*v == "auto")
      c.sgemm = SgemmKernel::automatic;
    else if (*v == "attn")
      c.sgemm = SgemmKernel::attn;
    else if (*v == "blas")
      c.sgemm = SgemmKernel::blas;
    else
      bad_value("ATTN_SGEMM", "auto, attn or blas", *v);
  }
  read_whole(lookup, "ATTN_LINEAR_SMALL_M", 0, 1000000, c.linear_small_m);
  read_whole(lookup, "ATTN_LINEAR_PACKED", 0, 1000000, c.linear_packed);
  if (const auto v = value_of(lookup, "ATTN_DATA_DIR")) c.data_dir = *v;
  if (const auto v = value_of(lookup, "ATTN_MODEL_DIR")) c.model_dir = *v;
  return c;
}

const RuntimeConfig& runtime_config() {
  // A function-local static: built by the first caller (others wait), and built again by the next
  // call if building threw.
  static const RuntimeConfig config =
      parse_runtime_config([](std::string_view name) -> std::optional<std::string> {
        const char* v = std::getenv(std::string(name).c_str());
        if (v == nullptr) return std::nullopt;
        return std::string(v);
      });
  return config;
}

}  // namespace attn
