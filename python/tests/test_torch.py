"""attn against torch's scaled_dot_product_attention; the drop-in, patch() and capture()."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")

import attn  # noqa: E402
import attn.torch as at  # noqa: E402
from cases import make_case  # noqa: E402

N_CASES = 240


def _torch_reference(c, dout):
    """torch float64: SDPA with the case's rules as an explicit mask (the formula for softcap)."""
    q, k, v = (torch.tensor(np.asarray(c[n], np.float64), requires_grad=True) for n in ("q", "k", "v"))
    kw = c["kwargs"]
    allowed = torch.tensor(c["allowed"])
    H, hkv = q.shape[1], k.shape[1]
    if kw.get("softcap"):
        kk, vv = (x.repeat_interleave(H // hkv, dim=1) for x in (k, v))
        s = q @ kk.transpose(-1, -2) * kw.get("scale", q.shape[-1] ** -0.5)
        s = kw["softcap"] * torch.tanh(s / kw["softcap"])
        s = s.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(s, -1) @ vv
    else:
        if c["bias"] is not None:
            mask = torch.tensor(c["bias"], dtype=torch.float64).masked_fill(~allowed, float("-inf"))
        else:
            mask = allowed
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=kw.get("scale"),
                                                               enable_gqa=H != hkv)
    out.backward(torch.tensor(dout))
    return out.detach().numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()


def _close(got, want, empty_rows, tol, what):
    got = np.asarray(got, np.float64)
    ok = ~np.broadcast_to(empty_rows, want.shape) if empty_rows is not None else np.ones(want.shape, bool)
    err = np.max(np.abs(got[ok] - want[ok]), initial=0)
    scale = max(1.0, np.max(np.abs(want[ok]), initial=0))
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol * scale:.3g}"


def _tol(c):
    if c["q"].dtype == np.float64:
        return 1e-9
    return 2e-3 if c["kind"] == "huge" else 3e-5


def _expressible_in_torch(c):
    kw = c["kwargs"]
    return not (kw.get("softcap") or kw.get("window") or kw.get("key_lengths") is not None
                or kw.get("align") == "bottom_right" or c["kind"] == "fully_masked")


@pytest.mark.parametrize("seed", range(N_CASES))
def test_against_torch_sdpa(seed):
    c = make_case(seed)
    dout = np.random.default_rng(20_000 + seed).standard_normal(c["q"].shape[:3] + (c["v"].shape[-1],))
    t_out, t_dq, t_dk, t_dv = _torch_reference(c, dout)
    empty = ~c["allowed"].any(-1)[..., None]  # [B, H, Lq, 1]
    tol = _tol(c)
    # the numpy API
    out, lse = attn.attention(c["q"], c["k"], c["v"], **c["kwargs"], return_lse=True)
    _close(out, t_out, empty, tol, "out")
    assert np.all(np.broadcast_to(empty, out.shape) <= (out == 0)), "fully masked rows must be 0"
    dq, dk, dv = attn.attention_backward(c["q"], c["k"], c["v"], out, lse, dout.astype(out.dtype), **c["kwargs"])
    gtol = tol * (30 if c["kind"] == "huge" else 3)
    _close(dq, t_dq, empty, gtol, "dq")
    _close(dk, t_dk, None, gtol, "dk")
    _close(dv, t_dv, None, gtol, "dv")
    # the drop-in, through torch's autograd
    if _expressible_in_torch(c):
        kw = c["kwargs"]
        q, k, v = (torch.from_numpy(np.array(c[n])).requires_grad_() for n in ("q", "k", "v"))
        mask = kw.get("attn_mask")
        mask = None if mask is None else torch.from_numpy(np.asarray(mask))
        o = at.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kw.get("is_causal", False),
                                            scale=kw.get("scale"), enable_gqa=kw.get("enable_gqa", False))
        assert o.dtype == q.dtype
        o.backward(torch.from_numpy(dout.astype(c["q"].dtype)))
        _close(o.detach().numpy(), t_out, None, tol, "drop-in out")
        _close(q.grad.numpy(), t_dq, None, gtol, "drop-in dq")
        _close(k.grad.numpy(), t_dk, None, gtol, "drop-in dk")
        _close(v.grad.numpy(), t_dv, None, gtol, "drop-in dv")


def test_fully_masked_row_is_zero_where_torch_gives_nan_or_zero():
    q = torch.randn(1, 1, 3, 4)
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    ours = at.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert torch.all(ours[0, 0, 1] == 0)
    assert torch.all(torch.isnan(theirs[0, 0, 1]) | (theirs[0, 0, 1] == 0))
    torch.testing.assert_close(ours[0, 0, [0, 2]], theirs[0, 0, [0, 2]], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("seed", range(24))
def test_bf16(seed):
    rng = np.random.default_rng(seed)
    B, H, lq, lk, D = 1 + seed % 2, 1 + seed % 3, int(rng.integers(1, 50)), int(rng.integers(1, 50)), [8, 16, 33, 64][seed % 4]
    q, k, v = (torch.tensor(rng.standard_normal(s), dtype=torch.bfloat16)
               for s in ((B, H, lq, D), (B, H, lk, D), (B, H, lk, D)))
    causal = bool(seed % 2)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
    out = at.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
    assert out.dtype == torch.bfloat16
    empty = torch.zeros(lq, dtype=torch.bool) if not causal or lk >= 1 else None
    ok = ~torch.isnan(ref)
    assert torch.max(torch.abs(out.double() - ref)[ok]) <= 3e-2 * max(1.0, v.abs().max().item())
    # numpy API: bf16 in (DLPack), f32 out
    o32 = attn.attention(q, k, v, is_causal=causal)
    assert o32.dtype == np.float32
    out.sum().backward()
    assert qq.grad.dtype == torch.bfloat16 and torch.isfinite(qq.grad.float()).all()
    assert empty is not None


@pytest.mark.parametrize("kind", ["plain", "causal", "float_mask", "bool_mask", "gqa", "scale", "lq_ne_lk"])
def test_gradcheck(kind):
    g = torch.Generator().manual_seed(0)
    lq, lk = (3, 5) if kind == "lq_ne_lk" else (4, 4)
    hkv = 1 if kind == "gqa" else 2
    q = torch.randn(2, 2, lq, 3, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(2, hkv, lk, 3, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(2, hkv, lk, 3, dtype=torch.float64, generator=g, requires_grad=True)
    kw = {}
    if kind == "causal":
        kw["is_causal"] = True
    if kind == "float_mask":
        kw["attn_mask"] = torch.randn(lq, lk, dtype=torch.float64, generator=g)
    if kind == "bool_mask":
        m = torch.rand(lq, lk, generator=g) < 0.7
        m[:, 0] = True
        kw["attn_mask"] = m
    if kind == "gqa":
        kw["enable_gqa"] = True
    if kind == "scale":
        kw["scale"] = 0.3
    assert torch.autograd.gradcheck(lambda a, b, c: at.scaled_dot_product_attention(a, b, c, **kw), (q, k, v))


def test_rank3_inputs_and_fallback_for_float16():
    q = torch.randn(4, 7, 8)
    torch.testing.assert_close(at.scaled_dot_product_attention(q, q, q, is_causal=True),
                               torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True),
                               atol=1e-6, rtol=1e-5)
    h = q.half()  # not attn's: runs torch's own
    assert at.scaled_dot_product_attention(h, h, h).dtype == torch.float16


def test_dropout_is_reproducible_under_manual_seed():
    q = torch.randn(1, 2, 9, 8)
    torch.manual_seed(3)
    a = at.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    torch.manual_seed(3)
    b = at.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(a, at.scaled_dot_product_attention(q, q, q))


def test_patch_routes_multihead_attention_and_restores():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(2, 11, 32)
    want, _ = mha(x, x, x, need_weights=False)
    calls = []
    original = at._AttnSDPA.apply

    def counting(*a):
        calls.append(1)
        return original(*a)

    at._AttnSDPA.apply = counting
    try:
        with at.patch():
            got, _ = mha(x, x, x, need_weights=False)
    finally:
        at._AttnSDPA.apply = original
    assert calls, "nn.MultiheadAttention did not reach attn under patch()"
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert torch.nn.functional.scaled_dot_product_attention is at._torch_sdpa


def _bert(impl):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    config = transformers.BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=64, attn_implementation=impl)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    assert model.config._attn_implementation == impl
    return model


def _bert_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 97, (3, 19), generator=g)
    mask = torch.ones(3, 19, dtype=torch.long)
    mask[1, 12:] = 0
    mask[2, 5:] = 0
    return ids, mask


def test_hugging_face_bert_under_patch_and_capture():
    sdpa = _bert("sdpa")
    eager = _bert("eager")
    eager.load_state_dict(sdpa.state_dict())
    ids, mask = _bert_inputs()
    with torch.no_grad():
        want = sdpa(input_ids=ids, attention_mask=mask).last_hidden_state
        with at.patch():
            got = sdpa(input_ids=ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        ref = eager(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
        with at.capture() as cap:
            out = sdpa(input_ids=ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(out, want, atol=1e-5, rtol=0)
        assert sorted(cap.weights) == [0, 1, 2]
        for layer in range(3):
            np.testing.assert_allclose(cap.weights[layer], ref[layer].numpy(), atol=1e-6, rtol=0)
        with at.capture(layers=[1], heads=[2, 0]) as cap:
            sdpa(input_ids=ids, attention_mask=mask)
        assert sorted(cap.weights) == [1]
        np.testing.assert_allclose(cap.weights[1], ref[1][:, [2, 0]].numpy(), atol=1e-6, rtol=0)


def test_bert_training_step_gradients_match():
    model = _bert("sdpa").train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    ids, mask = _bert_inputs()
    model.zero_grad()
    model(input_ids=ids, attention_mask=mask).last_hidden_state.square().mean().backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    with at.patch():
        model(input_ids=ids, attention_mask=mask).last_hidden_state.square().mean().backward()
    for n, p in model.named_parameters():
        if n in want:
            torch.testing.assert_close(p.grad, want[n], atol=1e-5, rtol=1e-4, msg=n)


def test_in_place_change_before_backward_is_caught():
    q = torch.randn(1, 2, 5, 4, requires_grad=True)
    x = q * 1.0
    out = at.scaled_dot_product_attention(x, x, x)
    with torch.no_grad():
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
