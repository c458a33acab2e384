"""Seeded random attention cases shared by the tests, and a float64 numpy oracle.

A case is a dict of numpy inputs (q, k, v float32 or float64 views, possibly
non-contiguous) and attn.attention keyword arguments, plus the explicit
boolean 'allowed' matrix [B, H, Lq, Lk] that the oracle and torch use.
"""

import numpy as np

KINDS = ["plain", "bool_mask", "float_mask", "causal_tl", "causal_br", "window", "softcap", "key_lengths",
         "fully_masked", "huge", "gqa", "noncontig", "lq1", "scale"]


def _allowed(B, H, lq, lk, *, causal=False, align="top_left", window=(-1, -1), key_lengths=None, allow=None):
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    p = i if align == "top_left" else i + lk - lq
    ok = np.ones((lq, lk), bool)
    if causal:
        ok &= j <= p
    left, right = window
    if left >= 0:
        ok &= j >= p - left
    if right >= 0:
        ok &= j <= p + right
    ok = np.broadcast_to(ok, (B, H, lq, lk)).copy()
    if key_lengths is not None:
        for b, n in enumerate(key_lengths):
            ok[b, :, :, n:] = False
    if allow is not None:
        ok &= np.broadcast_to(allow, ok.shape)
    return ok


def make_case(seed, kind=None):
    rng = np.random.default_rng(seed)
    kind = kind or KINDS[seed % len(KINDS)]
    B = int(rng.integers(1, 4))
    hkv = int(rng.integers(1, 4))
    group = int(rng.integers(1, 4)) if kind == "gqa" else 1
    H = hkv * group
    lq = 1 if kind == "lq1" else int(rng.integers(1, 40))
    lk = int(rng.integers(1, 40))
    D = int(rng.choice([1, 3, 7, 8, 16, 17, 33, 64]))
    q = rng.standard_normal((B, H, lq, D))
    k = rng.standard_normal((B, hkv, lk, D))
    v = rng.standard_normal((B, hkv, lk, D))
    if kind == "huge":
        q *= 30.0
        k *= 30.0
    kw = {}
    extra = {}
    if kind == "bool_mask" or kind == "fully_masked":
        shape = [(lq, lk), (B, 1, lq, lk), (B, H, lq, lk), (1, lk)][int(rng.integers(0, 4))]
        allow = rng.random(shape) < 0.7
        if kind == "fully_masked":
            allow = np.broadcast_to(allow, (B, H, lq, lk)).copy()
            allow[:, :, rng.integers(0, lq)] = False
        kw["attn_mask"] = allow
        extra["allow"] = allow
    if kind == "float_mask":
        shape = [(lq, lk), (B, 1, lq, lk), (B, H, lq, lk)][int(rng.integers(0, 3))]
        bias = rng.standard_normal(shape).astype(np.float32)
        bias[rng.random(shape) < 0.2] = -np.inf
        kw["attn_mask"] = bias
    if kind in ("causal_tl", "causal_br"):
        kw["is_causal"] = True
        kw["align"] = "top_left" if kind == "causal_tl" else "bottom_right"
    if kind == "window":
        left, right = int(rng.integers(-1, 6)), int(rng.integers(-1, 6))
        kw["window"] = (left, right)
        kw["align"] = ["top_left", "bottom_right"][int(rng.integers(0, 2))]
        kw["is_causal"] = bool(rng.integers(0, 2))
    if kind == "softcap":
        kw["softcap"] = float(rng.uniform(0.5, 5.0))
        q *= 3
    if kind == "key_lengths":
        kw["key_lengths"] = [int(rng.integers(0, lk + 1)) for _ in range(B)]
    if kind == "scale":
        kw["scale"] = float(rng.uniform(0.01, 2.0))
    if kind == "gqa":
        kw["enable_gqa"] = True
    dtype = np.float64 if rng.random() < 0.15 else np.float32
    q, k, v = (x.astype(dtype) for x in (q, k, v))
    if kind == "noncontig":
        # [B, L, H, D] memory read as [B, H, L, D], and a strided last dim for v
        q = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        k = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        v2 = np.zeros(v.shape[:-1] + (2 * D,), dtype)
        v2[..., ::2] = v
        v = v2[..., ::2]
    allowed = _allowed(B, H, lq, lk, causal=kw.get("is_causal", False), align=kw.get("align", "top_left"),
                       window=kw.get("window", (-1, -1)), key_lengths=kw.get("key_lengths"),
                       allow=extra.get("allow"))
    bias = kw.get("attn_mask") if kind == "float_mask" else None
    if bias is not None:
        allowed &= np.broadcast_to(np.isfinite(bias), allowed.shape)
    return dict(kind=kind, q=q, k=k, v=v, kwargs=kw, allowed=allowed, bias=bias, seed=seed)


def reference(case, dout=None):
    """float64 out, lse and, with dout, (dq, dk, dv) from the explicit formula."""
    q, k, v = (np.asarray(case[n], np.float64) for n in ("q", "k", "v"))
    kw = case["kwargs"]
    B, H, lq, D = q.shape
    hkv = k.shape[1]
    k = np.repeat(k, H // hkv, axis=1)
    v = np.repeat(v, H // hkv, axis=1)
    scale = kw.get("scale", 1 / np.sqrt(D))
    s0 = q @ k.transpose(0, 1, 3, 2) * scale
    c = kw.get("softcap")
    s = c * np.tanh(s0 / c) if c else s0
    if case["bias"] is not None:
        s = s + np.where(np.isfinite(case["bias"]), case["bias"], 0.0)
    allowed = case["allowed"]
    s = np.where(allowed, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    empty = ~allowed.any(axis=-1, keepdims=True)
    m = np.where(empty, 0, m)
    e = np.where(allowed, np.exp(s - m), 0.0)
    z = e.sum(-1, keepdims=True)
    p = np.where(empty, 0.0, e / np.where(empty, 1, z))
    out = p @ v
    lse = np.where(empty[..., 0], -np.inf, (m + np.log(np.where(empty, 1, z)))[..., 0])
    if dout is None:
        return out, lse, p
    dp = dout @ v.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ dout
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    if c:
        ds = ds * (1 - np.tanh(s0 / c) ** 2)
    dq = ds @ k * scale
    dk = ds.transpose(0, 1, 3, 2) @ q * scale
    g = H // hkv
    dk = dk.reshape(B, hkv, g, *dk.shape[2:]).sum(2)
    dv = dv.reshape(B, hkv, g, *dv.shape[2:]).sum(2)
    return out, lse, p, (dq, dk, dv)


def tolerance(case):
    """Absolute tolerance for float32 results against the float64 oracle."""
    if case["q"].dtype == np.float64:
        return 1e-10
    if case["kind"] == "huge":
        return 2e-3  # logits of ~1e4 carry fp32 rounding of ~1e-3 into the exponent
    return 3e-5
