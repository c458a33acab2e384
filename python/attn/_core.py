"""attn.attention and attn.attention_backward: argument handling around attn._attn.

Everything numeric runs in the C++ library (include/attn/ops/attention.h); this
file only brings inputs to the [B, H, L, D] layout the library takes, picks the
mask kind, and shapes the results back.
"""

import numpy as np

from . import _attn

_ALIGNS = ("top_left", "bottom_right")


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _as_input(x, name):
    """A numpy array or a CPU torch tensor the compiled module can borrow (it
    copies float16 to float32 and negative strides itself)."""
    if isinstance(x, np.ndarray):
        return x
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{name}: attn runs on the CPU; got a tensor on {x.device}")
        if x.requires_grad:
            x = x.detach()
        try:
            return x.numpy()  # a view (float32, float64, bool, ...): cheaper than DLPack
        except (TypeError, RuntimeError):
            return x  # bfloat16 (numpy has none) and other dtypes: through DLPack
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def _reshape(x, shape):
    return x.reshape(shape)


def _broadcast_to(x, shape):
    if _is_torch(x):
        return x.expand(shape)
    return np.broadcast_to(x, shape)


def _dtype_kind(x):
    """'bool', 'float' or the dtype's name for anything else."""
    if _is_torch(x):
        if str(x.dtype) == "torch.bool":
            return "bool"
        return "float" if x.dtype.is_floating_point else str(x.dtype).replace("torch.", "")
    if x.dtype == np.bool_:
        return "bool"
    return "float" if np.issubdtype(x.dtype, np.floating) else str(x.dtype)


def _window(window):
    if window is None:
        return -1, -1
    if isinstance(window, (int, np.integer)):
        return int(window), int(window)
    try:
        left, right = window
    except (TypeError, ValueError):
        raise ValueError(f"window must be None, an int or a pair (left, right); got {window!r}") from None
    return (-1 if left is None else int(left)), (-1 if right is None else int(right))


def _selection(return_weights):
    """(enabled, batches, heads, rows) from return_weights."""
    if return_weights is None or return_weights is False:
        return False, [], [], []
    if return_weights is True:
        return True, [], [], []
    if isinstance(return_weights, dict):
        unknown = set(return_weights) - {"batches", "heads", "rows"}
        if unknown:
            raise ValueError(f"return_weights: unknown keys {sorted(unknown)}; expected batches, heads, rows")
        sel = [return_weights.get(k) for k in ("batches", "heads", "rows")]
    elif isinstance(return_weights, (tuple, list)) and len(return_weights) == 3:
        sel = list(return_weights)
    else:
        raise ValueError(
            "return_weights must be True, False, a dict with batches/heads/rows or a tuple "
            f"(batches, heads, rows); got {return_weights!r}")
    out = []
    for s in sel:
        if s is None:
            out.append([])
        elif isinstance(s, (int, np.integer)):
            out.append([int(s)])
        else:
            out.append([int(i) for i in s])
    return (True, *out)


class _Prepared:
    """Inputs in the library's layout plus what is needed to shape results back."""

    def __init__(self, q, k, v, attn_mask, is_causal, align, scale, enable_gqa, key_lengths, window,
                 softcap, dropout_p, seed, backend):
        q, k, v = _as_input(q, "q"), _as_input(k, "k"), _as_input(v, "v")
        for name, x in (("q", q), ("k", k), ("v", v)):
            if x.ndim < 2:
                raise ValueError(f"{name} must have rank >= 2 [..., L, D]; got rank {x.ndim} {tuple(x.shape)}")
        if not (q.ndim == k.ndim == v.ndim):
            raise ValueError(
                f"q, k and v must have the same rank; got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
        self.shape = tuple(q.shape)
        self.kshape = tuple(k.shape)
        lq, lk = q.shape[-2], k.shape[-2]
        if q.ndim < 4:
            pad = (1,) * (4 - q.ndim)
            q, k, v = (_reshape(x, pad + tuple(x.shape)) for x in (q, k, v))
        elif q.ndim > 4:
            q, k, v = (_reshape(x, (-1,) + tuple(x.shape[-3:])) for x in (q, k, v))
        if not enable_gqa and q.shape[1] != k.shape[1]:
            raise ValueError(
                f"q has {q.shape[1]} heads and k, v have {k.shape[1]}: pass enable_gqa=True for grouped-query "
                "attention (as torch's scaled_dot_product_attention)")
        self.q, self.k, self.v = q, k, v
        self.allow = self.bias = None
        if attn_mask is not None:
            m = _as_input(attn_mask, "attn_mask")
            kind = _dtype_kind(m)
            if kind not in ("bool", "float"):
                raise ValueError(
                    f"attn_mask must be bool (True = may attend) or float (added to the logits); got {kind}")
            if m.ndim > 4:
                m = _broadcast_to(m, self.shape[:-2] + (lq, lk))
                m = _reshape(m, (-1,) + tuple(m.shape[-3:]))
            if kind == "bool":
                self.allow = m
            else:
                self.bias = m
        if align not in _ALIGNS:
            raise ValueError(f"align must be 'top_left' or 'bottom_right'; got {align!r}")
        self.causal = bool(is_causal)
        self.align = align
        self.scale = None if scale is None else float(scale)
        self.key_lengths = [] if key_lengths is None else [int(x) for x in np.asarray(key_lengths).reshape(-1)]
        self.window_left, self.window_right = _window(window)
        self.softcap = 0.0 if softcap is None else float(softcap)
        self.dropout_p = float(dropout_p)
        self.seed = int(seed)
        self.backend = backend

    def out_shape(self, x):
        """x [B, H, Lq, ...] back to the caller's leading dimensions."""
        return x.reshape(self.shape[:-2] + tuple(x.shape[2:]))


    def args(self):
        """The options as positional arguments of _attn.attention / attention_backward."""
        return (self.allow, self.bias, self.causal, self.align, self.scale, self.key_lengths, self.window_left,
                self.window_right, self.softcap, self.dropout_p, self.seed, self.backend)


def _run(p, capture):
    enabled, batches, heads, rows = capture
    return _attn.attention(p.q, p.k, p.v, *p.args(), enabled, batches, heads, rows)


_ndarray = np.ndarray
_NONE = ()


def attention(q, k, v, *, attn_mask=None, is_causal=False, align="top_left", scale=None, enable_gqa=False,
              key_lengths=None, window=None, softcap=None, dropout_p=0.0, seed=0, return_lse=False,
              return_weights=False, backend="automatic"):
    """softmax(q kᵀ · scale + mask) v in attn's engine; see docs/python.md.

    q [..., H, Lq, D], k and v [..., Hkv, Lk, D] (numpy arrays or __dlpack__
    tensors; float32 is borrowed without a copy, float64 runs the reference,
    bfloat16 runs the bf16 kernel where the CPU has one). Returns out (numpy,
    float32, or float64 for float64 inputs), then lse and/or weights when asked.
    """
    # The common call (numpy [B, H, L, D], no mask tensor, no weights) goes
    # straight to the binding: a few microseconds of Python per call.
    if type(q) is not _ndarray:
        q = _as_input(q, "q")
    if type(k) is not _ndarray:
        k = _as_input(k, "k")
    if type(v) is not _ndarray:
        v = _as_input(v, "v")
    if (type(q) is _ndarray and type(k) is _ndarray and type(v) is _ndarray and attn_mask is None
            and key_lengths is None and window is None and softcap is None and return_weights is False
            and q.ndim == 4 and k.ndim == 4 and v.ndim == 4 and (enable_gqa or q.shape[1] == k.shape[1])):
        out, lse, _ = _attn.attention(q, k, v, None, None, bool(is_causal), align, scale, _NONE, -1, -1, 0.0,
                                      dropout_p, seed, backend, False, _NONE, _NONE, _NONE)
        return (out, lse) if return_lse else out
    p = _Prepared(q, k, v, attn_mask, is_causal, align, scale, enable_gqa, key_lengths, window, softcap,
                  dropout_p, seed, backend)
    sel = _selection(return_weights)
    out, lse, weights = _run(p, sel)
    out = p.out_shape(out)
    results = [out]
    if return_lse:
        results.append(p.out_shape(lse[..., None])[..., 0])
    if sel[0]:
        if not any(sel[1:]) and len(p.shape) != 4:
            weights = p.out_shape(weights)
        results.append(weights)
    return results[0] if len(results) == 1 else tuple(results)


def attention_backward(q, k, v, out, lse, dout, *, attn_mask=None, is_causal=False, align="top_left", scale=None,
                       enable_gqa=False, key_lengths=None, window=None, softcap=None, dropout_p=0.0, seed=0,
                       backend="automatic"):
    """Gradients (dq, dk, dv) of sum(dout · out), where out and lse are what
    attention(..., return_lse=True) returned for the same inputs and options."""
    p = _Prepared(q, k, v, attn_mask, is_causal, align, scale, enable_gqa, key_lengths, window, softcap,
                  dropout_p, seed, backend)
    out, lse, dout = _as_input(out, "out"), _as_input(lse, "lse"), _as_input(dout, "dout")
    q4 = p.q.shape
    out = _reshape(out, tuple(q4))
    dout = _reshape(dout, tuple(q4))
    lse = _reshape(lse, tuple(q4[:3]))
    dq, dk, dv = _attn.attention_backward(p.q, p.k, p.v, out, lse, dout, *p.args())
    return p.out_shape(dq), dk.reshape(p.kshape), dv.reshape(p.kshape)
