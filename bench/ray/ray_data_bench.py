#!/usr/bin/env python3
"""Ray Data batch embedding (attn.ray.Embedder, docs/scale.md) against attn in-process on the same
reviews of ../shared/data/reviews-zh: Ray 1 worker × 1 thread, Ray 2 workers × 1 thread, in-process
1 thread and in-process 2 threads. Each Ray run is the whole pipeline from an in-memory dataset
(actor start and model load included) to the materialized vectors; the in-process runs include
the model load too. The runs alternate --rounds times; the best of each is kept (the machine is
shared). Prints the times, rows/s, the scaling 2×1 / 1×1 and Ray's overhead over in-process at the
same threads; checks every row once and equal to in-process to 1e-6.

  python3 bench/ray/ray_data_bench.py [--rows 20000] [--rounds 2] [--batch-size 1024] [--no-sort]
                                      [--setups in1,in2,ray1,ray2]

Ray's input is sorted by text length first (attn.ray.sort_by_length, inside the clock), as
SentenceEncoder.encode sorts the in-process side's whole list; --no-sort feeds it in its order.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on 127.0.0.1
os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np  # noqa: E402
import ray  # noqa: E402

import attn  # noqa: E402
import attn.ray as ar  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def reviews(n):
    d = os.environ.get("ATTN_DATA_DIR") or os.path.join(ROOT, "..", "shared", "data")
    d = os.path.join(d, "reviews-zh")
    pos = open(os.path.join(d, "pos.txt"), encoding="utf-8").read().splitlines()
    neg = open(os.path.join(d, "neg.txt"), encoding="utf-8").read().splitlines()
    texts = [t for pair in zip(pos, neg) for t in pair if t.strip()][:n]
    if len(texts) < n:
        sys.exit(f"only {len(texts)} reviews in {d}")
    return texts


def in_process(texts, threads):
    attn.set_num_threads(threads)
    t = time.perf_counter()
    enc = attn.SentenceEncoder("minilm")
    vecs = enc.encode(texts, batch_size=32)
    return time.perf_counter() - t, vecs


def on_ray(texts, workers, batch_size, sort):
    ds = ray.data.from_items([{"id": i, "text": s} for i, s in enumerate(texts)], override_num_blocks=64)
    ds = ds.materialize()  # the input in Ray's object store before the clock starts
    t = time.perf_counter()
    if sort:  # inside the clock: the sort is part of the pipeline
        ds = ar.sort_by_length(ds)
    out = ar.map_batches(ds, ar.Embedder, workers=workers, threads=1, batch_size=batch_size).materialize()
    seconds = time.perf_counter() - t
    ids, vecs = [], []
    for b in out.iter_batches(batch_size=4096, batch_format="numpy"):
        ids.append(b["id"])
        vecs.append(b["embedding"])
    ids = np.concatenate(ids)
    vecs = np.concatenate(vecs)[np.argsort(ids)]
    assert np.array_equal(np.sort(ids), np.arange(len(texts))), "a row was lost or written twice"
    return seconds, vecs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=1024)  # Ray batches: encode sorts by length within one
    ap.add_argument("--no-sort", action="store_true",
                    help="feed the reviews to map_batches in their order (default: attn.ray.sort_by_length first)")
    ap.add_argument("--setups", default="in1,in2,ray1,ray2",
                    help="which runs: in1, in2 (in-process 1 / 2 threads), ray1, ray2 (1 / 2 workers x 1 thread)")
    a = ap.parse_args()
    chosen = set(a.setups.split(","))
    texts = reviews(a.rows)
    ray.init(address="local", num_cpus=3, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    best = {}
    want = None
    for r in range(a.rounds):
        for key, name, run in (("in1", "in-process 1 thread", lambda: in_process(texts, 1)),
                               ("in2", "in-process 2 threads", lambda: in_process(texts, 2)),
                               ("ray1", "ray 1 worker x 1 thread", lambda: on_ray(texts, 1, a.batch_size, not a.no_sort)),
                               ("ray2", "ray 2 workers x 1 thread", lambda: on_ray(texts, 2, a.batch_size, not a.no_sort))):
            if key not in chosen:
                continue
            seconds, vecs = run()
            if want is None:
                want = vecs
            err = float(np.abs(vecs - want).max())
            assert err <= 1e-6, f"{name}: differs from in-process by {err}"
            best[name] = min(best.get(name, float("inf")), seconds)
            print(f"round {r + 1}: {name:26s} {seconds:8.2f} s  {len(texts) / seconds:8.1f} rows/s  "
                  f"max |diff| {err:.1e}", flush=True)
    ray.shutdown()
    print(f"\n{len(texts)} reviews, all-MiniLM-L6-v2, best of {a.rounds}:")
    for name, s in best.items():
        print(f"  {name:26s} {s:8.2f} s  {len(texts) / s:8.1f} rows/s")
    r1, r2 = best.get("ray 1 worker x 1 thread"), best.get("ray 2 workers x 1 thread")
    i1, i2 = best.get("in-process 1 thread"), best.get("in-process 2 threads")
    print(f"  (Ray's input {'in its given order' if a.no_sort else 'sorted by length first (attn.ray.sort_by_length)'})")
    if r1 and r2:
        print(f"  scaling ray 2x1 / 1x1: {r1 / r2:.2f}x")
    if r1 and i1:
        print(f"  ray overhead at 1 thread: {r1 / i1 - 1:+.1%}")
    if r2 and i2:
        print(f"  ray 2x1 against in-process 2 threads: {r2 / i2 - 1:+.1%}")


if __name__ == "__main__":
    main()
