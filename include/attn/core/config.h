// Run-time configuration from the environment: every ATTN_* variable the library reads, read in
// one place (src/core/config.cc), validated, and documented in one table (docs/configuration.md).
//
// runtime_config() builds the configuration once per process, at its first call (thread-safe),
// from the environment; later changes to the environment are not seen. A value that is not what
// the variable accepts throws attn::Error naming the variable, what it expects and what it got,
// e.g. "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '100000'". An empty value
// counts as unset. If building it throws, the next call tries again (and throws again).
//
// The first call is made by ordinary code, never during static initialisation: the thread pool
// reads it before it starts a worker, so code running on a worker finds it built; the attn CLI
// calls it first thing inside its error handler.
//
// parse_runtime_config() is the same parser over any name -> value lookup, so tests can check
// every variable without touching the environment.
#pragma once

#include <attn/core/precision.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// How tensor storage is allocated (ATTN_ALLOCATOR).
enum class AllocatorMode { caching, system };

// The highest instruction set the CPU kernels may use (ATTN_ISA).
enum class IsaLimit { scalar, avx2, avx512 };

// Who threads large fp32 matrix products (ATTN_GEMM_THREADS).
enum class GemmThreads {
  attn,  // split over attn's thread pool, one single-threaded BLAS call per block
  blas,  // one call, threaded by the BLAS library itself
};

// Which kernel runs fp32 matrix products (ATTN_SGEMM).
enum class SgemmKernel {
  automatic,  // attn's own where it measured at least as fast as OpenBLAS (kernels/cpu/gemm.cc)
  attn,       // attn's own (kernels/cpu/gemm_f32.h) for every product it takes (not matrix-vector)
  blas,       // OpenBLAS for every product
};

struct RuntimeConfig {
  // ATTN_NUM_THREADS: threads of attn's pool, [1, 1024]. Unset: one per hardware thread.
  std::optional<int> num_threads;
  // ATTN_SPIN_US: microseconds a pool thread polls for work before sleeping, [0, 1000000].
  int64_t spin_us = 50;
  // ATTN_ALLOCATOR: caching | system. Unset: caching (system in AddressSanitizer builds).
  std::optional<AllocatorMode> allocator;
  // ATTN_ALLOCATOR_CACHE_MB: MiB of idle blocks the caching allocator keeps, [0, 1048576].
  int64_t allocator_cache_mb = 2048;
  // ATTN_MATMUL_PRECISION: highest | fp32 | bf16 (set_matmul_precision overrides it).
  MatmulPrecision matmul_precision = MatmulPrecision::highest;
  // ATTN_ISA: scalar | avx2 | avx512, an upper bound on the detected set. Unset: the best detected.
  std::optional<IsaLimit> isa;
  // ATTN_GEMM_THREADS: attn | blas.
  GemmThreads gemm_threads = GemmThreads::attn;
  // ATTN_SGEMM: auto | attn | blas.
  SgemmKernel sgemm = SgemmKernel::automatic;
  // ATTN_LINEAR_SMALL_M: most rows for inference linear's small-M kernel, [0, 1000000]; 0 = off.
  int64_t linear_small_m = 48;
  // ATTN_LINEAR_PACKED: most rows for decoding's pre-packed weights, [0, 1000000]; 0 = off.
  int64_t linear_packed = 48;
  // ATTN_DATA_DIR: the folder of the data sets; "" = not set (data::find_data_dir then looks in
  // ../shared/data, <repo>/../shared/data and <repo>/data).
  std::string data_dir;
  // ATTN_MODEL_DIR: a folder searched first for pretrained model files; "" = none.
  std::string model_dir;

  bool operator==(const RuntimeConfig&) const = default;
};

// The value of one variable, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The configuration these values give (defaults for unset or empty ones); throws attn::Error for
// the first bad value, naming the variable.
RuntimeConfig parse_runtime_config(const EnvLookup& lookup);

// The process's configuration, built from the environment at the first call.
const RuntimeConfig& runtime_config();

// The names of all variables parse_runtime_config reads, in the order of RuntimeConfig.
const std::vector<std::string>& runtime_config_variables();

}  // namespace attn
