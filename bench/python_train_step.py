#!/usr/bin/env python3
"""A small torch Transformer training step on CPU: attn.torch.patch() against torch's own SDPA.

A causal decoder (--layers blocks of d_model --d, --heads heads, sequence --n, batch
--batch) written with torch.nn.functional.scaled_dot_product_attention, as most torch
models are. Two measurements, best of --repeat, the sides interleaved:
  * the attention part: SDPA forward + backward alone on the block's q, k, v shapes;
  * end to end: forward, loss, backward and an AdamW step of the whole model.
Each is timed twice: wall time, and the process's CPU time (all threads, time.process_time) per
step, which a machine loaded by other processes inflates less than wall time (it still counts the
time threads spin waiting for each other). The attn side runs its kernels on torch's OpenMP team
(attn.torch.use_torch_threads, the default); --pool adds a third side on attn's own thread pool.

  python3 bench/python_train_step.py [--n 256] [--d 256] [--heads 4] [--layers 4] [--batch 8] [--pool]
"""

import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import attn
import attn.torch as at


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        B, N, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, N, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, N, D))
        return x + self.ff(self.ln2(x))


class Model(nn.Module):
    def __init__(self, vocab, d, heads, layers, n):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(n, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids) + self.pos[: ids.shape[1]]
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def times(fn, inner):
    """(wall, CPU) seconds per call of fn, over `inner` calls after one warm-up call."""
    fn()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner, (time.process_time() - c0) / inner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--pool", action="store_true", help="also time attn on its own thread pool")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
        attn.set_num_threads(a.threads)
    torch.manual_seed(0)
    hd = a.d // a.heads
    q, k, v = (torch.randn(a.batch, a.heads, a.n, hd, requires_grad=True) for _ in range(3))
    g = torch.randn(a.batch, a.heads, a.n, hd)

    def sdpa_step(fn):
        def run():
            for t in (q, k, v):
                t.grad = None
            fn(q, k, v, is_causal=True).backward(g)
        return run

    model = Model(a.vocab, a.d, a.heads, a.layers, a.n)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, a.vocab, (a.batch, a.n + 1))

    def train_step():
        opt.zero_grad(set_to_none=True)
        logits = model(ids[:, :-1])
        F.cross_entropy(logits.reshape(-1, a.vocab), ids[:, 1:].reshape(-1)).backward()
        opt.step()

    def patched_train_step():
        with at.patch():
            train_step()

    def on_pool(fn):
        def run():
            at.use_torch_threads = False
            try:
                fn()
            finally:
                at.use_torch_threads = True
        return run

    # check the two agree before timing
    with torch.no_grad():
        want = model(ids[:, :-1])
        with at.patch():
            got = model(ids[:, :-1])
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()

    sides = {"torch": (sdpa_step(F.scaled_dot_product_attention), train_step),
             "attn": (sdpa_step(at.scaled_dot_product_attention), patched_train_step)}
    if a.pool:
        sides["attn pool"] = tuple(on_pool(f) for f in sides["attn"])
    inf = float("inf")
    res = {name: [[inf, inf], [inf, inf]] for name in sides}  # [part][wall, cpu]
    for _ in range(a.repeat):
        for part, inner in ((0, 3), (1, 2)):
            for name, fns in sides.items():
                w, c = times(fns[part], inner)
                best = res[name][part]
                best[0], best[1] = min(best[0], w), min(best[1], c)
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), attn {attn.__version__} "
          f"({attn.get_num_threads()} threads in its pool); causal decoder: batch {a.batch}, N {a.n}, "
          f"d_model {a.d}, {a.heads} heads (head size {hd}), {a.layers} layers; best of {a.repeat}; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    names = ("attention part: SDPA forward + backward", "end to end: forward + backward + AdamW step")
    for i, name in enumerate(names):
        t = res["torch"][i]
        print(f"  {name}")
        for side, parts in res.items():
            r = parts[i]
            print(f"    {side:10s} wall {1e3 * r[0]:8.2f} ms  speed-up {t[0] / r[0]:5.2f}x   "
                  f"CPU {1e3 * r[1]:8.2f} ms  speed-up {t[1] / r[1]:5.2f}x")

if __name__ == "__main__":
    main()
