#!/usr/bin/env python3
"""SmolLM2-135M-Instruct: attn (bench/llama_bench) against llama.cpp (bench/peers/llama_cpp_peer.py) on the
same GGUF, same prompt ids, same thread count, run back to back --rounds times (alternating); prints each
run and the ratio of the medians (attn / llama.cpp; > 1 means attn is faster).

  python3 bench/run_llama.py [--build build/release] [--threads 2] [--prompt-tokens 512] [--gen 128]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--forms", default="runtime,f32-act",
                    help="attn forms: runtime,f32-act (the runtime's decoder, what every command runs; "
                    "f32-act: the same without 8-bit activations)")
    a = ap.parse_args()
    common = ["--threads", str(a.threads), "--prompt-tokens", str(a.prompt_tokens), "--gen", str(a.gen),
              "--reps", str(a.reps)]
    bench = os.path.join(a.build, "bench", "llama_bench")
    if not os.path.exists(bench):
        sys.exit(f"{bench} not found: cmake --build --preset release first")
    rows = {}
    for r in range(a.rounds):
        for res in run([bench] + common + ["--forms", a.forms]):
            rows.setdefault("attn " + res["form"], []).append(res)
            print(json.dumps(res), flush=True)
        res = run([sys.executable, os.path.join(HERE, "peers", "llama_cpp_peer.py")] + common)[0]
        rows.setdefault("llama.cpp", []).append(res)
        print(json.dumps(res), flush=True)
    peer = rows["llama.cpp"]
    pp = statistics.median(x["prompt_tok_s"] for x in peer)
    pg = statistics.median(x["gen_tok_s"] for x in peer)
    print(f"\nmedians over {a.rounds} rounds, {a.threads} threads, {a.prompt_tokens}-token prompt, {a.gen} generated:")
    pc = statistics.median(x.get("gen_cpu_tok_s", float("nan")) for x in peer)
    print(f"{'engine':<22}{'prompt tok/s':>14}{'ratio':>8}{'gen tok/s':>12}{'ratio':>8}"
          f"{'gen tok/CPU-s':>15}{'ratio':>8}")
    for name, rs in rows.items():
        p = statistics.median(x["prompt_tok_s"] for x in rs)
        g = statistics.median(x["gen_tok_s"] for x in rs)
        c = statistics.median(x.get("gen_cpu_tok_s", float("nan")) for x in rs)
        print(f"{name:<22}{p:>14.1f}{p / pp:>8.2f}{g:>12.1f}{g / pg:>8.2f}{c:>15.1f}{c / pc:>8.2f}")
    print("(gen tok/CPU-s: generated tokens per second of process CPU time, all threads; at --threads 1 "
          "it is robust to other jobs on the machine, at more threads it counts waiting at barriers as work)")


if __name__ == "__main__":
    main()
