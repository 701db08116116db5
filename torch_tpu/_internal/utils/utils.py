"""Implementations behind ``torch_tpu._internal.utils`` (see the package docstring)."""

from __future__ import annotations

import collections.abc
import enum
import math
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["CheckValueMode", "OpTracer", "assert_close", "format_model", "pformat_op_tracer"]

Tolerance = Union[float, Callable[[float], float]]


# ---------------------------------------------------------------------------------------------------------------
# Op tracer


def _devices(values: Any) -> List[str]:
    flat, _ = tree_flatten(values)
    seen: List[str] = []
    for v in flat:
        if isinstance(v, torch.Tensor):
            d = str(v.device)
            if d not in seen:
                seen.append(d)
    return seen


class OpTracer(TorchDispatchMode):
    r"""Records the ATen ops run inside ``with OpTracer() as tracer:``.

    Each entry of ``tracer.events`` is a dict: ``op`` (schema name, e.g. ``aten::mm``), ``inputs`` / ``outputs``
    (devices of the tensor arguments and results), ``placement`` (``"tpu"``: a device program ran it,
    ``"cpu fallback"``: a tpu op with no lowering ran on the host, ``"cpu"``: host tensors only, ``"meta"``),
    ``reason`` (why a lowering declined the call, when it says) and ``seconds`` (host time of the call).
    :meth:`summary` counts ops per placement; :meth:`fallbacks` lists the ops that fell back.
    """

    def __init__(self) -> None:
        super().__init__()
        self.events: List[Dict[str, Any]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        from torch_tpu import _C

        kwargs = kwargs or {}
        before = sum(int(v) for v in dict(_C._fallback_counts()).values())
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        seconds = time.perf_counter() - t0
        after = sum(int(v) for v in dict(_C._fallback_counts()).values())
        name = func._schema.name
        ins = _devices((args, kwargs))
        outs = _devices(out)
        touched = ins + [d for d in outs if d not in ins]
        reason = None
        if after > before:
            placement = "cpu fallback"
            reason = dict(_C._fallback_reasons()).get(name)
        elif any(d.startswith("tpu") for d in touched):
            placement = "tpu"
        elif touched and all(d == "meta" for d in touched):
            placement = "meta"
        else:
            placement = "cpu"
        overload = func._overloadname
        self.events.append(
            dict(op=name if overload in ("", "default") else f"{name}.{overload}", inputs=ins, outputs=outs,
                 placement=placement, reason=reason, seconds=seconds)
        )
        return out

    def summary(self) -> Dict[str, Dict[str, int]]:
        r"""``{op: {placement: calls}}``."""
        out: Dict[str, Dict[str, int]] = {}
        for e in self.events:
            per = out.setdefault(e["op"], {})
            per[e["placement"]] = per.get(e["placement"], 0) + 1
        return out

    def fallbacks(self) -> Dict[str, int]:
        r"""Ops that ran on the CPU fallback, with their call counts."""
        return {op: per["cpu fallback"] for op, per in self.summary().items() if "cpu fallback" in per}

    def report(self) -> str:
        r"""One line per op: calls by placement, and the fallback reason if any."""
        lines = [f"OpTracer: {len(self.events)} op calls, {sum(self.fallbacks().values())} on the CPU fallback"]
        reasons = {e["op"]: e["reason"] for e in self.events if e["reason"]}
        summary = self.summary()
        width = max((len(op) for op in summary), default=0)
        for op, per in summary.items():
            where = ", ".join(f"{p}: {n}" for p, n in sorted(per.items()))
            why = f"  ({reasons[op]})" if op in reasons else ""
            lines.append(f"  {op:<{width}}  {where}{why}")
        return "\n".join(lines)

    _pformat = report


def pformat_op_tracer(tracer: OpTracer) -> str:
    r"""TorchTPU's name for :meth:`OpTracer.report`."""
    return tracer.report()


# ---------------------------------------------------------------------------------------------------------------
# format_model


def format_model(model: torch.nn.Module, max_depth: Optional[int] = None) -> str:
    r"""The module tree of ``model``, one line per module: its name, class, and its own parameters and buffers
    (count of elements, dtypes, devices). ``max_depth`` limits the nesting shown."""
    lines: List[str] = []

    def own(m: torch.nn.Module) -> str:
        tensors = list(m.named_parameters(recurse=False)) + list(m.named_buffers(recurse=False))
        if not tensors:
            return ""
        n = sum(t.numel() for _, t in tensors)
        dtypes = sorted({str(t.dtype).replace("torch.", "") for _, t in tensors})
        devices = sorted({str(t.device) for _, t in tensors})
        return f"  [{n:,} elements; {'/'.join(dtypes)}; {'/'.join(devices)}]"

    def walk(m: torch.nn.Module, name: str, depth: int) -> None:
        lines.append(f"{'  ' * depth}{name}: {type(m).__name__}{own(m)}")
        if max_depth is not None and depth >= max_depth:
            return
        for child_name, child in m.named_children():
            walk(child, child_name, depth + 1)

    walk(model, "(model)", 0)
    total = sum(p.numel() for p in model.parameters())
    lines.append(f"total parameters: {total:,}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# assert_close


class CheckValueMode(enum.Enum):
    r"""How :func:`assert_close` compares values: SKIP (shapes and dtypes only), LOOSE (PyTorch's rule,
    ``|a - e| <= atol + rtol |e|``), STRICT (both bounds: ``|a - e| <= atol`` and ``|a - e| <= rtol |e|``)."""

    SKIP = "skip"
    LOOSE = "loose"
    STRICT = "strict"


def _is_seq(x: Any) -> bool:
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, str)


def assert_close(actual: Any, expected: Any, rtol: Optional[float] = None, atol: Optional[Tolerance] = None,
                 preamble: Optional[str] = None, check_value: CheckValueMode = CheckValueMode.STRICT,
                 check_dtype: bool = True) -> None:
    r"""Assert ``actual`` matches ``expected`` (tensors on any devices, or nested sequences of them).

    Default tolerances are PyTorch's for the dtype. ``atol`` may be a callable of the expected value (then
    ``rtol`` must be None). A failure raises AssertionError naming the mismatching elements and the tolerances
    that would pass.
    """
    if actual is None or expected is None:
        assert actual is None and expected is None, f"both must be None or neither: {actual=} {expected=}"
        return
    if _is_seq(actual) or _is_seq(expected):
        assert _is_seq(actual) and _is_seq(expected), "actual and expected must both be sequences or both not"
        assert len(actual) == len(expected), f"sequence lengths differ: {len(actual)} vs {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, rtol, atol, f"{preamble or ''}[{i}]", check_value, check_dtype)
        return
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
        raise AssertionError(f"expected tensors, got {type(actual).__name__} and {type(expected).__name__}")
    head = (preamble.rstrip() + "\n") if preamble else ""
    if actual.shape != expected.shape:
        raise AssertionError(f"{head}shape mismatch: actual {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    a = actual.detach().cpu()
    e = expected.detach().cpu()
    if check_dtype and a.dtype != e.dtype:
        raise AssertionError(f"{head}dtype mismatch: actual {a.dtype}, expected {e.dtype}")
    if not check_dtype:
        common = torch.promote_types(a.dtype, e.dtype)
        a, e = a.to(common), e.to(common)
    if check_value == CheckValueMode.SKIP:
        return
    if callable(atol):
        if rtol is not None:
            raise ValueError("rtol must be None when atol is a callable")
        af, ef = a.double().flatten().tolist(), e.double().flatten().tolist()
        bad = [(i, x, y, atol(y)) for i, (x, y) in enumerate(zip(af, ef))
               if not (abs(x - y) <= atol(y) or (math.isnan(x) and math.isnan(y)))]
        if bad:
            rows = "\n".join(f"  flat index {i}: actual {x}, expected {y}, tolerance {t}" for i, x, y, t in bad[:10])
            raise AssertionError(f"{head}{len(bad)} of {len(af)} values are not close:\n{rows}")
        return
    if rtol is None or atol is None:
        d_rtol, d_atol = torch.testing._comparison.default_tolerances(a, e)
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
    if not (a.is_floating_point() or a.is_complex()):
        if not torch.equal(a, e):
            diff = (a != e).nonzero()
            raise AssertionError(f"{head}{diff.shape[0]} of {a.numel()} values differ, first at {diff[0].tolist()}")
        return
    ad, ed = a.double(), e.double()
    err = (ad - ed).abs()
    both_nan = ad.isnan() & ed.isnan()
    if check_value == CheckValueMode.LOOSE:
        ok = (err <= atol + rtol * ed.abs()) | both_nan
    else:
        ok = ((err <= atol) & (err <= rtol * ed.abs())) | (err == 0) | both_nan
    if bool(ok.all()):
        return
    bad = (~ok).nonzero()
    worst = int(err.masked_fill(ok, 0).flatten().argmax())
    rel = (err / ed.abs()).masked_fill(ok, 0)
    max_abs = float(err.masked_fill(ok, 0).max())
    max_rel = float(rel[~ok].max()) if bool((~ok).any()) else 0.0
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), tuple(a.shape))) if a.dim() else ()
    raise AssertionError(
        f"{head}Tensor-likes are not close ({check_value.name.lower()} check, rtol={rtol}, atol={atol}):\n"
        f"  mismatched elements: {bad.shape[0]} / {a.numel()}\n"
        f"  greatest absolute difference: {max_abs} at index {idx} (actual {float(ad.flatten()[worst])}, "
        f"expected {float(ed.flatten()[worst])})\n"
        f"  greatest relative difference among mismatches: {max_rel}\n"
        f"Tolerance suggestions: atol >= {max_abs:.1e}"
        + (f", rtol >= {max_rel:.1e}" if math.isfinite(max_rel) else " (rtol cannot pass: expected is 0 there)")
    )
