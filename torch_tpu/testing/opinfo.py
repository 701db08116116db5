"""OpInfo sweep: PyTorch's own op database run on `tpu` and compared with CPU.

For every OpInfo and dtype (float32, bfloat16, int64, bool where the OpInfo supports them) the sample inputs run
on CPU and on `tpu`; results are compared (forward, and backward where the OpInfo supports gradients). A case
counts as passing on device only if no op fell back to CPU while it ran; a case that was right only because of the
fallback is reported separately. Error inputs must raise the same exception type as on CPU.

Used by tests/python/test_opinfo.py (a time-bounded subset in CI) and tools/op_coverage.py (the full sweep that
writes docs/op_coverage.md).
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from collections import Counter, defaultdict
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_map

import torch_tpu

DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool)

# Outcome of one (op, dtype, sample, direction) case.
PASS = "pass"                  # correct and ran on device
PASS_FALLBACK = "fallback"     # correct, but only because some op ran on the CPU fallback
FAIL = "fail"                  # wrong values, shapes or dtypes
ERROR = "error"                # raised where CPU did not
XFAIL = "xfail"                # listed in EXPECTED_FAILURES
SKIP = "skip"                  # not comparable (nondeterministic op, CPU itself failed)


@dataclasses.dataclass
class CaseResult:
    op: str
    dtype: str
    direction: str  # "forward", "backward", "error_input"
    index: int
    outcome: str
    detail: str = ""


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _tol(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return dict(rtol=2e-2, atol=2e-2)
    if dtype == torch.float32:
        # XLA reassociates reductions; gradients accumulate a few more roundings than forwards.
        return dict(rtol=1e-4, atol=3e-4)
    if dtype == torch.float64:
        return dict(rtol=1e-7, atol=1e-7)
    return dict(rtol=0, atol=0)


def _to(x, device):
    """Moves every tensor in x to device, keeping aliasing: the same tensor twice, or views of one base, stay
    aliases of one device storage (error inputs test out= arguments that overlap inputs)."""
    bases = {}

    def f(t):
        if not isinstance(t, torch.Tensor):
            return t
        base = t._base if t._base is not None else t
        key = id(base)
        if key not in bases:
            bases[key] = base.detach().to(device)
        b = bases[key]
        if t is base:
            r = b
        else:
            try:
                r = b.as_strided(t.size(), t.stride(), t.storage_offset())
            except RuntimeError:  # the view outgrew its base (a resized out=): copy it alone
                r = t.detach().to(device)
        if t.requires_grad:
            r = r.detach().requires_grad_(True)
            if t is base:
                bases[key] = r
        return r

    out = tree_map(f, x)
    # Factory samples (full, arange, eye, ...) name their device in kwargs: build on the target device instead.
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        dev = out[1].get("device")
        if dev is not None and torch.device(dev).type == "cpu":
            out = (out[0], {**out[1], "device": device})
    return out


def _compare(actual, expected, dtype) -> Optional[str]:
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        return f"structure differs: {a_spec} vs {e_spec}"
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"expected a tensor, got {type(a).__name__}"
            if a.device.type != "tpu" and e.device.type == "cpu" and a.numel() > 0:
                return f"result on {a.device}, expected tpu"
            a = a.detach().cpu()
            e = e.detach()
            if a.dtype != e.dtype:
                return f"dtype {a.dtype} vs {e.dtype}"
            if a.shape != e.shape:
                return f"shape {tuple(a.shape)} vs {tuple(e.shape)}"
            try:
                torch.testing.assert_close(a, e, equal_nan=True, **_tol(e.dtype))
            except AssertionError as err:
                return str(err).splitlines()[0] + " " + " ".join(str(err).splitlines()[1:4])
        elif isinstance(e, (int, float, bool)):
            if isinstance(a, torch.Tensor):
                a = a.item()
            if isinstance(e, float) and isinstance(a, float):
                if not (abs(a - e) <= 1e-4 * max(1.0, abs(e)) or (a != a and e != e)):
                    return f"{a} vs {e}"
            elif a != e:
                return f"{a} vs {e}"
    return None


class _FallbackWatch:
    def __enter__(self):
        self.before = dict(torch_tpu._C._fallback_counts())
        return self

    def __exit__(self, *exc):
        after = torch_tpu._C._fallback_counts()
        self.ops = sorted(k for k, v in after.items() if v > self.before.get(k, 0))
        return False


def _grad_inputs(args) -> List[torch.Tensor]:
    leaves, _ = tree_flatten(args)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def _backward(fn, sample_args, device, seed_outs):
    out = fn(*sample_args[0], **sample_args[1])
    leaves = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves:
        return None
    total = sum(((t.float() * w.to(device)).sum()) for t, w in zip(leaves, seed_outs))
    inputs = _grad_inputs(sample_args)
    grads = torch.autograd.grad(total, inputs, allow_unused=True)
    return [g if g is not None else torch.zeros_like(i) for g, i in zip(grads, inputs)]


def _device_case(run: Callable, expected, dtype, xfail_reason: Optional[str]) -> Tuple[str, str]:
    """Runs one case on the device and classifies it against the CPU result."""
    outcome, detail = PASS, ""
    with _FallbackWatch() as watch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            err = _compare(run(), expected, dtype)
        except Exception as e:  # noqa: BLE001
            err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            outcome = ERROR
    if err is not None:
        outcome, detail = (ERROR if outcome == ERROR else FAIL), err
    elif watch.ops:
        outcome, detail = PASS_FALLBACK, ",".join(watch.ops)
    if outcome != PASS and xfail_reason:
        outcome, detail = XFAIL, xfail_reason
    return outcome, detail


NONDETERMINISTIC_OPS = {
    # Random ops: compared by statistics elsewhere, not element-wise against CPU.
    "bernoulli", "multinomial", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "randint", "randn", "rand", "randint_like",
    "randn_like", "rand_like", "normal", "uniform", "empty", "empty_like", "new_empty", "new_empty_strided",
    "empty_strided", "empty_permuted", "exponential", "geometric", "log_normal", "cauchy", "random_", "cauchy_",
    "nn.functional.rrelu", "svd_lowrank", "pca_lowrank", "torch._scaled_dot_product_flash_attention",
}


def run_op(op, dtypes: Iterable[torch.dtype] = DTYPES, max_samples: Optional[int] = None,
           backward: bool = True, error_inputs: bool = True,
           expected_failures: Optional[Dict[Tuple[str, str, str], str]] = None,
           deadline: Optional[float] = None) -> List[CaseResult]:
    """Runs one OpInfo's samples on tpu and CPU; returns a result per case."""
    key = op_key(op)
    results: List[CaseResult] = []
    expected_failures = expected_failures or {}
    if op.name in NONDETERMINISTIC_OPS or key in NONDETERMINISTIC_OPS:
        return results
    supported = op.supported_dtypes("cpu")
    for dtype in dtypes:
        if dtype not in supported:
            continue
        dname = str(dtype).replace("torch.", "")
        grad_ok = backward and op.supports_autograd and dtype.is_floating_point
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=grad_ok))
        except Exception:  # noqa: BLE001
            continue
        if max_samples is not None:
            samples = samples[:max_samples]
        for i, sample in enumerate(samples):
            if deadline is not None and time.monotonic() > deadline:
                return results
            fn = op.op
            args = (sample.input,) + tuple(sample.args)
            kwargs = dict(sample.kwargs)
            xf = expected_failures.get((key, dname, "forward"))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.manual_seed(0)
                    expected = fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001
                results.append(CaseResult(key, dname, "forward", i, SKIP, f"cpu raised {type(e).__name__}"))
                continue
            targs, tkwargs = _to((args, kwargs), "tpu")

            def forward():
                torch.manual_seed(0)
                return fn(*targs, **tkwargs)

            outcome, detail = _device_case(forward, expected, dtype, xf)
            results.append(CaseResult(key, dname, "forward", i, outcome, detail[:300]))
            if not grad_ok or outcome in (ERROR, FAIL, XFAIL):
                continue
            # Backward: same random cotangents on both devices.
            try:
                outs = [t for t in tree_flatten(expected)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
                if not outs:
                    continue
                g = torch.Generator().manual_seed(i)
                seeds = [torch.randn(t.shape, generator=g) for t in outs]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    exp_g = _backward(fn, (args, kwargs), "cpu", seeds)
            except Exception as e:  # noqa: BLE001
                continue
            if exp_g is None:
                continue
            bxf = expected_failures.get((key, dname, "backward"))
            outcome, detail = _device_case(lambda: _backward(fn, (targs, tkwargs), "tpu", seeds), exp_g, dtype, bxf)
            results.append(CaseResult(key, dname, "backward", i, outcome, detail[:300]))
    if error_inputs:
        results.extend(run_error_inputs(op, expected_failures))
    return results


def run_error_inputs(op, expected_failures=None) -> List[CaseResult]:
    key = op_key(op)
    results = []
    try:
        errs = list(op.error_inputs("cpu"))
        # a second, untouched copy for the device: the CPU call may resize out= arguments and their aliases
        fresh = list(op.error_inputs("cpu"))
    except Exception:  # noqa: BLE001
        return results
    for i, (ei, ei_dev) in enumerate(zip(errs, fresh)):
        s = ei.sample_input
        args = (s.input,) + tuple(s.args)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                op.op(*args, **s.kwargs)
            cpu_type = None
        except Exception as e:  # noqa: BLE001
            cpu_type = type(e)
        if cpu_type is None:
            continue
        sd = ei_dev.sample_input
        targs, tkwargs = _to(((sd.input,) + tuple(sd.args), sd.kwargs), "tpu")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                op.op(*targs, **tkwargs)
                torch.tpu.synchronize()  # device-side checks (index bounds) raise at a synchronization point
            tpu_type = None
        except Exception as e:  # noqa: BLE001
            tpu_type = type(e)
        ok = tpu_type is not None and issubclass(tpu_type, cpu_type)
        xf = (expected_failures or {}).get((key, "any", "error_input"))
        outcome = PASS if ok else (XFAIL if xf else FAIL)
        detail = "" if ok else (xf or f"cpu raised {cpu_type.__name__}, tpu raised "
                                f"{tpu_type.__name__ if tpu_type else 'nothing'}")
        results.append(CaseResult(key, "any", "error_input", i, outcome, detail))
    return results


def summarize(results: List[CaseResult]):
    """Per-op and overall pass rates (on-device passes only count as passes)."""
    per_op: Dict[str, Counter] = defaultdict(Counter)
    for r in results:
        per_op[r.op][(r.direction, r.outcome)] += 1
    return per_op


def rate(results: List[CaseResult], direction: str, ops: Optional[Iterable[str]] = None) -> Tuple[int, int]:
    ops = set(ops) if ops is not None else None
    sel = [r for r in results if r.direction == direction and r.outcome != SKIP and (ops is None or r.op in ops)]
    return sum(r.outcome == PASS for r in sel), len(sel)


def markdown_table(results: List[CaseResult]) -> str:
    per_op = summarize(results)
    lines = ["| op | fwd pass | fwd fallback | fwd fail | fwd xfail | bwd pass | bwd total | error-input pass |",
             "|---|---|---|---|---|---|---|---|"]
    for op in sorted(per_op):
        c = per_op[op]
        fwd_total = sum(v for (d, o), v in c.items() if d == "forward" and o != SKIP)
        bwd_total = sum(v for (d, o), v in c.items() if d == "backward" and o != SKIP)
        ei_total = sum(v for (d, o), v in c.items() if d == "error_input")
        lines.append(
            f"| {op} | {c[('forward', PASS)]}/{fwd_total} | {c[('forward', PASS_FALLBACK)]} | "
            f"{c[('forward', FAIL)] + c[('forward', ERROR)]} | {c[('forward', XFAIL)]} | "
            f"{c[('backward', PASS)]} | {bwd_total} | {c[('error_input', PASS)]}/{ei_total} |")
    return "\n".join(lines)


def find_ops(names: Optional[Iterable[str]] = None):
    from torch.testing._internal.common_methods_invocations import op_db

    if names is None:
        return list(op_db)
    names = set(names)
    return [op for op in op_db if op.name in names or op_key(op) in names]
