#!/usr/bin/env python3
"""Old build against new build, side by side in one run: the model benchmarks.

    python3 bench/compare_builds.py --old /path/to/old/build/release --new build/release [--rounds 3]

Runs each case from both builds' bench/ programs, alternating old and new (old, new, new, old, ...)
so that drift of the machine's speed hits both alike, and prints the median of each and the ratio
new / old (> 1 is faster). Used for the "within 3% of the previous main" gate of a refactoring: the
cases are the attention operator (a quick set), the training step, MiniLM, SmolLM2 and greedy
decoding. Each case's metric is "higher is better" except latencies (ms), where the ratio is
old / new so that > 1 still means the new build is faster.

--clock thread (with --threads 1) times the attention, MiniLM and decoding cases in the calling
thread's CPU time, which other processes on a loaded machine inflate far less than wall time (the
training and SmolLM2 cases keep their own clocks).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def cases(threads, clock="wall"):
    t = str(threads)
    ck = ["--clock", clock] if clock != "wall" else []
    att = ["attention_bench", "--threads", t, "--heads", "8", "--min-time", "0.5"] + ck
    out = []
    for n, causal in ((1024, 0), (1024, 1), (2048, 1)):
        out.append((f"attention fwd N={n} D=64{' causal' if causal else ''}",
                    att + ["--n", str(n), "--d", "64", "--causal", str(causal)], "gflops", "attn-fused", True))
    out.append(("attention bwd N=1024 D=64 causal",
                att + ["--n", "1024", "--d", "64", "--causal", "1", "--backward", "1"], "gflops", "attn-fused", True))
    out.append(("attention decode Lq=1 Lk=4096 D=64",
                att + ["--n", "1", "--d", "64", "--decode-lk", "4096"], "gflops", "decode", True))
    out.append(("training step tokens/s", ["train_bench", "--threads", t, "--steps", "10", "--warmup", "2"],
                "tokens_per_s", "RESULT", True))
    out.append(("MiniLM 32x128 sentences/s", ["minilm_bench", "--threads", t, "--min-time", "1",
                                               "--latency-seqs", "16"] + ck, "sentences_per_s", "throughput", True))
    out.append(("MiniLM 1x16 latency ms", ["minilm_bench", "--threads", t, "--min-time", "1",
                                           "--latency-seqs", "16"] + ck, "ms", "latency", False))
    out.append(("SmolLM2 prompt tokens/s", ["llama_bench", "--threads", t], "prompt_tok_s", "llama", True))
    out.append(("SmolLM2 generation tokens/s", ["llama_bench", "--threads", t], "gen_tok_s", "llama", True))
    out.append(("greedy decoding batch 1 tokens/s", ["decode_bench", "--threads", t, "--batch", "1",
                                                     "--min-time", "1"] + ck, "tokens_per_s", "decode", True))
    out.append(("greedy decoding batch 32 tokens/s", ["decode_bench", "--threads", t, "--batch", "32",
                                                      "--min-time", "1"] + ck, "tokens_per_s", "decode", True))
    return out


def parse(stdout, metric, select):
    """The metric from a bench's output: JSON lines, or train_bench's 'RESULT k=v ...' line."""
    if select == "RESULT":
        for line in stdout.splitlines():
            if line.startswith("RESULT"):
                kv = dict(p.split("=") for p in line.split()[1:])
                return float(kv[metric])
        raise RuntimeError("no RESULT line")
    vals = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if metric not in row:
            continue
        if select == "throughput" and row.get("case") != "throughput":
            continue
        if select == "latency" and row.get("case") != "latency":
            continue
        if select == "attn-fused" and row.get("engine") != "attn-fused":
            continue
        if select == "decode" and row.get("engine") == "attn-fused" and row.get("Lq") != 1:
            continue
        if select == "llama" and row.get("engine") != "attn":
            continue
        vals.append(float(row[metric]))
    if not vals:
        raise RuntimeError(f"no {metric} in output")
    return vals[-1]


def run(build, argv, metric, select):
    exe = os.path.join(build, "bench", argv[0])
    r = subprocess.run([exe] + argv[1:], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} failed ({r.returncode}): {r.stderr[-500:]}")
    return parse(r.stdout, metric, select)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="build folder of the previous main (holds bench/)")
    ap.add_argument("--new", required=True, help="build folder of the new tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall")
    a = ap.parse_args()
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"{cpu}, {a.threads} threads, {a.clock} clock, {a.rounds} rounds, old = {a.old}, new = {a.new}\n")
    print("| case | old (median) | new (median) | new vs old |")
    print("|---|---|---|---|")
    worst = None
    for name, argv, metric, select, higher in cases(a.threads, a.clock):
        if a.only and a.only not in name:
            continue
        old, new = [], []
        for i in range(a.rounds):
            order = [(a.old, old), (a.new, new)] if i % 2 == 0 else [(a.new, new), (a.old, old)]
            for build, sink in order:
                sink.append(run(build, argv, metric, select))
        mo, mn = statistics.median(old), statistics.median(new)
        ratio = mn / mo if higher else mo / mn
        worst = ratio if worst is None else min(worst, ratio)
        print(f"| {name} | {mo:.2f} | {mn:.2f} | {ratio:.3f}x |", flush=True)
    if worst is not None:
        print(f"\nworst case: {worst:.3f}x (1.000 = same speed; the gate is >= 0.97)")


if __name__ == "__main__":
    sys.exit(main())
