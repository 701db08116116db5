"""ModuleInfo sweep: PyTorch's module database (``common_modules.module_db``) run on `tpu` and compared with CPU.

For every ModuleInfo, dtype (float32, bfloat16) and mode (train, and eval for the modules whose ModuleInfo says the
two differ: ``train_and_eval_differ``, the rule of PyTorch's own module tests) every sample of its
``module_inputs_func`` runs on CPU and on `tpu`:

* the module is built on the CPU from a seed derived from (module, dtype, mode, sample), cast to the dtype and put in
  the mode; the device copy is a deep copy moved with ``.to("tpu")``, so both start from the same parameters and
  buffers (a lazy module is materialized on the CPU first, by a forward without gradients on copies of the inputs);
* forward (``<mode>_forward``): outputs, and the module's buffers after the call (running statistics), compared;
* backward (``<mode>_backward``): random cotangents for the outputs (the same on both devices); the gradients of
  every input that requires grad and of every parameter compared.

Comparisons reuse the OpInfo harness (torch_tpu/testing/opinfo.py): its tolerance table, the float32 reference for
bfloat16 results (a result off CPU's bf16 one passes if it matches CPU's float32 computation rounded to bf16), and
its distribution comparison for random modules (dropout and the like; a module is random when two CPU runs with
different seeds differ). A case passes only if nothing ran on the CPU fallback and no host round trip nobody asked
for happened while it ran (``torch_tpu.fallback_report()``'s counters); a case that was right only thanks to them
is a *fallback*. Expected failures: tests/python/module_expected_failures.py (the OpInfo harness's ``xfail``
entries, keyed by module name, dtype, direction and sample index).

Used by tests/python/test_module_conformance.py (a subset in CI) and tools/module_coverage.py (the full sweep that
writes docs/module_coverage.md).
"""
from __future__ import annotations

import copy
import time
import warnings
from collections import Counter, defaultdict
from typing import Iterable, List, Optional, Union

import torch
from torch.utils._pytree import tree_flatten, tree_map

import torch_tpu
from torch_tpu.testing import opinfo as H
from torch_tpu.testing.opinfo import (ERROR, FAIL, PASS, PASS_FALLBACK, SKIP, XFAIL, XPASS, CaseResult,
                                      ExpectedFailures, XFail)

DTYPES = (torch.float32, torch.bfloat16)
DIRECTIONS = ("train_forward", "train_backward", "eval_forward", "eval_backward")
# Random modules whose output elements are independent draws (a pooled Kolmogorov-Smirnov test applies too).
INDEPENDENT_RANDOM = {"nn.Dropout", "nn.AlphaDropout", "nn.RReLU"}


def module_key(info) -> str:
    return info.name


def modes(info) -> tuple:
    """Training flags a ModuleInfo is run in: train, and eval where the two differ (as PyTorch's module tests)."""
    return (True, False) if info.train_and_eval_differ else (True,)


def find_modules(names: Optional[Iterable[str]] = None):
    from torch.testing._internal.common_modules import module_db

    if names is None:
        return list(module_db)
    names = set(names)
    return [m for m in module_db if m.name in names or m.formatted_name in names]


class FallbackWatch:
    """Calls that ran on the CPU fallback, and host round trips nobody asked for, while the block ran."""

    def __enter__(self):
        self.before = dict(torch_tpu._C._fallback_counts())
        self.before_ht = dict(torch_tpu._C._host_transfer_counts())
        return self

    def __exit__(self, *exc):
        after = torch_tpu._C._fallback_counts()
        after_ht = torch_tpu._C._host_transfer_counts()
        self.ops = sorted(k for k, v in after.items() if v > self.before.get(k, 0))
        self.ops += sorted(torch_tpu.HOST_TRANSFER_PREFIX + k for k, v in after_ht.items()
                           if v > self.before_ht.get(k, 0))
        return False


def device_case(run, compare):
    """(outcome, detail) of one device run checked by `compare` (None: right), fallbacks watched."""
    outcome, detail = PASS, ""
    with FallbackWatch() as watch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            err = compare(run())
        except Exception as e:  # noqa: BLE001
            err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            outcome = ERROR
    if err is not None:
        outcome, detail = (ERROR if outcome == ERROR else FAIL), err
    elif watch.ops:
        outcome, detail = PASS_FALLBACK, ",".join(watch.ops)
    return outcome, H._clean(detail)


def _check_leaves(x) -> Optional[str]:
    """Outputs must consist of tensors, numbers and None (anything else would compare as nothing)."""
    for leaf in tree_flatten(x)[0]:
        if leaf is not None and not isinstance(leaf, (torch.Tensor, int, float, bool)):
            return f"uncomparable output of type {type(leaf).__name__}"
    return None


def _flatten_out(out):
    """A module's output as a flat list of tensors (PackedSequence and other named tuples by their fields)."""
    leaves = []
    for leaf in tree_flatten(out)[0]:
        if isinstance(leaf, tuple):  # a tuple subclass pytree does not know (PackedSequence)
            leaves += _flatten_out(tuple(leaf))
        else:
            leaves.append(leaf)
    return leaves


def _buffers(m):
    return [b for _, b in sorted(m.named_buffers(), key=lambda kv: kv[0])]


def _grad_leaves(args) -> List[torch.Tensor]:
    return [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor) and t.requires_grad]


def _inputs_for(args, device):
    """The forward inputs for `device`: (leaves, passed). Leaves are copies (aliasing kept; those requiring grad stay
    leaves requiring grad, the gradients' targets); the tensors passed to the module are clones of them (one per
    tensor object), so a module may write its input in place without touching the sample or a leaf."""
    leaves = H._to(args, device)
    clones = {}

    def passed(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in clones:
            clones[id(t)] = t.clone()
        return clones[id(t)]
    return leaves, tree_map(passed, leaves)


def _call(m, fwd):
    args, kwargs = fwd
    return m(*args, **kwargs)


def _materialize(m, fwd):
    """A lazy module's parameters, initialized on the CPU by one forward without gradients."""
    if isinstance(m, torch.nn.modules.lazy.LazyModuleMixin) and m.has_uninitialized_params():
        with torch.no_grad():
            _call(m, _inputs_for(fwd, "cpu")[1])


def _backward_grads(m, fwd_passed, fwd_leaves, out, seeds):
    outs = [t for t in _flatten_out(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    total = sum(H._weighted(t, w.to(t.device)) for t, w in zip(outs, seeds))
    targets = _grad_leaves(fwd_leaves) + [p for p in m.parameters() if p.requires_grad]
    grads = torch.autograd.grad(total, targets, allow_unused=True)
    return [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, targets)]


def _same(a, b) -> bool:
    la, lb = _flatten_out(a), _flatten_out(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            x, y = x.detach(), y.detach()
            if x.is_floating_point():
                # NaN equals NaN here: a module whose output holds NaNs (LPPool of negative inputs) is not random
                if not torch.equal(x.isnan(), y.isnan()):
                    return False
                x, y = x.nan_to_num(0.0), y.nan_to_num(0.0)
            if not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def run_module(info, dtypes: Iterable[torch.dtype] = DTYPES, max_samples: Optional[int] = None,
               backward: bool = True, training_modes: Optional[Iterable[bool]] = None,
               expected_failures: Union[None, ExpectedFailures, Iterable[XFail]] = None,
               deadline: Optional[float] = None) -> List[CaseResult]:
    """Runs one ModuleInfo's samples on tpu and CPU; returns a result per case."""
    key = module_key(info)
    xf = H._expected(expected_failures)
    results: List[CaseResult] = []

    def record(dname, direction, i, outcome, detail):
        outcome, detail, entry = xf.classify(key, dname, direction, i, outcome, detail)
        results.append(CaseResult(key, dname, direction, i, outcome, H._clean(detail)))
        return outcome, entry

    for training in (modes(info) if training_modes is None else training_modes):
        if training not in modes(info):
            continue
        mode = "train" if training else "eval"
        for dtype in dtypes:
            dname = str(dtype).replace("torch.", "")
            try:
                torch.manual_seed(H.case_seed(key, dname, mode))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    samples = list(info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                                           training=training))
            except Exception:  # noqa: BLE001  (the module has no samples for this dtype)
                continue
            if max_samples is not None:
                samples = samples[:max_samples]
            for i, sample in enumerate(samples):
                if deadline is not None and time.monotonic() > deadline:
                    return results
                if sample.forward_input is None:
                    continue
                _run_sample(info, key, dtype, dname, mode, training, i, sample, backward, record, results)
    return results


def _run_sample(info, key, dtype, dname, mode, training, i, sample, backward, record, results):
    fwd = (tuple(sample.forward_input.args), dict(sample.forward_input.kwargs))
    ctor = sample.constructor_input
    fdir, bdir = f"{mode}_forward", f"{mode}_backward"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.manual_seed(H.case_seed(key, dname, mode, i))
            m0 = info.module_cls(*ctor.args, **ctor.kwargs)
            m0.to(dtype)
            m0.train(training)
            _materialize(m0, fwd)
            # CPU reference (and whether the module is random: a second run with another seed differs).
            m_cpu = copy.deepcopy(m0)
            c_leaves, c_in = _inputs_for(fwd, "cpu")
            torch.manual_seed(0)
            expected = _call(m_cpu, c_in)
            probe = copy.deepcopy(m0)
            torch.manual_seed(1)
            is_random = not _same(_call(probe, _inputs_for(fwd, "cpu")[1]), expected)
            exp_bufs = _buffers(m_cpu)
        except Exception as e:  # noqa: BLE001
            results.append(CaseResult(key, dname, fdir, i, SKIP, f"cpu raised {type(e).__name__}"))
            return
    bad = _check_leaves(_flatten_out(expected))
    if bad is not None:
        record(dname, fdir, i, ERROR, "harness: " + bad)
        return
    try:
        m_tpu = copy.deepcopy(m0).to("tpu")
        t_leaves, t_in = _inputs_for(fwd, "tpu")
    except Exception as e:  # noqa: BLE001
        record(dname, fdir, i, ERROR, f"moving the module to tpu: {type(e).__name__}: {e}")
        return
    state = {}

    def forward():
        torch.manual_seed(0)
        out = _call(m_tpu, t_in)
        state["out"] = out
        return _flatten_out(out) + _buffers(m_tpu)

    expected_flat = _flatten_out(expected) + exp_bufs

    def fresh_run(device):
        """One run from the initial state (for draws of a random module)."""
        m = copy.deepcopy(m0) if device == "cpu" else copy.deepcopy(m0).to(device)
        return lambda r: _flatten_out(_call(m, _inputs_for(fwd, device)[1]))

    if is_random:
        def compare(out):
            return H._compare_random(key, fresh_run("tpu"), fresh_run("cpu"), out[:len(out) - len(exp_bufs)],
                                     _flatten_out(expected), independent=key in INDEPENDENT_RANDOM)
    else:
        def reference32():
            m32 = copy.deepcopy(m0).float()
            _, inp = _inputs_for(H._upcast(fwd, dtype), "cpu")
            return _flatten_out(_call(m32, inp)) + _buffers(m32)

        def reference():
            return H._rounded_like(reference32(), expected_flat)
        compare = _as_accurate_as_cpu(
            H._with_float32_reference(lambda out: H._compare(out, expected_flat, dtype), reference, dtype),
            expected_flat, reference32, dtype)
    outcome, detail = device_case(forward, compare)
    outcome, entry = record(dname, fdir, i, outcome, detail)
    if not backward or outcome in (ERROR, FAIL) or (outcome == XFAIL and entry.kind != "fallback"):
        return
    # Backward: the same random cotangents on both devices.
    outs = [t for t in _flatten_out(expected) if isinstance(t, torch.Tensor) and t.requires_grad
            and (t.is_floating_point() or t.is_complex())]
    if not outs:
        return
    g = torch.Generator().manual_seed(i)
    seeds = [H._seed_like(t, g) for t in outs]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exp_g = _backward_grads(m_cpu, c_in, c_leaves, expected, seeds)
    except Exception:  # noqa: BLE001  (CPU itself has no backward here)
        return

    def backward_run():
        return _backward_grads(m_tpu, t_in, t_leaves, state["out"], seeds)

    if is_random:
        def grads_of(device):
            def run(r):
                m = copy.deepcopy(m0) if device == "cpu" else copy.deepcopy(m0).to(device)
                leaves, passed = _inputs_for(fwd, device)
                return _backward_grads(m, passed, leaves, _call(m, passed), seeds)
            return run

        def bcompare(out):
            return H._compare_random(key, grads_of("tpu"), grads_of("cpu"), out, exp_g)
    else:
        def bref32():
            m32 = copy.deepcopy(m0).float()
            leaves, inp = _inputs_for(H._upcast(fwd, dtype), "cpu")
            return _backward_grads(m32, inp, leaves, _call(m32, inp), seeds)

        def bref():
            return H._rounded_like(bref32(), exp_g)
        bcompare = _as_accurate_as_cpu(
            H._with_float32_reference(lambda out: H._compare(out, exp_g, dtype), bref, dtype), exp_g, bref32, dtype)
    outcome, detail = device_case(backward_run, bcompare)
    record(dname, bdir, i, outcome, detail)


# A bf16/f16 result that misses both CPU's result and CPU's float32 result rounded still passes when its worst
# error against the float32 computation, relative to each tensor's largest magnitude, is at most this multiple of
# the same measure for CPU's own half-precision result.
HALF_ERROR_RATIO = 2.0


def _relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """max |x - ref| / max |ref| over the elements where ref is finite (inf where x is not finite there)."""
    x, ref = x.detach().cpu().double(), ref.detach().cpu().double()
    ok = torch.isfinite(ref)
    if not ok.any():
        return 0.0
    if not torch.isfinite(x[ok]).all():
        return float("inf")
    scale = float(ref[ok].abs().max())
    return float((x[ok] - ref[ok]).abs().max()) / (scale if scale > 0 else 1.0)


def _as_accurate_as_cpu(compare, expected, reference32, dtype):
    """For bf16/f16 cases: `compare` (CPU's result, then CPU's float32 computation rounded), and failing that, a
    comparison of accuracy: the device result passes if its worst relative error against the float32 computation
    (unrounded; the largest error of each tensor over the tensor's largest magnitude, the worst tensor) is at most
    HALF_ERROR_RATIO times that of CPU's own half-precision result. Half-precision sums (a convolution's weight
    gradient, the gradients of a recurrent or attention layer, a padded border's gradient) round differently in every
    implementation: where an exact result is small beside the terms summed, both the device's and CPU's results miss
    it by more than the elementwise tolerance, and neither is more right than the other. A wrong result (a tensor
    off by more than rounding) still fails: its relative error is far above CPU's."""
    def judge(out, ref, err):
        if len(ref) != len(out) or len(expected) != len(out):
            return err
        dev = cpu = 0.0
        for a, e, r in zip(out, expected, ref):
            if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and isinstance(r, torch.Tensor) \
                    and a.is_floating_point() and a.shape == r.shape == e.shape:
                dev, cpu = max(dev, _relative_error(a, r)), max(cpu, _relative_error(e, r))
        if dev > HALF_ERROR_RATIO * cpu:
            return f"{err} (relative error against float32 {dev:.3g}, CPU's {cpu:.3g})"
        return None
    return H._on_half_miss(compare, reference32, dtype, judge)


def rate(results: List[CaseResult], kind: str, dtype: Optional[str] = None):
    """(cases right on the device, cases run) over directions ending in `kind` ("forward"/"backward")."""
    sel = [r for r in results if r.direction.endswith(kind) and r.outcome != SKIP
           and (dtype is None or r.dtype == dtype)]
    return sum(r.outcome in (PASS, XPASS) for r in sel), len(sel)


def markdown_table(results: List[CaseResult]) -> str:
    per: dict = defaultdict(Counter)
    for r in results:
        if r.outcome != SKIP:
            per[r.op][(r.direction.split("_")[1], r.outcome)] += 1
    lines = ["| module | fwd pass | fwd fallback | fwd fail | fwd xfail | bwd pass | bwd fallback | bwd fail "
             "| bwd xfail |", "|---|---|---|---|---|---|---|---|---|"]
    for op in sorted(per):
        c = per[op]
        cols = []
        for d in ("forward", "backward"):
            total = sum(v for (dd, _), v in c.items() if dd == d)
            cols += [f"{c[(d, PASS)] + c[(d, XPASS)]}/{total}", c[(d, PASS_FALLBACK)], c[(d, FAIL)] + c[(d, ERROR)],
                     c[(d, XFAIL)]]
        lines.append(f"| {op} | " + " | ".join(map(str, cols)) + " |")
    return "\n".join(lines)
