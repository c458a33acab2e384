#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (docs/fuzzing.md), each for SECONDS
# (default 60), one after the other, with its seed corpus.
#
#   scripts/fuzz.sh                 # every target, 60 s each
#   scripts/fuzz.sh 300 gguf json   # fuzz_gguf and fuzz_json, 5 minutes each
#   FUZZ_JOBS=2 scripts/fuzz.sh     # 2 parallel workers per target (-fork=2)
#
# Builds the "fuzz" preset first (clang). Growing corpora are kept in
# build/fuzz/corpus/<target>/ (reused by the next run); crashes, leaks, OOMs
# and timeouts are written to build/fuzz/artifacts/<target>/ and the script
# exits non-zero. A summary line per target (executions, exec/s, coverage)
# goes to build/fuzz/summary.txt. Reproduce one input with
#   build/fuzz/fuzz/fuzz_<target> FILE
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=${1:-60}
shift || true
all=(safetensors gguf gguf_tokenizer json utf8 wordpiece bpe_bytes view_export text_files e5_container http chat_template)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all[@]}")

if [[ -z ${FUZZ_NO_BUILD:-} ]]; then
  [[ -f build/fuzz/build.ninja ]] || cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz
fi

# Seed inputs per target: fuzz/seeds/<target>/ plus the committed test files.
seeds_for() {
  case $1 in
    safetensors) echo tests/io/data/*.safetensors tests/io/data/bad/*.safetensors ;;
    gguf) echo tests/io/data/*.gguf tests/io/data/bad/*.gguf ;;
    gguf_tokenizer) echo tests/io/data/gguf_tokenizer_tiny.gguf tests/io/data/bad/*tokenizer*.gguf ;;
    view_export) echo fuzz/seeds/view_export/* tests/io/data/bad/*.export.json ;;
    e5_container) echo tests/io/data/e5_tiny.bin tests/io/data/bad/e5_*.bin ;;
    bpe_json) echo fuzz/seeds/bpe_json/* tests/text/data/bad/tokjson_*.json tests/text/data/decoder_tok/*/tokenizer.json ;;
    chat_template) echo tests/text/data/chat_templates/*.jinja ;;
    *) echo fuzz/seeds/"$1"/* ;;
  esac
}
max_len_for() {
  case $1 in
    safetensors | gguf | gguf_tokenizer) echo 8192 ;;
    e5_container) echo 16384 ;;
    chat_template) echo 8192 ;;
    *) echo 4096 ;;
  esac
}
dict_for() {
  case $1 in
    safetensors | json | gguf | view_export | http) echo "-dict=fuzz/dicts/$1.dict" ;;
    gguf_tokenizer) echo "-dict=fuzz/dicts/gguf.dict" ;;
    chat_template) echo "-dict=fuzz/dicts/jinja.dict" ;;
  esac
}

status=0
summary=build/fuzz/summary.txt
: >"$summary"
for t in "${targets[@]}"; do
  bin=build/fuzz/fuzz/fuzz_$t
  [[ -x $bin ]] || { echo "fuzz.sh: no target '$t' ($bin); targets: ${all[*]}" >&2; exit 2; }
  corpus=build/fuzz/corpus/$t
  artifacts=build/fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  # shellcheck disable=SC2046
  for f in $(seeds_for "$t"); do [[ -f $f ]] && cp -n "$f" "$corpus/" 2>/dev/null || true; done
  log=build/fuzz/$t.log
  echo "== fuzz_$t: ${seconds}s, corpus $corpus ($(ls "$corpus" | wc -l) files)"
  fork=()
  [[ -n ${FUZZ_JOBS:-} ]] && fork=(-fork="$FUZZ_JOBS" -ignore_crashes=0)
  set +e
  # shellcheck disable=SC2046
  "$bin" "$corpus" -max_total_time="$seconds" -max_len="$(max_len_for "$t")" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$artifacts/" $(dict_for "$t") "${fork[@]}" \
    >"$log" 2>&1
  rc=$?
  set -e
  # The final stats (absent in fork mode, -fork=N, which prints only progress lines "#N ... exec/s: R"):
  # a grep that finds nothing must not end the script (set -e -o pipefail).
  last() { { grep -oE "$1" "$log" || true; } | tail -1 | awk '{print $NF}'; }
  runs=$(last '^stat::number_of_executed_units: *[0-9]+')
  rate=$(last '^stat::average_exec_per_sec: *[0-9]+')
  [[ -z $runs ]] && runs=$(last '^#[0-9]+' | tr -d '#')
  [[ -z $rate ]] && rate=$(last 'exec/s: [0-9]+')
  cov=$(last 'cov: [0-9]+')
  line="fuzz_$t: ${seconds}s, ${runs:-?} executions, ${rate:-?} exec/s, cov ${cov:-?}, corpus $(ls "$corpus" | wc -l), rc $rc"
  echo "$line" | tee -a "$summary"
  if [[ $rc -ne 0 ]]; then
    status=1
    echo "   FOUND A PROBLEM: see $log; inputs in $artifacts/" >&2
    grep -E 'ERROR: |SUMMARY: |FUZZ_ASSERT|terminate called|runtime error' "$log" | head -5 >&2 || true
  fi
done
exit $status
