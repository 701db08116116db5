"""Soak case families (torch_tpu/testing/soak.py): elementwise (unary, binary, ternary), reductions, views and shape
ops, indexing and scatter/gather. Each gen_* draws one Case from a Gen."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from torch_tpu.testing.soak_gen import DIMS, FLOAT8, FLOATS, INTS, Case, Gen, Input, _dtype_name


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


