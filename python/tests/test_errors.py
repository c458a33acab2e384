"""Bad input raises with attn's message; no crash; no leak."""

import gc
import resource
import sys

import numpy as np
import pytest

import attn

Q = np.zeros((1, 2, 3, 4), np.float32)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: attn.attention(np.zeros(4, np.float32), Q, Q), ValueError, "rank"),
        (lambda: attn.attention(Q, np.zeros((1, 2, 3), np.float32), Q), ValueError, "same rank"),
        (lambda: attn.attention(Q, np.zeros((1, 2, 3, 5), np.float32), np.zeros((1, 2, 3, 5), np.float32)),
         ValueError, "head size D = 4"),
        (lambda: attn.attention(Q, Q, np.zeros((1, 2, 4, 4), np.float32)), ValueError, "same shape"),
        (lambda: attn.attention(Q.astype(np.int32), Q.astype(np.int32), Q.astype(np.int32)), ValueError, "f32"),
        (lambda: attn.attention(Q.astype(np.complex64), Q, Q), ValueError, "complex"),
        (lambda: attn.attention(Q, Q.astype(np.float64), Q), ValueError, "dtype"),
        (lambda: attn.attention(Q, Q, Q, scale=float("nan")), ValueError, "scale must be a finite number"),
        (lambda: attn.attention(Q, Q, Q, softcap=-1.0), ValueError, "softcap"),
        (lambda: attn.attention(Q, Q, Q, dropout_p=1.0), ValueError, "dropout"),
        (lambda: attn.attention(Q, Q, Q, attn_mask=np.zeros((5, 3), bool)), ValueError, "mask"),
        (lambda: attn.attention(Q, Q, Q, attn_mask=np.zeros((3, 3), np.int64)), ValueError, "bool"),
        (lambda: attn.attention(Q, Q, Q, key_lengths=[1, 2]), ValueError, "key_lengths"),
        (lambda: attn.attention(Q, Q, Q, key_lengths=[9]), ValueError, "key_lengths"),
        (lambda: attn.attention(Q, Q, Q, align="middle"), ValueError, "align"),
        (lambda: attn.attention(Q, Q, Q, window="x"), ValueError, "window"),
        (lambda: attn.attention(Q, Q, Q, return_weights={"layers": 1}), ValueError, "unknown keys"),
        (lambda: attn.attention(Q, Q, Q, return_weights={"heads": [7]}), ValueError, "capture"),
        (lambda: attn.attention(Q, Q[:, :1], Q[:, :1]), ValueError, "enable_gqa"),
        (lambda: attn.attention(Q, np.zeros((1, 3, 3, 4), np.float32), np.zeros((1, 3, 3, 4), np.float32),
                                enable_gqa=True), ValueError, "H"),
        (lambda: attn.attention_backward(Q, Q, Q, Q, np.zeros((1, 2, 3), np.float32), Q[..., :2]), ValueError,
         "shape"),
        (lambda: attn.attention(Q, Q, Q, backend="gpu"), ValueError, "backend"),
    ],
)
def test_bad_input_raises(call, error, message):
    with pytest.raises(error, match=message):
        call()


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_no_leak_over_10000_calls():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 16, 8)).astype(np.float32)
    mask = rng.random((16, 16)) < 0.9

    def some_calls(n):
        for i in range(n):
            out, lse, w = attn.attention(q, q, q, attn_mask=mask, return_lse=True, return_weights=True)
            attn.attention_backward(q, q, q, out, lse, out, attn_mask=mask)
            if i % 7 == 0:
                with pytest.raises(ValueError):
                    attn.attention(q, q[..., :3], q)

    some_calls(1000)  # warm-up: allocator caches, first-use buffers
    gc.collect()
    before = _rss_kib()
    some_calls(10_000)
    gc.collect()
    grown = _rss_kib() - before
    # One leaked set of outputs per call would be > 10000 * 3 KiB = 30 MiB.
    assert grown < 4 * 1024, f"RSS grew by {grown} KiB over 10000 calls"
