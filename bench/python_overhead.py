#!/usr/bin/env python3
"""Python overhead of attn.attention: the same call timed from Python and from C++.

B=1, H=8, N=128, D=64 float32 (the issue's size): attn.attention(q, k, v) against
attn._attn.time_attention_cpp, which times attn::attention on the same borrowed
tensors in a C++ loop in the same process. Also the raw binding (attn._attn.attention)
and, when torch is installed, torch tensors through __dlpack__. Best of --repeat runs
of --iters calls each, interleaved, so machine load hits both sides alike.

  python3 bench/python_overhead.py [--iters 2000] [--repeat 7] [--threads N]
"""

import argparse
import time

import numpy as np

import attn
from attn import _attn


def per_call(fn, iters):
    fn()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n", type=int, default=128)
    a = ap.parse_args()
    if a.threads:
        attn.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 8, a.n, 64)).astype(np.float32) for _ in range(3))
    opts = dict(allow=None, bias=None, causal=False, align="top_left", scale=None, key_lengths=[], window_left=-1,
                window_right=-1, softcap=0.0, dropout_p=0.0, seed=0, backend="automatic", capture=False, batches=[],
                heads=[], rows=[])
    sides = {
        "C++ attn::attention": lambda: _attn.time_attention_cpp(q, k, v, a.iters),
        "attn.attention (numpy)": lambda: per_call(lambda: attn.attention(q, k, v), a.iters),
        "attn._attn.attention (binding only)": lambda: per_call(lambda: _attn.attention(q, k, v, **opts), a.iters),
    }
    try:
        import torch

        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        sides["attn.attention (torch via DLPack)"] = lambda: per_call(lambda: attn.attention(tq, tk, tv), a.iters)
    except ImportError:
        pass
    best = {name: float("inf") for name in sides}
    for _ in range(a.repeat):
        for name, fn in sides.items():
            best[name] = min(best[name], fn())
    base = best["C++ attn::attention"]
    print(f"attn {attn.__version__}, {attn.get_num_threads()} threads, B=1 H=8 N={a.n} D=64 f32, "
          f"best of {a.repeat} x {a.iters} calls")
    for name, t in best.items():
        extra = "" if name.startswith("C++") else f"   overhead {1e6 * (t - base):+7.2f} us"
        print(f"  {name:38s} {1e6 * t:9.2f} us/call{extra}")


if __name__ == "__main__":
    main()
