#!/usr/bin/env bash
# Quick start, step 2: build and run the test suite (everything but label
# "slow"; pass --all to include it, or any ctest arguments after --).
# ATTN_BROWSER_TESTS=1 (or CI=true) also installs what the browser tests of
# `attn view` need (label "browser"; without it they are reported as skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
preset=${ATTN_TEST_PRESET:-release}
scripts/build.sh "$preset"
args=(-LE slow)
if [[ ${1:-} == --all ]]; then args=(); shift; fi
[[ ${1:-} == -- ]] && shift
ctest --preset "$preset" -j "$(nproc)" "${args[@]}" "$@"
