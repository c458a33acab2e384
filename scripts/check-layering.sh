#!/usr/bin/env bash
# Checks the #include lines of the library and the tools against the ladder of
# floors (docs/architecture.md), lowest first:
#
#   0 core   1 io, text, data   2 kernels   3 ops   4 nn   5 train   6 models
#   7 viz    8 tasks            9 teach     10 serve    11 tools (tools/**)
#
# Rules (each violation is printed as file:line, the rule and the line):
#   (a) models, nn, train, viz, tasks, teach and tools include no kernels header
#       ("kernels/...": the kernels are reached through ops only);
#   (b) core includes only core (<attn/core/...>, <attn/version.h>, "core/...",
#       its own folder) and system or standard headers;
#   (c) no floor includes a floor above it.
# Scanned: src/<floor>/**, include/attn/<floor>/**, tools/**. tests/, bench/
# and fuzz/ are exempt. An include names a floor as <attn/FLOOR/...> (public
# headers) or "FLOOR/..." (private headers under src/); anything else (the same
# folder, system and standard headers) is not a floor.
#
# Usage: scripts/check-layering.sh [REPO_ROOT]     (default: this repository)
#        scripts/check-layering.sh --self-test     (checks the checker on a made-up tree)
set -euo pipefail

declare -A RANK=([core]=0 [io]=1 [text]=1 [data]=1 [kernels]=2 [ops]=3 [nn]=4 [train]=5 [models]=6
                [viz]=7 [tasks]=8 [teach]=9 [serve]=10 [tools]=11)
INCLUDE_RE='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]*)[>"]'

# check ROOT: prints the violations, returns 1 when there is one.
check() {
  local root=$1
  cd "$root"
  local files=()
  local dir
  for dir in src include/attn tools; do
    [[ -d $dir ]] || continue
    while IFS= read -r -d '' f; do files+=("$f"); done \
      < <(find "$dir" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.cpp' -o -name '*.inc' \) -print0 | sort -z)
  done
  local violations=0 includes=0
  local f floor from_rank
  for f in "${files[@]}"; do
    case $f in
      src/*/*) floor=${f#src/}; floor=${floor%%/*} ;;
      include/attn/*/*) floor=${f#include/attn/}; floor=${floor%%/*} ;;
      include/attn/*) floor=core ;;  # top-level public headers (attn/version.h is generated)
      tools/*) floor=tools ;;
      *) continue ;;
    esac
    from_rank=${RANK[$floor]:-}
    if [[ -z $from_rank ]]; then
      echo "$f: unknown floor '$floor' (add it to the ladder in scripts/check-layering.sh and CMakeLists.txt)"
      violations=$((violations + 1))
      continue
    fi
    local line num text target to_rank rule
    while IFS= read -r line; do
      num=${line%%:*}
      text=${line#*:}
      includes=$((includes + 1))
      # The included path, without the delimiters.
      [[ $text =~ $INCLUDE_RE ]] || continue
      target=${BASH_REMATCH[1]}
      case $target in
        attn/version.h) target=core ;;
        attn/*/*) target=${target#attn/}; target=${target%%/*} ;;
        */*) target=${target%%/*} ;;
        *) continue ;;
      esac
      to_rank=${RANK[$target]:-}
      [[ -n $to_rank ]] || continue  # not a floor: a system header or a subfolder of the same floor
      rule=""
      if [[ $target == kernels ]] && [[ $floor =~ ^(models|nn|train|viz|tasks|teach|tools)$ ]]; then
        rule="(a) $floor must not include a kernels header (reach the kernels through ops)"
      elif [[ $floor == core && $target != core ]]; then
        rule="(b) core includes only core and system headers, not $target"
      elif ((to_rank > from_rank)); then
        rule="(c) $floor (floor $from_rank) must not include $target (floor $to_rank, above it)"
      fi
      if [[ -n $rule ]]; then
        echo "$f:$num: $rule: ${text#"${text%%[![:space:]]*}"}"
        violations=$((violations + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$f" || true)
  done
  if ((violations > 0)); then
    echo "layering: $violations violation(s) in ${#files[@]} files (docs/architecture.md: what may include what)"
    return 1
  fi
  echo "layering ok: ${#files[@]} files, $includes includes"
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp"/src/{core,models,io,ops,kernels/cpu} "$tmp"/include/attn/nn "$tmp"/tools/cli
  printf '#include <attn/core/tensor.h>\n#include <attn/version.h>\n#include <vector>\n#include "core/allocator.h"\n' \
    > "$tmp/src/core/ok.cc"
  printf '#include <attn/ops/attention.h>\n#include "kernels/cpu/gemm.h"\n#include "cpu/isa.h"\n' > "$tmp/src/ops/ok.cc"
  printf '#include "gemm.h"\n#include <attn/io/safetensors.h>\n' > "$tmp/src/kernels/cpu/ok.cc"
  printf '#include <attn/models/bert.h>\n#include "args.h"\n' > "$tmp/tools/cli/ok.cc"
  local out status=0
  out=$(check "$tmp") || status=$?
  if ((status != 0)); then
    echo "self-test FAIL: a clean tree was rejected:"; echo "$out"; return 1
  fi
  printf '#include <cstdint>\n#include <attn/io/json.h>\n' > "$tmp/src/core/bad.cc"               # (b)
  printf '#include "kernels/cpu/gemm.h"\n' > "$tmp/src/models/bad.cc"                          # (a)
  printf '#pragma once\n#  include <attn/train/optim.h>\n' > "$tmp/include/attn/nn/bad.h"       # (c)
  printf '#include <attn/ops/attention.h>\n' > "$tmp/src/io/bad.cc"                             # (c)
  printf '#include "kernels/f16.h"\n' > "$tmp/tools/cli/bad.cc"                                 # (a)
  status=0
  out=$(check "$tmp") || status=$?
  local expect
  for expect in "src/core/bad.cc:2: (b)" "src/models/bad.cc:1: (a)" "include/attn/nn/bad.h:2: (c)" \
                "src/io/bad.cc:1: (c)" "tools/cli/bad.cc:1: (a)" "5 violation(s)"; do
    if ! grep -qF "$expect" <<< "$out"; then
      echo "self-test FAIL: expected '$expect' in:"; echo "$out"; return 1
    fi
  done
  if ((status == 0)); then
    echo "self-test FAIL: violations found but exit status 0"; return 1
  fi
  echo "self-test ok: a clean tree passes, 5 planted violations are named"
}

if [[ ${1:-} == --self-test ]]; then
  self_test
else
  check "${1:-$(cd "$(dirname "$0")/.." && pwd)}"
fi
