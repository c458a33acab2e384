#!/usr/bin/env python3
"""PyTorch reference dump for the attention operator (tests/ops/torch_parity_test.cc).

Writes tests/ops/data/attention_torch.safetensors. For every case it stores

  <case>/q, k, v      F32 inputs, q [B, H, Lq, D], k and v [B, Hkv, Lk, D]
  <case>/allow        BOOL mask (True = may attend), when the case has one
  <case>/bias         F32 additive mask, when the case has one
  <case>/dout         F32 upstream gradient (fixed random)
  <case>/out          F32 torch.nn.functional.scaled_dot_product_attention output
  <case>/dq, dk, dv   F32 autograd gradients of sum(dout * out)
  <case>/lse          F32 log-sum-exp of the masked, scaled logits (torch.logsumexp)
  <case>/out64, dq64, dk64, dv64, lse64
                      F64: the same computed by torch in float64 from the same
                      (f32-valued) inputs, for a tight check of attn's f64 path

and in __metadata__: "cases" (JSON list of case names), "case/<name>" (JSON:
the attn options that express the same computation, plus how torch was called),
the torch version, the seed. The file is written by the small save_file()
below (byte-for-byte reproducible) and read with the safetensors package as
a cross-check.

Masks that attn has as options (bottom-right causal, sliding window, key
lengths) are given to torch as explicit boolean masks built here from their
definitions, so those cases check attn's option semantics against an
independent construction.

Seeded and deterministic on CPU. torch is needed only to regenerate the file:

  python3 python/reference/attention_fixtures.py
"""
import json
import os
import sys

import struct

import torch
import torch.nn.functional as F

SEED = 20240607
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "ops", "data",
                   "attention_torch.safetensors")


def causal_mask(lq, lk, offset):
    """allow[i, j] = j <= i + offset (offset 0: top-left, lk - lq: bottom-right)."""
    i = torch.arange(lq).unsqueeze(1)
    j = torch.arange(lk).unsqueeze(0)
    return j <= i + offset


def window_mask(lq, lk, left, right, offset=0):
    i = torch.arange(lq).unsqueeze(1) + offset
    j = torch.arange(lk).unsqueeze(0)
    return (j >= i - left) & (j <= i + right)


def random_allow(gen, shape, p_true=0.7):
    """Random boolean mask in which every row keeps at least one key."""
    m = torch.rand(shape, generator=gen) < p_true
    first = torch.randint(0, shape[-1], shape[:-1], generator=gen)
    m.scatter_(-1, first.unsqueeze(-1), True)
    return m


def make_cases(gen):
    """Each case: shapes, the torch call (masks, flags) and the matching attn options."""
    cases = []

    def add(name, B, H, Hkv, Lq, Lk, D, attn, torch_kw, allow=None, bias=None, torch_allow=None, note=""):
        # allow/bias go to both attn and torch; torch_allow replaces allow for torch only.
        cases.append(dict(name=name, B=B, H=H, Hkv=Hkv, Lq=Lq, Lk=Lk, D=D, attn=attn, torch_kw=torch_kw,
                          allow=allow, bias=bias, torch_allow=allow if torch_allow is None else torch_allow,
                          note=note))

    add("plain", 2, 3, 3, 5, 5, 8, {}, {})
    # Lq < Lk, so top-left and bottom-right alignment give different masks.
    add("causal_top_left", 1, 2, 2, 4, 7, 8, {"causal": True, "align": "top_left"}, {"is_causal": True},
        note="torch is_causal is top-left aligned")
    add("bool_mask", 2, 2, 2, 5, 6, 4, {}, {}, allow=random_allow(gen, (2, 1, 5, 6)),
        note="allow [B, 1, Lq, Lk] broadcast over heads; True = may attend in both")
    bias = torch.rand((1, 3, 4, 6), generator=gen) * 4 - 2
    bias[0, 1, 2, 3] = float("-inf")
    bias[0, 2, 0, 0] = float("-inf")
    add("float_mask", 2, 3, 3, 4, 6, 8, {}, {}, bias=bias, note="additive bias [1, H, Lq, Lk] with some -inf")
    add("gqa", 2, 4, 2, 3, 5, 8, {}, {"enable_gqa": True}, note="H = 4 query heads share Hkv = 2 kv heads")
    add("custom_scale", 1, 2, 2, 4, 4, 16, {"scale": 0.3}, {"scale": 0.3})
    add("lq_ne_lk", 1, 2, 2, 6, 11, 5, {}, {}, note="Lq != Lk and D = 5, off any SIMD width")
    add("causal_bottom_right", 2, 2, 2, 3, 8, 8, {"causal": True, "align": "bottom_right"}, {},
        torch_allow=causal_mask(3, 8, 8 - 3), note="torch gets an explicit tril mask with diagonal Lk - Lq")
    allow = random_allow(gen, (1, 2, 4, 5))
    allow[0, 1, 2, :] = False  # one fully masked row
    add("fully_masked_row", 1, 2, 2, 4, 5, 8, {}, {}, allow=allow,
        note="row (0, 1, 2) sees no key: attn gives out 0, lse -inf, zero grads by design")
    lengths = [7, 3]
    add("key_lengths", 2, 2, 2, 4, 7, 8, {"key_lengths": lengths}, {},
        torch_allow=torch.stack([torch.arange(7) < n for n in lengths]).reshape(2, 1, 1, 7),
        note="torch gets a key padding mask [B, 1, 1, Lk] built from the lengths")
    add("sliding_window", 1, 2, 2, 6, 6, 8, {"window_left": 2, "window_right": 1}, {},
        torch_allow=window_mask(6, 6, 2, 1), note="torch gets the explicit band i - 2 <= j <= i + 1")
    # Everything at once: GQA, bottom-right causal, a boolean mask, a bias and a scale.
    Lq, Lk = 5, 9
    diag = torch.arange(Lk).unsqueeze(0) == torch.arange(Lq).unsqueeze(1) + (Lk - Lq)
    allow = random_allow(gen, (2, 4, Lq, Lk), 0.7) | diag  # the diagonal stays: no row empty after causal
    add("combined", 2, 4, 2, Lq, Lk, 8,
        {"causal": True, "align": "bottom_right", "scale": 0.25}, {"enable_gqa": True, "scale": 0.25},
        allow=allow, bias=torch.rand((1, 4, Lq, Lk), generator=gen) - 0.5,
        torch_allow=allow & causal_mask(Lq, Lk, Lk - Lq),
        note="GQA + bottom-right causal + allow + bias + scale; torch gets the causal part inside its mask")
    return cases


def run_torch(c, q, k, v, dout, dtype):
    """SDPA forward and autograd backward in `dtype`; returns out, dq, dk, dv, lse."""
    q, k, v = (t.detach().clone().to(dtype).requires_grad_(True) for t in (q, k, v))
    mask = None
    if c["torch_allow"] is not None and c["bias"] is not None:
        mask = c["bias"].to(dtype).masked_fill(~c["torch_allow"], float("-inf"))
    elif c["torch_allow"] is not None:
        mask = c["torch_allow"]
    elif c["bias"] is not None:
        mask = c["bias"].to(dtype)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **c["torch_kw"])
    out.backward(dout.to(dtype))
    # Log-sum-exp of the same masked, scaled logits, computed directly.
    with torch.no_grad():
        kk = k.repeat_interleave(c["H"] // c["Hkv"], dim=1)
        scale = c["torch_kw"].get("scale", 1.0 / c["D"] ** 0.5)
        s = (q @ kk.transpose(-1, -2)) * scale
        if c["torch_kw"].get("is_causal"):
            s = s.masked_fill(~causal_mask(c["Lq"], c["Lk"], 0), float("-inf"))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
        lse = torch.logsumexp(s, dim=-1)
    return out.detach(), q.grad, k.grad, v.grad, lse


ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.bool: "BOOL"}


def save_file(tensors, path, metadata):
    """A minimal safetensors writer: names sorted, metadata keys sorted, header
    padded to 8 bytes, so the same tensors give the same bytes on every run
    (the safetensors package orders metadata by a hash map)."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = t.numpy().tobytes()  # little-endian on every host we run on
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def check_with_package(path, tensors, meta):
    """Reads the file back with the safetensors package (when installed)."""
    try:
        from safetensors import safe_open
    except ImportError:
        return
    with safe_open(path, "pt") as f:
        assert f.metadata() == meta
        assert sorted(f.keys()) == sorted(tensors)
        for name, t in tensors.items():
            assert torch.equal(f.get_tensor(name).nan_to_num(), t.nan_to_num()), name


def main():
    gen = torch.Generator().manual_seed(SEED)
    cases = make_cases(gen)
    tensors, meta = {}, {}
    for c in cases:
        n = c["name"]
        q = torch.randn((c["B"], c["H"], c["Lq"], c["D"]), generator=gen)
        k = torch.randn((c["B"], c["Hkv"], c["Lk"], c["D"]), generator=gen)
        v = torch.randn((c["B"], c["Hkv"], c["Lk"], c["D"]), generator=gen)
        dout = torch.randn((c["B"], c["H"], c["Lq"], c["D"]), generator=gen)
        tensors.update({f"{n}/q": q, f"{n}/k": k, f"{n}/v": v, f"{n}/dout": dout})
        if c["allow"] is not None:
            tensors[f"{n}/allow"] = c["allow"].contiguous()
        if c["bias"] is not None:
            tensors[f"{n}/bias"] = c["bias"].to(torch.float32).contiguous()
        for dtype, suffix in ((torch.float32, ""), (torch.float64, "64")):
            out, dq, dk, dv, lse = run_torch(c, q, k, v, dout, dtype)
            for name, t in (("out", out), ("dq", dq), ("dk", dk), ("dv", dv), ("lse", lse)):
                tensors[f"{n}/{name}{suffix}"] = t.contiguous()
        masked_rows = int((tensors[f"{n}/lse64"] == float("-inf")).sum())
        torch_nan = bool(torch.isnan(tensors[f"{n}/out"]).any())
        meta[f"case/{n}"] = json.dumps({
            "attn": c["attn"],
            "torch": {k: v for k, v in c["torch_kw"].items()},
            "mask": ("allow+bias" if c["allow"] is not None and c["bias"] is not None else
                     "allow" if c["allow"] is not None else "bias" if c["bias"] is not None else "none"),
            "fully_masked_rows": masked_rows,
            "torch_out_has_nan": torch_nan,
            "note": c["note"],
        }, sort_keys=True)
    meta.update({
        "cases": json.dumps([c["name"] for c in cases]),
        "generator": "python/reference/attention_fixtures.py",
        "seed": str(SEED),
        "torch_version": torch.__version__,
        "sdpa": "torch.nn.functional.scaled_dot_product_attention on CPU, default backend selection",
    })
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(tensors, OUT, metadata=meta)
    check_with_package(OUT, tensors, meta)
    print(f"wrote {os.path.relpath(OUT)}: {os.path.getsize(OUT)} bytes, {len(tensors)} tensors, torch {torch.__version__}")
    for c in cases:
        info = json.loads(meta[f"case/{c['name']}"])
        print(f"  {c['name']:20s} q [{c['B']}, {c['H']}, {c['Lq']}, {c['D']}]  k/v [{c['B']}, {c['Hkv']}, "
              f"{c['Lk']}, {c['D']}]  mask {info['mask']:10s} attn {json.dumps(c['attn'])}"
              + (f"  fully masked rows: {info['fully_masked_rows']} (torch NaN: {info['torch_out_has_nan']})"
                 if info["fully_masked_rows"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
