#!/usr/bin/env bash
# Installs the Debian packages attn needs to build and test, if any is missing.
# Nothing else is downloaded: no vendored code, no fetch at build or run time.
set -euo pipefail
pkgs=(cmake ninja-build g++ libgtest-dev libbenchmark-dev libopenblas-dev)
# Optional: the browser tests of `attn view` (ctest label "browser"; skipped
# without them): headless Chromium, its driver, Selenium, and a CJK font so
# screenshots show the Chinese example. Installed with ATTN_BROWSER_TESTS=1 or in CI.
if [[ ${ATTN_BROWSER_TESTS:-0} == 1 || ${CI:-} == true ]]; then
  pkgs+=(chromium chromium-driver python3-selenium fonts-wqy-zenhei)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
