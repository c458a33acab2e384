#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention timed the same way as bench/attention_bench.

Prints one JSON object per measurement, with the same fields as attention_bench, so
bench/compare_attention.py can put them side by side. Needs torch (PyPI); attn itself never does.

  torch_attention.py --n 1024 --d 64 --causal 1 [--window 512] [--backward 1] [--lq 1]
                     [--batch 1] [--heads 8] [--threads 2] [--min-time 0.5] [--clock wall|thread|process]
                     [--dtype f32|bf16]

--clock thread times in the calling thread's CPU time (time.thread_time(); use with --threads 1).
--clock process times in the process's CPU time divided by --threads (time.process_time()), as
attention_bench --clock process does.
"""
import argparse
import json
import statistics
import time

import torch


def time_median(fn, min_time, min_reps=3, clock=time.perf_counter):
    fn()
    ts = []
    start = time.perf_counter()
    while len(ts) < min_reps or time.perf_counter() - start < min_time:
        t = clock()
        fn()
        ts.append(clock() - t)
        if len(ts) >= 1000:
            break
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True, help="Lk (and Lq unless --lq)")
    ap.add_argument("--lq", type=int, default=0)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--backward", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--clock", choices=["wall", "thread", "process"], default="wall")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32", help="dtype of q, k, v")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    clock = time.thread_time if a.clock == "thread" else time.perf_counter
    if a.clock == "process":  # the process's CPU time per thread (OpenMP's spinning counts as busy)
        clock = lambda: time.process_time() / a.threads
    torch.manual_seed(0)
    lq = a.lq or a.n
    B, H, D, lk = a.batch, a.heads, a.d, a.n
    q = torch.rand(B, H, lq, D) * 2 - 1
    k = torch.rand(B, H, lk, D) * 2 - 1
    v = torch.rand(B, H, lk, D) * 2 - 1
    if a.dtype == "bf16":
        q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
    mask = None
    is_causal = bool(a.causal) and a.window == 0 and lq == lk
    if a.window > 0 or (a.causal and lq != lk):
        # bottom-right alignment, as attention_bench uses: query i sits at key i + lk - lq
        i = torch.arange(lq).unsqueeze(1) + (lk - lq)
        j = torch.arange(lk).unsqueeze(0)
        mask = j <= i if a.causal else torch.ones(lq, lk, dtype=torch.bool)
        if a.window > 0:
            mask = mask & (j >= i - a.window)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if not a.backward:
        with torch.inference_mode():
            sec = time_median(lambda: sdpa(q, k, v, attn_mask=mask, is_causal=is_causal), a.min_time,
                              clock=clock)
    else:
        for t in (q, k, v):
            t.requires_grad_(True)
        out = sdpa(q, k, v, attn_mask=mask, is_causal=is_causal)
        dout = torch.rand_like(out)

        def bwd():
            torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

        sec = time_median(bwd, a.min_time, clock=clock)
    if a.window > 0:
        keys = min(lk, a.window + 1)
    elif a.causal:
        keys = lk if lq == 1 else (lk + 1) / 2
    else:
        keys = lk
    flops = 4.0 * B * H * lq * keys * D * (2.5 if a.backward else 1.0)
    print(json.dumps({
        "engine": "torch-sdpa", "torch": torch.__version__,
        "pass": "backward" if a.backward else "forward", "B": B, "H": H, "Lq": lq, "Lk": lk,
        "D": D, "dtype": a.dtype, "causal": a.causal, "window": a.window, "threads": a.threads,
        "seconds": sec, "gflops": flops / sec / 1e9,
    }), flush=True)


if __name__ == "__main__":
    main()
