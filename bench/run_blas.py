#!/usr/bin/env python3
"""sgemm GFLOP/s of each BLAS built (bench/gemm: OpenBLAS, BLIS, oneDNN), side by side per shape,
as a Markdown table, with the fraction of the measured FMA peak.

  python3 bench/run_blas.py [--build build/release] [--threads 2] [--min-time 0.5]
"""
import argparse
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5)
    a = ap.parse_args()
    bdir = os.path.join(a.build, "bench")
    peak_out = subprocess.run([os.path.join(bdir, "attention_bench"), "--peak", "--n", "16", "--d", "16",
                               "--causal", "0", "--min-time", "0.01", "--threads", str(a.threads)],
                              check=True, capture_output=True, text=True).stdout
    peak = [json.loads(l) for l in peak_out.splitlines() if l.startswith("{")][0]["gflops"]
    results = {}
    names = [n for n in ("openblas", "blis", "onednn") if os.path.exists(os.path.join(bdir, f"gemm_bench_{n}"))]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), BLIS_NUM_THREADS=str(a.threads),
               OPENBLAS_NUM_THREADS=str(a.threads))
    for n in names:
        out = subprocess.run([os.path.join(bdir, f"gemm_bench_{n}"), "--threads", str(a.threads),
                              "--min-time", str(a.min_time)], check=True, capture_output=True, text=True,
                             env=env).stdout
        for l in out.splitlines():
            r = json.loads(l)
            results.setdefault((r["M"], r["N"], r["K"]), {})[n] = r["gflops"]
    print(f"measured fp32 FMA peak, {a.threads} threads: {peak:.1f} GFLOP/s\n")
    print("| M × N × K | " + " | ".join(f"{n} GFLOP/s" for n in names) + " | best (% of peak) |")
    print("|---|" + "---|" * len(names) + "---|")
    for shape, r in results.items():
        best = max(r, key=r.get)
        print(f"| {shape[0]} × {shape[1]} × {shape[2]} | " + " | ".join(f"{r.get(n, 0):.1f}" for n in names)
              + f" | {best} ({100 * r[best] / peak:.0f}%) |")


if __name__ == "__main__":
    main()
