"""Autograd and training on the tpu device, compared with the same computation on CPU."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.head = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = torch.tanh(self.fc2(x)) + x
        return self.head(x)


def _train(model, device, data, targets, steps, opt_name):
    model = model.to(device)
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    losses = []
    for i in range(steps):
        x = data[i % len(data)].to(device)
        y = targets[i % len(targets)].to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_mlp_training_matches_cpu_with_zero_fallbacks(opt_name):
    torch.manual_seed(0)
    model = MLP()
    data = [torch.randn(8, 16) for _ in range(4)]
    targets = [torch.randint(0, 4, (8,)) for _ in range(4)]
    cpu_losses, cpu_model = _train(copy.deepcopy(model), "cpu", data, targets, 20, opt_name)
    torch_tpu.reset_fallback_counts()
    tpu_losses, tpu_model = _train(copy.deepcopy(model), "tpu", data, targets, 20, opt_name)
    assert torch_tpu._C._fallback_counts() == {}, torch_tpu._C._fallback_reasons()
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-4)
    assert tpu_losses[-1] < tpu_losses[0]
    for (n, p), (_, q) in zip(tpu_model.named_parameters(), cpu_model.named_parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-4, msg=n)


def test_mse_training_second_step_compiles_nothing():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 1)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 8, device="tpu")
    y = torch.randn(16, 1, device="tpu")

    def step():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step()
    step()
    before = torch_tpu.cache_stats()["compiles"]
    for _ in range(3):
        step()
    assert torch_tpu.cache_stats()["compiles"] == before


def test_attention_block_forward_backward():
    torch.manual_seed(0)
    d, h = 32, 4
    attn = nn.MultiheadAttention(d, h, batch_first=True)
    norm = nn.LayerNorm(d)
    emb = nn.Embedding(50, d)
    ids = torch.randint(0, 50, (2, 7))

    def run(device):
        mods = [copy.deepcopy(m).to(device) for m in (attn, norm, emb)]
        a, n, e = mods
        x = e(ids.to(device))
        y = n(x)
        q = y.transpose(0, 1).transpose(0, 1)
        scores = torch.softmax(q @ q.transpose(1, 2) / d ** 0.5, dim=-1)
        out = (scores @ y).sum() + a(y, y, y, need_weights=False)[0].mean()
        out.backward()
        return out.detach().cpu(), [p.grad.cpu() for m in mods for p in m.parameters()]

    ref, ref_grads = run("cpu")
    torch_tpu.reset_fallback_counts()
    got, grads = run("tpu")
    # attention, layer norm and embedding run forward and backward on the device, none on the CPU fallback
    assert torch_tpu.fallback_counts() == {}
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)


def test_backward_runs_on_autograd_thread_and_accumulates():
    w = torch.randn(5, 3, device="tpu", requires_grad=True)
    for _ in range(3):
        (w * w).sum().backward()
    torch.testing.assert_close(w.grad.cpu(), 6 * w.detach().cpu())
