#!/usr/bin/env bash
# Fails if an object compiled for one instruction set (*_avx512.cc.o, *_avx2.cc.o)
# defines a weak (COMDAT) symbol. Such a symbol (an inline function or template
# instantiated there) may be picked by the linker for generic code too, and then
# crash with an illegal instruction on a CPU without that ISA. Keep ISA-specific
# code in anonymous namespaces and call only always-inlined helpers there.
#
# Arguments: object files, or CMake lists of them joined by ';' (one
# $<TARGET_OBJECTS:...> per library). Fails too when no ISA object was given.
set -euo pipefail
status=0
checked=0
objs=()
for arg in "$@"; do
  IFS=';' read -r -a part <<< "$arg"
  objs+=("${part[@]}")
done
for obj in "${objs[@]}"; do
  obj=${obj# }
  case "$obj" in *_avx512.cc.o|*_avx2.cc.o) ;; *) continue ;; esac
  weak=$(nm -C "$obj" | awk '$2 ~ /^[WVu]$/' || true)
  if [[ -n $weak ]]; then
    echo "FAIL: $obj defines weak symbols:"
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
  exit 1
fi
exit $status
