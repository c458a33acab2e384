#!/usr/bin/env python3
"""PyTorch reference dump for the differentiable ops (tests/autograd/torch_parity_test.cc).

Writes tests/autograd/data/ops_torch.safetensors. For every case it stores

  <case>/in<i>        inputs (F32, or I64 ids/targets), in the order the attn op takes them
  <case>/dout         F32 upstream gradient (fixed random; shape of the output)
  <case>/out          F32 output of the torch op
  <case>/grad<i>      F32 autograd gradient of sum(dout * out) for each float input
  <case>/out64, grad<i>64
                      F64: the same computed by torch in float64 from the same
                      (f32-valued) inputs, for a tight check of attn's f64 path

and in __metadata__: "cases" (JSON list), "case/<name>" (JSON: the torch call and
its arguments), the torch version and the seed. The attn side of each case
(which op, which arguments) is written out in the test; the metadata says the
same in words. Written by the same minimal, byte-reproducible writer as
attention_fixtures.py. torch is needed only to regenerate the file:

  python3 python/reference/ops_fixtures.py
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_fixtures import ST_DTYPES, save_file  # noqa: E402  (the shared minimal writer)

ST_DTYPES.setdefault(torch.int64, "I64")

SEED = 20240611
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "autograd", "data",
                   "ops_torch.safetensors")


def cases(gen):
    """(name, inputs, fn(*inputs) -> out, which inputs are float/differentiable, description)."""
    r = lambda *s: torch.randn(s, generator=gen)  # noqa: E731
    c = []
    c.append(("matmul_broadcast", [r(2, 1, 3, 4), r(3, 4, 5)], lambda a, b: a @ b, "a @ b, batch dims broadcast"))
    c.append(("linear", [r(2, 3, 5), r(4, 5), r(4)], F.linear, "F.linear(x, w, b)"))
    c.append(("layer_norm", [r(3, 8), r(8), r(8)], lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5),
              "F.layer_norm(x, (8,), w, b, eps=1e-5)"))
    c.append(("rms_norm", [r(3, 8), r(8)], lambda x, w: F.rms_norm(x, (8,), w, 1e-6),
              "F.rms_norm(x, (8,), w, eps=1e-6)"))
    c.append(("gelu", [r(4, 6) * 2], lambda x: F.gelu(x), "F.gelu(x) (exact, erf)"))
    c.append(("gelu_tanh", [r(4, 6) * 2], lambda x: F.gelu(x, approximate="tanh"), "F.gelu(x, approximate='tanh')"))
    c.append(("silu", [r(4, 6) * 2], F.silu, "F.silu(x)"))
    c.append(("swiglu", [r(3, 6), r(3, 6)], lambda a, b: F.silu(a) * b, "F.silu(a) * b"))
    c.append(("softmax", [r(3, 7) * 2], lambda x: F.softmax(x, dim=-1), "F.softmax(x, -1)"))
    c.append(("log_softmax", [r(3, 7) * 2], lambda x: F.log_softmax(x, dim=-1), "F.log_softmax(x, -1)"))
    targets = torch.tensor([3, -100, 0, 4, 2, -100], dtype=torch.int64)
    c.append(("cross_entropy", [r(6, 5) * 2, targets], lambda x, t: F.cross_entropy(x, t),
              "F.cross_entropy(logits, targets) (ignore_index -100, mean)"))
    c.append(("cross_entropy_smoothing", [r(6, 5) * 2, targets],
              lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
              "F.cross_entropy(logits, targets, label_smoothing=0.1) (ignore_index -100, mean)"))
    ids = torch.tensor([[1, 4, 4], [0, 2, 1]], dtype=torch.int64)
    c.append(("embedding", [ids, r(5, 3)], lambda i, t: F.embedding(i, t), "F.embedding(ids, table)"))
    return c


def run(fn, inputs, dout, dtype):
    xs = [x.detach().clone().to(dtype).requires_grad_(True) if x.is_floating_point() else x for x in inputs]
    out = fn(*xs)
    out.backward(dout.to(dtype))
    return out.detach(), [x.grad if x.is_floating_point() else None for x in xs]


def main():
    gen = torch.Generator().manual_seed(SEED)
    tensors, meta = {}, {}
    cs = cases(gen)
    for name, inputs, fn, desc in cs:
        with torch.no_grad():
            shape = fn(*inputs).shape
        dout = torch.randn(shape, generator=gen)
        tensors[f"{name}/dout"] = dout.contiguous()
        for i, x in enumerate(inputs):
            tensors[f"{name}/in{i}"] = x.contiguous()
        for dtype, suffix in ((torch.float32, ""), (torch.float64, "64")):
            out, grads = run(fn, inputs, dout, dtype)
            tensors[f"{name}/out{suffix}"] = out.contiguous()
            for i, g in enumerate(grads):
                if g is not None:
                    tensors[f"{name}/grad{i}{suffix}"] = g.contiguous()
        meta[f"case/{name}"] = json.dumps({"torch": desc, "inputs": [list(x.shape) for x in inputs]}, sort_keys=True)
    meta.update({
        "cases": json.dumps([c[0] for c in cs]),
        "generator": "python/reference/ops_fixtures.py",
        "seed": str(SEED),
        "torch_version": torch.__version__,
    })
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(tensors, OUT, metadata=meta)
    print(f"wrote {os.path.relpath(OUT)}: {os.path.getsize(OUT)} bytes, {len(tensors)} tensors, torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
