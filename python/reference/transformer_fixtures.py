#!/usr/bin/env python3
"""PyTorch reference for the Transformer models (tests/models/torch_parity_test.cc).

Builds three tiny models in plain torch (nn.Module + torch ops, no
nn.Transformer*) with exactly attn's parameter names and layouts
(include/attn/nn/transformer.h, include/attn/models/transformer.h):

  encdec      EncoderDecoder: post-norm, ReLU, sinusoidal positions, shared + tied +
              scaled embeddings, label smoothing 0.1, source key padding
  classifier  EncoderClassifier: pre-norm, GELU, learned positions, GQA (4 heads, 2 kv),
              unscaled embeddings, key padding
  lm          DecoderLM: pre-norm, RMSNorm, SwiGLU, RoPE (half split), GQA, no biases,
              untied output, padded targets
  encoder_layer  one EncoderLayer: pre-norm, GELU, GQA, key padding; loss = sum(out * dout)
  decoder_layer  one DecoderLayer: post-norm, ReLU, cross-attention with memory padding

(the layer cases also store <case>/grad_in/<input>, the gradient of the float inputs)

Weights are seeded random (not the engine's init: the test loads them by name),
dropout is 0. For each case the file holds

  <case>/in/<name>      inputs (I64 ids, lengths, targets)
  <case>/param/<name>   every parameter (F32)
  <case>/trace/<name>   named intermediates in forward order: encoder.embed,
                        encoder.layers.<i>, encoder.norm, decoder.embed,
                        decoder.layers.<i>, decoder.norm, logits
  <case>/loss           the loss (rank 0)
  <case>/grad/<name>    d loss / d parameter

and in __metadata__: "cases", "<case>/config" (attn's TransformerConfig JSON),
"<case>/trace" (the intermediate names in order), the torch version and seed.
torch is needed only to regenerate the file:

  python3 python/reference/transformer_fixtures.py
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_fixtures import ST_DTYPES, save_file  # noqa: E402  (the shared minimal writer)

ST_DTYPES.setdefault(torch.int64, "I64")

SEED = 20261129
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models", "data",
                   "transformer_torch.safetensors")


class Linear(torch.nn.Module):
    def __init__(self, i, o, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(o, i))
        self.bias = torch.nn.Parameter(torch.empty(o)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Norm(torch.nn.Module):
    def __init__(self, c, d):
        super().__init__()
        self.kind, self.eps = c["norm"], c["norm_eps"]
        self.weight = torch.nn.Parameter(torch.empty(d))
        self.bias = torch.nn.Parameter(torch.empty(d)) if self.kind == "layer_norm" else None

    def forward(self, x):
        if self.kind == "layer_norm":
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, offset, base):
    # x: [B, H, L, D], half-split layout: pair i is (i, i + D/2), angle pos * base^(-2i/D)
    D, L = x.shape[-1], x.shape[-2]
    inv = base ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
    ang = (torch.arange(L, dtype=torch.float64) + offset)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class MHA(torch.nn.Module):
    def __init__(self, c, use_rope):
        super().__init__()
        d, self.h = c["d_model"], c["heads"]
        self.hkv = c["kv_heads"] or c["heads"]
        self.dh = d // self.h
        self.rope, self.base = use_rope, c["rope_base"]
        self.w_q = Linear(d, d, c["bias"])
        self.w_k = Linear(d, self.hkv * self.dh, c["bias"])
        self.w_v = Linear(d, self.hkv * self.dh, c["bias"])
        self.w_o = Linear(d, d, c["bias"])

    def split(self, t, n):
        return t.view(t.shape[0], t.shape[1], n, self.dh).transpose(1, 2)

    def forward(self, x, mem, causal, key_lengths):
        B, Lq = x.shape[:2]
        q = self.split(self.w_q(x), self.h)
        k = self.split(self.w_k(mem), self.hkv)
        v = self.split(self.w_v(mem), self.hkv)
        if self.rope:
            q, k = rope(q, 0, self.base), rope(k, 0, self.base)
        rep = self.h // self.hkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        Lk = k.shape[2]
        allow = torch.ones(B, 1, Lq, Lk, dtype=torch.bool)
        if causal:
            allow = allow & torch.ones(Lq, Lk, dtype=torch.bool).tril(Lk - Lq)
        if key_lengths is not None:
            allow = allow & (torch.arange(Lk)[None, :] < key_lengths[:, None])[:, None, None, :]
        s = s.masked_fill(~allow, float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
        return self.w_o(o.transpose(1, 2).reshape(B, Lq, -1))


class FFN(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f, b = c["d_model"], c["d_ff"], c["bias"]
        self.act = c["activation"]
        self.w1, self.w2 = Linear(d, f, b), Linear(f, d, b)
        if self.act == "swiglu":
            self.w3 = Linear(d, f, b)

    def forward(self, x):
        h = self.w1(x)
        h = F.relu(h) if self.act == "relu" else F.gelu(h) if self.act == "gelu" else F.silu(h) * self.w3(x)
        return self.w2(h)


class EncoderLayer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.pre = c["pre_norm"]
        self.self_attn = MHA(c, c["positions"] == "rope")
        self.norm1, self.ffn, self.norm2 = Norm(c, c["d_model"]), FFN(c), Norm(c, c["d_model"])

    def forward(self, x, lengths):
        if self.pre:
            n = self.norm1(x)
            x = x + self.self_attn(n, n, False, lengths)
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.self_attn(x, x, False, lengths))
        return self.norm2(x + self.ffn(x))


class DecoderLayer(torch.nn.Module):
    def __init__(self, c, cross):
        super().__init__()
        self.pre, self.cross = c["pre_norm"], cross
        d = c["d_model"]
        self.self_attn = MHA(c, c["positions"] == "rope")
        self.norm1 = Norm(c, d)
        if cross:
            self.cross_attn = MHA(c, False)
        self.norm2, self.ffn = Norm(c, d), FFN(c)
        if cross:
            self.norm3 = Norm(c, d)

    def forward(self, x, mem, mem_lengths):
        fn = self.norm3 if self.cross else self.norm2
        if self.pre:
            n = self.norm1(x)
            x = x + self.self_attn(n, n, True, None)
            if self.cross:
                x = x + self.cross_attn(self.norm2(x), mem, False, mem_lengths)
            return x + self.ffn(fn(x))
        x = self.norm1(x + self.self_attn(x, x, True, None))
        if self.cross:
            x = self.norm2(x + self.cross_attn(x, mem, False, mem_lengths))
        return fn(x + self.ffn(x))


class Stack(torch.nn.Module):
    def __init__(self, c, n, make):
        super().__init__()
        self.layers = torch.nn.ModuleList([make() for _ in range(n)])
        self.norm = Norm(c, c["d_model"]) if c["pre_norm"] else None

    def forward(self, x, trace, prefix, call):
        for i, layer in enumerate(self.layers):
            x = call(layer, x)
            trace.append((prefix + "layers." + str(i), x))
        if self.norm is not None:
            x = self.norm(x)
            trace.append((prefix + "norm", x))
        return x


def sinusoidal(L, C):
    pos = torch.arange(L, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, C, 2, dtype=torch.float64)
    ang = pos / (10000.0 ** (i2 / C))
    pe = torch.zeros(L, C, dtype=torch.float64)
    pe[:, 0::2] = ang.sin()
    pe[:, 1::2] = ang.cos()[:, : C // 2]
    return pe.float()


def embed(c, table, pos_table, ids):
    x = F.embedding(ids, table)
    if c["scale_embeddings"]:
        x = x * math.sqrt(c["d_model"])
    L = ids.shape[1]
    if c["positions"] == "sinusoidal":
        x = x + sinusoidal(L, c["d_model"])
    elif c["positions"] == "learned":
        x = x + pos_table[:L]
    return x


class EncoderDecoder(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = torch.nn.Parameter(torch.empty(c["src_vocab"], c["d_model"]))  # "embed.weight"
        self.encoder = Stack(c, c["encoder_layers"], lambda: EncoderLayer(c))
        self.decoder = Stack(c, c["decoder_layers"], lambda: DecoderLayer(c, True))

    def named(self):
        return [("embed.weight" if n == "embed" else n, p) for n, p in self.named_parameters()]

    def forward(self, inp, trace):
        c = self.c
        x = embed(c, self.embed, None, inp["src"])
        trace.append(("encoder.embed", x))
        mem = self.encoder(x, trace, "encoder.", lambda l, h: l(h, inp["src_lengths"]))
        y = embed(c, self.embed, None, inp["tgt_in"])
        trace.append(("decoder.embed", y))
        h = self.decoder(y, trace, "decoder.", lambda l, h: l(h, mem, inp["src_lengths"]))
        logits = F.linear(h, self.embed)
        trace.append(("logits", logits))
        V = logits.shape[-1]
        return F.cross_entropy(logits.reshape(-1, V), inp["targets"].reshape(-1), ignore_index=c["pad_id"],
                               label_smoothing=c["label_smoothing"])


class EncoderClassifier(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = torch.nn.Parameter(torch.empty(c["src_vocab"], c["d_model"]))
        self.pos = torch.nn.Parameter(torch.empty(c["max_len"], c["d_model"]))
        self.encoder = Stack(c, c["encoder_layers"], lambda: EncoderLayer(c))
        self.classifier = Linear(c["d_model"], c["num_classes"], True)

    def named(self):
        return [(n + ".weight" if n in ("embed", "pos") else n, p) for n, p in self.named_parameters()]

    def forward(self, inp, trace):
        x = embed(self.c, self.embed, self.pos, inp["ids"])
        trace.append(("encoder.embed", x))
        h = self.encoder(x, trace, "encoder.", lambda l, h: l(h, inp["lengths"]))
        logits = self.classifier(h[:, 0])
        trace.append(("logits", logits))
        return F.cross_entropy(logits, inp["labels"], label_smoothing=self.c["label_smoothing"])


class DecoderLM(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = torch.nn.Parameter(torch.empty(c["tgt_vocab"], c["d_model"]))
        self.decoder = Stack(c, c["decoder_layers"], lambda: DecoderLayer(c, False))
        self.lm_head = Linear(c["d_model"], c["tgt_vocab"], False)

    def named(self):
        return [("embed.weight" if n == "embed" else n, p) for n, p in self.named_parameters()]

    def forward(self, inp, trace):
        x = embed(self.c, self.embed, None, inp["ids"])
        trace.append(("decoder.embed", x))
        h = self.decoder(x, trace, "decoder.", lambda l, h: l(h, None, None))
        logits = self.lm_head(h)
        trace.append(("logits", logits))
        V = logits.shape[-1]
        return F.cross_entropy(logits.reshape(-1, V), inp["targets"].reshape(-1), ignore_index=self.c["pad_id"],
                               label_smoothing=self.c["label_smoothing"])


BASE = dict(src_vocab=0, tgt_vocab=0, d_model=16, heads=4, kv_heads=0, d_ff=32, encoder_layers=2,
            decoder_layers=2, dropout=0.0, attention_dropout=0.0, max_len=16, pre_norm=False, norm="layer_norm",
            norm_eps=1e-5, activation="relu", positions="sinusoidal", rope_base=10000.0, bias=True,
            share_embeddings=True, tie_output=True, scale_embeddings=True, pad_id=0, label_smoothing=0.0,
            num_classes=0, seed=0)


def ids(gen, shape, lo, hi):
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64)


def make_cases(gen):
    cases = []
    c = dict(BASE, src_vocab=19, tgt_vocab=19, label_smoothing=0.1)
    tgt = ids(gen, (2, 5), 1, 19)
    targets = torch.cat([tgt[:, 1:], ids(gen, (2, 1), 1, 19)], dim=1)
    targets[1, 3:] = 0  # padding, ignored by the loss
    inp = dict(src=ids(gen, (2, 6), 1, 19), src_lengths=torch.tensor([6, 4]), tgt_in=tgt, targets=targets)
    inp["src"][1, 4:] = 0
    cases.append(("encdec", c, EncoderDecoder(c), inp))

    c = dict(BASE, src_vocab=17, kv_heads=2, pre_norm=True, activation="gelu", positions="learned",
             scale_embeddings=False, num_classes=3, tie_output=False, share_embeddings=False)
    inp = dict(ids=ids(gen, (2, 7), 1, 17), lengths=torch.tensor([7, 5]), labels=torch.tensor([2, 0]))
    inp["ids"][1, 5:] = 0
    cases.append(("classifier", c, EncoderClassifier(c), inp))

    c = dict(BASE, tgt_vocab=21, kv_heads=2, pre_norm=True, norm="rms_norm", norm_eps=1e-6, activation="swiglu",
             positions="rope", bias=False, tie_output=False, scale_embeddings=False)
    x = ids(gen, (2, 6), 1, 21)
    targets = torch.cat([x[:, 1:], ids(gen, (2, 1), 1, 21)], dim=1)
    targets[0, 4:] = 0
    cases.append(("lm", c, DecoderLM(c), dict(ids=x, targets=targets)))
    return cases


class LayerCase(torch.nn.Module):
    """One EncoderLayer or DecoderLayer alone; loss = sum(out * dout)."""

    def __init__(self, c, kind):
        super().__init__()
        self.kind = kind
        self.layer = EncoderLayer(c) if kind == "encoder" else DecoderLayer(c, True)

    def named(self):
        return [(n[len("layer."):], p) for n, p in self.named_parameters()]

    def forward(self, inp, trace):
        if self.kind == "encoder":
            out = self.layer(inp["x"], inp["lengths"])
        else:
            out = self.layer(inp["x"], inp["memory"], inp["memory_lengths"])
        trace.append(("out", out))
        return (out * inp["dout"]).sum()


def layer_cases(gen):
    r = lambda *s: torch.randn(s, generator=gen)  # noqa: E731
    cases = []
    c = dict(BASE, kv_heads=2, pre_norm=True, activation="gelu")
    x = r(2, 5, 16).requires_grad_(True)
    cases.append(("encoder_layer", c, LayerCase(c, "encoder"),
                  dict(x=x, lengths=torch.tensor([5, 3]), dout=r(2, 5, 16))))
    c = dict(BASE, activation="relu")
    x, mem = r(2, 4, 16).requires_grad_(True), r(2, 6, 16).requires_grad_(True)
    cases.append(("decoder_layer", c, LayerCase(c, "decoder"),
                  dict(x=x, memory=mem, memory_lengths=torch.tensor([6, 2]), dout=r(2, 4, 16))))
    return cases


def main():
    gen = torch.Generator().manual_seed(SEED)
    tensors, meta = {}, {"torch": torch.__version__, "seed": str(SEED)}
    names = []
    for name, c, model, inp in make_cases(gen) + layer_cases(gen):
        names.append(name)
        with torch.no_grad():
            for pname, p in sorted(model.named()):
                if pname.endswith("norm1.weight") or pname.endswith("norm2.weight") or pname.endswith(
                        "norm3.weight") or pname.endswith("norm.weight"):
                    p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
                elif p.dim() == 1:
                    p.copy_(0.2 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
        trace = []
        loss = model(inp, trace)
        loss.backward()
        for k, v in inp.items():
            tensors[f"{name}/in/{k}"] = v.detach().clone()
            if v.is_floating_point() and v.requires_grad:
                tensors[f"{name}/grad_in/{k}"] = v.grad.detach().clone()
        for pname, p in model.named():
            tensors[f"{name}/param/{pname}"] = p.detach().clone()
            tensors[f"{name}/grad/{pname}"] = p.grad.detach().clone()
        for tname, t in trace:
            tensors[f"{name}/trace/{tname}"] = t.detach().clone()
        tensors[f"{name}/loss"] = loss.detach().clone()
        meta[f"{name}/config"] = json.dumps(c)
        meta[f"{name}/trace"] = json.dumps([t for t, _ in trace])
    meta["cases"] = json.dumps(names)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(tensors, OUT, metadata=meta)
    print(f"wrote {os.path.normpath(OUT)}: {len(tensors)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
