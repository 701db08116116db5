"""nn.EmbeddingBag / F.embedding_bag on tpu (_embedding_bag and its backward kernels) against PyTorch's CPU kernels.

Every mode (sum, mean, max), padding_idx, include_last_offset, per-sample weights, empty bags, 2-d input, the
module in training and eval (_embedding_bag_forward_only), the auxiliary results in CUDA's layout, and CPU's
argument checks as device-side checks. All on the device (strict: a CPU fallback fails the test).
"""

import itertools

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

INDICES = torch.tensor([1, 2, 3, 2, 4, 2, 2, 7, 9, 0, 5])
OFFSETS = torch.tensor([0, 2, 2, 5, 9])  # bag 1 is empty, the last bag runs to the end


def _run(dev, w, idx, off, per_sample, go, **kw):
    wd = w.clone().to(dev).requires_grad_()
    pd = per_sample.clone().to(dev).requires_grad_() if per_sample is not None else None
    out = F.embedding_bag(idx.to(dev), wd, off.to(dev), per_sample_weights=pd, **kw)
    out.backward(go.to(dev))
    return out.detach().cpu(), wd.grad.cpu(), pd.grad.cpu() if pd is not None else None


CASES = [c for c in itertools.product(["sum", "mean", "max"], [None, 2], [False, True], [False, True])
         if not (c[3] and c[0] != "sum")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("mode,padding_idx,include_last,per_sample", CASES)
def test_embedding_bag_matches_cpu(strict_fallback, dtype, mode, padding_idx, include_last, per_sample):
    torch.manual_seed(0)
    w = torch.randn(10, 4, dtype=dtype)
    off = torch.cat([OFFSETS, torch.tensor([len(INDICES)])]) if include_last else OFFSETS
    psw = torch.randn(len(INDICES), dtype=dtype) if per_sample else None
    go = torch.randn(5, 4, dtype=dtype)
    kw = dict(mode=mode, padding_idx=padding_idx, include_last_offset=include_last)
    expected = _run("cpu", w, INDICES, off, psw, go, **kw)
    got = _run("tpu", w, INDICES, off, psw, go, **kw)
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    for e, g in zip(expected, got):
        if e is not None:
            torch.testing.assert_close(g, e, **tol)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(strict_fallback, mode):
    # Each row's gradient is divided by how often its index occurs in the batch (the definition, and CUDA's; CPU's
    # kernel of torch 2.13 scales some rows by another index's count: for INDICES it gives rows 3 and 4 a quarter).
    torch.manual_seed(0)
    w = torch.randn(10, 4, dtype=torch.float64)
    go = torch.randn(5, 4, dtype=torch.float64)
    _, plain, _ = _run("cpu", w, INDICES, OFFSETS, None, go, mode=mode)
    counts = torch.bincount(INDICES, minlength=10).clamp(min=1).to(torch.float64)
    _, got, _ = _run("tpu", w, INDICES, OFFSETS, None, go, mode=mode, scale_grad_by_freq=True)
    torch.testing.assert_close(got, plain / counts[:, None])


def test_embedding_bag_auxiliary_results(strict_fallback):
    # CUDA's layout: offset2bag per index, bag_size per offset (padding not counted), max_indices for max only
    w = torch.randn(6, 3, device="tpu")
    idx = torch.tensor([1, 2, 3, 2, 4], device="tpu")
    off = torch.tensor([0, 2, 2], device="tpu")
    for mode in (0, 1, 2):
        out, offset2bag, bag_size, max_indices = torch._embedding_bag(w, idx, off, False, mode, False, None, False, 2)
        assert offset2bag.tolist() == [0, 0, 2, 2, 2]
        assert bag_size.tolist() == [1, 0, 2]
        assert out[1].abs().sum().item() == 0  # an empty bag gives 0
        if mode == 2:
            wc = w.cpu()
            assert max_indices.tolist() == [[1, 1, 1], [-1, -1, -1],
                                            [3 if wc[3, j] >= wc[4, j] else 4 for j in range(3)]]
        else:
            assert max_indices.numel() == 0


def test_embedding_bag_module_2d_input_and_eval(strict_fallback):
    torch.manual_seed(0)
    cpu = torch.nn.EmbeddingBag(20, 6, mode="mean")
    tpu = torch.nn.EmbeddingBag(20, 6, mode="mean").to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    x = torch.randint(0, 20, (5, 4))
    torch.testing.assert_close(tpu(x.to("tpu")).cpu(), cpu(x))
    with torch.no_grad():  # _embedding_bag_forward_only
        torch.testing.assert_close(tpu.eval()(x.to("tpu")).cpu(), cpu.eval()(x))


def test_embedding_bag_trains(strict_fallback):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.EmbeddingBag(50, 8, mode="sum"), torch.nn.Linear(8, 1)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randint(0, 50, (16, 5), device="tpu")
    y = torch.randn(16, 1, device="tpu")
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("idx,off,message", [
    ([1, 12, 3], [0, 2], "input takes value 12 which is not in the valid range"),
    ([1, 2, 3], [1, 2], "offsets\\[0\\] has to be 0"),
    ([1, 2, 3], [0, 5], "offsets\\[-1\\] can not be greater than input's length 3"),
])
def test_embedding_bag_checks(idx, off, message):
    w = torch.randn(10, 3, device="tpu")
    with pytest.raises(RuntimeError, match=message):
        F.embedding_bag(torch.tensor(idx, device="tpu"), w, torch.tensor(off, device="tpu")).cpu()
    torch.ones(2, device="tpu").cpu()  # the error was reported once; the device goes on
