#!/usr/bin/env bash
# Configures and builds one preset (default: release).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
launcher=()
# ccache when installed (scripts/install-deps.sh installs it): a rebuild, and the wheel that
# scripts/test-python.sh builds from the same sources with the same flags, compile only what changed.
# Paths under the repository are hashed relative to the build folder (CCACHE_BASEDIR), so two build
# folders at the same depth (build/release, build/py-<tag>) share their objects.
if command -v ccache >/dev/null && [[ ${ATTN_NO_CCACHE:-0} != 1 ]]; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake --preset "$preset" "${launcher[@]}" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
