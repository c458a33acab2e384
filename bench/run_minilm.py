#!/usr/bin/env python3
"""One command for the MiniLM benchmark (docs/benchmarks-log/2026-11-29.md, "MiniLM"): runs
build/release/bench/minilm_bench and bench/peers/minilm_peers.py (sentence-transformers
on PyTorch, ONNX Runtime) with the same token ids and thread count, back to back, and
prints a table with attn's ratio to each peer (> 1: attn is faster).

  python3 bench/run_minilm.py [--threads 2] [--batch 32] [--seq 128] [--min-time 2] [--rounds 1]
                              [--clock wall|thread] [--precision fp32|bf16]

--clock thread --threads 1 times each engine in its calling thread's CPU time, which
other processes on a shared machine do not inflate (a fair single-core comparison).

--precision bf16 runs attn with bf16 matrix products (minilm_bench --precision bf16) and adds
PyTorch under torch.autocast bf16 as a third peer, so attn bf16 is shown against PyTorch fp32
AND PyTorch bf16.

Needs: cmake --build --preset release; pip install sentence-transformers onnxruntime onnx.
With --rounds R the three engines run R times interleaved and the best time of each is kept.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--latency-seqs", default="16,128")
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--clock", default="wall", choices=["wall", "thread"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "release", "bench", "minilm_bench"))
    a = ap.parse_args()
    common = ["--threads", str(a.threads), "--batch", str(a.batch), "--seq", str(a.seq),
              "--latency-seqs", a.latency_seqs, "--min-time", str(a.min_time), "--clock", a.clock]
    bf16 = a.precision == "bf16"
    engines = ["torch", "torch-bf16", "ort"] if bf16 else ["torch", "ort"]
    best = {}
    versions = {}
    for _ in range(a.rounds):
        rows = run([a.bench] + common + ["--precision", a.precision])
        rows += run([sys.executable, os.path.join(ROOT, "bench", "peers", "minilm_peers.py")] + common +
                    ["--engines", ",".join(engines)])
        for r in rows:
            key = (r["engine"], r["case"], r["seq"])
            best[key] = min(best.get(key, float("inf")), r["seconds"])
            versions[r["engine"]] = r.get("version", "attn")
    print(f"all-MiniLM-L6-v2, token ids -> unit embeddings, {a.threads} threads, {a.clock} clock, "
          f"attn matmul precision {a.precision}; peers: {versions.get('torch', '?')}; {versions.get('ort', '?')}")
    print()
    if bf16:
        print("| case | attn bf16 | PyTorch fp32 | PyTorch bf16 autocast | ONNX Runtime | attn / PyTorch fp32 "
              "| attn / PyTorch bf16 | attn / ORT |")
        print("|---|---|---|---|---|---|---|---|")
    else:
        print("| case | attn | PyTorch (sentence-transformers) | ONNX Runtime | attn / PyTorch | attn / ORT |")
        print("|---|---|---|---|---|---|")
    cases = [("throughput", a.seq)] + [("latency", int(s)) for s in a.latency_seqs.split(",")]
    for case, seq in cases:
        t = {e: best.get((e, case, seq)) for e in ["attn"] + engines}
        if case == "throughput":
            fmt = lambda s: f"{a.batch / s:.1f} sent/s" if s else "-"
            name = f"throughput, batch {a.batch} x seq {seq}"
        else:
            fmt = lambda s: f"{s * 1e3:.2f} ms" if s else "-"
            name = f"latency, 1 sentence x seq {seq}"
        ratio = lambda p: f"{t[p] / t['attn']:.2f}x" if t[p] and t["attn"] else "-"
        if bf16:
            print(f"| {name} | {fmt(t['attn'])} | {fmt(t['torch'])} | {fmt(t['torch-bf16'])} | {fmt(t['ort'])} "
                  f"| {ratio('torch')} | {ratio('torch-bf16')} | {ratio('ort')} |")
        else:
            print(f"| {name} | {fmt(t['attn'])} | {fmt(t['torch'])} | {fmt(t['ort'])} | {ratio('torch')} "
                  f"| {ratio('ort')} |")


if __name__ == "__main__":
    main()
