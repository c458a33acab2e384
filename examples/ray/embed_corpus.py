#!/usr/bin/env python3
"""The Ray Data recipe of docs/scale.md: read a text file (one document a line) or Parquet (a "text"
column), embed or classify it with attn.ray's actors, write Parquet. Needs `pip install 'attn[ray]'`.

  python3 examples/ray/embed_corpus.py INPUT OUT_DIR [--task embed|classify] [--model M]
                                       [--workers 2] [--threads 1] [--address auto]
"""
import argparse
import os

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402

import attn.ray as ar  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input", help="a .txt file (one document a line) or Parquet file/folder with a 'text' column")
    ap.add_argument("out", help="the output folder of Parquet files")
    ap.add_argument("--task", choices=["embed", "classify"], default="embed")
    ap.add_argument("--model", default=None, help="embed: minilm or a folder; classify: a model.attn file")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="CPUs (and attn threads) per worker")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--address", default=None, help="a running cluster ('auto'); default: a local Ray")
    a = ap.parse_args()

    if a.address:
        ray.init(address=a.address)
    else:  # a CPU beyond the workers' for Ray Data's read and write tasks
        ray.init(num_cpus=a.workers * a.threads + 1, include_dashboard=False)
    if a.input.endswith(".txt"):
        ds = ray.data.read_text(a.input)
    else:
        ds = ray.data.read_parquet(a.input)
    if a.task == "embed":
        out = ar.map_batches(ds, ar.Embedder, workers=a.workers, threads=a.threads, batch_size=a.batch_size,
                             model=a.model or "minilm")
    else:
        if not a.model:
            ap.error("--task classify needs --model (a model.attn of `attn train classify`)")
        out = ar.map_batches(ds, ar.Classifier, workers=a.workers, threads=a.threads, batch_size=a.batch_size,
                             model=a.model)
    out.write_parquet(a.out)
    print(f"wrote {ray.data.read_parquet(a.out).count()} rows to {a.out}")


if __name__ == "__main__":
    main()
