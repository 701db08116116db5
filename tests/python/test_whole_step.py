"""torch_tpu.compile_whole_step(): a compiled training step (forward, backward, opt.step(), zero_grad) is one graph and
one program per step, with the same losses and parameters as the same step on CPU."""

import copy

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._dynamo.utils import counters

import torch_tpu

CONFIGS = [
    ("SGD", {"momentum": 0.9, "foreach": True}),
    ("SGD", {"fused": True}),
    ("Adam", {"foreach": True}),
    ("Adam", {"fused": True}),
    ("AdamW", {"foreach": False, "weight_decay": 0.1}),
    ("AdamW", {"fused": True, "amsgrad": True}),
    ("Adagrad", {"fused": True}),
]


@pytest.fixture
def whole_step():
    torch._dynamo.reset()
    counters.clear()
    torch_tpu.compile_whole_step()
    try:
        yield
    finally:
        torch_tpu.compile_whole_step(False)
        torch._dynamo.reset()


def _models():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.GELU(), torch.nn.LayerNorm(24), torch.nn.Linear(24, 5))
    return m, copy.deepcopy(m).to("tpu")


def _step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.detach()


@pytest.mark.parametrize("name,kw", CONFIGS, ids=[f"{n}-{'-'.join(k for k in kw)}" for n, kw in CONFIGS])
def test_one_program_per_step(whole_step, name, kw):
    cpu, tpu = _models()
    opt_c = getattr(torch.optim, name)(cpu.parameters(), lr=1e-2, **kw)
    opt_t = getattr(torch.optim, name)(tpu.parameters(), lr=1e-2, **kw)
    x, y = torch.randn(6, 12), torch.randint(0, 5, (6,))
    xt, yt = x.to("tpu"), y.to("tpu")
    params = list(tpu.parameters())
    step = torch.compile(_step, backend="tpu")
    for i in range(4):
        torch.tpu.synchronize()
        launches, runs = torch_tpu.launch_count(), torch_tpu.compile_stats()["runs"]
        donated = torch_tpu.compile_stats()["donated"]
        lt = step(tpu, opt_t, xt, yt)
        torch.tpu.synchronize()
        if i >= 2:  # steady state: the first step's graph also creates the optimizer state
            assert torch_tpu.launch_count() - launches == 1
            assert torch_tpu.compile_stats()["runs"] - runs == 1
            assert torch_tpu.compile_stats()["donated"] > donated  # parameters and state updated in place
        lc = _step(cpu, opt_c, x, y)
        torch.testing.assert_close(lt.cpu(), lc, rtol=1e-5, atol=1e-5)
    assert dict(counters["graph_break"]) == {}
    assert list(tpu.parameters()) == params and all(p.grad is None for p in params)
    for pc, pt in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(pt.detach().cpu(), pc.detach(), rtol=1e-5, atol=1e-5)
    for sc, st in zip(opt_c.state.values(), opt_t.state.values()):
        for k, v in sc.items():
            if isinstance(v, torch.Tensor):
                torch.testing.assert_close(st[k].cpu(), v, rtol=1e-5, atol=1e-5, msg=f"state {k}")


def test_set_to_none_false_and_returned_loss(whole_step):
    # zero_grad(set_to_none=False) zeroes .grad in the graph; returning the loss itself (not detached) makes Dynamo
    # break at the backward: still the same values.
    cpu, tpu = _models()
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_t = torch.optim.AdamW(tpu.parameters(), lr=1e-2)
    x, y = torch.randn(6, 12), torch.randint(0, 5, (6,))

    def step(model, opt, x, y, keep):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss if keep else loss.detach()

    cs = torch.compile(step, backend="tpu")
    for i in range(3):
        for keep in (False, True):
            lt = cs(tpu, opt_t, x.to("tpu"), y.to("tpu"), keep)
            lc = step(cpu, opt_c, x, y, keep)
            torch.testing.assert_close(lt.detach().cpu(), lc.detach(), rtol=1e-5, atol=1e-5)
    assert all(torch.equal(p.grad.cpu(), torch.zeros_like(p.grad.cpu())) for p in tpu.parameters())
    for pc, pt in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(pt.detach().cpu(), pc.detach(), rtol=1e-5, atol=1e-5)


def test_disable_restores_pytorch():
    opt_zero_grad = torch.optim.Optimizer.zero_grad
    torch_tpu.compile_whole_step()
    assert torch._dynamo.config.trace_autograd_ops
    assert torch.optim.Optimizer.zero_grad is not opt_zero_grad
    torch_tpu.compile_whole_step(False)
    assert not torch._dynamo.config.trace_autograd_ops
    assert torch.optim.Optimizer.zero_grad is opt_zero_grad
    assert getattr(torch.optim.Adam.__dict__["_init_group"], "_torchdynamo_disable", False)
    # PyTorch's behaviour again: the backward is a graph break
    torch._dynamo.reset()
    counters.clear()
    try:
        _, tpu = _models()
        opt = torch.optim.SGD(tpu.parameters(), lr=1e-2)
        torch.compile(_step, backend="tpu")(tpu, opt, torch.randn(2, 12, device="tpu"),
                                            torch.zeros(2, dtype=torch.long, device="tpu"))
        assert counters["graph_break"]
    finally:
        torch._dynamo.reset()


def test_bad_argument():
    with pytest.raises(TypeError, match="compile_whole_step"):
        torch_tpu.compile_whole_step("yes")
