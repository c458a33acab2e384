#!/usr/bin/env bash
# The Python package (docs/python.md), as a user gets it: builds the wheel from
# the repository, installs it into a fresh virtual environment, checks that
# `import attn` works with numpy alone, then runs the pytest suite
# (python/tests) with the test dependencies (pytest, torch, transformers,
# sentence-transformers). Arguments go to pytest.
#
# Where the test dependencies come from (torch from PyPI is ~5 GB installed, so
# it is never installed per run):
#   ATTN_PY_DEPS unset   the system's python3 when it has all of them (a second
#                        fresh venv with --system-site-packages), else "cache"
#   ATTN_PY_DEPS=system  that, and an error when one is missing
#   ATTN_PY_DEPS=cache   installed once into ~/.cache/attn/py-test-deps/<python>
#                        (ATTN_PY_DEPS_DIR overrides), which the fresh venv reads
#                        through a .pth file; torch from ATTN_TORCH_INDEX_URL
#                        (default PyTorch's CPU-only index, ~200 MB) or PyPI when
#                        that index cannot be reached
#
# --slow (passed on to pytest) also runs the tests marked slow (docs/testing.md): Ray clusters, Ray
# Serve and torch.distributed. Their extra dependencies (ray[data,serve], openai) are installed once
# into ~/.cache/attn/py-ray-deps/<python> (ATTN_PY_RAY_DEPS_DIR overrides) and read the same way.
#
# The wheel's build folder (build/py-<tag>) is kept between runs and ccache
# is used when installed, so a second run recompiles only what changed.
# pytest's exit code 5 (no tests collected) is an error like any other failure.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
py=${PYTHON:-python3}
venv=build/python-venv            # numpy + the wheel only
tvenv=build/python-venv-test      # with the system's packages (system mode)
dist=build/python-dist
pyver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
mode=${ATTN_PY_DEPS:-auto}
deps=${ATTN_PY_DEPS_DIR:-$HOME/.cache/attn/py-test-deps/$pyver}
want="pytest torch transformers sentence_transformers"
# Whether python3 has every test dependency (found, not imported: importing torch takes seconds).
have_deps() {
  "$py" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in '$want'.split()))"
}
stamp() { echo "== test-python: $* ($(($(date +%s) - t0)) s)"; }
fail() { echo "test-python: FAIL: $*" >&2; exit 1; }

if [[ $mode == auto ]]; then
  mode=cache
  if have_deps; then mode=system; fi
fi
[[ $mode == system || $mode == cache ]] || fail "ATTN_PY_DEPS must be system or cache; got '$mode'"

if command -v ccache >/dev/null && [[ ${ATTN_NO_CCACHE:-0} != 1 ]]; then
  # The same compiler and base folder as scripts/build.sh: the library's objects of build/release are
  # hits here (build/py-<tag> is at the same depth), only the nanobind module is compiled anew.
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
  export CXX=${CXX:-c++} CC=${CC:-cc}
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

stamp "a fresh virtual environment in $venv"
rm -rf "$venv" "$tvenv" "$dist"
"$py" -m venv "$venv"
vpy=$venv/bin/python
# The build requirements go into the environment itself (--no-build-isolation), so
# nanobind's sources sit at the same path every run and ccache hits for them too.
"$vpy" -m pip install -q scikit-build-core nanobind
stamp "building the wheel (pip wheel --no-build-isolation .)"
"$vpy" -m pip wheel -q --no-build-isolation --no-deps -w "$dist" .
wheel=$(ls "$dist"/attn-*.whl)
stamp "installing $wheel"
"$vpy" -m pip install -q "$wheel"
(cd "$venv" && ./bin/python -c "import attn; print('attn', attn.__version__, 'imports with numpy alone')")

if [[ $mode == system ]]; then
  have_deps || fail "ATTN_PY_DEPS=system: the system's $py lacks one of: $want"
  stamp "test dependencies: the system's (a venv with --system-site-packages in $tvenv)"
  "$py" -m venv --system-site-packages "$tvenv"
  "$tvenv/bin/python" -m pip install -q --no-deps "$wheel"
  vpy=$tvenv/bin/python
else
  if [[ ! -f $deps/.complete ]] || [[ $(cat "$deps/.complete") != "$want" ]]; then
    stamp "installing the test dependencies once into $deps"
    rm -rf "$deps"
    mkdir -p "$deps"
    "$py" -m venv "$deps/venv"
    index=${ATTN_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
    if ! "$deps/venv/bin/python" -m pip install -q --retries 1 --timeout 30 torch --index-url "$index"; then
      echo "test-python: $index cannot be reached; torch from PyPI"
      "$deps/venv/bin/python" -m pip install -q torch
    fi
    stamp "torch installed"
    "$deps/venv/bin/python" -m pip install -q pytest transformers sentence-transformers
    echo "$want" >"$deps/.complete"
    stamp "test dependencies installed"
  fi
  site=$("$deps/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  vsite=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" >"$vsite/attn-test-deps.pth"
fi

slow=0
for a in "$@"; do [[ $a == --slow ]] && slow=1; done
if [[ $slow == 1 ]]; then
  rdeps=${ATTN_PY_RAY_DEPS_DIR:-$HOME/.cache/attn/py-ray-deps/$pyver}
  rwant="ray[data,serve]>=2.60 openai"
  if [[ ! -f $rdeps/.complete ]] || [[ $(cat "$rdeps/.complete") != "$rwant" ]]; then
    stamp "installing the slow tests' dependencies ($rwant) once into $rdeps"
    rm -rf "$rdeps"
    mkdir -p "$rdeps"
    "$py" -m venv "$rdeps/venv"
    # shellcheck disable=SC2086
    "$rdeps/venv/bin/python" -m pip install -q $rwant
    echo "$rwant" >"$rdeps/.complete"
  fi
  rsite=$("$rdeps/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  vsite=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$rsite" >"$vsite/attn-ray-deps.pth"
fi

stamp "running pytest"
set +e
# From outside the source tree, so `import attn` is the installed wheel.
(cd python/tests && ATTN_REPO="$OLDPWD" "$OLDPWD/$vpy" -m pytest -q -p no:cacheprovider "$@" .)
rc=$?
set -e
[[ $rc -ne 5 ]] || fail "pytest collected no tests"
[[ $rc -eq 0 ]] || fail "pytest exited with status $rc"
stamp "done"
