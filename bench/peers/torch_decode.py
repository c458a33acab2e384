#!/usr/bin/env python3
"""PyTorch peer of bench/decode_bench: greedy decoding with a KV cache.

A straightforward incremental encoder-decoder in plain torch (eager, torch.inference_mode,
F.scaled_dot_product_attention, self-attention keys/values concatenated step by step, the
cross-attention keys/values computed once), with the weights attn wrote
(decode_bench --weights FILE: safetensors with attn's parameter names and its
TransformerConfig JSON in the metadata). Post-norm, ReLU, sinusoidal positions,
shared/tied/scaled embeddings: the configuration decode_bench uses.

  torch_decode.py --weights FILE [--ids FILE] [--batch 1,32] [--src 32] [--new 64]
                  [--threads 2] [--min-time 2] [--clock wall|thread]

--ids (decode_bench --ids): decode the same sources and report how many generated tokens
agree with attn's. Prints one JSON object per batch size, the fields of decode_bench.
Needs torch and safetensors (PyPI); attn itself never does.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F
from safetensors import safe_open


def time_median(fn, min_time, min_reps=3, clock=time.perf_counter):
    fn()
    ts = []
    start = time.perf_counter()
    while len(ts) < min_reps or time.perf_counter() - start < min_time:
        t = clock()
        fn()
        ts.append(clock() - t)
    return statistics.median(ts)


def sinusoidal(L, C, offset=0):
    pos = torch.arange(offset, offset + L, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, C, 2, dtype=torch.float64)
    ang = pos / (10000.0 ** (i2 / C))
    pe = torch.zeros(L, C, dtype=torch.float64)
    pe[:, 0::2] = ang.sin()
    pe[:, 1::2] = ang.cos()[:, : C // 2]
    return pe.float()


class Model:
    def __init__(self, w, c):
        self.w, self.c = w, c
        self.d, self.h = c["d_model"], c["heads"]
        self.dh = self.d // self.h
        self.eps = c["norm_eps"]
        assert c["positions"] == "sinusoidal" and not c["pre_norm"] and c["activation"] == "relu"
        assert c["share_embeddings"] and c["tie_output"] and (c["kv_heads"] in (0, c["heads"]))
        self.emb = w["embed.weight"]
        self.pe = sinusoidal(c["max_len"], self.d)

    def lin(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    def norm(self, x, name):
        return F.layer_norm(x, (self.d,), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def heads(self, t):  # [B, L, C] -> [B, H, L, D]
        return t.view(t.shape[0], t.shape[1], self.h, self.dh).transpose(1, 2)

    def merge(self, o):  # [B, H, L, D] -> [B, L, C]
        return o.transpose(1, 2).reshape(o.shape[0], o.shape[2], self.d)

    def embed(self, ids, offset):
        x = F.embedding(ids, self.emb) * math.sqrt(self.d)
        return x + self.pe[offset: offset + ids.shape[1]]

    def ffn(self, x, p):
        return self.lin(F.relu(self.lin(x, p + "ffn.w1")), p + "ffn.w2")

    def encode(self, src):
        x = self.embed(src, 0)
        for i in range(self.c["encoder_layers"]):
            p = "encoder.layers.%d." % i
            q, k, v = (self.heads(self.lin(x, p + "self_attn." + n)) for n in ("w_q", "w_k", "w_v"))
            a = self.lin(self.merge(F.scaled_dot_product_attention(q, k, v)), p + "self_attn.w_o")
            x = self.norm(x + a, p + "norm1")
            x = self.norm(x + self.ffn(x, p), p + "norm2")
        return x

    def start(self, memory):
        """The decoder cache: cross-attention k/v from the memory, empty self-attention k/v."""
        cache = []
        for i in range(self.c["decoder_layers"]):
            p = "decoder.layers.%d.cross_attn." % i
            cache.append({"ck": self.heads(self.lin(memory, p + "w_k")),
                          "cv": self.heads(self.lin(memory, p + "w_v")), "k": None, "v": None})
        return cache

    def step(self, tok, cache, pos):
        """tok [B, 1] at position pos -> logits [B, V]."""
        x = self.embed(tok, pos)
        for i, lc in enumerate(cache):
            p = "decoder.layers.%d." % i
            q, k, v = (self.heads(self.lin(x, p + "self_attn." + n)) for n in ("w_q", "w_k", "w_v"))
            if lc["k"] is not None:
                k, v = torch.cat([lc["k"], k], dim=2), torch.cat([lc["v"], v], dim=2)
            lc["k"], lc["v"] = k, v
            a = self.lin(self.merge(F.scaled_dot_product_attention(q, k, v)), p + "self_attn.w_o")
            x = self.norm(x + a, p + "norm1")
            q = self.heads(self.lin(x, p + "cross_attn.w_q"))
            a = self.lin(self.merge(F.scaled_dot_product_attention(q, lc["ck"], lc["cv"])), p + "cross_attn.w_o")
            x = self.norm(x + a, p + "norm2")
            x = self.norm(x + self.ffn(x, p), p + "norm3")
        return F.linear(x[:, -1], self.emb)

    def greedy(self, src, new, bos):
        memory = self.encode(src)
        cache = self.start(memory)
        tok = torch.full((src.shape[0], 1), bos, dtype=torch.long)
        out = []
        for t in range(new):
            logits = self.step(tok, cache, t)
            tok = logits.argmax(-1, keepdim=True)
            out.append(tok)
        return torch.cat(out, dim=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--ids", default="")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--src", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--bos", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall",
                    help="thread: the calling thread's CPU time (use with --threads 1)")
    a = ap.parse_args()
    clock = time.thread_time if a.clock == "thread" else time.perf_counter
    torch.set_num_threads(a.threads)
    with safe_open(a.weights, "pt") as f:
        c = json.loads(f.metadata()["config"])
        w = {k: f.get_tensor(k) for k in f.keys()}
    m = Model(w, c)
    ref = json.load(open(a.ids)) if a.ids else {}
    V = c["tgt_vocab"]
    for B in (int(x) for x in a.batch.split(",")):
        if str(B) in ref:
            src = torch.tensor(ref[str(B)]["sources"], dtype=torch.long)
        else:
            src = torch.randint(6, V, (B, a.src))
        res = {}
        with torch.inference_mode():
            def run():
                res["out"] = m.greedy(src, a.new, a.bos)
            t = time_median(run, a.min_time, clock=clock)
        row = {"engine": "torch", "batch": B, "src": src.shape[1], "new": a.new, "vocab": V,
               "threads": a.threads, "clock": a.clock, "seconds": round(t, 6), "tokens_per_s": round(B * a.new / t, 1),
               "ms_per_step": round(1e3 * t / a.new, 3), "torch": torch.__version__}
        if str(B) in ref:
            want = torch.tensor(ref[str(B)]["generated"], dtype=torch.long)
            row["same_tokens"] = float((want == res["out"]).float().mean())
            # rows identical up to the first disagreement (greedy paths diverge after it)
            row["same_rows"] = int(sum(bool((want[i] == res["out"][i]).all()) for i in range(B)))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
