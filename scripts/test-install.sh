#!/usr/bin/env bash
# Checks attn as a package, the way another project uses it. Installs the built
# tree (build/<preset>, default release; built first if needed) into a fresh
# prefix (build/<preset>/test-install/prefix, removed afterwards), then:
#   1. the installed files are there and bin/attn --version prints the version;
#   2. examples/consumer (find_package(attn 0.2) + attn::attn) builds against
#      the prefix and runs; find_package(attn 0.1), (attn 0.3) and (attn 1.0) are refused;
#   3. examples/pkgconfig/check.cc builds with `pkg-config --cflags --libs attn` and runs;
#   4. every installed header compiles on its own;
#   5. subproject mode: a throwaway project doing add_subdirectory(<this repo>)
#      builds and runs the consumer with attn::attn, and defines no test or
#      benchmark target.
# Any failure stops the script with a message. ATTN_KEEP_TMP=1 keeps the folder.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
preset=${ATTN_TEST_PRESET:-release}
build=$repo/build/$preset
jobs=$(nproc)

fail() { echo "test-install: FAIL: $*" >&2; exit 1; }
step() { echo; echo "== test-install: $*"; }

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake --preset "$preset" >/dev/null
fi
step "building the library and the CLI in $build"
cmake --build "$build" -j "$jobs" --target attn_cli

# A fresh folder inside the build tree (a fixed path, so that ccache, when used,
# can reuse the subproject's objects from one run to the next).
tmp=$build/test-install
rm -rf "$tmp"
mkdir -p "$tmp"
if [[ ${ATTN_KEEP_TMP:-0} == 1 ]]; then
  trap 'echo "test-install: kept $tmp"' EXIT
else
  trap 'rm -rf "$tmp"' EXIT
fi
prefix=$tmp/prefix
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

# ---- 1. install ----------------------------------------------------------------
step "cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
version_h=$prefix/include/attn/version.h
[[ -f $version_h ]] || fail "no include/attn/version.h installed"
version=$(sed -nE 's/^#define ATTN_VERSION_STRING "([^"]+)"/\1/p' "$version_h")
[[ -n $version ]] || fail "no ATTN_VERSION_STRING in $version_h"
for f in bin/attn include/attn/core/tensor.h include/attn/ops/attention.h; do
  [[ -f $prefix/$f ]] || fail "not installed: $f"
done
cmakedir=$(dirname "$(find "$prefix" -name attnConfig.cmake -print -quit)")
[[ -d $cmakedir ]] || fail "no attnConfig.cmake installed"
for f in attnConfig.cmake attnConfigVersion.cmake attnTargets.cmake FindAttnOpenBLAS.cmake; do
  [[ -f $cmakedir/$f ]] || fail "not installed: $cmakedir/$f"
done
pc=$(find "$prefix" -name attn.pc -print -quit)
[[ -n $pc ]] || fail "no attn.pc installed"
libdir=$(dirname "$(find "$prefix" -name libattn_core.a -print -quit)")
[[ -f $libdir/libattn_core.a ]] || fail "no libattn_core.a installed"
for f in "$libdir"/libattn_*.a; do echo "  $(basename "$f")"; done
if find "$prefix" -path '*/src/*' -o -name '*_cpu.h' | grep -q .; then fail "private headers were installed"; fi
got=$("$prefix/bin/attn" --version)
[[ $got == "attn $version" ]] || fail "bin/attn --version printed '$got', expected 'attn $version'"
echo "  bin/attn --version: $got"

# ---- 2. find_package consumer -------------------------------------------------------
step "examples/consumer with find_package(attn 0.2) against the prefix"
cmake -S "$repo/examples/consumer" -B "$tmp/consumer" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$tmp/consumer.log" 2>&1 \
  || { cat "$tmp/consumer.log"; fail "configuring examples/consumer"; }
found_dir=$(sed -nE 's/^attn_DIR:PATH=(.*)/\1/p' "$tmp/consumer/CMakeCache.txt")
[[ $found_dir == "$prefix"/* ]] || fail "find_package(attn) used $found_dir, not the fresh prefix"
cmake --build "$tmp/consumer" -j "$jobs" || fail "building examples/consumer"
out=$("$tmp/consumer/app") || { echo "$out"; fail "examples/consumer exited non-zero"; }
echo "$out" | sed 's/^/  /'
grep -q "^attn $version\$" <<< "$out" || fail "the consumer did not print attn::version()"
grep -q "out \[1, 2, 6, 8\], weights \[1, 2, 6, 6\], head 1 row 5 sums to 1.000000, row 0 attends only to key 0: 1.000000" \
  <<< "$out" || fail "unexpected attention output from the consumer"
grep -qE '^cosine\(.*\) = |is not installed' <<< "$out" || fail "no encoder line from the consumer"

for wanted in 0.1 0.3 1.0; do
  mkdir -p "$tmp/version-$wanted"
  cat > "$tmp/version-$wanted/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(attn_version_check LANGUAGES CXX)
find_package(attn $wanted REQUIRED)
CMAKE
  if cmake -S "$tmp/version-$wanted" -B "$tmp/version-$wanted/build" -DCMAKE_PREFIX_PATH="$prefix" \
       >"$tmp/version-$wanted.log" 2>&1; then
    fail "find_package(attn $wanted) accepted version $version (expected SameMinorVersion to refuse it)"
  fi
  grep -q "requested version \"$wanted\"" "$tmp/version-$wanted.log" \
    || { cat "$tmp/version-$wanted.log"; fail "find_package(attn $wanted) failed for another reason"; }
  echo "  find_package(attn $wanted) refused, as expected"
done

# ---- 2b. attn::mpi (data-parallel training), when attn was built with MPI ------------------
if [[ -f $libdir/libattn_mpi.a ]]; then
  step "find_package(attn) + attn::mpi: a one-process MPI communicator"
  mkdir -p "$tmp/mpi-consumer"
  cat > "$tmp/mpi-consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(attn_mpi_check LANGUAGES CXX)
find_package(attn 0.2 REQUIRED)
add_executable(app main.cc)
target_link_libraries(app PRIVATE attn::mpi)
CMAKE
  cat > "$tmp/mpi-consumer/main.cc" <<'CC'
#include <attn/train/mpi.h>
#include <cstdio>
int main(int argc, char** argv) {
  auto comm = attn::train::mpi_communicator(&argc, &argv);
  double x = 2.5;
  comm->allreduce_sum(&x, 1);
  std::printf("mpi rank %d of %d, sum %.1f\n", comm->rank(), comm->size(), x);
  return 0;
}
CC
  cmake -S "$tmp/mpi-consumer" -B "$tmp/mpi-consumer/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$tmp/mpi-consumer.log" 2>&1 \
    || { cat "$tmp/mpi-consumer.log"; fail "configuring the attn::mpi consumer"; }
  cmake --build "$tmp/mpi-consumer/build" -j "$jobs" || fail "building the attn::mpi consumer"
  out=$("$tmp/mpi-consumer/build/app") || { echo "$out"; fail "the attn::mpi consumer exited non-zero"; }
  grep -q "^mpi rank 0 of 1, sum 2.5$" <<< "$out" || { echo "$out"; fail "unexpected attn::mpi consumer output"; }
  echo "  $out"
fi

# ---- 3. pkg-config ----------------------------------------------------------------
step "examples/pkgconfig/check.cc with pkg-config --cflags --libs attn"
command -v pkg-config >/dev/null || fail "pkg-config is not installed (Debian: apt-get install pkg-config)"
pc_flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs attn) || fail "pkg-config attn"
[[ $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --modversion attn) == "$version" ]] || fail "attn.pc version"
echo "  pkg-config: $pc_flags"
# shellcheck disable=SC2086  # the flags are words
"${CXX:-c++}" -std=c++20 -O1 "$repo/examples/pkgconfig/check.cc" -o "$tmp/pkgconfig-check" $pc_flags \
  || fail "compiling examples/pkgconfig/check.cc with the pkg-config flags"
"$tmp/pkgconfig-check" | sed 's/^/  /'
[[ ${PIPESTATUS[0]} == 0 ]] || fail "examples/pkgconfig/check.cc exited non-zero"

# ---- 4. every installed header on its own -------------------------------------------
step "each installed header compiles alone"
(cd "$prefix/include" && find attn -name '*.h' | sort) > "$tmp/headers.txt"
export prefix
xargs -P "$jobs" -I{} sh -c \
  'echo "#include <{}>" | "${CXX:-c++}" -std=c++20 -fsyntax-only -I"$prefix/include" -x c++ - || { echo "header does not compile alone: {}"; exit 255; }' \
  < "$tmp/headers.txt" || fail "an installed header does not compile on its own"
echo "  $(wc -l < "$tmp/headers.txt") headers ok"

# ---- 5. subproject mode ---------------------------------------------------------------
step "subproject: add_subdirectory($repo) in a throwaway project"
mkdir -p "$tmp/sub"
cat > "$tmp/sub/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(attn_subproject_check LANGUAGES CXX)
add_subdirectory("$repo" attn)
add_executable(app "$repo/examples/consumer/main.cc")
target_link_libraries(app PRIVATE attn::attn)
if(ATTN_BUILD_TESTS OR ATTN_BUILD_BENCH)
  message(FATAL_ERROR "attn as a subproject: ATTN_BUILD_TESTS=\${ATTN_BUILD_TESTS} ATTN_BUILD_BENCH=\${ATTN_BUILD_BENCH}, expected OFF")
endif()
# Every target defined anywhere below attn: none may be a test or a benchmark.
function(collect dir)
  get_property(targets DIRECTORY "\${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t \${targets})
    if(t MATCHES "^test_|^attn_testing\$|_bench\$|^gemm_bench")
      message(FATAL_ERROR "attn as a subproject defines the test/benchmark target \${t}")
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "\${dir}" PROPERTY SUBDIRECTORIES)
  foreach(d \${subdirs})
    collect("\${d}")
  endforeach()
endfunction()
collect("$repo")
message(STATUS "attn subproject: no test or benchmark targets")
CMAKE
cmake -S "$tmp/sub" -B "$tmp/sub/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$tmp/sub.log" 2>&1 \
  || { cat "$tmp/sub.log"; fail "configuring the subproject check"; }
grep -q "no test or benchmark targets" "$tmp/sub.log" || { cat "$tmp/sub.log"; fail "the subproject check did not run"; }
if [[ -n ${gen[*]} ]] && ninja -C "$tmp/sub/build" -t targets all | grep -qE '(^|/)test_[a-z_]+:'; then
  fail "the subproject build has test_* targets"
fi
cmake --build "$tmp/sub/build" -j "$jobs" --target app || fail "building the subproject check"
out=$("$tmp/sub/build/app") || { echo "$out"; fail "the subproject app exited non-zero"; }
grep -q "^attn $version\$" <<< "$out" || fail "the subproject app did not print the version"
echo "  subproject app ran: $(head -2 <<< "$out" | tail -1)"

echo
echo "test-install: ok (attn $version: install, find_package, pkg-config, headers, subproject)"
