#!/usr/bin/env python3
"""PyTorch eager peer of bench/train_bench.cc: the same encoder-decoder Transformer.

Post-norm encoder-decoder as attn's models::EncoderDecoder (include/attn/models/transformer.h):
shared source/target embedding table, scaled by sqrt(d_model), tied output projection (no bias),
sinusoidal positions, dropout on embeddings, on residual branches and on the FFN hidden layer,
ReLU FFN, biases in all projections, LayerNorm eps 1e-5, attention through
F.scaled_dot_product_attention (no attention dropout, causal decoder self-attention),
cross-entropy with label smoothing 0.1, AdamW (lr 1e-4, weight decay 0.01 on every parameter).
Random token batches of a fixed shape in [1, V); target tokens per step = batch * tgt_len,
the count train_bench uses. Warm-up steps are not timed.

  python3 bench/peers/torch_train.py [--threads 2] [--steps 20] [--warmup 3] [--batch 32] ...
                                     [--autocast-bf16] [--bursts]

--autocast-bf16 runs forward and loss under torch.autocast("cpu", dtype=torch.bfloat16) (matrix
products in bf16; the peer of attn's --precision bf16). Default: fp32.

--bursts: after the warm-up, prints READY, then reads one number of steps per line from stdin, runs them and prints
BURST tokens_per_s=... step_ms=... cpu_ms=... for them, until stdin ends (train_bench --bursts, the
same protocol; bench/compare_train.py --interleave drives both).

Ends with: RESULT tokens_per_s=<x> step_ms=<wall ms per step> cpu_ms=<process CPU ms per step>
"""
import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F


class MHA(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.dh = h, d // h
        self.w_q, self.w_k = torch.nn.Linear(d, d), torch.nn.Linear(d, d)
        self.w_v, self.w_o = torch.nn.Linear(d, d), torch.nn.Linear(d, d)

    def split(self, t):
        return t.view(t.shape[0], t.shape[1], self.h, self.dh).transpose(1, 2)

    def forward(self, x, mem, causal):
        B, L, d = x.shape
        q, k, v = self.split(self.w_q(x)), self.split(self.w_k(mem)), self.split(self.w_v(mem))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.w_o(o.transpose(1, 2).reshape(B, L, d))


class FFN(torch.nn.Module):
    def __init__(self, d, f, p):
        super().__init__()
        self.w1, self.w2, self.p = torch.nn.Linear(d, f), torch.nn.Linear(f, d), p

    def forward(self, x):
        return self.w2(F.dropout(F.relu(self.w1(x)), self.p, self.training))


class EncoderLayer(torch.nn.Module):
    def __init__(self, d, h, f, p):
        super().__init__()
        self.self_attn, self.ffn, self.p = MHA(d, h), FFN(d, f, p), p
        self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)

    def forward(self, x):
        x = self.norm1(x + F.dropout(self.self_attn(x, x, False), self.p, self.training))
        return self.norm2(x + F.dropout(self.ffn(x), self.p, self.training))


class DecoderLayer(torch.nn.Module):
    def __init__(self, d, h, f, p):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn, self.p = MHA(d, h), MHA(d, h), FFN(d, f, p), p
        self.norm1, self.norm2, self.norm3 = (torch.nn.LayerNorm(d) for _ in range(3))

    def forward(self, x, mem):
        x = self.norm1(x + F.dropout(self.self_attn(x, x, True), self.p, self.training))
        x = self.norm2(x + F.dropout(self.cross_attn(x, mem, False), self.p, self.training))
        return self.norm3(x + F.dropout(self.ffn(x), self.p, self.training))


def sinusoidal(L, C):
    pos = torch.arange(L, dtype=torch.float64)[:, None]
    two_i = (torch.arange(C) - torch.arange(C) % 2).to(torch.float64)
    ang = pos / (10000.0 ** (two_i / C))
    pe = torch.where(torch.arange(C) % 2 == 0, ang.sin(), ang.cos())
    return pe.to(torch.float32)


class EncoderDecoder(torch.nn.Module):
    def __init__(self, V, d, h, f, layers, p, max_len):
        super().__init__()
        self.d, self.p = d, p
        self.embed = torch.nn.Parameter(torch.randn(V, d) / math.sqrt(d))
        self.enc = torch.nn.ModuleList([EncoderLayer(d, h, f, p) for _ in range(layers)])
        self.dec = torch.nn.ModuleList([DecoderLayer(d, h, f, p) for _ in range(layers)])
        self.register_buffer("pe", sinusoidal(max_len, d))

    def embed_ids(self, ids):
        x = F.embedding(ids, self.embed) * math.sqrt(self.d) + self.pe[: ids.shape[1]]
        return F.dropout(x, self.p, self.training)

    def forward(self, src, tgt_in, tgt_out):
        m = self.embed_ids(src)
        for layer in self.enc:
            m = layer(m)
        y = self.embed_ids(tgt_in)
        for layer in self.dec:
            y = layer(y, m)
        logits = F.linear(y, self.embed)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0,
                               label_smoothing=0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--src-len", type=int, default=64)
    ap.add_argument("--tgt-len", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--autocast-bf16", action="store_true", help="forward under torch.autocast bf16")
    ap.add_argument("--bursts", action="store_true",
                    help="after the warm-up, run the number of steps read from each stdin line and print a "
                    "BURST line for them (bench/compare_train.py --interleave); --steps is ignored")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = EncoderDecoder(a.vocab, a.d_model, a.heads, a.d_ff, a.layers, a.dropout,
                           max(a.src_len, a.tgt_len))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__} train peer: threads {torch.get_num_threads()}, B {a.batch}, "
          f"Ls {a.src_len}, Lt {a.tgt_len}, V {a.vocab}, d_model {a.d_model}, heads {a.heads}, "
          f"d_ff {a.d_ff}, layers {a.layers}+{a.layers}, dropout {a.dropout}, params {nparams}"
          f"{', autocast bf16' if a.autocast_bf16 else ''}")
    g = torch.Generator().manual_seed(12345)
    times, losses, cpu = [], [], []

    def step_once(timed):
        src = torch.randint(1, a.vocab, (a.batch, a.src_len), generator=g)
        tgt = torch.randint(1, a.vocab, (a.batch, a.tgt_len + 1), generator=g)
        tgt_in, tgt_out = tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16):
            loss = model(src, tgt_in, tgt_out)
        loss.backward()
        opt.step()
        t1, c1 = time.perf_counter(), time.process_time()
        if timed:
            times.append(t1 - t0)
            cpu.append(c1 - c0)
            losses.append(loss.item())

    for _ in range(a.warmup):
        step_once(False)
    if not a.bursts:
        for _ in range(a.steps):
            step_once(True)
    else:  # one number of steps per line on stdin; one BURST line for each (train_bench --bursts)
        print("READY", flush=True)  # warmed up
        for line in sys.stdin:
            if not line.strip():
                continue
            k = int(line)
            if k < 1:
                sys.exit(f"torch_train.py --bursts: expected a number of steps >= 1 per line; got {k}")
            first = len(times)
            for _ in range(k):
                step_once(True)
            per = sum(times[first:]) / k
            print(f"BURST tokens_per_s={a.batch * a.tgt_len / per:.1f} step_ms={per * 1e3:.2f} "
                  f"cpu_ms={sum(cpu[first:]) / k * 1e3:.2f}", flush=True)
    step = sum(times) / len(times)
    print(f"loss {losses[0]:.4f} (first timed step) -> {losses[-1]:.4f} (last)")
    print(f"step: mean {step * 1e3:.1f} ms, median {sorted(times)[len(times) // 2] * 1e3:.1f} ms")
    print(f"RESULT tokens_per_s={a.batch * a.tgt_len / step:.1f} step_ms={step * 1e3:.2f} "
          f"cpu_ms={sum(cpu) / len(cpu) * 1e3:.2f}")


if __name__ == "__main__":
    main()
