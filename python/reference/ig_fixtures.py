#!/usr/bin/env python3
"""PyTorch reference for integrated gradients (tests/models/ig_torch_test.cc, issue 41).

Two tiny EncoderClassifier models written in plain torch with attn's parameter names (the classes of
transformer_fixtures.py): "prenorm" (pre-norm, GELU, learned positions, GQA) and "postnorm" (post-norm
LayerNorm, GELU, learned positions, as e5's layers). For one input each, in float64:

  f(e)     the logit of the predicted class as a function of the token embeddings e [L, C] (the embedding
           rows; positions are added inside the model and are not attributed)
  IG_i     = sum_c (e_ic - b_ic) * (1/m) sum_k df/de_ic (b + a_k (e - b)),  a_k = (k + 1/2) / m  (midpoint)

for m = 20 and three baselines: "pad" (the [PAD] row, pad_id 0, at every position), "zeros", and "pad_keep"
(the [PAD] row except at the first and the last position, which keep the input's own rows: the special
tokens <s> and </s> held fixed, models::AttributionOptions::keep = {0, L - 1}). The file holds

  <case>/param/<name>  every parameter (F32; the model is evaluated in float64 from these values)
  <case>/in/ids        the input ids [1, L] (I64)
  <case>/<baseline>/ig [L], <case>/<baseline>/f_input, f_baseline (rank 0), <case>/target (I64 rank 0)

and in __metadata__: "cases", "<case>/config" (attn's TransformerConfig JSON), "steps", the torch version and
seed. torch is needed only to regenerate the file:

  python3 python/reference/ig_fixtures.py
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_fixtures import ST_DTYPES, save_file  # noqa: E402
from transformer_fixtures import BASE, EncoderClassifier  # noqa: E402

ST_DTYPES.setdefault(torch.int64, "I64")

SEED = 20261207
STEPS = 20
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models", "data",
                   "ig_torch.safetensors")


def init(model, gen):
    with torch.no_grad():
        for name, p in sorted(model.named()):
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))


def logits_from_tokens(model, tokens):
    """tokens [n, L, C] (embedding rows, float64) -> logits [n, classes]: attn's forward_embeddings."""
    L = tokens.shape[1]
    x = tokens + model.pos[:L]
    h = model.encoder(x, [], "encoder.", lambda layer, y: layer(y, None))
    return model.classifier(h[:, 0])


def integrated_gradients(model, e, b, target, m):
    alphas = (torch.arange(m, dtype=torch.float64) + 0.5) / m
    pts = (b[None] + alphas[:, None, None] * (e - b)[None]).clone().requires_grad_(True)  # [m, L, C]
    f = logits_from_tokens(model, pts)[:, target]
    (g,) = torch.autograd.grad(f.sum(), pts)
    ig = ((e - b) * g.mean(0)).sum(-1)
    with torch.no_grad():
        fe = logits_from_tokens(model, e[None])[0, target]
        fb = logits_from_tokens(model, b[None])[0, target]
    return ig, fe, fb


def main():
    gen = torch.Generator().manual_seed(SEED)
    tensors, meta, names = {}, {"torch": torch.__version__, "seed": str(SEED), "steps": str(STEPS)}, []
    common = dict(src_vocab=23, kv_heads=2, activation="gelu", positions="learned", scale_embeddings=False,
                  num_classes=3, tie_output=False, share_embeddings=False, max_len=16)
    for name, c in (("prenorm", dict(BASE, pre_norm=True, **common)),
                    ("postnorm", dict(BASE, pre_norm=False, **common))):
        names.append(name)
        model = EncoderClassifier(c)
        init(model, gen)
        ids = torch.randint(1, c["src_vocab"], (1, 9), generator=gen, dtype=torch.int64)
        for pname, p in model.named():
            tensors[f"{name}/param/{pname}"] = p.detach().clone().float()
        model = model.double()
        with torch.no_grad():  # the F32 values, evaluated in float64
            for pname, p in model.named():
                p.copy_(tensors[f"{name}/param/{pname}"].double())
        e = model.embed[ids[0]].detach()
        with torch.no_grad():
            target = int(logits_from_tokens(model, e[None])[0].argmax())
        tensors[f"{name}/in/ids"] = ids
        tensors[f"{name}/target"] = torch.tensor(target, dtype=torch.int64)
        for base in ("pad", "zeros", "pad_keep"):
            b = model.embed[torch.full_like(ids[0], c["pad_id"])].detach() if base != "zeros" else torch.zeros_like(e)
            if base == "pad_keep":
                b = b.clone()
                b[0], b[-1] = e[0], e[-1]
            ig, fe, fb = integrated_gradients(model, e, b, target, STEPS)
            tensors[f"{name}/{base}/ig"] = ig.detach().clone()
            tensors[f"{name}/{base}/f_input"] = fe.detach().clone()
            tensors[f"{name}/{base}/f_baseline"] = fb.detach().clone()
        meta[f"{name}/config"] = json.dumps(c)
    meta["cases"] = json.dumps(names)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(tensors, OUT, metadata=meta)
    print(f"wrote {os.path.normpath(OUT)}: {len(tensors)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
