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

Known divergences (KNOWN) are counted and reported, never hidden: each names the condition and why.

Used by tests/python/test_soak.py; as a script for longer runs:

    python -m torch_tpu.testing.soak --seed 0 --cases 5000 [--only I] [-v]
"""
from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
import warnings
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
import torch.utils._python_dispatch
from torch.utils._pytree import tree_flatten

import torch_tpu  # noqa: F401  (registers the device)

from torch_tpu.testing.opinfo import _IndexedSpec, _check_indices

FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int64, torch.int32)
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu)
DTYPE_WEIGHTS = ((torch.float32, 40), (torch.bfloat16, 15), (torch.float16, 5), (torch.int64, 18),
                 (torch.int32, 7), (torch.bool, 10))
DIMS = (0, 1, 1, 2, 2, 3, 3, 4, 5, 5, 7)


# ---------------------------------------------------------------------------------------------------------------
# inputs


@dataclasses.dataclass
class Input:
    """A tensor argument: a CPU base and the view recipe that gives the argument (applied on each device)."""
    base: torch.Tensor
    recipe: Tuple[Tuple[Any, ...], ...] = ()
    layout: str = "contiguous"

    def build(self, device: str) -> Tuple[torch.Tensor, torch.Tensor]:
        base = self.base.clone() if device == "cpu" else self.base.to(device)
        t = base
        for step in self.recipe:
            kind = step[0]
            if kind == "transpose":
                t = t.transpose(step[1], step[2])
            elif kind == "permute":
                t = t.permute(step[1])
            elif kind == "slice":
                _, d, start, stop, stride = step
                t = t[(slice(None),) * d + (slice(start, stop, stride),)]
            elif kind == "expand":
                t = t.expand(step[1])
            elif kind == "flat":
                _, off, shape = step
                t = t.reshape(-1)[off:off + math.prod(shape)].view(shape)
            else:
                raise ValueError(kind)
        return base, t

    @property
    def shape(self):
        return tuple(self.build("cpu")[1].shape)


class Gen:
    """The random choices of one case."""

    def __init__(self, seed: int, index: int, variant: int = 0):
        s = seed * 1000003 + index
        self.r = random.Random(s)  # the structure: op, shapes, dtypes, layouts, static arguments
        self.g = torch.Generator().manual_seed(s * 16 + variant)  # the values: one stream per variant

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def choice(self, seq):
        return seq[self.r.randrange(len(seq))]

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def dtype(self, allowed: Sequence[torch.dtype] = None) -> torch.dtype:
        opts = [(d, w) for d, w in DTYPE_WEIGHTS if allowed is None or d in allowed]
        total = sum(w for _, w in opts)
        x = self.r.random() * total
        for d, w in opts:
            x -= w
            if x < 0:
                return d
        return opts[-1][0]

    def shape(self, min_rank: int = 0, max_rank: int = 4, nonempty: bool = False) -> Tuple[int, ...]:
        rank = self.choice([k for k in (0, 1, 1, 2, 2, 2, 3, 3, 4) if min_rank <= k <= max_rank] or [min_rank])
        return tuple(self.choice([d for d in DIMS if d > 0] if nonempty else DIMS) for _ in range(rank))

    def broadcastable(self, shape: Tuple[int, ...]) -> Tuple[int, ...]:
        """A shape that broadcasts with `shape` (fewer dims, ones), or occasionally one that does not."""
        if self.chance(0.04) and shape:
            bad = list(shape)
            k = self.int(0, len(bad) - 1)
            bad[k] = bad[k] + 1 if bad[k] > 1 else 3
            return tuple(bad)
        k = self.int(0, len(shape))
        out = [1 if self.chance(0.35) else d for d in shape[len(shape) - k:]]
        if self.chance(0.15):  # the other operand is the bigger one
            out = [self.choice((2, 3))] + out if len(out) < 4 else out
        return tuple(out)

    def values(self, shape, dtype) -> torch.Tensor:
        if dtype.is_complex:
            part = torch.float64 if dtype == torch.complex128 else torch.float32
            return torch.complex(self.values(shape, part), self.values(shape, part))
        if dtype == torch.bool:
            return torch.rand(shape, generator=self.g) < 0.5
        if dtype.is_floating_point:
            scale = self.choice((1.0, 1.0, 3.0, 0.1))
            t = torch.randn(shape, generator=self.g) * scale
            if self.chance(0.08) and t.numel():  # a few special values
                flat = t.view(-1)
                for _ in range(self.int(1, 3)):
                    flat[self.int(0, flat.numel() - 1)] = self.choice(
                        (0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0))
            return t.to(dtype)
        lo, hi = self.choice(((-9, 10), (0, 5), (-100, 100)))
        return torch.randint(lo, hi, shape, generator=self.g).to(dtype)

    def tensor(self, shape, dtype, writable: bool = False, layout: Optional[str] = None, values=None) -> Input:
        """An Input of `shape`: a view of a larger or permuted base with probability."""
        shape = tuple(shape)
        k = len(shape)
        kinds = ["contiguous"] * 4 + (["transpose", "step", "offset", "flat"] if k >= 1 else [])
        if k >= 2:
            kinds += ["transpose", "step"]
        if k >= 3:
            kinds.append("permute")
        if not writable and k >= 1:
            kinds.append("expand")
        layout = layout or self.choice(kinds)
        make = (lambda s: values(s)) if values is not None else (lambda s: self.values(s, dtype))
        if layout == "transpose" and k >= 2:
            a, b = sorted(self.r.sample(range(k), 2))
            bs = list(shape)
            bs[a], bs[b] = bs[b], bs[a]
            return Input(make(tuple(bs)), (("transpose", a, b),), layout)
        if layout == "transpose" and k == 1:
            return Input(make(shape), (("transpose", 0, 0),), layout)
        if layout == "permute" and k >= 3:
            perm = list(range(k))
            self.r.shuffle(perm)
            inv = [0] * k
            for i, p in enumerate(perm):
                inv[p] = i
            bs = tuple(shape[inv[j]] for j in range(k))
            return Input(make(bs), (("permute", tuple(perm)),), layout)
        if layout == "step" and k >= 1:
            d = self.int(0, k - 1)
            step, off = self.choice((2, 3)), self.int(0, 1)
            bs = list(shape)
            bs[d] = shape[d] * step + off
            return Input(make(tuple(bs)), (("slice", d, off, off + shape[d] * step, step),), layout)
        if layout == "offset" and k >= 1:
            bs = list(shape)
            bs[0] = shape[0] + 2
            return Input(make(tuple(bs)), (("slice", 0, 1, 1 + shape[0], 1),), layout)
        if layout == "flat" and k >= 1:
            off = self.int(1, 3)
            return Input(make((math.prod(shape) + off + 1,)), (("flat", off, shape),), layout)
        if layout == "expand" and k >= 1:
            bs = tuple(1 if (self.chance(0.5) and d != 0) else d for d in shape)
            if bs == shape:
                bs = (1,) + shape[1:] if shape[0] != 0 else shape
            lead = self.int(0, k - 1) if self.chance(0.3) else 0
            return Input(make(bs[lead:]), (("expand", shape),), layout)
        return Input(make(shape), (), "contiguous")

    def scalar(self, dtype: Optional[torch.dtype] = None):
        """A Python number (of the kind matching dtype when given)."""
        kind = ("float" if dtype.is_floating_point else "bool" if dtype == torch.bool else "int") if dtype \
            else self.choice(("float", "int", "bool", "float"))
        if kind == "float":
            return self.choice((0.5, -1.25, 2.0, 3.5, -0.75, 1e-3, 0.0))
        if kind == "int":
            return self.choice((0, 1, -2, 3, 7))
        return self.choice((True, False))

    def index(self, n: int, count: int, unique: bool = False, negative: bool = False) -> torch.Tensor:
        """In-range int64 indices into a dimension of size n (some negative when the op accepts them)."""
        if n == 0:
            return torch.zeros((0,) if count else (0,), dtype=torch.int64)
        if unique:
            count = min(count, n)
            idx = torch.randperm(n, generator=self.g)[:count]
        else:
            idx = torch.randint(0, n, (count,), generator=self.g)
        if negative and self.chance(0.3):
            idx = torch.where(torch.rand(idx.shape, generator=self.g) < 0.5, idx - n, idx)
        return idx


# ---------------------------------------------------------------------------------------------------------------
# cases


@dataclasses.dataclass
class Case:
    op: str                         # a name for reports ("add_", "sum.dim", "index_put.accumulate", ...)
    fn: Callable[..., Any]
    args: List[Any]                 # Input or plain values
    compare: str = "close"          # close | indexed | meta | unordered
    spec: Optional[Tuple] = None    # for indexed: (_IndexedSpec, dim, squeezed)
    mutates: bool = False           # compare the inputs' bases after the call
    note: str = ""

    def describe(self) -> str:
        parts = []
        for a in self.args:
            if isinstance(a, Input):
                parts.append(f"{str(a.base.dtype).replace('torch.', '')}{list(a.shape)}/{a.layout}")
            elif isinstance(a, torch.Tensor):
                parts.append(f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}")
            else:
                parts.append(repr(a))
        return f"{self.op}({', '.join(parts)}){' ' + self.note if self.note else ''}"


UNARY_FLOAT = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin,
    "cos": torch.cos, "tan": torch.tan, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
    "erfc": torch.erfc, "expm1": torch.expm1, "log1p": torch.log1p, "log2": torch.log2, "log10": torch.log10,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "asinh": torch.asinh, "atanh": torch.atanh, "reciprocal": torch.reciprocal, "exp2": torch.exp2,
    "lgamma": torch.lgamma, "digamma": torch.digamma, "erfinv": torch.erfinv, "sinc": torch.sinc,
    "deg2rad": torch.deg2rad, "rad2deg": torch.rad2deg, "logit": torch.logit, "i0": torch.i0,
}
UNARY_ANY = {
    "abs": torch.abs, "neg": torch.neg, "sign": torch.sign, "square": torch.square, "floor": torch.floor,
    "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc, "frac": torch.frac, "relu": torch.relu,
    "logical_not": torch.logical_not, "bitwise_not": torch.bitwise_not, "isnan": torch.isnan, "isinf": torch.isinf,
    "isfinite": torch.isfinite, "signbit": torch.signbit, "nan_to_num": torch.nan_to_num, "clone": torch.clone,
    "positive": torch.positive, "sgn": torch.sgn, "isposinf": torch.isposinf, "isneginf": torch.isneginf,
}
ACTIVATIONS = {
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "mish": F.mish,
    "softplus": F.softplus, "elu": F.elu, "selu": F.selu, "celu": F.celu, "leaky_relu": F.leaky_relu,
    "hardtanh": F.hardtanh, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "relu6": F.relu6,
    "logsigmoid": F.logsigmoid, "softsign": F.softsign, "tanhshrink": F.tanhshrink,
    "hardshrink": F.hardshrink, "softshrink": F.softshrink,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "true_divide": torch.true_divide,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign, "pow": torch.pow,
    "remainder": torch.remainder, "fmod": torch.fmod, "floor_divide": torch.floor_divide,
    "logaddexp": torch.logaddexp, "xlogy": torch.xlogy, "nextafter": torch.nextafter,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "bitwise_left_shift": torch.bitwise_left_shift, "bitwise_right_shift": torch.bitwise_right_shift,
    "heaviside": torch.heaviside, "ldexp": torch.ldexp, "gcd": torch.gcd, "lcm": torch.lcm,
}
INT_DIVISION = {"remainder", "fmod", "floor_divide", "div_floor", "div_trunc", "gcd", "lcm"}
INPLACE_BINARY = {"add", "sub", "mul", "div", "pow", "remainder", "fmod", "atan2",
                  "bitwise_and", "bitwise_or", "logical_and", "eq", "lt", "copysign", "hypot"}


def _dtype_name(d):
    return str(d).replace("torch.", "")


def gen_unary(g: Gen) -> Case:
    table = g.choice((UNARY_FLOAT, UNARY_ANY, UNARY_ANY, ACTIVATIONS))
    name = g.choice(sorted(table))
    fn = table[name]
    dt = g.dtype(FLOATS if table is ACTIVATIONS and g.chance(0.9) else None)
    shape = g.shape()
    mode = g.choice(("fn", "fn", "fn", "inplace", "out", "view_inplace"))
    if name in ("logit", "relu6", "hardtanh", "hardshrink", "softshrink", "leaky_relu", "elu", "celu",
                "hardswish", "hardsigmoid", "gelu_tanh", "selu", "mish", "softplus", "logsigmoid", "softsign",
                "tanhshrink") or table is ACTIVATIONS:
        mode = "fn"
    if mode == "inplace" or (mode == "view_inplace" and len(shape) == 0):
        method = getattr(torch.Tensor, name + "_", None)
        if method is None:
            mode = "fn"
        else:
            return Case(name + "_", lambda x, m=method: m(x), [g.tensor(shape, dt, writable=True)], mutates=True)
    if mode == "view_inplace":
        method = getattr(torch.Tensor, name + "_", None)
        if method is not None:
            # write through a strided view of the argument: the whole base must match afterwards
            def f(x, m=method):
                v = x[::2] if x.dim() else x
                return m(v)
            return Case(name + "_[::2]", f, [g.tensor(shape, dt, writable=True)], mutates=True)
    if mode == "out" and table is not ACTIVATIONS:
        out_dt = dt if g.chance(0.7) else g.dtype()
        out_shape = shape if g.chance(0.7) else g.shape()

        def f(x, fn=fn, out_dt=out_dt, out_shape=out_shape):
            out = torch.zeros(out_shape, dtype=out_dt, device=x.device)
            r = fn(x, out=out)
            return r, out
        return Case(name + ".out", f, [g.tensor(shape, dt)], note=f"out={_dtype_name(out_dt)}{list(out_shape)}")
    return Case(name, lambda x, fn=fn: fn(x), [g.tensor(shape, dt)])


def gen_binary(g: Gen) -> Case:
    name = g.choice(sorted(BINARY))
    fn = BINARY[name]
    a_dt = g.dtype()
    shape = g.shape()
    other = g.choice(("tensor", "tensor", "tensor", "scalar", "zero_dim"))
    a = g.tensor(shape, a_dt, writable=True)
    if other == "scalar":
        b = g.scalar(a_dt if g.chance(0.6) else None)
        if name in INT_DIVISION and not isinstance(b, float) and b == 0:
            b = 3  # integer division by zero: see KNOWN
    else:
        b_dt = a_dt if g.chance(0.6) else g.dtype()
        b_shape = () if other == "zero_dim" else g.broadcastable(shape)
        b = g.tensor(b_shape, b_dt)
        if name in INT_DIVISION and not b_dt.is_floating_point:
            b.base = torch.where(b.base == 0, torch.ones_like(b.base), b.base)
    if name in ("bitwise_left_shift", "bitwise_right_shift") and isinstance(b, Input) and \
            b.base.dtype in INTS:
        b.base = b.base.abs() % 8  # shift counts within the width
    if name in ("bitwise_left_shift", "bitwise_right_shift") and isinstance(b, int):
        b = abs(b) % 8
    if name == "pow" and isinstance(b, Input) and b.base.dtype in INTS:
        b.base = b.base.abs() % 4  # integer tensors to negative integer powers raise on CPU (data dependent)
    if name == "pow" and isinstance(b, int) and not isinstance(b, bool):
        b = abs(b) % 4
    mode = g.choice(("fn", "fn", "fn", "inplace", "alpha")) if name in INPLACE_BINARY else "fn"
    if mode == "inplace":
        method = getattr(torch.Tensor, (name if name != "eq" else "eq") + "_")
        return Case(name + "_", lambda x, y, m=method: m(x, y), [a, b], mutates=True)
    if mode == "alpha" and name in ("add", "sub"):
        alpha = g.scalar(a_dt)
        return Case(name + ".alpha", lambda x, y, fn=fn, al=alpha: fn(x, y, alpha=al), [a, b], note=f"alpha={alpha}")
    if other == "scalar" and g.chance(0.3) and name in ("add", "sub", "mul", "div", "pow", "remainder"):
        return Case("r" + name, lambda x, y, fn=fn: fn(y, x), [a, b])  # number op tensor
    return Case(name, lambda x, y, fn=fn: fn(x, y), [a, b])


def gen_ternary(g: Gen) -> Case:
    name = g.choice(("where", "where_scalar", "lerp", "addcmul", "addcdiv", "clamp", "clamp_tensor", "clamp_",
                     "masked_fill", "masked_fill_", "lerp_scalar"))
    dt = g.dtype(FLOATS if name.startswith(("lerp", "addcdiv")) else None)
    shape = g.shape()
    a = g.tensor(shape, dt, writable=name.endswith("_"))
    if name == "where":
        c = g.tensor(g.broadcastable(shape), torch.bool)
        b = g.tensor(g.broadcastable(shape), dt if g.chance(0.7) else g.dtype())
        return Case(name, lambda c, x, y: torch.where(c, x, y), [c, a, b])
    if name == "where_scalar":
        c = g.tensor(g.broadcastable(shape), torch.bool)
        return Case(name, lambda c, x, s: torch.where(c, x, s), [c, a, g.scalar()])
    if name == "lerp":
        b, w = g.tensor(g.broadcastable(shape), dt), g.tensor(g.broadcastable(shape), dt)
        return Case(name, torch.lerp, [a, b, w])
    if name == "lerp_scalar":
        return Case(name, torch.lerp, [a, g.tensor(g.broadcastable(shape), dt), g.choice((0.25, 0.5, 0.75))])
    if name in ("addcmul", "addcdiv"):
        b, c = g.tensor(g.broadcastable(shape), dt), g.tensor(g.broadcastable(shape), dt)
        fn = torch.addcmul if name == "addcmul" else torch.addcdiv
        v = g.choice((1, 0.5, -2))
        return Case(name, lambda x, y, z, fn=fn, v=v: fn(x, y, z, value=v), [a, b, c], note=f"value={v}")
    if name == "clamp":
        lo = g.scalar(dt) if g.chance(0.8) else None
        hi = g.scalar(dt) if g.chance(0.8) or lo is None else None
        return Case(name, lambda x, lo=lo, hi=hi: torch.clamp(x, lo, hi), [a], note=f"min={lo} max={hi}")
    if name == "clamp_":
        lo = g.scalar(dt)
        return Case(name, lambda x, lo=lo: x.clamp_(min=lo), [a], mutates=True, note=f"min={lo}")
    if name == "clamp_tensor":
        lo, hi = g.tensor(g.broadcastable(shape), dt), g.tensor(g.broadcastable(shape), dt)
        return Case(name, lambda x, l, h: torch.clamp(x, l, h), [a, lo, hi])
    m = g.tensor(g.broadcastable(shape), torch.bool)
    v = g.scalar()
    if name == "masked_fill_":
        return Case(name, lambda x, m, v=v: x.masked_fill_(m, v), [a, m], mutates=True, note=f"value={v}")
    return Case(name, lambda x, m, v=v: x.masked_fill(m, v), [a, m], note=f"value={v}")


REDUCTIONS = ("sum", "mean", "prod", "amax", "amin", "max_dim", "min_dim", "max", "min", "argmax", "argmin",
              "std", "var", "all", "any", "logsumexp", "norm", "count_nonzero", "nansum", "cumsum", "cumprod",
              "softmax", "log_softmax", "var_mean", "std_mean", "aminmax", "nanmean", "sum_dtype", "logcumsumexp",
              "vector_norm")


def gen_reduction(g: Gen) -> Case:
    name = g.choice(REDUCTIONS)
    dt = g.dtype(FLOATS if name in ("logsumexp", "softmax", "log_softmax", "std_mean", "var_mean",
                                    "logcumsumexp", "vector_norm") and g.chance(0.9) else None)
    shape = g.shape()
    k = len(shape)
    x = g.tensor(shape, dt)
    # a valid dim most of the time, occasionally an out-of-range one (IndexError on both)
    dim = g.int(-max(k, 1), max(k, 1) - 1) if g.chance(0.95) else max(k, 1) + 1
    keepdim = g.chance(0.4)
    note = f"dim={dim} keepdim={keepdim}"
    if name in ("sum", "mean", "prod", "amax", "amin", "nansum", "nanmean", "logsumexp", "count_nonzero",
                "all", "any", "std", "var", "vector_norm"):
        fn = getattr(torch, name) if name != "vector_norm" else torch.linalg.vector_norm
        form = g.choice(("all", "dim", "dims"))
        if form == "all":
            if name in ("amax", "amin", "logsumexp"):
                dims = tuple(range(k))
                return Case(name, lambda t, fn=fn, d=dims: fn(t, d), [x])
            return Case(name, lambda t, fn=fn: fn(t), [x])
        if form == "dims" and k >= 2 and name not in ("all", "any", "count_nonzero", "prod"):
            dims = tuple(sorted(g.r.sample(range(k), 2)))
            if name == "logsumexp" or name == "vector_norm":
                return Case(name + ".dims", lambda t, fn=fn, d=dims, kd=keepdim: fn(t, dim=d, keepdim=kd), [x],
                            note=f"dim={dims} keepdim={keepdim}")
            return Case(name + ".dims", lambda t, fn=fn, d=dims, kd=keepdim: fn(t, d, keepdim=kd), [x],
                        note=f"dim={dims} keepdim={keepdim}")
        if name == "count_nonzero":
            return Case(name + ".dim", lambda t, d=dim: torch.count_nonzero(t, d), [x], note=f"dim={dim}")
        if name in ("std", "var"):
            corr = g.choice((0, 1, 2))
            return Case(name + ".dim", lambda t, fn=fn, d=dim, kd=keepdim, c=corr: fn(t, d, correction=c, keepdim=kd),
                        [x], note=f"{note} correction={corr}")
        return Case(name + ".dim", lambda t, fn=fn, d=dim, kd=keepdim: fn(t, d, keepdim=kd), [x], note=note)
    if name in ("max_dim", "min_dim"):
        fn = torch.max if name == "max_dim" else torch.min
        # PyTorch documents the first index among equal maxima: compared exactly
        return Case(name, lambda t, fn=fn, d=dim, kd=keepdim: tuple(fn(t, d, keepdim=kd)), [x], note=note)
    if name in ("max", "min"):
        return Case(name, getattr(torch, name), [x])
    if name in ("argmax", "argmin"):
        fn = getattr(torch, name)
        if g.chance(0.3):
            return Case(name, lambda t, fn=fn: fn(t), [x])
        return Case(name + ".dim", lambda t, fn=fn, d=dim, kd=keepdim: fn(t, d, keepdim=kd), [x], note=note)
    if name in ("cumsum", "cumprod", "logcumsumexp"):
        fn = getattr(torch, name)
        return Case(name, lambda t, fn=fn, d=dim: fn(t, d), [x], note=f"dim={dim}")
    if name in ("softmax", "log_softmax"):
        fn = getattr(torch, name)
        return Case(name, lambda t, fn=fn, d=dim: fn(t, d), [x], note=f"dim={dim}")
    if name in ("var_mean", "std_mean"):
        fn = getattr(torch, name)
        return Case(name, lambda t, fn=fn, d=dim, kd=keepdim: fn(t, d, keepdim=kd), [x], note=note)
    if name == "aminmax":
        return Case(name, lambda t, d=dim, kd=keepdim: tuple(torch.aminmax(t, dim=d, keepdim=kd)), [x], note=note)
    if name == "sum_dtype":
        odt = g.choice((torch.float32, torch.int64, torch.float64))
        return Case(name, lambda t, d=dim, o=odt: torch.sum(t, d, dtype=o), [x], note=f"dim={dim} dtype={odt}")
    p = g.choice((1, 2, 3, float("inf")))
    return Case("norm", lambda t, p=p, d=dim: torch.norm(t, p, d), [x], note=f"p={p} dim={dim}")


def gen_shape(g: Gen) -> Case:
    name = g.choice(("transpose", "permute", "reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze",
                     "expand", "narrow", "select", "slice_step", "flip", "roll", "cat", "stack", "split", "chunk",
                     "repeat", "tile", "tril", "triu", "diagonal", "diag_embed", "unfold", "movedim", "t",
                     "contiguous", "getitem", "setitem", "setitem_scalar", "copy_", "to_dtype", "fill_", "zero_",
                     "repeat_interleave", "rot90", "hstack", "split_sizes", "as_strided", "view_inplace_chain"))
    dt = g.dtype()
    shape = g.shape(min_rank=1 if name in ("narrow", "select", "slice_step", "split", "chunk", "unfold",
                                          "unflatten", "tril", "triu", "diagonal", "rot90", "split_sizes",
                                          "getitem", "setitem", "setitem_scalar", "repeat_interleave") else 0)
    k = len(shape)
    if name in ("tril", "triu", "diagonal", "rot90") and k < 2:
        shape = shape + (g.choice(DIMS),)
        k = 2
    writable = name in ("setitem", "setitem_scalar", "copy_", "fill_", "zero_", "view_inplace_chain")
    x = g.tensor(shape, dt, writable=writable)
    d = g.int(-k, k - 1) if k else 0
    if name == "transpose":
        d2 = g.int(-k, k - 1) if k else 0
        return Case(name, lambda t, a=d, b=d2: t.transpose(a, b) * 1, [x], note=f"{d},{d2}")
    if name == "permute":
        perm = list(range(k))
        g.r.shuffle(perm)
        return Case(name, lambda t, p=tuple(perm): t.permute(p).contiguous(), [x], note=str(perm))
    if name in ("reshape", "view"):
        n = math.prod(shape)
        cands = [(n,), (-1,), (1, n), (n, 1)] + ([(2, n // 2)] if n % 2 == 0 else []) + \
            ([(-1, 3)] if n % 3 == 0 else []) + [(n + 1,)]
        new = g.choice(cands)
        if name == "view":
            return Case(name, lambda t, s=new: t.view(s) + 0, [x], note=str(new))
        return Case(name, lambda t, s=new: t.reshape(s) + 0, [x], note=str(new))
    if name == "flatten":
        s, e = sorted((g.int(-max(k, 1), max(k, 1) - 1), g.int(-max(k, 1), max(k, 1) - 1)))
        return Case(name, lambda t, s=s, e=e: t.flatten(s, e) + 0, [x], note=f"{s},{e}")
    if name == "unflatten":
        n = shape[d]
        sizes = g.choice([(1, n), (n, 1), (-1, 1)] + ([(2, n // 2)] if n % 2 == 0 else []) + [(2, 2)])
        return Case(name, lambda t, d=d, s=sizes: t.unflatten(d, s) + 0, [x], note=f"{d},{sizes}")
    if name == "squeeze":
        if g.chance(0.5):
            return Case(name, lambda t: t.squeeze() + 0, [x])
        return Case(name + ".dim", lambda t, d=d: t.squeeze(d) + 0, [x], note=str(d))
    if name == "unsqueeze":
        d = g.int(-k - 1, k)
        return Case(name, lambda t, d=d: t.unsqueeze(d) * 1, [x], note=str(d))
    if name == "expand":
        new = tuple(g.choice((2, 3)) if s == 1 else s for s in shape)
        new = ((2,) if g.chance(0.5) else ()) + new
        return Case(name, lambda t, s=new: t.expand(s) * 1, [x], note=str(new))
    if name in ("narrow", "select", "slice_step"):
        n = shape[d]
        if name == "select":
            i = g.int(-n, n - 1) if n and g.chance(0.95) else n
            return Case(name, lambda t, d=d, i=i: t.select(d, i) + 0, [x], note=f"{d},{i}")
        if name == "narrow":
            s = g.int(0, n)
            ln = g.int(0, n - s)
            return Case(name, lambda t, d=d, s=s, ln=ln: t.narrow(d, s, ln) + 0, [x], note=f"{d},{s},{ln}")
        st, step = g.int(0, max(n - 1, 0)), g.choice((1, 2, 3))
        return Case(name, lambda t, d=d, st=st, sp=step: t[(slice(None),) * (d % k) + (slice(st, None, sp),)] + 0,
                    [x], note=f"dim {d} [{st}::{step}]")
    if name == "flip":
        dims = tuple(sorted(set(g.int(-k, k - 1) for _ in range(g.int(1, 2))))) if k else ()
        return Case(name, lambda t, d=dims: t.flip(d), [x], note=str(dims))
    if name == "roll":
        s = g.int(-7, 7)
        if k == 0 or g.chance(0.3):
            return Case(name, lambda t, s=s: t.roll(s), [x], note=str(s))
        return Case(name, lambda t, s=s, d=d: t.roll(s, d), [x], note=f"{s},{d}")
    if name in ("cat", "stack", "hstack"):
        n = g.int(1, 3)
        parts = [x]
        for _ in range(n):
            s = list(shape)
            if name == "cat" and k and g.chance(0.7):
                s[d] = g.choice(DIMS)
            if g.chance(0.05) and s:
                s[0] += 1  # mismatched
            parts.append(g.tensor(tuple(s), dt if g.chance(0.8) else g.dtype()))
        if name == "hstack":
            return Case(name, lambda *ts: torch.hstack(ts), parts)
        fn = torch.cat if name == "cat" else torch.stack
        dd = d if name == "cat" else g.int(-k - 1, k)
        return Case(name, lambda *ts, fn=fn, d=dd: fn(ts, dd), parts, note=f"dim={dd}")
    if name in ("split", "chunk", "split_sizes"):
        n = shape[d]
        if name == "split":
            sz = g.int(1, max(n, 1))
            return Case(name, lambda t, s=sz, d=d: tuple(p * 1 for p in t.split(s, d)), [x], note=f"{sz},{d}")
        if name == "split_sizes":
            a = g.int(0, n)
            sizes = [a, n - a] if g.chance(0.9) else [a, n - a + 1]
            return Case(name, lambda t, s=sizes, d=d: tuple(p * 1 for p in t.split(s, d)), [x], note=f"{sizes},{d}")
        c = g.int(1, 4)
        return Case(name, lambda t, c=c, d=d: tuple(p * 1 for p in t.chunk(c, d)), [x], note=f"{c},{d}")
    if name in ("repeat", "tile"):
        reps = tuple(g.choice((1, 2, 3)) for _ in range(max(k, 1) + g.int(0, 1)))
        fn = (lambda t, r=reps: t.repeat(r)) if name == "repeat" else (lambda t, r=reps: t.tile(r))
        return Case(name, fn, [x], note=str(reps))
    if name == "repeat_interleave":
        r = g.int(0, 3)
        return Case(name, lambda t, r=r, d=d: t.repeat_interleave(r, d), [x], note=f"{r},{d}")
    if name in ("tril", "triu"):
        dg = g.int(-3, 3)
        fn = getattr(torch, name)
        if g.chance(0.3):
            return Case(name + "_", lambda t, dg=dg, n=name: getattr(t, n + "_")(dg),
                        [g.tensor(shape, dt, writable=True)], mutates=True, note=str(dg))
        return Case(name, lambda t, fn=fn, dg=dg: fn(t, dg), [x], note=str(dg))
    if name == "diagonal":
        off = g.int(-2, 2)
        return Case(name, lambda t, o=off: t.diagonal(o, -2, -1) + 0, [x], note=str(off))
    if name == "diag_embed":
        return Case(name, torch.diag_embed, [x])
    if name == "unfold":
        n = shape[d]
        size, step = g.int(0, max(n, 1)), g.int(1, 3)
        return Case(name, lambda t, d=d, s=size, st=step: t.unfold(d, s, st) + 0, [x], note=f"{d},{size},{step}")
    if name == "movedim":
        d2 = g.int(-k, k - 1) if k else 0
        return Case(name, lambda t, a=d, b=d2: t.movedim(a, b) + 0, [x], note=f"{d},{d2}")
    if name == "t":
        return Case(name, lambda t: t.t() + 0, [x])
    if name == "contiguous":
        return Case(name, lambda t: t.contiguous(), [x])
    if name == "rot90":
        kk = g.int(-2, 3)
        return Case(name, lambda t, kk=kk: torch.rot90(t, kk, (0, 1)), [x], note=str(kk))
    if name == "as_strided":
        n = x.base.numel()
        size = (g.int(0, 3), g.int(0, 3))
        stride = (g.int(0, 3), g.int(0, 2))
        need = (size[0] - 1) * stride[0] + (size[1] - 1) * stride[1] + 1 if size[0] and size[1] else 0
        off = g.int(0, max(n - need, 0)) if need <= n else 0
        return Case(name, lambda t, s=size, st=stride, o=off: t.as_strided(s, st, o) + 0,
                    [Input(x.base.reshape(-1), (), "contiguous")], note=f"{size},{stride},{off}")
    if name == "getitem":
        n = shape[0]
        form = g.choice(("int", "slice", "tensor", "bool", "ellipsis", "none"))
        if form == "int":
            i = g.int(-n, n - 1) if n else 0
            return Case(name + ".int", lambda t, i=i: t[i] + 0, [x], note=str(i))
        if form == "slice":
            a, b, s = g.int(-n - 1, n + 1), g.int(-n - 1, n + 1), g.choice((1, 2, 3))
            return Case(name + ".slice", lambda t, a=a, b=b, s=s: t[a:b:s] + 0, [x], note=f"{a}:{b}:{s}")
        if form == "tensor":
            idx = g.index(n, g.int(0, 4), negative=True)
            return Case(name + ".tensor", lambda t, i: t[i], [x, Input(idx)])
        if form == "bool":
            m = Input(torch.rand(shape[:1], generator=g.g) < 0.5)
            return Case(name + ".bool", lambda t, m: t[m], [x, m])
        if form == "ellipsis":
            return Case(name + ".ellipsis", lambda t: t[..., :1] + 0, [x])
        return Case(name + ".none", lambda t: t[None, ...] + 0, [x])
    if name in ("setitem", "setitem_scalar"):
        n = shape[0]
        form = g.choice(("int", "slice", "tensor", "bool"))
        v = g.scalar() if name == "setitem_scalar" else None
        vin = None
        key: Any
        if form == "int":
            key = g.int(-n, n - 1) if n else slice(None)
        elif form == "slice":
            key = slice(g.int(0, n), None, g.choice((1, 2)))
        elif form == "tensor":
            key = g.index(n, g.int(0, 3), unique=True, negative=True)
        else:
            key = torch.rand(shape[:1], generator=g.g) < 0.5
        if v is None:
            tmp = torch.empty(shape)[key]
            vshape = tuple(tmp.shape)
            vshape = vshape[g.int(0, len(vshape)):] if vshape else vshape  # broadcast from a suffix
            vin = g.tensor(vshape, dt if g.chance(0.7) else g.dtype())
        if isinstance(key, torch.Tensor):
            if vin is None:
                return Case(name + "." + form, lambda t, k, val=v: t.__setitem__(k, val) or t, [x, Input(key)],
                            mutates=True, note=f"= {v}")
            return Case(name + "." + form, lambda t, k, w: t.__setitem__(k, w) or t, [x, Input(key), vin],
                        mutates=True)
        if vin is None:
            return Case(name + "." + form, lambda t, k=key, val=v: t.__setitem__(k, val) or t, [x], mutates=True,
                        note=f"[{key}] = {v}")
        return Case(name + "." + form, lambda t, w, k=key: t.__setitem__(k, w) or t, [x, vin], mutates=True,
                    note=f"[{key}]")
    if name == "copy_":
        src = g.tensor(g.broadcastable(shape), g.dtype())
        return Case(name, lambda t, s: t.copy_(s), [x, src], mutates=True)
    if name == "to_dtype":
        if g.chance(0.2):  # a float8 cast (PyTorch's rounding and saturation), read back as float32
            odt = g.choice(FLOAT8)
            return Case(name, lambda t, o=odt: t.to(o).to(torch.float32), [x], note=_dtype_name(odt))
        odt = g.dtype()
        return Case(name, lambda t, o=odt: t.to(o), [x], note=_dtype_name(odt))
    if name == "fill_":
        v = g.scalar()
        return Case(name, lambda t, v=v: t.fill_(v), [x], mutates=True, note=str(v))
    if name == "zero_":
        return Case(name, lambda t: t.zero_(), [x], mutates=True)
    # a chain of views, then an in-place op through the last one
    v = g.scalar(dt)

    def chain(t, v=v):
        u = t.unsqueeze(0).transpose(0, -1)
        u = u[..., ::2] if u.dim() else u
        u.add_(v) if t.dtype != torch.bool else u.logical_not_()
        return t
    return Case(name, chain, [x], mutates=True, note=f"+= {v}")


def gen_indexing(g: Gen) -> Case:
    name = g.choice(("index_select", "gather", "scatter", "scatter_value", "scatter_add", "scatter_reduce",
                     "index_add", "index_copy", "index_fill", "index_put", "index_put_acc", "masked_select",
                     "masked_scatter", "nonzero", "take_along_dim", "take", "put_", "where_nonzero", "embedding",
                     "one_hot", "index_add_", "scatter_add_", "bincount_like_scatter"))
    dt = g.dtype()
    shape = g.shape(min_rank=1, nonempty=g.chance(0.8))
    k = len(shape)
    d = g.int(-k, k - 1)
    n = shape[d]
    x = g.tensor(shape, dt, writable=True)
    if name == "index_select":
        idx = Input(g.index(n, g.int(0, 5)))
        return Case(name, lambda t, i, d=d: t.index_select(d, i), [x, idx],
                    note=f"dim={d}")
    if name in ("gather", "take_along_dim"):
        ishape = list(shape)
        ishape[d] = g.int(0, 4)
        if n == 0:
            ishape[d] = 0
        ishape = [min(s, g.int(0, s)) if j != d % k and g.chance(0.3) else s for j, s in enumerate(ishape)]
        idx = torch.randint(0, max(n, 1), ishape, generator=g.g)
        if name == "gather":
            return Case(name, lambda t, i, d=d: torch.gather(t, d, i), [x, Input(idx)], note=f"dim={d}")
        idx = torch.randint(0, max(n, 1), [s if j == d % k else s for j, s in enumerate(shape)][:k], generator=g.g)
        return Case(name, lambda t, i, d=d: torch.take_along_dim(t, i, d), [x, Input(idx)], note=f"dim={d}")
    if name in ("scatter", "scatter_value", "scatter_add", "scatter_reduce", "scatter_add_"):
        # unique positions along d for scatter (duplicates have an unspecified winner)
        ishape = list(shape)
        ishape[d] = g.int(0, n)
        cols = [torch.randperm(n, generator=g.g)[:ishape[d]] for _ in range(math.prod(ishape) // max(ishape[d], 1))]
        if cols and ishape[d]:
            idx = torch.stack(cols).view([s for j, s in enumerate(ishape) if j != d % k] + [ishape[d]])
            idx = idx.movedim(-1, d % k).contiguous()
        else:
            idx = torch.zeros(ishape, dtype=torch.int64)
        if name in ("scatter_add", "scatter_reduce", "scatter_add_"):
            idx = torch.randint(0, max(n, 1), ishape, generator=g.g) if n else idx  # duplicates fine: reductions
        src = g.tensor(ishape, dt)
        if name == "scatter":
            return Case(name, lambda t, i, s, d=d: torch.scatter(t, d, i, s), [x, Input(idx), src], note=f"dim={d}")
        if name == "scatter_value":
            v = g.scalar(dt)
            return Case(name, lambda t, i, d=d, v=v: torch.scatter(t, d, i, v), [x, Input(idx)], note=f"dim={d} v={v}")
        if name == "scatter_add":
            return Case(name, lambda t, i, s, d=d: torch.scatter_add(t, d, i, s), [x, Input(idx), src],
                        note=f"dim={d}")
        if name == "scatter_add_":
            return Case(name, lambda t, i, s, d=d: t.scatter_add_(d, i, s), [x, Input(idx), src], mutates=True,
                        note=f"dim={d}")
        red = g.choice(("sum", "prod", "mean", "amax", "amin"))
        inc = g.chance(0.5)
        return Case(name, lambda t, i, s, d=d, r=red, inc=inc: torch.scatter_reduce(t, d, i, s, r, include_self=inc),
                    [x, Input(idx), src], note=f"dim={d} {red} include_self={inc}")
    if name in ("index_add", "index_copy", "index_fill", "index_add_"):
        cnt = g.int(0, n)
        idx = g.index(n, cnt, unique=name != "index_add" and name != "index_add_")
        sshape = list(shape)
        sshape[d] = idx.numel()
        src = g.tensor(sshape, dt)
        if name == "index_add":
            al = g.scalar(dt)
            return Case(name, lambda t, i, s, d=d, a=al: torch.index_add(t, d, i, s, alpha=a), [x, Input(idx), src],
                        note=f"dim={d} alpha={al}")
        if name == "index_add_":
            return Case(name, lambda t, i, s, d=d: t.index_add_(d, i, s), [x, Input(idx), src], mutates=True,
                        note=f"dim={d}")
        if name == "index_copy":
            return Case(name, lambda t, i, s, d=d: t.index_copy(d, i, s), [x, Input(idx), src], note=f"dim={d}")
        v = g.scalar(dt)
        return Case(name, lambda t, i, d=d, v=v: t.index_fill(d, i, v), [x, Input(idx)], note=f"dim={d} v={v}")
    if name in ("index_put", "index_put_acc"):
        acc = name == "index_put_acc"
        cnt = g.int(0, shape[0])
        idx = g.index(shape[0], cnt, unique=not acc, negative=True)
        vshape = (idx.numel(),) + shape[1:]
        vshape = vshape[g.int(0, len(vshape)):]
        v = g.tensor(vshape, dt)
        return Case(name, lambda t, i, v, acc=acc: t.index_put_((i,), v, accumulate=acc), [x, Input(idx), v],
                    mutates=True)
    if name == "masked_select":
        m = g.tensor(g.broadcastable(shape), torch.bool)
        return Case(name, torch.masked_select, [x, m])
    if name == "masked_scatter":
        m = g.tensor(g.broadcastable(shape), torch.bool)
        src = g.tensor((math.prod(shape) + g.int(0, 2),), dt)
        return Case(name, lambda t, m, s: t.masked_scatter(m, s), [x, m, src])
    if name == "nonzero":
        return Case(name, torch.nonzero, [x])
    if name == "where_nonzero":
        return Case(name, lambda t: torch.where(t), [x])
    if name == "take":
        idx = g.index(math.prod(shape), g.int(0, 5), negative=True)
        return Case(name, torch.take, [x, Input(idx)])
    if name == "put_":
        cnt = g.int(0, math.prod(shape))
        idx = g.index(math.prod(shape), cnt, unique=True, negative=True)
        acc = g.chance(0.5)
        src = g.tensor((idx.numel(),), dt)
        return Case(name, lambda t, i, s, acc=acc: t.put_(i, s, accumulate=acc), [x, Input(idx), src], mutates=True,
                    note=f"accumulate={acc}")
    if name == "embedding":
        w = g.tensor((g.int(1, 7), g.int(1, 5)), g.dtype(FLOATS))
        idx = torch.randint(0, w.shape[0], g.shape(max_rank=2), generator=g.g)
        return Case(name, lambda i, w: F.embedding(i, w), [Input(idx), w])
    if name == "one_hot":
        c = g.int(1, 6)
        idx = torch.randint(0, c, g.shape(max_rank=3), generator=g.g)
        return Case(name, lambda i, c=c: F.one_hot(i, c), [Input(idx)], note=f"classes={c}")
    # scatter_add into zeros: a bincount-like histogram
    m = g.int(1, 6)
    idx = torch.randint(0, m, (g.choice(DIMS),), generator=g.g)
    w = g.tensor(tuple(idx.shape), g.dtype(FLOATS + INTS))
    return Case(name, lambda i, w, m=m: torch.zeros(m, dtype=w.dtype, device=w.device).scatter_add_(0, i, w),
                [Input(idx), w])


def gen_matmul(g: Gen) -> Case:
    name = g.choice(("mm", "bmm", "matmul", "addmm", "addmv", "mv", "dot", "outer", "linear", "baddbmm", "einsum",
                     "tensordot", "addbmm", "vdot", "inner", "kron"))
    dt = g.dtype(FLOATS + INTS) if g.chance(0.85) else g.dtype()
    dt2 = dt if g.chance(0.92) else g.dtype()
    m, kk, n, b = (g.choice((0, 1, 2, 3, 5, 8)) for _ in range(4))
    T = lambda s, d=dt: g.tensor(s, d)  # noqa: E731
    if name == "mm":
        return Case(name, torch.mm, [T((m, kk)), T((kk, n), dt2)])
    if name == "bmm":
        return Case(name, torch.bmm, [T((b, m, kk)), T((b, kk, n), dt2)])
    if name == "matmul":
        ra, rb = g.int(1, 4), g.int(1, 4)
        sa = tuple(g.choice((1, 2, 3)) for _ in range(ra - 2)) + ((m, kk) if ra >= 2 else (kk,))
        sb = tuple(g.choice((1, 2, 3)) for _ in range(rb - 2)) + ((kk, n) if rb >= 2 else (kk,))
        if ra > 2 and rb > 2 and g.chance(0.6):
            lead = sa[:-2]
            sb = lead[len(lead) - (rb - 2):] + sb[-2:] if len(lead) >= rb - 2 else sb
        return Case(name, torch.matmul, [T(sa), T(sb, dt2)])
    if name == "addmm":
        beta, alpha = g.choice((1, 0.5, 0)), g.choice((1, -2))
        return Case(name, lambda c, a, b_, be=beta, al=alpha: torch.addmm(c, a, b_, beta=be, alpha=al),
                    [T(g.broadcastable((m, n))), T((m, kk)), T((kk, n), dt2)], note=f"beta={beta} alpha={alpha}")
    if name == "addmv":
        return Case(name, torch.addmv, [T((m,)), T((m, kk)), T((kk,), dt2)])
    if name == "mv":
        return Case(name, torch.mv, [T((m, kk)), T((kk,), dt2)])
    if name in ("dot", "vdot", "inner"):
        fn = getattr(torch, name)
        return Case(name, fn, [T((kk,)), T((kk,), dt2)])
    if name == "outer":
        return Case(name, torch.outer, [T((m,)), T((n,), dt2)])
    if name == "kron":
        return Case(name, torch.kron, [T((m, 2)), T((2, n), dt2)])
    if name == "linear":
        bias = g.chance(0.6)
        args = [T((b, m, kk) if g.chance(0.5) else (m, kk)), T((n, kk), dt2)] + ([T((n,), dt2)] if bias else [])
        return Case(name, lambda *a: F.linear(*a), args)
    if name == "baddbmm":
        return Case(name, torch.baddbmm, [T((b, m, n)), T((b, m, kk)), T((b, kk, n), dt2)])
    if name == "addbmm":
        return Case(name, torch.addbmm, [T((m, n)), T((b, m, kk)), T((b, kk, n), dt2)])
    if name == "tensordot":
        return Case(name, lambda a, b_: torch.tensordot(a, b_, dims=([1], [0])), [T((m, kk, 2)), T((kk, n), dt2)])
    eq = g.choice(("ij,jk->ik", "bij,bjk->bik", "ij->ji", "ii->i", "ij,ij->", "i,j->ij", "bhqd,bhkd->bhqk"))
    shapes = {"ij,jk->ik": [(m, kk), (kk, n)], "bij,bjk->bik": [(b, m, kk), (b, kk, n)], "ij->ji": [(m, n)],
              "ii->i": [(m, m)], "ij,ij->": [(m, n), (m, n)], "i,j->ij": [(m,), (n,)],
              "bhqd,bhkd->bhqk": [(b, 2, m, kk), (b, 2, n, kk)]}[eq]
    return Case("einsum", lambda *a, eq=eq: torch.einsum(eq, *a), [T(s) for s in shapes], note=eq)


def gen_sort(g: Gen) -> Case:
    name = g.choice(("sort", "argsort", "topk", "kthvalue", "msort", "median", "mode", "cummax", "unique",
                     "unique_consecutive", "searchsorted", "sort_stable", "nanmedian", "bucketize"))
    dt = g.dtype()
    shape = g.shape(min_rank=0 if name not in ("msort", "searchsorted") else 1)
    k = len(shape)
    x = g.tensor(shape, dt)
    d = g.int(-max(k, 1), max(k, 1) - 1)
    n = shape[d] if k else 1
    if name in ("sort", "sort_stable"):
        desc = g.chance(0.5)
        if name == "sort_stable":
            return Case(name, lambda t, d=d, de=desc: tuple(torch.sort(t, dim=d, descending=de, stable=True)), [x],
                        note=f"dim={d} descending={desc}")
        return Case(name, lambda t, d=d, de=desc: tuple(torch.sort(t, d, de)), [x], compare="indexed",
                    spec=(_IndexedSpec(0, -1, perm=True), d, False), note=f"dim={d} descending={desc}")
    if name == "argsort":
        desc = g.chance(0.5)
        # returned with the values it selects (checked for consistency)
        return Case(name, lambda t, d=d, de=desc: (t.gather(d, torch.argsort(t, d, de)) if t.dim() else t,
                                                   torch.argsort(t, d, de)), [x], compare="indexed",
                    spec=(_IndexedSpec(0, -1, perm=True), d, False), note=f"dim={d} descending={desc}")
    if name == "topk":
        kk = g.int(0, n)
        largest = g.chance(0.7)
        return Case(name, lambda t, kk=kk, d=d, l=largest: tuple(torch.topk(t, kk, d, l)), [x], compare="indexed",
                    spec=(_IndexedSpec(1, -1, distinct=True), d, False), note=f"k={kk} dim={d} largest={largest}")
    if name in ("kthvalue", "median", "mode", "nanmedian"):
        keep = g.chance(0.4)
        if name == "kthvalue":
            kk = g.int(1, max(n, 1))
            fn = lambda t, kk=kk, d=d, kd=keep: tuple(torch.kthvalue(t, kk, d, kd))  # noqa: E731
            note = f"k={kk} dim={d} keepdim={keep}"
        else:
            op = getattr(torch, name)
            fn = lambda t, op=op, d=d, kd=keep: tuple(op(t, d, kd))  # noqa: E731
            note = f"dim={d} keepdim={keep}"
        return Case(name, fn, [x], compare="indexed", spec=(_IndexedSpec(0, -1, reduces=True), d, not keep and k > 0),
                    note=note)
    if name == "msort":
        return Case(name, torch.msort, [x])
    if name == "cummax":
        return Case(name, lambda t, d=d: tuple(torch.cummax(t, d)), [x], compare="indexed",
                    spec=(_IndexedSpec(0, None), d, False), note=f"dim={d}")
    if name == "unique":
        srt, inv, cnt = g.chance(0.7), g.chance(0.5), g.chance(0.5)
        return Case(name, lambda t, s=srt, i=inv, c=cnt: torch.unique(t, sorted=s, return_inverse=i,
                                                                       return_counts=c),
                    [x], compare="close" if srt else "unordered", note=f"sorted={srt} inverse={inv} counts={cnt}")
    if name == "unique_consecutive":
        return Case(name, lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), [x])
    if name == "bucketize":
        bnd = torch.sort(g.values((g.int(0, 6),), dt if dt != torch.bool else torch.float32)).values
        right = g.chance(0.5)
        return Case(name, lambda t, b, r=right: torch.bucketize(t, b, right=r), [x, Input(bnd)], note=f"right={right}")
    sorted_seq = torch.sort(g.values(shape[:-1] + (g.int(0, 6),), dt), dim=-1).values
    right = g.chance(0.5)
    return Case(name, lambda s, v, r=right: torch.searchsorted(s, v, right=r), [Input(sorted_seq), x],
                note=f"right={right}")


def gen_nn(g: Gen) -> Case:
    name = g.choice(("layer_norm", "group_norm", "batch_norm", "batch_norm_train", "rms_norm", "conv1d", "conv2d",
                     "conv_transpose2d", "avg_pool2d", "max_pool2d", "adaptive_avg_pool2d", "cross_entropy",
                     "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "bce_with_logits", "bce",
                     "kl_div", "pad", "interpolate", "sdpa", "softmax_dtype", "normalize", "pixel_shuffle",
                     "cosine_similarity", "pdist_like", "glu", "embedding_bag_like", "upsample_bilinear",
                     "max_pool1d", "avg_pool1d", "log_softmax_loss"))
    dt = g.dtype(FLOATS) if g.chance(0.95) else g.dtype()
    N, C, H, W = g.choice((0, 1, 2, 3)), g.choice((1, 2, 4)), g.choice((1, 3, 5, 8)), g.choice((1, 4, 6))
    T = lambda s, d=dt: g.tensor(s, d)  # noqa: E731
    if name == "layer_norm":
        shape = (N, H, W)
        ns = shape[g.int(1, 2):]
        aff = g.chance(0.6)
        args = [T(shape)] + ([T(ns), T(ns)] if aff else [])
        return Case(name, lambda x, *wb, ns=ns: F.layer_norm(x, ns, *wb), args, note=f"normalized={ns}")
    if name == "rms_norm":
        shape = (N, H, W)
        ns = shape[-1:]
        return Case(name, lambda x, w, ns=ns: F.rms_norm(x, ns, w), [T(shape), T(ns)])
    if name == "group_norm":
        G = g.choice([gg for gg in (1, 2, 4) if C % gg == 0])
        return Case(name, lambda x, w, b, G=G: F.group_norm(x, G, w, b), [T((N, C, H, W)), T((C,)), T((C,))],
                    note=f"groups={G}")
    if name in ("batch_norm", "batch_norm_train"):
        train = name == "batch_norm_train"
        rm = Input(torch.randn(C, generator=g.g))
        rv = Input(torch.rand(C, generator=g.g) + 0.5)
        return Case(name, lambda x, rm, rv, w, b, t=train: F.batch_norm(x, rm, rv, w, b, training=t),
                    [T((max(N, 1) if train else N, C, H, W)), rm, rv, T((C,)), T((C,))], mutates=train)
    if name in ("conv1d", "conv2d", "conv_transpose2d"):
        groups = g.choice((1, 1, C)) if name != "conv_transpose2d" else 1
        O = g.choice((1, 2, 4)) * groups
        ks = g.choice((1, 2, 3))
        stride, pad, dil = g.choice((1, 2)), g.choice((0, 1)), g.choice((1, 1, 2))
        bias = g.chance(0.5)
        if name == "conv1d":
            x, w = T((max(N, 1), C, W + 4)), T((O, C // groups, ks))
            fn = lambda x, w, *b, s=stride, p=pad, d=dil, gr=groups: F.conv1d(x, w, *b, s, p, d, gr)  # noqa: E731
        elif name == "conv2d":
            x, w = T((max(N, 1), C, H + 2, W + 2)), T((O, C // groups, ks, ks))
            fn = lambda x, w, *b, s=stride, p=pad, d=dil, gr=groups: F.conv2d(x, w, *b, s, p, d, gr)  # noqa: E731
        else:
            x, w = T((max(N, 1), C, H, W)), T((C, O, ks, ks))
            fn = lambda x, w, *b, s=stride, p=pad: F.conv_transpose2d(x, w, *b, s, p)  # noqa: E731
        return Case(name, fn, [x, w] + ([T((O,))] if bias else []),
                    note=f"stride={stride} pad={pad} dil={dil} groups={groups}")
    if name in ("avg_pool2d", "max_pool2d"):
        ks, st = g.choice((1, 2, 3)), g.choice((1, 2))
        pad = g.int(0, ks // 2)
        ceil = g.chance(0.3)
        fn = F.avg_pool2d if name == "avg_pool2d" else F.max_pool2d
        return Case(name, lambda x, fn=fn, k=ks, s=st, p=pad, c=ceil: fn(x, k, s, p, ceil_mode=c),
                    [T((N, C, H + 2, W + 2))], note=f"k={ks} s={st} p={pad} ceil={ceil}")
    if name in ("max_pool1d", "avg_pool1d"):
        ks = g.choice((1, 2, 3))
        fn = getattr(F, name)
        return Case(name, lambda x, fn=fn, k=ks: fn(x, ks), [T((max(N, 1), C, W + 3))], note=f"k={ks}")
    if name == "adaptive_avg_pool2d":
        out = (g.int(1, H + 1), g.int(1, W + 1))
        return Case(name, lambda x, o=out: F.adaptive_avg_pool2d(x, o), [T((N, C, H, W))], note=str(out))
    if name in ("cross_entropy", "nll_loss", "log_softmax_loss"):
        red = g.choice(("mean", "sum", "none"))
        tgt = torch.randint(0, C, (N,), generator=g.g)
        if g.chance(0.2) and N:
            tgt[0] = -100  # ignore_index
        if name == "cross_entropy":
            ls = g.choice((0.0, 0.0, 0.1))
            return Case(name, lambda x, t, r=red, ls=ls: F.cross_entropy(x, t, reduction=r, label_smoothing=ls),
                        [T((N, C)), Input(tgt)], note=f"reduction={red} smoothing={ls}")
        if name == "nll_loss":
            return Case(name, lambda x, t, r=red: F.nll_loss(x, t, reduction=r), [T((N, C)), Input(tgt)],
                        note=f"reduction={red}")
        return Case(name, lambda x, t, r=red: F.nll_loss(F.log_softmax(x, -1), t, reduction=r),
                    [T((N, C)), Input(tgt)], note=f"reduction={red}")
    if name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "bce_with_logits", "kl_div"):
        shape = g.shape(nonempty=g.chance(0.8))
        red = g.choice(("mean", "sum", "none"))
        fn = {"mse_loss": F.mse_loss, "l1_loss": F.l1_loss, "smooth_l1_loss": F.smooth_l1_loss,
              "huber_loss": F.huber_loss, "bce_with_logits": F.binary_cross_entropy_with_logits,
              "kl_div": F.kl_div}[name]
        return Case(name, lambda a, b, fn=fn, r=red: fn(a, b, reduction=r), [T(shape), T(shape)],
                    note=f"reduction={red}")
    if name == "bce":
        shape = g.shape(nonempty=True)
        p = Input(torch.rand(shape, generator=g.g).clamp(0.01, 0.99).to(dt))
        y = Input(torch.rand(shape, generator=g.g).to(dt))
        return Case(name, F.binary_cross_entropy, [p, y])
    if name == "pad":
        mode = g.choice(("constant", "constant", "reflect", "replicate", "circular"))
        x = T((max(N, 1), C, H + 2, W + 2))
        p = tuple(g.int(0, 2) for _ in range(4))
        if mode == "constant" and g.chance(0.3):
            p = (-1, 1, 0, 2)
        v = g.scalar(dt) if mode == "constant" else None
        return Case(name, lambda x, p=p, m=mode, v=v: F.pad(x, p, m, v) if v is not None else F.pad(x, p, m),
                    [x], note=f"{p} {mode} {v}")
    if name in ("interpolate", "upsample_bilinear"):
        mode = g.choice(("nearest", "bilinear", "bicubic", "nearest-exact")) if name == "interpolate" else "bilinear"
        size = (g.int(1, 9), g.int(1, 9))
        ac = g.chance(0.5) if mode in ("bilinear", "bicubic") else None
        return Case(name, lambda x, s=size, m=mode, ac=ac: F.interpolate(x, size=s, mode=m, align_corners=ac),
                    [T((N, C, H, W))], note=f"{mode} {size} align_corners={ac}")
    if name == "sdpa":
        B, Hh, L, S, E = max(N, 1), g.choice((1, 2)), g.choice((1, 3, 5)), g.choice((1, 4, 5)), g.choice((2, 4, 8))
        causal = g.chance(0.4)
        mask_kind = g.choice((None, None, "bool", "float"))
        args = [T((B, Hh, L, E)), T((B, Hh, S, E)), T((B, Hh, S, E))]
        if mask_kind == "bool" and not causal:
            m = torch.rand((L, S), generator=g.g) < 0.7
            m[:, 0] = True
            args.append(Input(m))
        elif mask_kind == "float" and not causal:
            args.append(T((L, S)))
        return Case(name, lambda q, k_, v, *m, c=causal: F.scaled_dot_product_attention(q, k_, v, *m, is_causal=c),
                    args, note=f"causal={causal} mask={mask_kind}")
    if name == "softmax_dtype":
        return Case(name, lambda x: torch.softmax(x, -1, dtype=torch.float32), [T((N, C, W))])
    if name == "normalize":
        p = g.choice((1, 2))
        return Case(name, lambda x, p=p: F.normalize(x, p=p, dim=-1), [T((N, C, W))], note=f"p={p}")
    if name == "pixel_shuffle":
        return Case(name, lambda x: F.pixel_shuffle(x, 2), [T((N, 4 * C, H, W))])
    if name == "cosine_similarity":
        return Case(name, lambda a, b: F.cosine_similarity(a, b, dim=-1), [T((N, C, W)), T((N, C, W))])
    if name == "pdist_like":
        return Case(name, lambda a, b: torch.cdist(a, b), [T((N, C, W)), T((N, H, W))])
    if name == "glu":
        return Case(name, lambda x: F.glu(x, -1), [T((N, C, 2 * W))])
    # embedding-bag-like: gather rows and reduce
    w = T((g.int(1, 7), W))
    idx = torch.randint(0, w.shape[0], (N, 3), generator=g.g)
    return Case(name, lambda i, w: F.embedding(i, w).sum(1), [Input(idx), w])


def gen_factory(g: Gen) -> Case:
    name = g.choice(("zeros", "ones", "full", "arange", "arange_float", "linspace", "eye", "zeros_like",
                     "full_like", "ones_like", "empty", "new_full", "tril_indices", "logspace", "scalar_tensor",
                     "tensor"))
    dt = g.dtype()
    shape = g.shape()
    if name in ("zeros", "ones", "empty"):
        fn = getattr(torch, name)
        return Case(name, lambda dev, fn=fn, s=shape, d=dt: fn(s, dtype=d, device=dev), ["<device>"],
                    compare="meta" if name == "empty" else "close", note=f"{list(shape)} {_dtype_name(dt)}")
    if name == "full":
        v = g.scalar()
        return Case(name, lambda dev, s=shape, v=v, d=dt: torch.full(s, v, dtype=d, device=dev),
                    ["<device>"], note=f"{list(shape)} {v} {_dtype_name(dt)}")
    if name == "arange":
        a, b, s = g.int(-5, 5), g.int(-5, 15), g.choice((1, 2, 3, -1))
        return Case(name, lambda dev, a=a, b=b, s=s: torch.arange(a, b, s, device=dev), ["<device>"],
                    note=f"{a},{b},{s}")
    if name == "arange_float":
        a, b, s = g.choice((0.0, -1.5, 0.25)), g.choice((1.0, 3.7, 5.0)), g.choice((0.1, 0.5, 0.3))
        return Case(name, lambda dev, a=a, b=b, s=s, d=g.dtype(FLOATS): torch.arange(a, b, s, dtype=d, device=dev),
                    ["<device>"], note=f"{a},{b},{s}")
    if name in ("linspace", "logspace"):
        a, b, n = g.choice((0.0, -2.0, 1.0)), g.choice((1.0, 3.0, -1.0)), g.int(0, 9)
        fn = getattr(torch, name)
        d = g.dtype(FLOATS + INTS)
        return Case(name, lambda dev, fn=fn, a=a, b=b, n=n, d=d: fn(a, b, n, dtype=d, device=dev), ["<device>"],
                    note=f"{a},{b},{n} {_dtype_name(d)}")
    if name == "eye":
        n, m = g.int(0, 5), g.int(0, 5)
        return Case(name, lambda dev, n=n, m=m, d=dt: torch.eye(n, m, dtype=d, device=dev), ["<device>"],
                    note=f"{n},{m}")
    if name == "tril_indices":
        r, c, o = g.int(0, 5), g.int(0, 5), g.int(-2, 2)
        return Case(name, lambda dev, r=r, c=c, o=o: torch.tril_indices(r, c, o, device=dev), ["<device>"],
                    note=f"{r},{c},{o}")
    if name == "scalar_tensor":
        v = g.scalar()
        return Case(name, lambda dev, v=v, d=dt: torch.scalar_tensor(v, dtype=d, device=dev), ["<device>"],
                    note=str(v))
    if name == "tensor":
        vals = g.values(shape, dt).tolist()
        return Case(name, lambda dev, v=vals, d=dt: torch.tensor(v, dtype=d, device=dev), ["<device>"])
    x = g.tensor(shape, dt)
    if name == "zeros_like":
        return Case(name, torch.zeros_like, [x])
    if name == "ones_like":
        return Case(name, lambda t: torch.ones_like(t, dtype=torch.float32), [x])
    if name == "new_full":
        v = g.scalar()
        return Case(name, lambda t, v=v: t.new_full((2, 3), v), [x], note=str(v))
    v = g.scalar()
    return Case(name, lambda t, v=v: torch.full_like(t, v), [x], note=str(v))


def gen_overlap(g: Gen) -> Case:
    """In-place writes whose source overlaps the destination."""
    name = g.choice(("add_shifted", "copy_shifted", "mul_self", "add_self_t", "expanded_inplace"))
    dt = g.dtype(FLOATS + INTS)
    n = g.choice((2, 3, 5, 8))
    if name == "add_shifted":
        return Case(name, lambda b: b[1:].add_(b[:-1]), [g.tensor((n,), dt, writable=True, layout="contiguous")],
                    mutates=True)
    if name == "copy_shifted":
        return Case(name, lambda b: b[1:].copy_(b[:-1]), [g.tensor((n,), dt, writable=True, layout="contiguous")],
                    mutates=True)
    if name == "mul_self":
        return Case(name, lambda b: b.mul_(b), [g.tensor((n, 3), dt, writable=True)], mutates=True)
    if name == "add_self_t":
        return Case(name, lambda b: b.add_(b.t()), [g.tensor((n, n), dt, writable=True, layout="contiguous")],
                    mutates=True)
    return Case(name, lambda b: b.expand(3, n).add_(1), [g.tensor((n,), dt, writable=True, layout="contiguous")],
                mutates=True)


COMPLEX_UNARY = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh,
    "neg": torch.neg, "abs": torch.abs, "angle": torch.angle, "sgn": torch.sgn, "reciprocal": torch.reciprocal,
    "conj_physical": torch.conj_physical, "conj": lambda x: x.conj() * 1, "real": lambda x: x.real * 1,
    "imag": lambda x: x.imag * 1, "isnan": torch.isnan, "view_as_real": lambda x: torch.view_as_real(x) + 0,
}
COMPLEX_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "eq": torch.eq, "ne": torch.ne,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=0.5 - 2j), "pow": lambda a, b: torch.pow(a, 2),
}


def gen_complex(g: Gen) -> Case:
    """complex64 (and complex128) tensors: elementwise math, promotion with real operands, reductions, products,
    views as real numbers and back (written through), conjugate views, concatenation and indexing."""
    dt = torch.complex64 if g.chance(0.85) else torch.complex128
    kind = g.choice(("unary", "unary", "binary", "binary", "reduce", "matmul", "view", "movement", "polar"))
    shape = g.shape(nonempty=g.chance(0.8))
    if kind == "unary":
        name = g.choice(sorted(COMPLEX_UNARY))
        return Case("complex." + name, lambda x, f=COMPLEX_UNARY[name]: f(x), [g.tensor(shape, dt)])
    if kind == "binary":
        name = g.choice(sorted(COMPLEX_BINARY))
        odt = g.choice((dt, dt, torch.float32, torch.int64))
        b = g.tensor(g.broadcastable(shape), odt)
        if g.chance(0.2):
            return Case("complex." + name + "_scalar", lambda a, f=COMPLEX_BINARY[name]: f(a, 1.5 - 0.5j),
                        [g.tensor(shape, dt)])
        return Case("complex." + name, lambda a, b, f=COMPLEX_BINARY[name]: f(a, b), [g.tensor(shape, dt), b],
                    note=_dtype_name(odt))
    if kind == "reduce":
        name = g.choice(("sum", "mean", "prod"))
        dim = g.int(0, len(shape) - 1) if shape and g.chance(0.7) else None
        if dim is None:
            return Case("complex." + name, lambda x, n=name: getattr(torch, n)(x), [g.tensor(shape, dt)])
        return Case(f"complex.{name}.dim", lambda x, n=name, d=dim: getattr(torch, n)(x, d), [g.tensor(shape, dt)])
    if kind == "matmul":
        m, k, n = g.int(1, 5), g.int(1, 6), g.int(1, 5)
        conj = g.chance(0.3)
        return Case("complex.mm" + (".conj" if conj else ""),
                    lambda a, b, c=conj: (a.conj() if c else a) @ b, [g.tensor((m, k), dt), g.tensor((k, n), dt)])
    if kind == "view":
        # a float tensor viewed as complex, changed through the view, and the base compared afterwards
        part = torch.float64 if dt == torch.complex128 else torch.float32
        fshape = tuple(shape) + (2,)

        def f(x):
            c = torch.view_as_complex(x)
            c.mul_(0.5 + 1j)
            torch.view_as_real(c)[..., 0].add_(1)
            return c.abs()
        return Case("complex.view_write", f, [g.tensor(fshape, part, writable=True, layout="contiguous")],
                    mutates=True)
    if kind == "movement":
        name = g.choice(("cat", "stack", "index_select", "flip", "where"))
        a, b = g.tensor(shape, dt), g.tensor(shape, dt)
        if name == "cat":
            return Case("complex.cat", lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]), [a, b])
        if name == "stack":
            return Case("complex.stack", lambda a, b: torch.stack([a, b]), [a, b])
        if name == "index_select":
            idx = torch.tensor([0, 0]) if shape and shape[0] else torch.zeros(0, dtype=torch.int64)
            return Case("complex.index_select", lambda a, i=idx: a.index_select(0, i.to(a.device)) if a.dim() else a,
                        [a])
        if name == "flip":
            return Case("complex.flip", lambda a: a.flip(tuple(range(a.dim()))), [a])
        return Case("complex.where", lambda a, b: torch.where(a.real > 0, a, b), [a, b])
    mag = g.tensor(shape, torch.float32, values=lambda s: torch.rand(s, generator=g.g))
    return Case("complex.polar", lambda m, a: torch.polar(m, a), [mag, g.tensor(shape, torch.float32)])


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


def _tol(dtype):
    if dtype in (torch.bfloat16,):
        return dict(rtol=2e-2, atol=2e-2)
    if dtype == torch.float16:
        return dict(rtol=4e-3, atol=2e-3)
    if dtype in (torch.float32, torch.complex64):
        return dict(rtol=1e-4, atol=1e-4)
    if dtype in (torch.float64, torch.complex128):
        return dict(rtol=1e-6, atol=1e-6)
    return dict(rtol=0, atol=0)


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
        torch.testing.assert_close(t, c, equal_nan=True, **_tol(c.dtype))
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
