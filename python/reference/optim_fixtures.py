#!/usr/bin/env python3
"""PyTorch reference runs of the optimizers (tests/train/optim_torch_test.cc).

Writes tests/train/data/optim_torch.safetensors. A 2-layer MLP
  logits = linear(gelu(linear(x, w1, b1)), w2, b2),  loss = F.cross_entropy(logits, y)
with fixed seeded data (x [16, 4] F32, y [16] I64) and initial weights is trained
for STEPS full-batch steps by each case's optimizer. For every case it stores

  <case>/loss          F64 [STEPS]: the loss computed before update t (t = 0..STEPS-1)
  <case>/norm          F64 [STEPS]: the global gradient norm before clipping (clip case only)
  <case>/final.<p>     F32: the parameters after STEPS updates
  <case>/m.<p>, v.<p>  F32: AdamW's exp_avg / exp_avg_sq after STEPS updates (AdamW cases)
  <case>/momentum.<p>  F32: SGD's momentum buffer (SGD case)

plus init.<p>, x and y shared by all cases. Cases (also in __metadata__):

  adamw       torch.optim.AdamW(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1), b1, b2 in a
              param group with weight_decay=0 (attn: AdamWOptions::no_decay names them)
  adamw_clip  the same, torch.nn.utils.clip_grad_norm_(params, 0.5) before every step
  sgd         torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0, weight_decay=1e-3, nesterov=False)
  sgd_nesterov torch.optim.SGD(lr=0.05, momentum=0.9, weight_decay=0, nesterov=True)

torch runs the single-tensor (foreach=False) implementations, in float32. torch is only
needed to regenerate the file:

  python3 python/reference/optim_fixtures.py
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_fixtures import ST_DTYPES, save_file  # noqa: E402  (the shared minimal writer)

ST_DTYPES.setdefault(torch.int64, "I64")
ST_DTYPES.setdefault(torch.float64, "F64")

SEED = 20261129
STEPS = 10
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "train", "data",
                   "optim_torch.safetensors")
NAMES = ["w1", "b1", "w2", "b2"]


def forward(p, x, y):
    return F.cross_entropy(F.linear(F.gelu(F.linear(x, p["w1"], p["b1"])), p["w2"], p["b2"]), y)


def run(case, init, x, y):
    p = {n: init[n].clone().requires_grad_(True) for n in NAMES}
    if case.startswith("adamw"):
        groups = [{"params": [p["w1"], p["w2"]]}, {"params": [p["b1"], p["b2"]], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, foreach=False)
    elif case == "sgd":
        opt = torch.optim.SGD(list(p.values()), lr=0.1, momentum=0.9, dampening=0, weight_decay=1e-3,
                              nesterov=False, foreach=False)
    else:
        opt = torch.optim.SGD(list(p.values()), lr=0.05, momentum=0.9, weight_decay=0, nesterov=True,
                              foreach=False)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = forward(p, x, y)
        loss.backward()
        losses.append(loss.item())
        if case == "adamw_clip":
            norms.append(torch.nn.utils.clip_grad_norm_(list(p.values()), 0.5).item())
        opt.step()
    out = {f"{case}/loss": torch.tensor(losses, dtype=torch.float64)}
    if norms:
        out[f"{case}/norm"] = torch.tensor(norms, dtype=torch.float64)
    for n in NAMES:
        out[f"{case}/final.{n}"] = p[n].detach().clone()
        st = opt.state[p[n]]
        if case.startswith("adamw"):
            out[f"{case}/m.{n}"] = st["exp_avg"].clone()
            out[f"{case}/v.{n}"] = st["exp_avg_sq"].clone()
        else:
            out[f"{case}/momentum.{n}"] = st["momentum_buffer"].clone()
    return out


def main():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(16, 4, generator=gen)
    y = torch.randint(0, 3, (16,), generator=gen, dtype=torch.int64)
    init = {"w1": torch.randn(8, 4, generator=gen) * 0.5, "b1": torch.randn(8, generator=gen) * 0.1,
            "w2": torch.randn(3, 8, generator=gen) * 0.5, "b2": torch.randn(3, generator=gen) * 0.1}
    tensors = {"x": x, "y": y}
    tensors.update({f"init.{n}": t for n, t in init.items()})
    cases = ["adamw", "adamw_clip", "sgd", "sgd_nesterov"]
    for c in cases:
        tensors.update(run(c, init, x, y))
    meta = {"cases": json.dumps(cases), "steps": str(STEPS), "seed": str(SEED), "torch": torch.__version__,
            "model": "cross_entropy(linear(gelu(linear(x, w1, b1)), w2, b2), y)"}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(tensors, OUT, meta)
    print(f"wrote {os.path.normpath(OUT)}: {len(tensors)} tensors")


if __name__ == "__main__":
    main()
