"""attn's SDPA drop-in under torch.distributed (issue 39): DistributedDataParallel with the gloo
backend on 2 processes gives the loss and gradients of 1 process on the whole batch, and each rank
still captures its own rows' attention weights. Slow (two processes importing torch): run with
scripts/test-python.sh --slow."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

pytestmark = pytest.mark.slow

B, L, D, H = 4, 12, 32, 4  # batch, tokens, width, heads


class Block(torch.nn.Module):
    """Self-attention through torch.nn.functional.scaled_dot_product_attention, which attn.torch
    patches, followed by a projection."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.out = torch.nn.Linear(D, D)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, n, D))


def _data():
    g = torch.Generator().manual_seed(7)
    return torch.randn(B, L, D, generator=g), torch.randn(B, L, D, generator=g)


def _model():
    torch.manual_seed(3)
    return Block()


def _step(model, x, y):
    """One forward and backward under attn.torch.capture(): the loss, the gradients by name and
    the captured weights of the one attention call."""
    import attn.torch

    with attn.torch.capture() as cap:
        loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    grads = {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}
    return loss.detach().item(), grads, cap.weights


def _rank(rank, world, init_file, out_dir):
    import attn
    import torch.distributed as dist

    attn.set_num_threads(1)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        model = torch.nn.parallel.DistributedDataParallel(_model())
        x, y = _data()
        rows = slice(rank * B // world, (rank + 1) * B // world)
        loss, grads, weights = _step(model, x[rows], y[rows])
        total = torch.tensor([loss])
        dist.all_reduce(total)  # the mean loss over the whole batch: each rank's mean over equal halves
        grads = {n.removeprefix("module."): g for n, g in grads.items()}
        np.savez(os.path.join(out_dir, f"rank{rank}.npz"), loss=total.item() / world, weights=weights[0],
                 **{"grad." + n: g for n, g in grads.items()})
    finally:
        dist.destroy_process_group()


def test_ddp_gloo_two_processes_equal_one_process(tmp_path):
    import torch.multiprocessing as mp

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    world = 2
    mp.spawn(_rank, args=(world, str(tmp_path / "init"), str(tmp_path)), nprocs=world, join=True)

    import attn

    attn.set_num_threads(1)
    x, y = _data()
    loss, grads, weights = _step(_model(), x, y)
    assert set(weights) == {0} and weights[0].shape == (B, H, L, L)
    for rank in range(world):
        got = np.load(tmp_path / f"rank{rank}.npz")
        assert got["loss"] == pytest.approx(loss, rel=1e-6, abs=1e-7)
        for name, want in grads.items():
            np.testing.assert_allclose(got["grad." + name], want, rtol=1e-5, atol=1e-6, err_msg=name)
        # The rank's attention weights are its own rows of the whole batch's.
        rows = slice(rank * B // world, (rank + 1) * B // world)
        np.testing.assert_allclose(got["weights"], weights[0][rows], rtol=1e-6, atol=1e-7)
        assert np.allclose(got["weights"].sum(-1), 1.0, atol=1e-5)
