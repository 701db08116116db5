"""Optimizers on `tpu`: foreach and fused implementations match CPU and run without any CPU fallback."""
import copy

import pytest
import torch

import torch_tpu


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def _train(model, opt_factory, device, steps=3):
    model = copy.deepcopy(model).to(device)
    opt = opt_factory(model.parameters())
    g = torch.Generator().manual_seed(1)
    dtype = next(model.parameters()).dtype
    for _ in range(steps):
        x = torch.randn(5, 8, generator=g).to(device, dtype)
        y = torch.randn(5, 4, generator=g).to(device, dtype)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()], opt


def _fallbacks():
    return dict(torch_tpu._C._fallback_counts())


OPTIMIZERS = {
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=True),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=True),
    "adam_foreach_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.01, amsgrad=True, foreach=True),
    "adam_fused_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.01, amsgrad=True, fused=True),
    "adam_fused_maximize": lambda p: torch.optim.Adam(p, lr=1e-2, maximize=True, fused=True),
    "sgd_momentum_foreach": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, foreach=True),
    "sgd_momentum_fused": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, fused=True),
    "sgd_nesterov_fused": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, fused=True),
    "sgd_plain_fused": lambda p: torch.optim.SGD(p, lr=0.1, fused=True),
    "sgd_plain_foreach": lambda p: torch.optim.SGD(p, lr=0.1, foreach=True),
    "adagrad_fused": lambda p: torch.optim.Adagrad(p, lr=0.05, lr_decay=0.1, weight_decay=0.01, fused=True),
    "adagrad_fused_maximize_tensor_lr": lambda p: torch.optim.Adagrad(p, lr=torch.tensor(0.05), maximize=True,
                                                                      initial_accumulator_value=0.1, fused=True),
    "adam_fused_tensor_lr": lambda p: torch.optim.Adam(p, lr=torch.tensor(1e-2), amsgrad=True, fused=True),
    "adamw_fused_tensor_lr": lambda p: torch.optim.AdamW(p, lr=torch.tensor(1e-2), weight_decay=0.1, fused=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_cpu_on_device(name):
    model = _model()
    expected, _ = _train(model, OPTIMIZERS[name], "cpu")
    before = _fallbacks()
    actual, opt = _train(model, OPTIMIZERS[name], "tpu")
    after = _fallbacks()
    new = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
    assert not new, f"CPU fallbacks: {new}"
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    for state in opt.state.values():
        for k, v in state.items():
            if isinstance(v, torch.Tensor) and k != "step":
                assert v.device.type == "tpu", k


def test_fused_adam_bfloat16_params():
    model = _model()
    exp, _ = _train(model.bfloat16(), lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True), "cpu")
    act, _ = _train(model.bfloat16(), lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True), "tpu")
    for a, e in zip(act, exp):
        torch.testing.assert_close(a, e, rtol=2e-2, atol=2e-2)


def test_fused_adam_found_inf_skips_the_step():
    p = [torch.randn(4), torch.randn(3)]
    outs = {}
    for dev in ("cpu", "tpu"):
        ps = [t.clone().to(dev) for t in p]
        gs = [torch.ones_like(t) for t in ps]
        avgs = [torch.zeros_like(t) for t in ps]
        sqs = [torch.zeros_like(t) for t in ps]
        steps = [torch.ones((), device=dev) for _ in ps]
        torch._fused_adam_(ps, gs, avgs, sqs, [], steps, lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0,
                           eps=1e-8, amsgrad=False, maximize=False, grad_scale=torch.tensor(2.0, device=dev),
                           found_inf=torch.tensor(1.0, device=dev))
        outs[dev] = [t.cpu() for t in ps + gs + avgs]
    for a, e in zip(outs["tpu"], outs["cpu"]):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
def test_fused_adagrad_grad_scale_and_found_inf(found_inf):
    """The gradients are unscaled and written back; a found inf leaves everything as it was."""
    p = [torch.randn(4), torch.randn(2, 3)]
    g = [torch.randn(4), torch.randn(2, 3)]
    outs = {}
    for dev in ("cpu", "tpu"):
        ps = [t.clone().to(dev) for t in p]
        gs = [t.clone().to(dev) for t in g]
        sums = [torch.full_like(t, 0.1) for t in ps]
        steps = [torch.full((), 2.0, device=dev) for _ in ps]
        before = _fallbacks()
        torch._fused_adagrad_(ps, gs, sums, steps, lr=0.1, lr_decay=0.05, weight_decay=0.01, eps=1e-10,
                              maximize=False, grad_scale=torch.tensor(4.0, device=dev),
                              found_inf=torch.tensor(found_inf, device=dev))
        if dev == "tpu":
            assert _fallbacks() == before
        outs[dev] = [t.cpu() for t in ps + gs + sums + steps]
    for a, e in zip(outs["tpu"], outs["cpu"]):
        torch.testing.assert_close(a, e)


def test_foreach_ops_match_cpu_without_fallback():
    xs = [torch.randn(3), torch.randn(2, 4)]
    ys = [torch.rand(3) + 0.5, torch.rand(2, 4) + 0.5]
    cases = [
        lambda a, b: torch._foreach_add(a, b, alpha=2),
        lambda a, b: torch._foreach_add(a, 1.5),
        lambda a, b: torch._foreach_mul(a, b),
        lambda a, b: torch._foreach_div(a, 3.0),
        lambda a, b: torch._foreach_sub(a, b),
        lambda a, b: torch._foreach_sqrt(b),
        lambda a, b: torch._foreach_exp(a),
        lambda a, b: torch._foreach_neg(a),
        lambda a, b: torch._foreach_lerp(a, b, 0.3),
        lambda a, b: torch._foreach_addcmul(a, a, b, value=0.5),
        lambda a, b: torch._foreach_addcdiv(a, a, b, value=-0.5),
        lambda a, b: torch._foreach_norm(a),
        lambda a, b: torch._foreach_norm(a, 1),
        lambda a, b: torch._foreach_maximum(a, b),
        lambda a, b: torch._foreach_clamp_min(a, 0.1),
        lambda a, b: torch._foreach_pow(b, 2.0),
        lambda a, b: torch._foreach_div(a, [2.0, 4.0]),
    ]
    for i, f in enumerate(cases):
        exp = f(xs, ys)
        before = _fallbacks()
        act = f([t.to("tpu") for t in xs], [t.to("tpu") for t in ys])
        assert _fallbacks() == before, f"case {i} fell back"
        for a, e in zip(act, exp):
            assert a.device.type == "tpu"
            torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-6, msg=f"case {i}")
    # in-place forms write their lists
    a = [t.to("tpu") for t in xs]
    torch._foreach_add_(a, [t.to("tpu") for t in ys], alpha=0.5)
    torch._foreach_mul_(a, 2.0)
    for t, x, y in zip(a, xs, ys):
        torch.testing.assert_close(t.cpu(), (x + 0.5 * y) * 2.0)


def test_tensor_lr_foreach_step():
    """A 0-d CPU tensor inside a foreach op's list argument (Adagrad's foreach step with a Tensor lr multiplies the
    gradients by a list of them) is a program input, as CUDA accepts it: no fallback, CPU's result."""
    model = _model()
    factory = lambda p: torch.optim.Adagrad(p, lr=torch.tensor(0.05), lr_decay=0.1, foreach=True)  # noqa: E731
    expected, _ = _train(model, factory, "cpu")
    before = _fallbacks()
    actual, _ = _train(model, factory, "tpu")
    assert _fallbacks() == before
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    xs = [torch.randn(3), torch.randn(2, 4)]
    # the values are program inputs (the second list reuses the first's program), the dtypes part of its signature
    for scalars in ([torch.tensor(2.5), torch.tensor(-1.0)], [torch.tensor(-4.0), torch.tensor(0.25)],
                    [torch.tensor(0.5), torch.tensor(3)]):
        exp = torch._foreach_mul(xs, scalars)
        before = _fallbacks()
        act = torch._foreach_mul([t.to("tpu") for t in xs], scalars)
        assert _fallbacks() == before
        for a, e in zip(act, exp):
            assert a.device.type == "tpu" and a.dtype == e.dtype
            torch.testing.assert_close(a.cpu(), e)
