"""Randomized soak test: seeded random op calls on `tpu`, each compared with the same call on CPU.

Case ``i`` of seed ``s`` is generated from its own random streams (``Random(s * 1000003 + i)``), so any case can be
replayed alone (``python -m torch_tpu.testing.soak --seed s --only i -v``). A case picks an op from a catalogue
(elementwise, type promotion with Python numbers, reductions, views and shape ops, indexing, scatter/gather,
matmul, sort-like ops, normalization, losses, pooling, factories, copies and conversions), its dtypes (float32,
bfloat16, float16, int64, int32, bool; casts to the float8 types; complex64 and complex128 for the complex family),
shapes (0-d and empty included) and input layouts (contiguous, transposed, permuted, sliced with steps, offset,
expanded), and sometimes an in-place or out= variant, possibly through a view. The same call runs on CPU tensors and
on tpu tensors with the same layouts; the results must
match within the dtype's tolerance (ops with unspecified tie indices: values plus index consistency), in-place
calls must leave the same bases, and a call CPU rejects must raise the same exception type on tpu.

The case machinery lives in soak_gen.py, the op families in soak_cases.py and soak_cases_nn.py; this
module draws a case, runs it on both devices and compares.

Known divergences (KNOWN) are counted and reported, never hidden: each names the condition and why.

Used by tests/python/test_soak.py; as a script for longer runs:

    python -m torch_tpu.testing.soak --seed 0 --cases 5000 [--only I] [-v]
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
import warnings
from collections import Counter
from typing import Callable, List, Optional, Sequence, Tuple

import torch
import torch.utils._python_dispatch
from torch.utils._pytree import tree_flatten

import torch_tpu  # noqa: F401  (registers the device)

from torch_tpu.testing.opinfo import _check_indices
from torch_tpu.testing.soak_cases import (gen_binary, gen_indexing, gen_reduction, gen_shape, gen_ternary,
                                          gen_unary)
from torch_tpu.testing.soak_cases_nn import gen_complex, gen_factory, gen_matmul, gen_nn, gen_overlap, gen_sort
from torch_tpu.testing.tolerances import tol
from torch_tpu.testing.soak_gen import Case, Gen, Input  # noqa: F401  (Input: part of this module's interface)


FAMILIES = ((gen_unary, 16), (gen_binary, 20), (gen_ternary, 6), (gen_reduction, 14), (gen_shape, 16),
            (gen_indexing, 10), (gen_matmul, 6), (gen_sort, 6), (gen_nn, 8), (gen_factory, 4), (gen_overlap, 1),
            (gen_complex, 8))


def make_case(seed: int, index: int, variant: int = 0) -> Case:
    """Case `index` of `seed`; variants share the structure (and so, mostly, the compiled programs) and differ in
    their tensor values."""
    g = Gen(seed, index, variant)
    total = sum(w for _, w in FAMILIES)
    x = g.r.random() * total
    for fam, w in FAMILIES:
        x -= w
        if x < 0:
            return fam(g)
    return FAMILIES[0][0](g)


# ---------------------------------------------------------------------------------------------------------------
# running and comparing


def compare_results(case: Case, cpu, tpu, cpu_args) -> Optional[str]:
    if case.compare == "indexed":
        spec, dim, squeezed = case.spec
        err = compare_results(Case(case.op, case.fn, case.args, "meta"), cpu, tpu, cpu_args)
        if err is not None:
            return err
        vc, vt = cpu[0], tpu[0]
        err = _close_msg(vt.cpu(), vc)
        if err is not None:
            return "values: " + err
        x = cpu_args[0]
        return _check_indices(x, vt, tpu[1], dim, squeezed, spec)
    if case.compare == "unordered":
        err = compare_results(Case(case.op, case.fn, case.args, "meta"), cpu, tpu, cpu_args)
        if err is not None:
            return err
        vc = cpu[0] if isinstance(cpu, tuple) else cpu
        vt = (tpu[0] if isinstance(tpu, tuple) else tpu).cpu()
        return _close_msg(vt.sort().values, vc.sort().values)
    c_leaves, c_spec = tree_flatten(cpu)
    t_leaves, t_spec = tree_flatten(tpu)
    if len(c_leaves) != len(t_leaves):
        return f"structure {t_spec} vs {c_spec}"
    for c, t in zip(c_leaves, t_leaves):
        if isinstance(c, torch.Tensor):
            if not isinstance(t, torch.Tensor):
                return f"{type(t).__name__} vs a tensor"
            if t.device.type != "tpu":
                return f"result on {t.device}"
            if t.dtype != c.dtype:
                return f"dtype {t.dtype} vs {c.dtype}"
            if t.shape != c.shape:
                return f"shape {tuple(t.shape)} vs {tuple(c.shape)}"
            if case.compare == "meta":
                continue
            err = _close_msg(t.cpu(), c)
            if err is not None:
                return err
        elif c != t and not (isinstance(c, float) and math.isnan(c) and isinstance(t, float) and math.isnan(t)):
            return f"{t!r} vs {c!r}"
    return None


def _close_msg(t: torch.Tensor, c: torch.Tensor) -> Optional[str]:
    try:
        torch.testing.assert_close(t, c, equal_nan=True, **tol(c.dtype))
    except AssertionError as e:
        lines = str(e).splitlines()
        return " ".join(lines[:4])
    return None


@dataclasses.dataclass
class Finding:
    index: int
    variant: int
    case: str
    op: str
    what: str
    known: Optional[str] = None


# Divergences known and tracked elsewhere: (name, predicate(case, cpu_exc, tpu_exc, detail), why). Each occurrence
# is counted in the report; a new kind of mismatch fails the test.
CPU_LAYOUT = "CPU's result (or error) on these strides differs from its result on contiguous copies, which tpu matches: "
CPU_HALF = "CPU's bf16/f16 result differs from its float32 result rounded to the same dtype, which tpu matches: "
KNOWN: List[Tuple[str, Callable[..., bool], str]] = [
    ("cpu-strided-kernel", lambda case, what: what.startswith(CPU_LAYOUT),
     "the CPU kernel (the reference) is wrong for this input layout; tpu agrees with CPU on contiguous copies"),
    ("cpu-half-kernel", lambda case, what: what.startswith(CPU_HALF),
     "the CPU kernel (the reference) computes in bf16/f16 differently from the same computation in float32 (e.g. "
     "its bf16 convolution drops NaNs); tpu agrees with CPU's float32 result rounded to bf16/f16"),
    ("out-dtype", lambda case, what: case.op.endswith(".out") and "tpu raised nothing" in what and
     "Found dtype" in what,
     "op(x, out=o) with o of another dtype converts instead of raising for some unary ops (neg, bitwise_not): "
     "PyTorch's meta kernels for their out= forms accept what the CPU kernels reject, and the eager kernel trusts "
     "the meta kernels"),
    ("masked-scatter-count", lambda case, what: "tpu raised nothing" in what and
     "Number of elements of source < number of ones in mask" in what,
     "masked_scatter with fewer source elements than true mask elements is not detected: a data-dependent check, "
     "like out-of-range indices it needs a device-side check (issue 13, item 1)"),
    ("overlapping-inplace", lambda case, what: "tpu raised nothing" in what and "memory location" in what,
     "an in-place op whose source overlaps its destination (b[1:].add_(b[:-1])), or a write to an expanded "
     "tensor, computes instead of raising; the check belongs to the eager kernel (issue 13)"),
    ("inplace-broadcast-resize", lambda case, what: "tpu raised nothing" in what and
     "doesn't match the broadcast shape" in what,
     "x.op_(y) where broadcasting would grow x resizes x instead of raising: PyTorch's meta kernels for in-place "
     "ops resize their output and the eager kernel trusts them (csrc/eager/kernel.cpp)"),
]


def _alternative(case: Case, how: str, like):
    """CPU's result on other copies of the inputs: "contiguous" copies, or "float32" copies of bf16/f16 inputs
    (the result rounded back to the dtypes of `like`). Raises what CPU raises."""
    args = []
    for a in case.args:
        if isinstance(a, Input):
            t = a.build("cpu")[1]
            t = t.contiguous() if how == "contiguous" else t.float() if t.dtype in (torch.bfloat16, torch.float16) else t
            args.append(t)
        else:
            args.append("cpu" if a == "<device>" else a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = case.fn(*args)
    if how == "float32":
        leaves, spec = tree_flatten(out)
        ref = tree_flatten(like)[0]
        if len(leaves) == len(ref):
            leaves = [x.to(r.dtype) if isinstance(x, torch.Tensor) and isinstance(r, torch.Tensor) else x
                      for x, r in zip(leaves, ref)]
            out = torch.utils._pytree.tree_unflatten(leaves, spec)
    return out, args


def _matches_alternative(case: Case, tpu_out, cpu_raised: bool = False) -> Optional[str]:
    """When CPU's result (or error) differs from tpu's: the marker of a CPU reference tpu does match, if any. An
    error CPU raises only on strided inputs is a CPU layout bug; an error is never excused by upcasting."""
    if case.mutates:
        return None
    tries = []
    if any(isinstance(a, Input) and a.recipe for a in case.args):
        tries.append(("contiguous", CPU_LAYOUT))
    if not cpu_raised and any(isinstance(a, Input) and a.base.dtype in (torch.bfloat16, torch.float16)
                              for a in case.args):
        tries.append(("float32", CPU_HALF))
    for how, marker in tries:
        try:
            alt, alt_args = _alternative(case, how, tpu_out)
        except Exception:  # noqa: BLE001
            continue
        if compare_results(case, alt, tpu_out, alt_args) is None:
            return marker
    return None


def run_case(case: Case) -> Optional[str]:
    """Runs the case on CPU and tpu; None when they agree, else what differs."""
    cpu_in = [a.build("cpu") if isinstance(a, Input) else a for a in case.args]
    tpu_in = [a.build("tpu") if isinstance(a, Input) else a for a in case.args]
    cpu_args = [("cpu" if a == "<device>" else a[1] if isinstance(a, tuple) else a) for a in cpu_in]
    tpu_args = [("tpu" if a == "<device>" else a[1] if isinstance(a, tuple) else a) for a in tpu_in]
    cpu_exc = tpu_exc = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cpu_out = case.fn(*cpu_args)
        except Exception as e:  # noqa: BLE001
            cpu_exc = e
        try:
            tpu_out = case.fn(*tpu_args)
            torch.tpu.synchronize()
        except Exception as e:  # noqa: BLE001
            tpu_exc = e
    if cpu_exc is not None or tpu_exc is not None:
        if cpu_exc is None:
            return f"tpu raised {type(tpu_exc).__name__}: {str(tpu_exc).splitlines()[0] if str(tpu_exc) else ''}"
        if tpu_exc is None:
            what = f"CPU raised {type(cpu_exc).__name__} ({str(cpu_exc).splitlines()[0][:120]}), tpu raised nothing"
            marker = _matches_alternative(case, tpu_out, cpu_raised=True)
            return marker + what if marker else what
        if not isinstance(tpu_exc, type(cpu_exc)):
            return (f"CPU raised {type(cpu_exc).__name__}, tpu raised {type(tpu_exc).__name__}: "
                    f"{str(tpu_exc).splitlines()[0][:160] if str(tpu_exc) else ''}")
        return None
    err = compare_results(case, cpu_out, tpu_out, cpu_args)
    if err is not None:
        marker = _matches_alternative(case, tpu_out)
        return (marker or "result: ") + err
    if case.mutates:
        for k, (c, t) in enumerate(zip(cpu_in, tpu_in)):
            if isinstance(c, tuple):
                err = compare_results(Case(case.op, case.fn, []), c[0], t[0], [])
                if err is not None:
                    return f"argument {k} after the call: {err}"
    return None


def known_reason(case: Case, what: str) -> Optional[str]:
    for name, pred, why in KNOWN:
        try:
            if pred(case, what):
                return f"{name}: {why}"
        except Exception:  # noqa: BLE001
            continue
    return None


@dataclasses.dataclass
class Report:
    cases: int = 0
    calls: int = 0
    ops: Counter = dataclasses.field(default_factory=Counter)
    findings: List[Finding] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False
    aten_ops: Counter = dataclasses.field(default_factory=Counter)

    @property
    def unexpected(self) -> List[Finding]:
        return [f for f in self.findings if f.known is None]

    def summary(self) -> str:
        known = Counter(f.known.split(":")[0] for f in self.findings if f.known)
        lines = [f"soak: {self.cases} cases, {self.calls} calls compared with CPU, {len(self.ops)} distinct ops"
                 + (f" ({len(self.aten_ops)} distinct ATen ops on tpu)" if self.aten_ops else "")
                 + f", {self.seconds:.1f} s" + (" (stopped at the time budget)" if self.stopped_early else ""),
                 f"  mismatches: {len(self.unexpected)} unexpected, {sum(known.values())} known"]
        lines += [f"  known {k}: {v}" for k, v in sorted(known.items())]
        lines += [f"  #{f.index}.{f.variant} {f.case}: {f.what}" for f in self.unexpected[:50]]
        return "\n".join(lines)


class _AtenCounter(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self, counter: Counter):
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(isinstance(a, torch.Tensor) and a.device.type == "tpu" for a in tree_flatten((args, kwargs))[0]):
            self.counter[str(func.name())] += 1
        return func(*args, **(kwargs or {}))


def run(seed: int, cases: int, variants: int = 1, budget_s: Optional[float] = None,
        indices: Optional[Sequence[int]] = None, verbose: bool = False, count_aten: bool = False) -> Report:
    """Runs cases (each in `variants` value variants); stops starting new cases after budget_s seconds."""
    rep = Report()
    t0 = time.monotonic()
    for i in (indices if indices is not None else range(cases)):
        if budget_s is not None and time.monotonic() - t0 > budget_s:
            rep.stopped_early = True
            break
        rep.cases += 1
        for v in range(variants):
            try:
                case = make_case(seed, i, v)
            except Exception as e:  # noqa: BLE001  (a bug of the generator: reported, not hidden)
                rep.findings.append(Finding(i, v, "<generator>", "<generator>", f"generator: {type(e).__name__}: {e}"))
                continue
            desc = case.describe()
            if verbose:
                print(f"#{i}.{v} {desc}", file=sys.stderr, flush=True)
            try:
                if count_aten:
                    with _AtenCounter(rep.aten_ops):
                        what = run_case(case)
                else:
                    what = run_case(case)
            except Exception as e:  # noqa: BLE001  (the comparison itself failed: a finding too)
                what = f"harness: {type(e).__name__}: {e}"
            rep.calls += 1
            rep.ops[case.op] += 1
            if what is not None:
                rep.findings.append(Finding(i, v, desc, case.op, what[:400], known_reason(case, what)))
    rep.seconds = time.monotonic() - t0
    return rep


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--variants", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--only", type=int, nargs="*")
    ap.add_argument("--budget", type=float, default=None)
    ap.add_argument("--aten", action="store_true", help="count the distinct ATen ops reaching tpu (slower)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    idx = a.only if a.only else range(a.start, a.start + a.cases)
    rep = run(a.seed, a.cases, a.variants, a.budget, idx, a.verbose, a.aten)
    print(rep.summary())
    for f in rep.findings:
        print(f"#{f.index}.{f.variant} [{f.known or 'UNEXPECTED'}] {f.case}: {f.what}")
    if a.aten:
        print("ATen ops:", " ".join(sorted(rep.aten_ops)))
    return 1 if rep.unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
