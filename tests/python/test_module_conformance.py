"""A representative subset of the ModuleInfo and OptimInfo sweeps (the full sweeps: python tools/module_coverage.py).

Every case must pass on the device, or fail exactly as an entry of module_expected_failures.py says; a listed case
that passes (an unexpected pass) fails too. The entries themselves are checked for reachability.
"""
import os
import re
import time

import pytest
import torch

from torch_tpu.testing import modules as M
from torch_tpu.testing import opinfo as H
from torch_tpu.testing import optims as O
from module_expected_failures import EXPECTED_FAILURES

# Layers of the model suite, normalization in both modes, losses, attention, a lazy module,
# and a module with expected failures (so that an unexpected pass fails CI).
CI_MODULES = [
    "nn.Linear", "nn.Conv2d", "nn.ConvTranspose2d", "nn.BatchNorm2d", "nn.LayerNorm", "nn.GroupNorm", "nn.RMSNorm",
    "nn.Embedding", "nn.GELU", "nn.SiLU", "nn.ReLU", "nn.PReLU", "nn.Softmax", "nn.LogSoftmax", "nn.MaxPool2d",
    "nn.AvgPool2d", "nn.AdaptiveAvgPool2d", "nn.CrossEntropyLoss", "nn.NLLLoss", "nn.MSELoss", "nn.BCEWithLogitsLoss",
    "nn.MultiheadAttention", "nn.TransformerEncoderLayer", "nn.LazyConv2d", "nn.ZeroPad2d", "nn.LSTM",
    # bf16 weight gradients judged against CPU's own bf16 accuracy; outputs with NaNs (not random)
    "nn.Conv3d", "nn.LPPool1d",
]
MAX_SAMPLES = int(os.environ.get("TORCH_TPU_MODULE_SAMPLES", "1"))
BUDGET_S = float(os.environ.get("TORCH_TPU_MODULE_BUDGET_S", "20"))
XF = H.ExpectedFailures(EXPECTED_FAILURES)
_DTYPE_NAMES = {str(d).replace("torch.", "") for d in M.DTYPES}


def _bad(results):
    return "\n".join(f"{r.dtype} {r.direction} #{r.index}: {r.outcome} {r.detail}"
                     for r in results if r.outcome in H.BAD_OUTCOMES)


@pytest.mark.parametrize("info", M.find_modules(CI_MODULES), ids=M.module_key)
def test_module_on_device(info):
    # bfloat16 for the first sample only (the float32 samples cover the module's paths)
    deadline = time.monotonic() + BUDGET_S
    results = M.run_module(info, dtypes=(torch.float32,), max_samples=MAX_SAMPLES, expected_failures=XF,
                           deadline=deadline)
    results += M.run_module(info, dtypes=(torch.bfloat16,), max_samples=1, expected_failures=XF, deadline=deadline)
    assert not _bad(results), _bad(results)
    assert any(r.outcome in (H.PASS, H.XFAIL) for r in results), "no case ran"


def _ci_configs(info):
    """The default configuration, the first foreach one, the first fused one, and the first with a Tensor lr (with
    foreach if any)."""
    descs = [d for d, _, _ in O.configs(info)]

    def first(pred):
        return next((k for k, d in enumerate(descs) if pred(d)), None)
    picks = [0, first(lambda d: "foreach" in d), first(lambda d: d.endswith("& fused")),
             first(lambda d: "Tensor lr" in d and "foreach" in d) or first(lambda d: "Tensor lr" in d)]
    return sorted({k for k in picks if k is not None})


@pytest.mark.parametrize("info", O.find_optims(), ids=lambda o: o.name)
def test_optimizer_on_device(info):
    results = O.run_optim(info, select=_ci_configs(info), expected_failures=XF)
    assert not _bad(results), _bad(results)
    assert any(r.outcome in (H.PASS, H.XFAIL) for r in results), "no case ran"


def test_ci_subset_names_exist():
    assert not set(CI_MODULES) - {m.name for m in M.find_modules(CI_MODULES)}


def test_module_expected_failures_are_reachable():
    """Every entry can apply: the module or optimizer exists, the direction and mode exist for it, and the listed
    samples or configurations exist."""
    mods = {m.name: m for m in M.find_modules()}
    opts = {o.name: o for o in O.find_optims()}
    problems = []
    for e in EXPECTED_FAILURES:
        for pattern in (e.error, e.mismatch):
            if pattern is not None:
                re.compile(pattern)
        if e.direction == "step":
            info = opts.get(e.op)
            if info is None or e.dtype != "float32":
                problems.append(f"{e.describe()}: no such optimizer, or not float32")
                continue
            n = len(O.configs(info))
        else:
            info = mods.get(e.op)
            if info is None:
                problems.append(f"{e.describe()}: no such ModuleInfo")
                continue
            mode, _, _ = e.direction.partition("_")
            if e.direction not in M.DIRECTIONS or (mode == "eval") not in [not t for t in M.modes(info)] or \
                    e.dtype not in _DTYPE_NAMES:
                problems.append(f"{e.describe()}: the module is not run in this mode, direction or dtype")
                continue
            torch.manual_seed(H.case_seed(e.op, e.dtype, mode))
            n = len(info.module_inputs_func(info, device="cpu", dtype=getattr(torch, e.dtype), requires_grad=True,
                                            training=mode == "train"))
        if e.samples is not None and max(e.samples) >= n:
            problems.append(f"{e.describe()}: only {n} samples or configurations")
    assert not problems, "\n".join(problems)


def test_optimizer_configurations_cover_the_flags():
    """The configurations include foreach, fused, differentiable, capturable, maximize and a Tensor lr."""
    descs = " ".join(d for o in O.find_optims() for d, _, _ in O.configs(o))
    for flag in ("foreach", "fused", "differentiable", "capturable", "maximize", "Tensor lr"):
        assert flag in descs, flag
