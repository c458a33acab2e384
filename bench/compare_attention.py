#!/usr/bin/env python3
"""Runs attn's fused attention and PyTorch's SDPA side by side, config by config, on the same
threads in the same run, and prints a Markdown table of GFLOP/s, the ratio attn / PyTorch and the
fraction of the machine's measured FMA peak.

  python3 bench/compare_attention.py [--build build/release] [--threads 2] [--quick]
        [--suite forward,causal,window,decode,backward,bf16,reference]  [--json out.jsonl]
        [--decode-lks 1024,4096,32768] [--clock wall|thread|process] [--ns 512,2048,8192] [--repeat 1]

--clock thread times both engines in the calling thread's CPU time (use with --threads 1 on a loaded
machine: other processes then inflate neither side). --clock process: the process's CPU time divided by
--threads, for both engines and the peaks (several threads on a loaded machine: time other processes
take is not counted, threads that spin waiting for work are; peers whose idle threads spin longer look
slower). --decode-lks sets the key lengths of the decode
suite (one query against Lk keys). --ns replaces the list of N (default 128 ... 16384, --quick: up to 2048).
--repeat R measures the peaks and every case R times, the two engines in turn, and keeps each one's best
(on a loaded machine other processes only ever slow a run down).

The bf16 suite passes bf16 q, k, v to both engines (attn's AVX512_BF16 path; PyTorch's bf16 SDPA);
its last column is against the measured bf16 dot-product (vdpbf16ps) peak, printed with the fp32 one.

torch is needed only here (pip install torch); attn itself never needs it.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--quick", action="store_true", help="N up to 2048 only")
    ap.add_argument("--suite", default="forward,causal,window,decode,backward,bf16,reference")
    ap.add_argument("--json", default="")
    ap.add_argument("--decode-lks", default="1024,4096,32768", help="Lk values of the decode suite")
    ap.add_argument("--clock", choices=["wall", "thread", "process"], default="wall")
    ap.add_argument("--repeat", type=int, default=1, help="best of this many runs per engine and case")
    ap.add_argument("--ns", default="", help="comma-separated N of the forward, causal, bf16 and backward suites")
    a = ap.parse_args()
    bench = os.path.join(a.build, "bench", "attention_bench")
    suites = set(a.suite.split(","))
    common = ["--threads", str(a.threads), "--heads", str(a.heads), "--min-time", str(a.min_time),
              "--clock", a.clock]
    peaks = []
    for _ in range(max(1, a.repeat)):
        peaks += run_json([bench, "--peak", "--n", "16", "--d", "16", "--causal", "0", "--min-time", "0.01",
                           "--threads", str(a.threads), "--clock", a.clock])
    peak = max(p["gflops"] for p in peaks if p["engine"] == "fma-peak")
    bf16_peak = max(p["gflops"] for p in peaks if p["engine"] == "bf16-dot-peak")
    ns = [128, 512, 1024, 2048] if a.quick else [128, 512, 1024, 2048, 4096, 8192, 16384]
    if a.ns:
        ns = [int(x) for x in a.ns.split(",")]
    configs = []  # (label, attn args, torch args)
    for d in (64, 128):
        for n in ns:
            for causal in (0, 1):
                if (causal and "causal" in suites) or (not causal and "forward" in suites):
                    configs.append((f"fwd N={n} D={d}{' causal' if causal else ''}",
                                    ["--n", str(n), "--d", str(d), "--causal", str(causal)],
                                    ["--n", str(n), "--d", str(d), "--causal", str(causal)]))
        if "window" in suites:
            for n in [x for x in ns if x >= 1024]:
                configs.append((f"fwd N={n} D={d} causal window 512",
                                ["--n", str(n), "--d", str(d), "--causal", "1", "--window", "512"],
                                ["--n", str(n), "--d", str(d), "--causal", "1", "--window", "512"]))
        if "decode" in suites:
            for lk in [int(x) for x in a.decode_lks.split(",")]:
                configs.append((f"decode Lq=1 Lk={lk} D={d}",
                                ["--n", "1", "--d", str(d), "--decode-lk", str(lk)],
                                ["--n", str(lk), "--lq", "1", "--d", str(d)]))
        if "bf16" in suites:
            for n in [x for x in ns if 1024 <= x <= 4096]:
                for causal in (0, 1):
                    args = ["--n", str(n), "--d", str(d), "--causal", str(causal), "--dtype", "bf16"]
                    configs.append((f"bf16 fwd N={n} D={d}{' causal' if causal else ''}", args, args))
        if "backward" in suites:
            for n in [x for x in ns if 512 <= x <= 4096]:
                for causal in (0, 1):
                    configs.append((f"bwd N={n} D={d}{' causal' if causal else ''}",
                                    ["--n", str(n), "--d", str(d), "--causal", str(causal), "--backward", "1"],
                                    ["--n", str(n), "--d", str(d), "--causal", str(causal), "--backward", "1"]))
    rows = []
    sink = open(a.json, "w") if a.json else None
    print(f"measured fp32 FMA peak, {a.threads} threads: {peak:.1f} GFLOP/s")
    print(f"measured bf16 dot-product (vdpbf16ps) peak, {a.threads} threads: {bf16_peak:.1f} GFLOP/s"
          " (0: no AVX512_BF16); bf16 rows give their % of this peak\n")
    print("| case | attn fused GFLOP/s | PyTorch SDPA GFLOP/s | attn / PyTorch | attn % of FMA peak |")
    print("|---|---|---|---|---|")
    def run_mine(label, aargs):
        mine = run_json([bench] + common + aargs)
        if label.startswith("decode"):  # the bench also runs the --n 1 square case; keep Lq = 1, Lk = lk
            lk = int(aargs[aargs.index("--decode-lk") + 1])
            mine = [m for m in mine if m["Lq"] == 1 and m["Lk"] == lk]
        return mine[0]

    def run_theirs(targs):
        return run_json([sys.executable, os.path.join(HERE, "peers", "torch_attention.py"),
                         "--threads", str(a.threads), "--heads", str(a.heads),
                         "--min-time", str(a.min_time), "--clock", a.clock] + targs)[0]

    for label, aargs, targs in configs:
        mine, theirs = None, None
        for _ in range(max(1, a.repeat)):
            m, t = run_mine(label, aargs), run_theirs(targs)
            mine = m if mine is None or m["gflops"] > mine["gflops"] else mine
            theirs = t if theirs is None or t["gflops"] > theirs["gflops"] else theirs
        ratio = mine["gflops"] / theirs["gflops"]
        if label.startswith("bf16") and bf16_peak > 0:
            frac = f"{100 * mine['gflops'] / bf16_peak:.0f}% of bf16 peak"
        else:
            frac = f"{100 * mine['gflops'] / peak:.0f}%"
        print(f"| {label} | {mine['gflops']:.1f} | {theirs['gflops']:.1f} | {ratio:.2f}x | {frac} |", flush=True)
        for r in (mine, theirs):
            r["case"] = label
            if sink:
                sink.write(json.dumps(r) + "\n")
    if "reference" in suites:
        print("\n| case | attn reference GFLOP/s | attn fused GFLOP/s | fused / reference |")
        print("|---|---|---|---|")
        for n in (128, 512, 1024):
            r = run_json([bench] + common + ["--n", str(n), "--d", "64", "--causal", "0",
                                             "--backends", "reference,fused"])
            ref = [x for x in r if x["engine"] == "attn-reference"][0]
            fus = [x for x in r if x["engine"] == "attn-fused"][0]
            print(f"| fwd N={n} D=64 | {ref['gflops']:.2f} | {fus['gflops']:.1f} | "
                  f"{fus['gflops'] / ref['gflops']:.0f}x |", flush=True)


if __name__ == "__main__":
    main()
