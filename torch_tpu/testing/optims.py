"""OptimInfo sweep: PyTorch's optimizer database (``common_optimizers.optim_db``) run on `tpu` and compared with CPU.

Configurations of each OptimizerInfo: those its ``optim_inputs_func(device="cpu")`` gives (Tensor ``lr``,
``maximize``, weight decay, amsgrad, ...), each also with every implementation flag the OptimizerInfo supports
turned on in turn (``foreach``, ``differentiable``, and ``fused`` where CPU has a fused kernel to compare with), like
PyTorch's ``_get_optim_inputs_including_global_cliquey_kwargs``; plus the configurations it gives only for
accelerators (``optim_inputs_func(device="cuda")``: ``capturable``, Tensor betas, ...), which CPU cannot run: their
reference is the same configuration on the CPU without ``capturable`` (and with the for-loop implementation), the same
arithmetic.

Each configuration (direction ``step``, one case per configuration, indexed in that order) runs ``STEPS`` steps on
three float32 parameters (2-D ones only for Muon) with seeded random gradients (a closure computing a quadratic loss
for optimizers whose step requires one; sparse gradients for SparseAdam); the parameters and every optimizer state
tensor are compared with CPU with the OpInfo harness's tolerance table. ``differentiable`` configurations step
non-leaf parameters and gradients that require grad, and also compare the gradients of the final parameters with
respect to the initial ones and to the gradients. As everywhere in the sweeps, a configuration that ran an op on the
CPU fallback (or a host round trip nobody asked for) is a *fallback*, not a pass; expected failures:
tests/python/module_expected_failures.py (keyed by optimizer name, dtype "float32", direction "step", configuration
index).
"""
from __future__ import annotations

import copy
import time
import warnings
from typing import Iterable, List, Optional, Union

import torch

from torch_tpu.testing import opinfo as H
from torch_tpu.testing.modules import device_case
from torch_tpu.testing.tolerances import tol
from torch_tpu.testing.opinfo import SKIP, CaseResult, ExpectedFailures, XFail

STEPS = 3
DTYPE = torch.float32
SHAPES = [(4, 3), (3,), (2, 2, 2)]
SHAPES_2D = [(4, 3), (3, 5)]


def find_optims(names: Optional[Iterable[str]] = None):
    from torch.testing._internal.common_optimizers import optim_db

    if names is None:
        return list(optim_db)
    names = set(names)
    return [o for o in optim_db if o.name in names]


def configs(info):
    """[(description, kwargs on tpu, kwargs of the CPU reference)] in a fixed order."""
    impls = [x for x in info.supported_impls if x != "fused" or "cpu" in info.supports_fused_on]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = info.optim_inputs_func(device="cpu")
        acc = info.optim_inputs_func(device="cuda")
    cpu_desc = {c.desc for c in cpu}
    out = []
    for base, device_only in [(c, False) for c in cpu] + [(c, True) for c in acc if c.desc not in cpu_desc]:
        flags = [None] + impls
        for flag in flags:
            kw = copy.deepcopy(base.kwargs)
            for f in impls:
                kw[f] = f == flag
            desc = base.desc + (f" & {flag}" if flag else "")
            ref = copy.deepcopy(kw)
            if device_only:
                ref.pop("capturable", None)
                ref["foreach"] = False
                ref.pop("fused", None)
                desc += " (reference: CPU without capturable)"
            out.append((desc, kw, ref))
    return out


def _shapes(info):
    return SHAPES_2D if info.name == "Muon" else SHAPES


def _train(info, kwargs, device, seed):
    """Runs STEPS steps; returns (parameters, state tensors by (param index, name), differentiable grads or None)."""
    g = torch.Generator().manual_seed(seed)
    shapes = _shapes(info)
    init = [torch.randn(s, generator=g) for s in shapes]
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(STEPS)]
    targets = [torch.randn(s, generator=g) for s in shapes]
    differentiable = bool(kwargs.get("differentiable", False))
    leaves = [t.to(device).requires_grad_(True) for t in init]
    params = [t.clone() for t in leaves] if differentiable else leaves
    opt = info.optim_cls(params, **copy.deepcopy(kwargs))
    grad_leaves = []
    for step in range(STEPS):
        if info.step_requires_closure:
            tg = [t.to(device) for t in targets]

            def closure():
                opt.zero_grad()
                loss = sum(((p - t) ** 2).sum() for p, t in zip(params, tg))
                loss.backward()
                return loss
            opt.step(closure)
            continue
        for p, gr in zip(params, grads[step]):
            if info.only_supports_sparse_grads:
                p.grad = gr.to_sparse().to(device)
            elif differentiable:
                gl = gr.to(device).requires_grad_(True)
                grad_leaves.append(gl)
                p.grad = gl * 1.0
            else:
                p.grad = gr.to(device)
        opt.step()
    state = {}
    for k, p in enumerate(params):
        for name, v in sorted(opt.state.get(p, {}).items()):
            if isinstance(v, torch.Tensor):
                state[(k, name)] = v
    dgrads = None
    if differentiable:
        w = torch.Generator().manual_seed(seed + 1)
        total = sum((p * torch.randn(p.shape, generator=w).to(device)).sum() for p in params)
        dgrads = list(torch.autograd.grad(total, leaves + grad_leaves, allow_unused=True))
        dgrads = [d if d is not None else torch.zeros_like(t) for d, t in zip(dgrads, leaves + grad_leaves)]
    return [p.detach() for p in params], state, dgrads


def _compare_runs(actual, expected) -> Optional[str]:
    params, state, dgrads = actual
    eparams, estate, edgrads = expected
    err = H._compare(params, eparams, DTYPE)
    if err is not None:
        return "parameters: " + err
    for p in params:
        if p.device.type != "tpu":
            return f"parameter on {p.device}"
    if sorted(state) != sorted(estate):
        return f"state keys differ: {sorted(state)} vs {sorted(estate)}"
    for k in sorted(estate):
        a, e = state[k], estate[k]
        if a.dtype != e.dtype or a.shape != e.shape:
            return f"state {k}: {a.dtype}{tuple(a.shape)} vs {e.dtype}{tuple(e.shape)}"
        err = H._close(a.detach().cpu(), e.detach(), **tol(e.dtype))
        if err is not None:
            return f"state {k}: {err}"
        if k[1] != "step" and e.numel() > 1 and a.device.type != "tpu":
            return f"state {k} on {a.device}"
    if edgrads is not None:
        err = H._compare(dgrads, edgrads, DTYPE)
        if err is not None:
            return "gradients through the steps: " + err
    return None


def run_optim(info, max_configs: Optional[int] = None, select: Optional[Iterable[int]] = None,
              expected_failures: Union[None, ExpectedFailures, Iterable[XFail]] = None,
              deadline: Optional[float] = None) -> List[CaseResult]:
    """Runs an OptimizerInfo's configurations (all, the first `max_configs`, or those indexed in `select`)."""
    key = info.name
    xf = H._expected(expected_failures)
    results: List[CaseResult] = []
    cfgs = configs(info)
    chosen = list(select) if select is not None else list(range(len(cfgs)))
    if max_configs is not None:
        chosen = chosen[:max_configs]
    for i in chosen:
        if deadline is not None and time.monotonic() > deadline:
            break
        desc, kw, ref = cfgs[i]
        seed = H.case_seed(key, i)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = _train(info, ref, "cpu", seed)
        except Exception as e:  # noqa: BLE001
            results.append(CaseResult(key, "float32", "step", i, SKIP, f"cpu raised {type(e).__name__}"))
            continue
        outcome, detail = device_case(lambda: _train(info, kw, "tpu", seed),
                                      lambda out: _compare_runs(out, expected))
        outcome, detail, _ = xf.classify(key, "float32", "step", i, outcome, detail)
        results.append(CaseResult(key, "float32", "step", i, outcome, H._clean(detail)))
    return results
