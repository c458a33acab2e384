#!/usr/bin/env python3
"""A small torch Transformer training step on CPU: attn.torch.patch() against torch's own SDPA.

A causal decoder (--layers blocks of d_model --d, --heads heads, sequence --n, batch
--batch) written with torch.nn.functional.scaled_dot_product_attention, as most torch
models are. Two measurements, best of --repeat, the two sides interleaved:
  * the attention part: SDPA forward + backward alone on the block's q, k, v shapes;
  * end to end: forward, loss, backward and an AdamW step of the whole model.

  python3 bench/python_train_step.py [--n 256] [--d 256] [--heads 4] [--layers 4] [--batch 8]
"""

import argparse
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


def best_time(fn, repeat, inner):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


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

    # check the two agree before timing
    with torch.no_grad():
        want = model(ids[:, :-1])
        with at.patch():
            got = model(ids[:, :-1])
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()

    res = {"torch": [float("inf")] * 2, "attn": [float("inf")] * 2}
    for _ in range(a.repeat):
        res["torch"][0] = min(res["torch"][0], best_time(sdpa_step(F.scaled_dot_product_attention), 1, 3))
        res["attn"][0] = min(res["attn"][0], best_time(sdpa_step(at.scaled_dot_product_attention), 1, 3))
        res["torch"][1] = min(res["torch"][1], best_time(train_step, 1, 2))
        res["attn"][1] = min(res["attn"][1], best_time(patched_train_step, 1, 2))
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), attn {attn.__version__} "
          f"({attn.get_num_threads()} threads); causal decoder: batch {a.batch}, N {a.n}, d_model {a.d}, "
          f"{a.heads} heads (head size {hd}), {a.layers} layers; best of {a.repeat}")
    names = ("attention part: SDPA forward + backward", "end to end: forward + backward + AdamW step")
    for i, name in enumerate(names):
        t, o = res["torch"][i], res["attn"][i]
        print(f"  {name:45s} torch {1e3 * t:8.2f} ms   attn {1e3 * o:8.2f} ms   speed-up {t / o:5.2f}x")


if __name__ == "__main__":
    main()
