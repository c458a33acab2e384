#!/usr/bin/env bash
# Data-parallel scaling of `attn train translate` (the paper's EncoderDecoder, preset tiny, batch 64,
# Tatoeba en->zh; docs/benchmarks.md "Data-parallel training"): tokens per second (source + target,
# the whole global batch) over the same number of updates at
#   1 rank x 1 thread, 2 ranks x 1 thread (mpirun), 1 rank x 2 threads,
# the best of REPEATS runs each, and the gradient all-reduce's time and bytes per update.
#
#   [MPI_FLAGS=...] bench/mpi_train_scaling.sh [STEPS (30)] [REPEATS (3)] [ATTN binary (build/release/attn)]
#
# Needs the Tatoeba pairs (ATTN_DATA_DIR or ../shared/data) and an attn built with MPI.
# tok/s is read from the last progress line (tokens of every update so far / seconds since the
# first), so the data preparation, the validation pass and BLEU are not in it.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
repeats=${2:-3}
attn=${3:-build/release/attn}
[[ -x $attn ]] || { echo "no $attn: build it first (cmake --build --preset release --target attn_cli)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
export ATTN_DATA_DIR=${ATTN_DATA_DIR:-$(cd .. && pwd)/shared/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# MPI_FLAGS: more mpirun flags, e.g. "--mca mpi_yield_when_idle 1" (a rank waiting in the
# all-reduce yields its core instead of spinning: helps on a loaded machine).
read -r -a extra <<<"${MPI_FLAGS:-}"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none "${extra[@]}" -x ATTN_DATA_DIR -x ATTN_NUM_THREADS)

# run RANKS THREADS -> "tok/s allreduce_ms allreduce_MB" of the last progress line
run() {
  local ranks=$1 threads=$2 log=$tmp/run.log
  export ATTN_NUM_THREADS=$threads
  "${mpi[@]}" -np "$ranks" "$attn" train translate --steps "$steps" --eval-pairs 1 --out "$tmp/out" >"$log" 2>&1 \
    || { cat "$log" >&2; echo "run failed" >&2; exit 1; }
  local line
  line=$(grep "^step $steps " "$log" | tail -1)
  local tps ms mb
  tps=$(sed -nE 's/.* ([0-9]+) tok\/s.*/\1/p' <<<"$line")
  ms=$(sed -nE 's/.*all-reduce ([0-9.]+) ms\/step.*/\1/p' <<<"$line")
  mb=$(sed -nE 's/.*ms\/step \(([0-9.]+) MB\).*/\1/p' <<<"$line")
  wait=$(sed -nE 's/.*wait ([0-9.]+) ms\/step.*/\1/p' <<<"$line")
  echo "$tps ${ms:--} ${mb:--} ${wait:--}"
}

echo "CPU: $(lscpu | sed -nE 's/^Model name: *//p'), $(nproc) cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "attn train translate --steps $steps (preset tiny, batch 64), best of $repeats; mpirun flags: ${MPI_FLAGS:-none}"
declare -A best best_ms best_mb best_wait
for cfg in "1 1" "2 1" "1 2"; do
  read -r r t <<<"$cfg"
  best[$cfg]=0
  for ((i = 0; i < repeats; i++)); do
    read -r tps ms mb wait < <(run "$r" "$t")
    echo "  ${r} rank(s) x ${t} thread(s): run $((i + 1)): $tps tok/s, all-reduce $ms ms/step, $mb MB/step, wait $wait ms/step"
    if ((tps > best[$cfg])); then best[$cfg]=$tps best_ms[$cfg]=$ms best_mb[$cfg]=$mb best_wait[$cfg]=$wait; fi
  done
done
echo
echo "| configuration | tokens/s (best of $repeats) | vs 1 x 1 | all-reduce ms/step | all-reduce MB/step | wait ms/step |"
echo "|---|---:|---:|---:|---:|---:|"
for cfg in "1 1" "2 1" "1 2"; do
  read -r r t <<<"$cfg"
  ratio=$(awk -v a="${best[$cfg]}" -v b="${best["1 1"]}" 'BEGIN { printf "%.2fx", a / b }')
  echo "| $r rank x $t thread | ${best[$cfg]} | $ratio | ${best_ms[$cfg]} | ${best_mb[$cfg]} | ${best_wait[$cfg]} |"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
