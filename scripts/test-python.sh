#!/usr/bin/env bash
# The Python package (docs/python.md), as a user gets it: builds the wheel with
# `pip install .` into a fresh virtual environment, checks that `import attn`
# works with numpy alone, then runs the pytest suite (python/tests) with the
# test dependencies (pytest, torch, transformers, sentence-transformers).
#
# The test dependencies are large (torch), so they are installed once into a
# cached folder, ATTN_PY_DEPS (default ~/.cache/attn/py-test-deps/<python
# version>), which the fresh environment reads through a .pth file; torch comes
# from PyTorch's CPU-only index. ATTN_PY_DEPS=system uses the system's packages
# instead (python3 -m venv --system-site-packages), for a machine that has them.
#
# The wheel's build folder (build/python/<tag>) is kept between runs and ccache
# is used when installed, so a second run recompiles only what changed.
# pytest's exit code 5 (no tests collected) is an error like any other failure.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
py=${PYTHON:-python3}
venv=build/python-venv
pyver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
deps=${ATTN_PY_DEPS:-$HOME/.cache/attn/py-test-deps/$pyver}
stamp() { echo "== test-python: $* ($(($(date +%s) - t0)) s)"; }

rm -rf "$venv"
if [[ $deps == system ]]; then
  "$py" -m venv --system-site-packages "$venv"
else
  "$py" -m venv "$venv"
fi
vpy=$venv/bin/python

if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# The build requirements go into the environment itself (--no-build-isolation), so
# nanobind's sources sit at the same path every run and ccache hits for them too.
stamp "installing the build requirements (scikit-build-core, nanobind)"
"$vpy" -m pip install -q scikit-build-core nanobind
stamp "building and installing the wheel (pip install --no-build-isolation .)"
"$vpy" -m pip install -q --no-build-isolation .
stamp "installed"
# With numpy alone (before any test dependency is added).
(cd "$venv" && ./bin/python -c "import attn; print('attn', attn.__version__, 'imports with numpy alone')")

if [[ $deps != system ]]; then
  want="pytest torch transformers sentence-transformers"
  if [[ ! -f $deps/.complete ]] || [[ $(cat "$deps/.complete") != "$want" ]]; then
    stamp "installing the test dependencies once into $deps"
    rm -rf "$deps"
    mkdir -p "$deps"
    "$py" -m venv "$deps/venv"
    "$deps/venv/bin/python" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
    "$deps/venv/bin/python" -m pip install -q pytest transformers sentence-transformers
    echo "$want" >"$deps/.complete"
    stamp "test dependencies installed"
  fi
  site=$("$deps/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  vsite=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" >"$vsite/attn-test-deps.pth"
fi

stamp "running pytest"
set +e
# From outside the source tree, so `import attn` is the installed wheel.
(cd python/tests && ATTN_REPO="$OLDPWD" ../../"$vpy" -m pytest -q -p no:cacheprovider "$@" .)
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "test-python: FAIL: pytest collected no tests" >&2
  exit 1
fi
if [[ $rc -ne 0 ]]; then
  echo "test-python: FAIL: pytest exited with status $rc" >&2
  exit "$rc"
fi
stamp "done"
