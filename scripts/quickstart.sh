#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build Release, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
echo
echo "== attn explain =="
build/release/attn explain
