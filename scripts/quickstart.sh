#!/usr/bin/env bash
# Quick start: install what is missing, build Release, then the main job on real
# data (about five minutes on 2 cores):
#   1. train the review classifier (a Transformer encoder over characters, ~3.5 min)
#      next to a naive Bayes baseline on the same split, and print both test accuracies;
#   2. classify a few held-out test reviews and show what the [CLS] token attended to;
#   3. a short `attn explain` of softmax, the step inside every attention weight.
# The model and its report stay in runs/classify/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release

# The reviews: $ATTN_DATA_DIR, ../shared/data, or <repo>/data (downloaded once).
if [[ -z ${ATTN_DATA_DIR:-} ]]; then
  if [[ -s ../shared/data/reviews-zh/pos.txt && -s ../shared/data/reviews-zh/neg.txt ]]; then
    export ATTN_DATA_DIR=$(cd ../shared/data && pwd)
  else
    scripts/fetch-reviews.sh
    export ATTN_DATA_DIR=$PWD/data
  fi
fi

echo
echo "== attn train classify --preset quick  (reviews from $ATTN_DATA_DIR) =="
build/release/attn train classify --preset quick --out runs/classify

echo
echo "== attn classify: held-out test reviews the model never saw =="
build/release/attn classify --model runs/classify/model.attn --file runs/classify/test-sample.txt

echo
echo "== attn explain --scores: how one row of attention weights is made =="
build/release/attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0

echo
echo "Model:  runs/classify/model.attn   (try: build/release/attn classify --model runs/classify/model.attn \"物流很快，质量很好\")"
echo "Report: runs/classify/report.md    (also report.json, split.json, test-sample.txt)"
