#!/usr/bin/env python3
"""MiniLM embeddings of `attn embed` in fp32 and in bf16 matmul precision against the
sentence-transformers reference dump (tests/models/data/minilm_reference.{json,safetensors},
written by python/reference/minilm_fixtures.py): worst and mean cosine similarity and the
worst max |diff| over the fixture's texts. fp32 is the parity mode; this shows what
--precision bf16 costs in accuracy.

  python3 bench/minilm_precision_parity.py [--attn build/release/attn] [--threads 2]

Needs numpy and the all-MiniLM-L6-v2 model that `attn embed` finds.
"""
import argparse
import io
import json
import os
import struct
import subprocess

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "models", "data")


def load_safetensor(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        meta = header[name]
        assert meta["dtype"] == "F32", meta
        begin, end = meta["data_offsets"]
        f.seek(8 + n + begin)
        return np.frombuffer(f.read(end - begin), dtype="<f4").reshape(meta["shape"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attn", default=os.path.join(ROOT, "build", "release", "attn"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    with open(os.path.join(DATA, "minilm_reference.json"), encoding="utf-8") as f:
        texts = [c["text"] for c in json.load(f)["cases"]]
    ref = load_safetensor(os.path.join(DATA, "minilm_reference.safetensors"), "embeddings").astype(np.float64)
    print(f"all-MiniLM-L6-v2, {len(texts)} fixture texts, attn embed against sentence-transformers (fp32)")
    print("| attn precision | worst cosine | mean cosine | worst max abs diff |")
    print("|---|---|---|---|")
    for precision in ("fp32", "bf16"):
        out = subprocess.run([a.attn, "embed", "--format", "npy", "--threads", str(a.threads), "--precision",
                              precision, "--"] + texts, check=True, capture_output=True).stdout
        got = np.load(io.BytesIO(out)).astype(np.float64)
        assert got.shape == ref.shape, (got.shape, ref.shape)
        cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)
        print(f"| {precision} | {cos.min():.6f} | {cos.mean():.6f} | {np.abs(got - ref).max():.3g} |")


if __name__ == "__main__":
    main()
