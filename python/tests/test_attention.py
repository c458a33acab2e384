"""attn.attention / attention_backward against the float64 oracle in cases.py (numpy only)."""

import numpy as np
import pytest

import attn
from cases import make_case, reference, tolerance

N_CASES = 240


def _check_close(got, want, tol, what):
    got = np.asarray(got, np.float64)
    fin = np.isfinite(want)
    assert np.array_equal(np.isfinite(got), fin), f"{what}: finite pattern differs"
    if fin.any():
        err = np.max(np.abs(got[fin] - want[fin]))
        scale = max(1.0, np.max(np.abs(want[fin])))
        assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol * scale:.3g}"


@pytest.mark.parametrize("seed", range(N_CASES))
def test_forward_backward_against_oracle(seed):
    c = make_case(seed)
    out, lse, w = attn.attention(c["q"], c["k"], c["v"], **c["kwargs"], return_lse=True, return_weights=True)
    rng = np.random.default_rng(10_000 + seed)
    dout = rng.standard_normal(out.shape)
    r_out, r_lse, r_p, (r_dq, r_dk, r_dv) = reference(c, dout)
    tol = tolerance(c)
    assert out.dtype == (np.float64 if c["q"].dtype == np.float64 else np.float32)
    _check_close(out, r_out, tol, "out")
    _check_close(lse, r_lse, tol, "lse")
    _check_close(w, r_p, tol, "weights")
    empty = ~c["allowed"].any(-1)
    assert np.all(out[empty] == 0), "a fully masked row must give zeros"
    dq, dk, dv = attn.attention_backward(c["q"], c["k"], c["v"], out, lse, dout.astype(out.dtype), **c["kwargs"])
    gtol = tol * (30 if c["kind"] == "huge" else 3)
    _check_close(dq, r_dq, gtol, "dq")
    _check_close(dk, r_dk, gtol, "dk")
    _check_close(dv, r_dv, gtol, "dv")
    assert np.all(dq[empty] == 0)


def test_weight_selection():
    c = make_case(3, "causal_tl")
    q = np.random.default_rng(0).standard_normal((2, 4, 9, 8)).astype(np.float32)
    full = attn.attention(q, q, q, is_causal=True, return_weights=True)[1]
    sel = attn.attention(q, q, q, is_causal=True, return_weights={"batches": [1], "heads": [0, 3], "rows": [2, 5]})[1]
    assert sel.shape == (1, 2, 2, 9)
    np.testing.assert_array_equal(sel, full[[1]][:, [0, 3]][:, :, [2, 5]])
    tup = attn.attention(q, q, q, is_causal=True, return_weights=(None, 2, None))[1]
    np.testing.assert_array_equal(tup, full[:, [2]])
    assert c is not None


def test_rank3_and_rank5_inputs():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((3, 2, 5, 7, 8)).astype(np.float32)
    k = rng.standard_normal((3, 2, 5, 6, 8)).astype(np.float32)
    mask = rng.random((3, 1, 1, 7, 6)) < 0.8
    out = attn.attention(q, k, k, attn_mask=mask)
    assert out.shape == (3, 2, 5, 7, 8)
    flat = attn.attention(q.reshape(6, 5, 7, 8), k.reshape(6, 5, 6, 8), k.reshape(6, 5, 6, 8),
                          attn_mask=np.broadcast_to(mask, (3, 2, 5, 7, 6)).reshape(6, 5, 7, 6))
    np.testing.assert_array_equal(out.reshape(6, 5, 7, 8), flat)
    out3, lse3 = attn.attention(q[0, 0], k[0, 0], k[0, 0], return_lse=True)
    assert out3.shape == (5, 7, 8) and lse3.shape == (5, 7)


def test_zero_copy_contiguous_float32():
    q = np.random.default_rng(2).standard_normal((1, 2, 4, 8)).astype(np.float32)
    out1 = attn.attention(q, q, q)
    q[0, 0, 0, 0] += 1.0  # the same buffer, changed: the call must read it (no stale cache)
    out2 = attn.attention(q, q, q)
    assert not np.array_equal(out1, out2)


def test_dropout_zero_is_exact_and_seeded_dropout_is_deterministic():
    q = np.random.default_rng(4).standard_normal((2, 3, 17, 16)).astype(np.float32)
    base = attn.attention(q, q, q)
    np.testing.assert_array_equal(attn.attention(q, q, q, dropout_p=0.0, seed=5), base)
    a = attn.attention(q, q, q, dropout_p=0.3, seed=7)
    b = attn.attention(q, q, q, dropout_p=0.3, seed=7)
    c = attn.attention(q, q, q, dropout_p=0.3, seed=8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    ref = attn.attention(q, q, q, dropout_p=0.3, seed=7, backend="reference")
    np.testing.assert_allclose(a, ref, atol=3e-5)


def test_fused_and_reference_backends_agree():
    c = make_case(11, "causal_br")
    a = attn.attention(c["q"].astype(np.float32), c["k"].astype(np.float32), c["v"].astype(np.float32),
                       **c["kwargs"], backend="reference")
    b = attn.attention(c["q"].astype(np.float32), c["k"].astype(np.float32), c["v"].astype(np.float32),
                       **c["kwargs"], backend="fused")
    np.testing.assert_allclose(a, b, atol=3e-5)


def test_threads():
    n = attn.get_num_threads()
    attn.set_num_threads(1)
    assert attn.get_num_threads() == 1
    attn.set_num_threads(n)
    with pytest.raises(ValueError, match=">= 1|>= 1"):
        attn.set_num_threads(0)


def test_version():
    assert attn.__version__.count(".") == 2


def test_float16_and_negative_strides_are_copied():
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 3, 10, 8)).astype(np.float32)
    h = q.astype(np.float16)
    np.testing.assert_array_equal(attn.attention(h, h, h), attn.attention(*(h.astype(np.float32),) * 3))
    flipped = q[:, ::-1, ::-2]
    want = attn.attention(*(np.ascontiguousarray(flipped),) * 3)
    np.testing.assert_array_equal(attn.attention(flipped, flipped, flipped), want)
    out, lse = attn.attention(flipped, flipped, flipped, return_lse=True)
    dq, dk, dv = attn.attention_backward(flipped, flipped, flipped, out, lse, out[:, ::-1][:, ::-1])
    assert dq.shape == flipped.shape
