#!/usr/bin/env bash
# Fails if an object compiled for one instruction set (*_avx512.cc.o, *_avx2.cc.o)
# defines a weak (COMDAT) or unique symbol in an executable section. Such a symbol
# (an inline function or template instantiated there) may be picked by the linker
# for generic code too, and then crash with an illegal instruction on a CPU without
# that ISA. Keep ISA-specific code in anonymous namespaces and call only
# always-inlined helpers there.
#
# Weak DATA is not code and runs on any CPU, so it is not flagged: the compiler's
# DW.ref.__gxx_personality_v0 (a pointer to libstdc++'s exception personality
# routine, emitted wherever an object has unwind tables that need it, for example
# under -fsanitize or with try/catch), DW.ref.<typeinfo>, guard variables and
# typeinfo objects. What decides is the section the symbol is defined in: one with
# the executable flag (SHF_EXECINSTR, "X" in readelf -S) holds code.
#
# Usage: check-isa-objects.sh OBJECT...   object files, or CMake lists of them joined
#                                         by ';' (one $<TARGET_OBJECTS:...> per library);
#                                         fails too when no ISA object was given.
#        check-isa-objects.sh --self-test CXX
#                                         compiles two made-up ISA objects with CXX (one
#                                         with a weak inline function: must fail; one with
#                                         only the personality reference: must pass).
set -euo pipefail

# weak_code OBJECT: prints the weak or unique symbols defined in executable sections.
weak_code() {
  local obj=$1
  # Section index -> executable? ("[Nr] Name Type Address Off Size ES Flg Lk Inf Al";
  # Flg is empty for some sections, so it is the 8th field only when there are 11.)
  local exec_sections
  exec_sections=$(LC_ALL=C readelf -SW "$obj" | sed -nE 's/^ *\[ *([0-9]+)\] +/\1 /p' |
                  awk 'NF == 11 && $8 ~ /X/ { print $1 }' | tr '\n' ' ')
  # "Num: Value Size Type Bind Vis Ndx Name"
  LC_ALL=C readelf -sW "$obj" |
    awk -v ex=" $exec_sections " '
      $5 == "WEAK" || $5 == "UNIQUE" {
        if ($7 == "UND") next
        if ($4 == "FUNC" || $4 == "IFUNC" || index(ex, " " $7 " ") > 0) print $4, $5, $8
      }' | { if command -v c++filt > /dev/null; then c++filt; else cat; fi; }
}

check() {
  local status=0 checked=0 objs=() arg obj part
  for arg in "$@"; do
    IFS=';' read -r -a part <<< "$arg"
    objs+=("${part[@]}")
  done
  for obj in "${objs[@]}"; do
    obj=${obj# }
    case "$obj" in *_avx512.cc.o|*_avx2.cc.o) ;; *) continue ;; esac
    local weak
    weak=$(weak_code "$obj")
    if [[ -n $weak ]]; then
      echo "FAIL: $obj defines weak symbols in code sections:"
      echo "$weak" | head -20
      status=1
    else
      echo "ok: $(basename "$obj")"
    fi
    checked=$((checked + 1))
  done
  echo "checked $checked ISA-specific objects"
  if ((checked == 0)); then
    echo "FAIL: no *_avx512.cc.o or *_avx2.cc.o among the objects given"
    return 1
  fi
  return $status
}

self_test() {
  local cxx=$1 tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  # (a) A weak inline function (and a template instance) compiled for AVX-512: must be flagged.
  cat > "$tmp/inline_avx512.cc" <<'SRC'
#include <vector>
__attribute__((noinline)) inline int twice(int x) { return 2 * x; }
int use_inline(std::vector<int>& v) { v.push_back(twice(static_cast<int>(v.size()))); return v[0]; }
SRC
  # (b) Only exception handling in an anonymous namespace: the compiler emits the weak data
  # DW.ref.__gxx_personality_v0 (and DW.ref of the caught type's typeinfo). Must pass.
  cat > "$tmp/personality_avx512.cc" <<'SRC'
#include <stdexcept>
namespace {
int checked(int x) { if (x < 0) throw std::runtime_error("negative"); return 2 * x; }
}  // namespace
int use_personality(int x) { try { return checked(x); } catch (const std::exception&) { return -1; } }
SRC
  local f
  for f in inline personality; do
    "$cxx" -O2 -fPIC -mavx512f -c "$tmp/${f}_avx512.cc" -o "$tmp/${f}_avx512.cc.o"
  done
  if ! readelf -sW "$tmp/personality_avx512.cc.o" | grep -q 'DW.ref.__gxx_personality_v0'; then
    echo "self-test FAIL: the compiler emitted no DW.ref.__gxx_personality_v0; the case tests nothing"
    return 1
  fi
  local out status=0
  out=$(check "$tmp/personality_avx512.cc.o") || status=$?
  if ((status != 0)); then
    echo "self-test FAIL: the personality reference was flagged:"; echo "$out"; return 1
  fi
  status=0
  out=$(check "$tmp/inline_avx512.cc.o") || status=$?
  if ((status == 0)) || ! grep -qF "twice(int)" <<< "$out"; then
    echo "self-test FAIL: the weak inline function twice(int) was not flagged:"; echo "$out"; return 1
  fi
  echo "self-test ok"
}

if [[ ${1:-} == --self-test ]]; then
  self_test "${2:?usage: check-isa-objects.sh --self-test CXX}"
else
  check "$@"
fi
