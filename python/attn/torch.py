"""attn for PyTorch users: a drop-in scaled_dot_product_attention, patch() and capture().

    import attn.torch
    out = attn.torch.scaled_dot_product_attention(q, k, v, is_causal=True)   # forward and backward in attn

    with attn.torch.patch():            # torch's SDPA on CPU tensors runs in attn
        y = model(x)

    with attn.torch.capture(layers=[0, 11], heads=[0]) as cap:
        y = model(x)                    # cap.weights[layer]: the exact probabilities of that call

Differences from torch, by design (docs/python.md): a fully masked query row gives
output 0 and zero gradients (torch gives NaN); dropout draws its keep mask from
attn's counter-based rule seeded from torch's generator, so it is reproducible
with torch.manual_seed but not the same mask as torch's. Calls attn cannot take
(a tensor not on the CPU, float16, a mask that requires grad, double backward)
run torch's own implementation.
"""

import contextlib
import threading

import torch

from . import _attn
from ._core import _Prepared

__all__ = ["scaled_dot_product_attention", "patch", "capture", "Capture"]

_torch_sdpa = torch.nn.functional.scaled_dot_product_attention

# Which threads run attn's kernels in calls from this module: True (the default) = torch's own
# OpenMP team, torch.get_num_threads() of them, the threads torch's operators just used; False =
# attn's pool (attn.set_num_threads). torch's OpenMP workers spin for milliseconds after each of its
# operators, so attn's pool would compete with them for the cores (docs/python.md).
use_torch_threads = True


def _team():
    return torch.get_num_threads() if use_torch_threads else 0
_state = threading.local()


class _LastWeights(threading.local):
    value = None  # the weights the last forward on this thread captured


_last_weights = _LastWeights()


def _active_capture():
    return getattr(_state, "capture", None)


def _supported(q, k, v, attn_mask, scale):
    for x in (q, k, v):
        if not isinstance(x, torch.Tensor) or x.device.type != "cpu":
            return False
        if x.dtype not in (torch.float32, torch.float64, torch.bfloat16):
            return False
    if not (q.dtype == k.dtype == v.dtype):
        return False
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor) or attn_mask.device.type != "cpu" or attn_mask.requires_grad:
            return False
    return True


def _as_torch(a, dtype):
    t = torch.from_numpy(a)
    return t if t.dtype == dtype else t.to(dtype)


class _AttnSDPA(torch.autograd.Function):
    """Forward and backward in attn; inputs [..., H, L, D] CPU tensors."""

    @staticmethod
    def forward(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, seed, selection):
        p = _Prepared(q, k, v, attn_mask, is_causal, "top_left", scale, enable_gqa, None, None, None, dropout_p,
                      seed, "automatic")
        enabled, batches, heads, rows = selection
        if q.dtype == torch.float32 and q.dim() == 4:
            # The output in torch's own SDPA layout, [B, Lq, H, D] seen as [B, H, Lq, D]: the model's
            # usual out.transpose(1, 2).reshape(B, Lq, H * D) is then a view, not a copy.
            B, H, L, D = q.shape
            out_t = torch.empty(B, L, H, D).transpose(1, 2)
            _, lse, weights = _attn.attention(p.q, p.k, p.v, *p.args(), enabled, batches, heads, rows, _team(),
                                              out_t.numpy())
            result = out_t
        else:
            out, lse, weights = _attn.attention(p.q, p.k, p.v, *p.args(), enabled, batches, heads, rows,
                                                _team())
            out_t = torch.from_numpy(out)
            result = _as_torch(p.out_shape(out), q.dtype)
        ctx.prepared = p
        ctx.dtypes = (q.dtype, k.dtype, v.dtype)
        _last_weights.value = weights
        lse_t = torch.from_numpy(lse)
        # q, k, v are saved too so that torch's version check catches an in-place change before backward
        ctx.save_for_backward(q, k, v, out_t, lse_t)
        return result

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        p = ctx.prepared
        _, _, _, out_t, lse_t = ctx.saved_tensors
        d = dout.detach()
        if d.dtype != out_t.dtype:
            d = d.to(out_t.dtype)
        d = d.reshape(tuple(p.q.shape))
        dq, dk, dv = _attn.attention_backward(p.q, p.k, p.v, out_t, lse_t, d, *p.args(), _team())
        qd, kd, vd = ctx.dtypes
        return (_as_torch(p.out_shape(dq), qd), _as_torch(dk.reshape(p.kshape), kd),
                _as_torch(dv.reshape(p.kshape), vd), None, None, None, None, None, None, None)


def _seed(dropout_p):
    if dropout_p == 0:
        return 0
    return int(torch.randint(0, 2**62, (1,), dtype=torch.int64).item())


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention, computed by attn on the CPU.

    The same signature and results as torch's (to rounding), except that a fully
    masked row gives zeros instead of NaN. A call attn cannot take runs torch's.
    """
    if not _supported(query, key, value, attn_mask, scale):
        return _torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, enable_gqa=enable_gqa)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    cap = _active_capture()
    selection = (False, [], [], [])
    layer = None
    if cap is not None:
        layer = cap._next_layer()
        if cap._wants(layer):
            selection = (True, [], list(cap.heads) if cap.heads is not None else [], [])
    out = _AttnSDPA.apply(query, key, value, attn_mask, float(dropout_p), bool(is_causal), scale, bool(enable_gqa),
                          _seed(dropout_p), selection)
    if selection[0]:
        cap._record(layer, _last_weights.value)
        _last_weights.value = None
    return out


class Capture:
    """The exact attention probabilities of the SDPA calls made under capture().

    weights: {layer: numpy array [B, nh, Lq, Lk]} where layer counts the SDPA
    calls from 0 in the order they ran (one forward pass of an L-layer model
    gives layers 0 .. L-1; a second pass continues at L unless clear() is called)
    and nh the selected heads (all when heads=None).
    """

    def __init__(self, layers=None, heads=None):
        self.layers = None if layers is None else {int(x) for x in ([layers] if isinstance(layers, int) else layers)}
        self.heads = None if heads is None else [int(x) for x in ([heads] if isinstance(heads, int) else heads)]
        self.weights = {}
        self._calls = 0

    def clear(self):
        self.weights = {}
        self._calls = 0

    def _next_layer(self):
        layer = self._calls
        self._calls += 1
        return layer

    def _wants(self, layer):
        return self.layers is None or layer in self.layers

    def _record(self, layer, weights):
        self.weights[layer] = weights


@contextlib.contextmanager
def patch():
    """Routes torch.nn.functional.scaled_dot_product_attention on CPU tensors to attn
    inside the block (nn.MultiheadAttention and Hugging Face models built with
    attn_implementation="sdpa" included); other calls go to torch's."""
    previous = torch.nn.functional.scaled_dot_product_attention
    torch.nn.functional.scaled_dot_product_attention = scaled_dot_product_attention
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = previous


@contextlib.contextmanager
def capture(layers=None, heads=None):
    """patch() that also records the exact weights of the selected calls (layers:
    call indices from 0; heads: query heads; None = all) into the Capture it yields."""
    cap = Capture(layers, heads)
    outer = _active_capture()
    _state.capture = cap
    try:
        with patch():
            yield cap
    finally:
        _state.capture = outer
