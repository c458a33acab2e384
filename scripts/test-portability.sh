#!/usr/bin/env bash
# CI, after scripts/test.sh (which builds the preset): the tests whose results pass through the
# matrix products and the CPU kernels, run again (a) with OpenBLAS forced to another kernel set,
# as machines newer than their OpenBLAS build set it (OPENBLAS_CORETYPE=Haswell and a smaller
# OPENBLAS_L2_SIZE), so no test depends on which OpenBLAS kernel runs, and (b) with the kernels
# limited to AVX2 (ATTN_ISA=avx2, docs/configuration.md), the path of x86-64 CPUs without AVX-512
# (skipped on such a CPU: the default run took that path).
# Any ctest arguments are passed on (e.g. -R Gemm).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${ATTN_TEST_PRESET:-release}
labels='autograd|kernels|ops|nn|train'
echo "== OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576 (labels $labels)"
OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576 \
  ctest --preset "$preset" -j "$(nproc)" -L "$labels" -LE slow "$@"
# On a CPU without AVX-512 the default run took the AVX2 path already: the same tests again would
# run the same code.
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  echo "== ATTN_ISA=avx2 (labels $labels)"
  ATTN_ISA=avx2 ctest --preset "$preset" -j "$(nproc)" -L "$labels" -LE slow "$@"
else
  echo "== ATTN_ISA=avx2: skipped, this CPU has no AVX-512 (the default run took the AVX2 path)"
fi
