#!/usr/bin/env python3
"""Greedy decoding, attn vs PyTorch, in one run (docs/benchmarks-log/2026-11-29.md, "Greedy decoding").

  python3 bench/run_decode.py [--build build/release] [--batch 1,32] [--threads 2]
                              [--min-time 2] [--repeat 3] [--clock wall|thread]

Runs build/.../bench/decode_bench once to write the weights and its tokens, then
alternates attn and bench/peers/torch_decode.py (same weights, same sources) --repeat
times per batch size, and prints the median tokens/s of each, the ratio attn / torch
and how many generated tokens agree. Alternating keeps a busy machine's load about
equal for both engines.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--src", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall",
                    help="thread: per-thread CPU time (use with --threads 1; robust on a busy machine)")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "decode_bench")
    if not os.path.exists(exe):
        sys.exit("decode_bench not found at %s: build first (cmake --build --preset release)" % exe)
    common = ["--src", str(a.src), "--new", str(a.new), "--threads", str(a.threads), "--clock", a.clock]
    with tempfile.TemporaryDirectory() as tmp:
        w, ids = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "ids.json")
        run_json([exe, "--batch", a.batch, "--min-time", "0", "--weights", w, "--ids", ids] + common)
        print("| batch | attn tokens/s | torch tokens/s | attn / torch | same tokens | attn ms/step | torch ms/step |")
        print("|---|---|---|---|---|---|---|")
        for b in a.batch.split(","):
            at, pt, same = [], [], None
            for _ in range(a.repeat):
                at += run_json([exe, "--batch", b, "--min-time", str(a.min_time)] + common)
                r = run_json([sys.executable, os.path.join(HERE, "peers", "torch_decode.py"), "--weights", w,
                              "--ids", ids, "--batch", b, "--min-time", str(a.min_time)] + common)
                pt += r
                same = r[0].get("same_tokens")
            ta = statistics.median(x["tokens_per_s"] for x in at)
            tt = statistics.median(x["tokens_per_s"] for x in pt)
            print("| %s | %.1f | %.1f | %.2f× | %s | %.2f | %.2f |" % (
                b, ta, tt, ta / tt, "%.3f" % same if same is not None else "-",
                1e3 * int(b) / ta, 1e3 * int(b) / tt), flush=True)


if __name__ == "__main__":
    main()
