#!/usr/bin/env python3
"""Python overhead of attn.attention: the same call timed from Python and from C++.

B=1, H=8, N=128, D=64 float32 (the issue's size): attn.attention(q, k, v) against
attn._attn.time_attention_cpp, which times attn::attention on the same borrowed
tensors in C++ in the same process. Also the raw binding (attn._attn.attention) and,
when torch is installed, torch tensors (read as numpy views). Each call is timed on its
own and the sides take turns call by call; the minimum over --iters calls is
reported (robust to a loaded machine: compute is ~1 ms, the overhead ~10 us, and the
minimum is the call that nothing else disturbed), then the median for reference.

  python3 bench/python_overhead.py [--iters 3000] [--threads N] [--n 128] [--h 8] [--d 64]
  python3 bench/python_overhead.py --h 1 --n 4 --d 4     # compute ~2 us: the overhead alone
"""

import argparse
import time

import numpy as np

import attn
from attn import _attn


def one_call(fn):
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) * 1e-9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--d", type=int, default=64)
    a = ap.parse_args()
    if a.threads:
        attn.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, a.h, a.n, a.d)).astype(np.float32) for _ in range(3))
    opts = dict(allow=None, bias=None, causal=False, align="top_left", scale=None, key_lengths=[], window_left=-1,
                window_right=-1, softcap=0.0, dropout_p=0.0, seed=0, backend="automatic", capture=False, batches=[],
                heads=[], rows=[])
    sides = {
        "C++ attn::attention": lambda: _attn.time_attention_cpp(q, k, v, 1),
        "attn.attention (numpy)": lambda: one_call(lambda: attn.attention(q, k, v)),
        "attn._attn.attention (binding only)": lambda: one_call(lambda: _attn.attention(q, k, v, **opts)),
    }
    try:
        import torch

        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        sides["attn.attention (torch tensors)"] = lambda: one_call(lambda: attn.attention(tq, tk, tv))
    except ImportError:
        pass
    times = {name: [] for name in sides}
    for fn in sides.values():
        fn()  # warm-up
    for _ in range(a.iters):
        for name, fn in sides.items():
            times[name].append(fn())
    best = {name: min(t) for name, t in times.items()}
    median = {name: float(np.median(t)) for name, t in times.items()}
    base = best["C++ attn::attention"]
    print(f"attn {attn.__version__}, {attn.get_num_threads()} threads, B=1 H={a.h} N={a.n} D={a.d} f32, "
          f"{a.iters} calls per side, taking turns")
    for name in sides:
        extra = "" if name.startswith("C++") else f"   overhead {1e6 * (best[name] - base):+7.2f} us"
        print(f"  {name:38s} min {1e6 * best[name]:9.2f} us  median {1e6 * median[name]:9.2f} us{extra}")


if __name__ == "__main__":
    main()
