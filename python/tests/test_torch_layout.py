"""The drop-in on the layouts a torch model hands over, on both thread teams.

A model computes q, k, v with one fused projection and views them as
[B, H, L, D] (.view(B, L, 3, H, D).permute(2, 0, 3, 1, 4)): strided slices of one
buffer. attn borrows them without a copy, writes its output in torch's own SDPA
layout ([B, L, H, D] seen through transpose(1, 2)), and runs its kernels either on
torch's OpenMP team (attn.torch.use_torch_threads, the default) or on its own pool.
Forward and backward must match torch's SDPA in every combination.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")

import attn  # noqa: E402
import attn.torch as at  # noqa: E402

F = torch.nn.functional


@pytest.fixture(params=[True, False], ids=["torch_team", "attn_pool"])
def team(request):
    saved = at.use_torch_threads
    at.use_torch_threads = request.param
    yield request.param
    at.use_torch_threads = saved


def _packed(B, L, H, D, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    buf = torch.randn(B, L, 3, H, D, generator=g, dtype=torch.float64).to(dtype).requires_grad_()
    q, k, v = buf.permute(2, 0, 3, 1, 4)
    return buf, q, k, v


def _run(fn, B, L, H, D, seed, causal, dtype):
    buf, q, k, v = _packed(B, L, H, D, seed, dtype)
    out = fn(q, k, v, is_causal=causal)
    merged = out.transpose(1, 2).reshape(B, L, H * D)
    g = torch.Generator().manual_seed(seed + 1)
    merged.backward(torch.randn(merged.shape, generator=g, dtype=torch.float64).to(dtype))
    return out, merged, buf.grad


@pytest.mark.parametrize("B,L,H,D,causal", [(2, 37, 4, 16, True), (1, 64, 2, 64, False), (3, 5, 3, 7, True),
                                            (2, 130, 4, 32, True)])
def test_packed_qkv_forward_and_backward_match_torch(team, B, L, H, D, causal):
    assert not _packed(B, L, H, D, 0)[1].is_contiguous()
    want_out, want_merged, want_grad = _run(F.scaled_dot_product_attention, B, L, H, D, 7, causal, torch.float64)
    got_out, got_merged, got_grad = _run(at.scaled_dot_product_attention, B, L, H, D, 7, causal, torch.float32)
    assert got_out.dtype == torch.float32
    np.testing.assert_allclose(got_merged.detach().numpy(), want_merged.detach().numpy(), atol=3e-5, rtol=1e-4)
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), atol=1e-4, rtol=1e-3)


def test_output_is_in_torchs_layout_so_merging_heads_copies_nothing(team):
    B, L, H, D = 2, 9, 4, 8
    _, q, k, v = _packed(B, L, H, D, 3, torch.float32)
    for fn in (F.scaled_dot_product_attention, at.scaled_dot_product_attention):
        out = fn(q, k, v, is_causal=True)
        assert out.shape == (B, H, L, D)
        assert out.transpose(1, 2).is_contiguous(), f"{fn.__module__}: output strides {out.stride()}"
    # rank 3 and float64 keep the allocated [..., H, L, D] result
    q3 = torch.randn(4, 6, 8)
    assert at.scaled_dot_product_attention(q3, q3, q3).is_contiguous()


def test_the_two_teams_agree(team):
    # the same kernel on another set of threads: the same numbers up to the order of dk, dv sums
    B, L, H, D = 2, 70, 4, 32
    outs = []
    saved = at.use_torch_threads
    for use in (True, False):
        at.use_torch_threads = use
        outs.append(_run(at.scaled_dot_product_attention, B, L, H, D, 11, True, torch.float32))
    at.use_torch_threads = saved
    np.testing.assert_array_equal(outs[0][0].detach().numpy(), outs[1][0].detach().numpy())
    np.testing.assert_allclose(outs[0][2].numpy(), outs[1][2].numpy(), atol=1e-6, rtol=1e-6)


def test_team_uses_torchs_thread_count_and_survives_a_change():
    saved = torch.get_num_threads()
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            _, q, k, v = _packed(1, 40, 2, 16, n, torch.float32)
            got = at.scaled_dot_product_attention(q, k, v, is_causal=True)
            want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=3e-5)
    finally:
        torch.set_num_threads(saved)


def test_errors_inside_the_team_reach_python():
    q = torch.randn(1, 2, 5, 8)
    with pytest.raises(ValueError, match="heads"):
        at.scaled_dot_product_attention(q, torch.randn(1, 3, 5, 8), torch.randn(1, 3, 5, 8), enable_gqa=True)


def test_attention_out_argument_rejects_bad_arrays():
    q = np.random.default_rng(0).standard_normal((1, 2, 5, 8), dtype=np.float32)
    args = (None, None, False, "top_left", None, (), -1, -1, 0.0, 0.0, 0, "automatic", False, (), (), ())
    good = np.empty((1, 5, 2, 8), np.float32).transpose(0, 2, 1, 3)
    out, lse, _ = attn._attn.attention(q, q, q, *args, 0, good)
    assert out is None
    np.testing.assert_allclose(good, attn.attention(q, q, q), atol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        attn._attn.attention(q, q, q, *args, 0, np.empty((1, 2, 5, 7), np.float32))
    with pytest.raises(ValueError, match="overlap"):
        attn._attn.attention(q, q, q, *args, 0, torch.empty(1, 1, 5, 8).expand(1, 2, 5, 8).numpy())
    with pytest.raises((ValueError, TypeError)):
        attn._attn.attention(q, q, q, *args, 0, np.empty((1, 2, 5, 8), np.int32))
    with pytest.raises((ValueError, TypeError)):  # read-only
        attn._attn.attention(q, q, q, *args, 0, np.broadcast_to(np.empty((1, 1, 5, 8), np.float32), (1, 2, 5, 8)))
