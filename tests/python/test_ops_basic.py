"""Lowering rules checked end to end: each op runs on `tpu` and on CPU and the results are compared.

Tables of (name, function, sample-input maker, dtypes). Every case also asserts that no op fell back to CPU while
the `tpu` side ran (an op listed in the case's `fallback_ok` may: it has no rule by design). Samples include
broadcasting, Python scalars, 0-d tensors, empty tensors and non-contiguous inputs; float cases also compare the
gradients of a weighted sum of the outputs.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_flatten, tree_map

import torch_tpu
from torch_tpu.testing.tolerances import tight_tol

F32, BF16, F16, F64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
I64, I32, I8, U8, BOOL = torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool
FLOATS = (F32, BF16, F64)
INTS = (I64, I32, U8)


def make(shape, dtype, low=-3.0, high=3.0, noncontig=False, seed=0):
    g = torch.Generator().manual_seed(seed + len(shape) * 31 + sum(shape))
    if dtype == BOOL:
        t = torch.rand(shape, generator=g) > 0.5
    elif dtype.is_floating_point:
        t = (torch.rand(shape, generator=g, dtype=F64) * (high - low) + low).to(dtype)
    else:
        lo = 0 if dtype == U8 else int(low)
        t = torch.randint(lo, max(int(high), lo + 1) + 1, shape, generator=g).to(dtype)
    if noncontig and t.dim() >= 2:  # same values, transposed strides
        t = t.transpose(0, 1).contiguous().transpose(0, 1)
    return t


def _to_tpu(x):
    return x.to("tpu") if isinstance(x, torch.Tensor) else x


def _fallbacks():
    return {k: v for k, v in torch_tpu._C._fallback_counts().items() if v}


def run_case(fn, args, dtype, grad=False, fallback_ok=(), kwargs=None):
    kwargs = kwargs or {}
    cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    if grad:
        cpu_args = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                    for a in cpu_args]
    tpu_args = [_to_tpu(a.detach()) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    if grad:
        tpu_args = [t.requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                    for t in tpu_args]
    want = fn(*cpu_args, **kwargs)
    torch_tpu.reset_fallback_counts()
    got = fn(*tpu_args, **kwargs)
    wl, _ = tree_flatten(want)
    gl, _ = tree_flatten(got)
    assert len(wl) == len(gl)
    for w, g in zip(wl, gl):
        if isinstance(w, torch.Tensor):
            assert g.device.type == "tpu", g.device
            torch.testing.assert_close(g.cpu(), w, **tight_tol(dtype), equal_nan=True)
        else:
            assert g == w
    bad = {k: v for k, v in _fallbacks().items() if not any(ok in k for ok in fallback_ok)}
    assert not bad, f"ops fell back to CPU: {bad}"
    if grad:
        outs_c = [w for w in wl if isinstance(w, torch.Tensor) and w.is_floating_point() and w.requires_grad]
        outs_t = [g for g in gl if isinstance(g, torch.Tensor) and g.is_floating_point() and g.requires_grad]
        if not outs_c:
            return
        weights = [make(o.shape, o.dtype, seed=7) for o in outs_c]
        sc = sum((o * w).sum() for o, w in zip(outs_c, weights))
        st = sum((o * w.to("tpu")).sum() for o, w in zip(outs_t, weights))
        torch_tpu.reset_fallback_counts()
        sc.backward()
        st.backward()
        for a, b in zip(cpu_args, tpu_args):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                assert (a.grad is None) == (b.grad is None)
                if a.grad is not None:
                    torch.testing.assert_close(b.grad.cpu(), a.grad, **tight_tol(dtype), equal_nan=True)
        bad = {k: v for k, v in _fallbacks().items() if not any(ok in k for ok in fallback_ok)}
        assert not bad, f"backward ops fell back to CPU: {bad}"


# ---------------------------------------------------------------- unary

POS = dict(low=0.1, high=4.0)
UNARY = [
    # name, fn, dtypes, input range, differentiable
    ("neg", torch.neg, FLOATS + INTS[:2], {}, True),
    ("abs", torch.abs, FLOATS + INTS, {}, True),
    ("exp", torch.exp, FLOATS + (I64,), {}, True),
    ("log", torch.log, FLOATS, POS, True),
    ("sqrt", torch.sqrt, FLOATS + (I64,), POS, True),
    ("rsqrt", torch.rsqrt, FLOATS, POS, True),
    ("tanh", torch.tanh, FLOATS, {}, True),
    ("sigmoid", torch.sigmoid, FLOATS, {}, True),
    ("relu", torch.relu, FLOATS + (I64,), {}, True),
    ("gelu", F.gelu, FLOATS, {}, True),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), FLOATS, {}, True),
    ("silu", F.silu, FLOATS, {}, True),
    ("mish", F.mish, (F32, F64), {}, True),
    ("hardswish", F.hardswish, (F32,), {}, True),
    ("hardsigmoid", F.hardsigmoid, (F32,), {}, True),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), FLOATS, {}, True),
    ("hardtanh", lambda x: F.hardtanh(x, -1.5, 0.5), FLOATS, {}, True),
    ("elu", F.elu, FLOATS, {}, True),
    ("softplus", F.softplus, FLOATS, {}, True),
    ("sin", torch.sin, FLOATS, {}, True),
    ("cos", torch.cos, FLOATS, {}, True),
    ("erf", torch.erf, FLOATS, {}, True),
    ("log1p", torch.log1p, FLOATS, POS, True),
    ("expm1", torch.expm1, FLOATS, {}, True),
    ("floor", torch.floor, FLOATS + INTS, {}, False),
    ("ceil", torch.ceil, FLOATS + INTS, {}, False),
    ("round", torch.round, FLOATS, {}, False),
    ("trunc", torch.trunc, FLOATS, {}, False),
    ("sign", torch.sign, FLOATS + INTS + (BOOL,), {}, False),
    ("reciprocal", torch.reciprocal, FLOATS, POS, True),
    ("square", torch.square, FLOATS + (I64,), {}, True),
    ("logical_not", torch.logical_not, FLOATS + INTS + (BOOL,), {}, False),
    ("bitwise_not", torch.bitwise_not, INTS + (BOOL,), {}, False),
    ("isnan", torch.isnan, FLOATS + (I64,), {}, False),
    ("clamp", lambda x: torch.clamp(x, -1, 2), FLOATS + INTS[:2], {}, True),
    ("clamp_min", lambda x: torch.clamp(x, min=0.5), FLOATS, {}, True),
    ("to_int", lambda x: x.to(torch.int32), FLOATS, {}, False),
    ("to_bool", lambda x: x.to(torch.bool), FLOATS + INTS, {}, False),
    ("to_f32", lambda x: x.float(), (BF16, F64, I64, BOOL), {}, True),
    ("clone", torch.clone, FLOATS + INTS + (BOOL,), {}, True),
]


@pytest.mark.parametrize("name,fn,dtypes,rng,diff", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, dtypes, rng, diff):
    for dtype in dtypes:
        for shape, nc in (((3, 5), False), ((4, 3), True), ((), False), ((0, 2), False)):
            x = make(shape, dtype, noncontig=nc, **rng)
            run_case(fn, [x], dtype, grad=diff and dtype.is_floating_point and dtype != BF16)


def test_unary_special_values():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1.5, -2.5, 0.5])
    for fn in (torch.relu, torch.sign, torch.round, torch.trunc, torch.floor, torch.abs, torch.sigmoid, torch.exp,
               torch.isnan, lambda t: torch.clamp(t, -1, 1), torch.tanh):
        run_case(fn, [x], F32)


# ---------------------------------------------------------------- binary

BINARY = [
    ("add", torch.add, FLOATS + INTS + (BOOL,), True),
    ("add_alpha", lambda a, b: torch.add(a, b, alpha=2), FLOATS + INTS[:2], True),
    ("sub", torch.sub, FLOATS + INTS, True),
    ("sub_alpha", lambda a, b: torch.sub(a, b, alpha=0.5), FLOATS, True),
    ("rsub", lambda a, b: torch.rsub(a, b), FLOATS, True),
    ("mul", torch.mul, FLOATS + INTS + (BOOL,), True),
    ("div", torch.div, FLOATS + (I64,), True),
    ("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), FLOATS + (I64,), False),
    ("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), FLOATS + (I64,), False),
    ("remainder", torch.remainder, FLOATS + (I64,), False),
    ("fmod", torch.fmod, FLOATS + (I64,), False),
    ("floor_divide", torch.floor_divide, (F32, I64), False),
    ("pow", lambda a, b: torch.pow(a.abs() + 0.5 if a.is_floating_point() else a.abs(), b), (F32, F64), True),
    ("maximum", torch.maximum, FLOATS + INTS + (BOOL,), True),
    ("minimum", torch.minimum, FLOATS + INTS, True),
    ("atan2", torch.atan2, (F32, F64), True),
    ("eq", torch.eq, FLOATS + INTS + (BOOL,), False),
    ("ne", torch.ne, FLOATS + INTS, False),
    ("lt", torch.lt, FLOATS + INTS, False),
    ("le", torch.le, FLOATS + INTS, False),
    ("gt", torch.gt, FLOATS + INTS + (BOOL,), False),
    ("ge", torch.ge, FLOATS + INTS, False),
    ("bitwise_and", torch.bitwise_and, INTS + (BOOL,), False),
    ("bitwise_or", torch.bitwise_or, INTS + (BOOL,), False),
    ("bitwise_xor", torch.bitwise_xor, INTS + (BOOL,), False),
    ("logical_and", torch.logical_and, FLOATS + INTS + (BOOL,), False),
    ("logical_or", torch.logical_or, FLOATS + (BOOL,), False),
    ("lerp", lambda a, b: torch.lerp(a, b, 0.3), (F32, F64), True),
    ("lerp_tensor", lambda a, b: torch.lerp(a, b, torch.sigmoid(b)), (F32, F64), True),
]


def _nonzero(t):
    if t.dtype == BOOL or not (t.dtype.is_floating_point or t.dtype.is_signed):
        return t if t.dtype == BOOL else t.clamp(min=1)
    return torch.where(t.abs() < 0.5, torch.ones_like(t), t)


@pytest.mark.parametrize("name,fn,dtypes,diff", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, fn, dtypes, diff):
    divides = name.startswith(("div", "remainder", "fmod", "floor_divide"))
    for dtype in dtypes:
        grad = diff and dtype.is_floating_point and dtype != BF16
        shapes = [((3, 4), (3, 4), False), ((3, 4), (4,), False), ((2, 1, 4), (3, 1), True), ((3, 4), (), False),
                  ((0, 4), (4,), False)]
        for sa, sb, nc in shapes:
            a = make(sa, dtype, noncontig=nc)
            b = make(sb, dtype, seed=3)
            if divides:
                b = _nonzero(b)
            run_case(fn, [a, b], dtype, grad=grad)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32, U8, BOOL])
def test_python_scalars_and_promotion(dtype):
    x = make((3, 4), dtype)
    for other in (2, 2.5, True, -1):
        for fn in (torch.add, torch.mul, torch.lt, torch.eq, torch.maximum if False else torch.ge):
            if fn is torch.add and dtype == BOOL and other == -1:
                continue
            run_case(lambda a: fn(a, other), [x], dtype)
        if dtype != BOOL and other is not True:
            run_case(lambda a: a - other, [x], dtype)
            run_case(lambda a: other - a, [x], dtype)
    # 0-d tensors of another dtype
    run_case(lambda a, s: a + s, [x, torch.tensor(1.5, dtype=F64)], dtype)
    run_case(lambda a, s: a * s, [x, torch.tensor(3, dtype=I64)], dtype)
    if dtype.is_floating_point:
        run_case(lambda a: torch.div(a, 3), [x], dtype)
        run_case(lambda a: a ** 2, [x], dtype, grad=dtype == F32)
        run_case(lambda a: 2 ** a, [x], dtype, grad=dtype == F32)


def test_where_masked_fill_addcmul():
    for dtype in (F32, BF16, I64, BOOL):
        c = make((3, 4), BOOL)
        a, b = make((3, 4), dtype), make((4,), dtype, seed=5)
        run_case(torch.where, [c, a, b], dtype, grad=dtype == F32)
        run_case(lambda c, a: torch.where(c, a, 0), [c, a], dtype)
        run_case(lambda a, m: a.masked_fill(m, 1), [a, make((4,), BOOL)], dtype)
    a, b, c = make((3, 4), F32), make((4,), F32, seed=1), make((3, 1), F32, low=1, high=2, seed=2)
    run_case(lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [a, b, c], F32, grad=True)
    run_case(lambda a, b, c: torch.addcdiv(a, b, c, value=-2), [a, b, c], F32, grad=True)


# ---------------------------------------------------------------- reductions

REDUCTIONS = [
    ("sum", lambda x: x.sum(), FLOATS + INTS + (BOOL,), True),
    ("sum_dim", lambda x: x.sum(dim=-1, keepdim=True), FLOATS + INTS + (BOOL,), True),
    ("sum_dims", lambda x: x.sum(dim=(0, 2)), FLOATS + (I64,), True),
    ("sum_dtype", lambda x: x.sum(dim=1, dtype=torch.float64), (F32, I64), False),
    ("mean", lambda x: x.mean(), FLOATS, True),
    ("mean_dim", lambda x: x.mean(dim=(1,), keepdim=True), FLOATS, True),
    ("amax", lambda x: x.amax(dim=1), FLOATS + INTS + (BOOL,), True),
    ("amin", lambda x: x.amin(dim=(0, 1)), FLOATS + INTS, True),
    ("max", lambda x: x.max(), FLOATS + INTS, False),
    ("min", lambda x: x.min(), FLOATS + INTS, False),
    ("max_dim", lambda x: x.max(dim=1), FLOATS + INTS, True),
    ("min_dim", lambda x: x.min(dim=-1, keepdim=True), FLOATS + INTS, True),
    ("argmax", lambda x: x.argmax(dim=1), FLOATS + INTS, False),
    ("argmax_flat", lambda x: x.argmax(), FLOATS + INTS, False),
    ("argmin", lambda x: x.argmin(dim=0, keepdim=True), FLOATS + INTS, False),
    ("prod", lambda x: x.prod(dim=1), (F32, F64, I64), True),
    ("any", lambda x: x.any(dim=1), FLOATS + INTS + (BOOL,), False),
    ("all", lambda x: x.all(), FLOATS + INTS + (BOOL,), False),
    ("var", lambda x: x.var(dim=1), FLOATS, True),
    ("var_c0", lambda x: torch.var(x, dim=(0, 1), correction=0, keepdim=True), FLOATS, True),
    ("std", lambda x: x.std(), FLOATS, True),
    ("var_mean", lambda x: torch.var_mean(x, dim=-1), (F32, F64), True),
    ("norm", lambda x: torch.linalg.vector_norm(x, dim=-1), FLOATS, True),
    ("norm1", lambda x: torch.linalg.vector_norm(x, ord=1), (F32, F64), True),
    ("norm_inf", lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=0), (F32,), False),
    ("logsumexp", lambda x: torch.logsumexp(x, dim=1), FLOATS, True),
    ("cumsum", lambda x: torch.cumsum(x, dim=1), FLOATS + INTS + (BOOL,), True),
    ("cumprod", lambda x: torch.cumprod(x, dim=0), (F32, F64, I64), False),
]


@pytest.mark.parametrize("name,fn,dtypes,diff", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction(name, fn, dtypes, diff):
    for dtype in dtypes:
        for shape, nc in (((3, 4, 5), False), ((4, 3, 2), True)):
            x = make(shape, dtype, noncontig=nc)
            run_case(fn, [x], dtype, grad=diff and dtype in (F32, F64))


def test_reduction_nan_and_empty():
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]])
    for fn in (lambda t: t.amax(1), lambda t: t.max(), lambda t: t.max(dim=1), lambda t: t.argmax(1),
               lambda t: t.sum(1), lambda t: t.min(dim=1)):
        run_case(fn, [x], F32)
    e = torch.zeros(0, 3)
    for fn in (lambda t: t.sum(), lambda t: t.sum(0), lambda t: t.mean(0), lambda t: t.prod(0)):
        run_case(fn, [e], F32)


# ---------------------------------------------------------------- linalg

@pytest.mark.parametrize("dtype", [F32, BF16, F64, I64])
def test_linalg(dtype):
    grad = dtype in (F32, F64)
    a, b = make((3, 4), dtype), make((4, 5), dtype, seed=1)
    run_case(torch.mm, [a, b], dtype, grad=grad)
    run_case(torch.mm, [make((3, 4), dtype, noncontig=True), b], dtype, grad=grad)
    run_case(torch.bmm, [make((2, 3, 4), dtype), make((2, 4, 5), dtype, seed=1)], dtype, grad=grad)
    run_case(torch.matmul, [make((2, 2, 3, 4), dtype), make((4, 5), dtype, seed=1)], dtype, grad=grad)
    run_case(torch.mv, [a, make((4,), dtype)], dtype, grad=grad)
    run_case(torch.dot, [make((4,), dtype), make((4,), dtype, seed=1)], dtype, grad=grad)
    if dtype != I64:
        run_case(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2), [make((5,), dtype), a, b], dtype, grad=grad)
        run_case(F.linear, [make((2, 3, 4), dtype), make((6, 4), dtype), make((6,), dtype)], dtype, grad=grad)
        run_case(lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.5),
                 [make((2, 3, 5), dtype), make((2, 3, 4), dtype), make((2, 4, 5), dtype)], dtype, grad=grad)


# ---------------------------------------------------------------- nn

@pytest.mark.parametrize("dtype", [F32, BF16, F64])
def test_softmax_family(dtype):
    grad = dtype != BF16
    x = make((3, 4, 5), dtype)
    for dim in (-1, 0, 1):
        run_case(lambda t: torch.softmax(t, dim), [x], dtype, grad=grad)
        run_case(lambda t: torch.log_softmax(t, dim), [x], dtype, grad=grad)
    run_case(lambda t: torch.softmax(t, -1, dtype=torch.float32), [x], dtype)
    big = torch.tensor([[1000.0, 1000.0, -float("inf")]], dtype=dtype)
    run_case(lambda t: torch.softmax(t, -1), [big], dtype)


@pytest.mark.parametrize("dtype", [F32, BF16, F64])
def test_layer_norm(dtype):
    grad = dtype != BF16
    x = make((2, 3, 8), dtype, noncontig=False)
    w, b = make((8,), dtype, seed=1), make((8,), dtype, seed=2)
    run_case(lambda x, w, b: F.layer_norm(x, (8,), w, b), [x, w, b], dtype, grad=grad)
    run_case(lambda x: F.layer_norm(x, (3, 8)), [x], dtype, grad=grad)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_embedding_index_select(dtype):
    w = make((10, 4), dtype)
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])
    run_case(lambda w: F.embedding(idx.to(w.device), w), [w], dtype, grad=True)
    run_case(lambda w: F.embedding(idx.to(w.device), w, padding_idx=3), [w], dtype, grad=True)
    run_case(lambda w, i: torch.index_select(w, 0, i), [w, torch.tensor([4, 0, 4])], dtype, grad=True)
    run_case(lambda w, i: torch.index_select(w, 1, i), [w, torch.tensor([3, 1])], dtype, grad=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
    logits = make((5, 7), F32)
    target = torch.tensor([0, 6, 3, -100, 2])
    weight = make((7,), F32, low=0.5, high=2)
    run_case(lambda x, t: F.cross_entropy(x, t, reduction=reduction), [logits, target], F32, grad=True)
    run_case(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, weight=weight.to(x.device), reduction=reduction),
             [logits, target], F32, grad=True)
    run_case(lambda x, y: F.mse_loss(x, y, reduction=reduction), [make((3, 4), F32), make((3, 4), F32, seed=9)],
             F32, grad=True)


def test_mlp_attention_block_training_step():
    torch.manual_seed(0)
    x = make((2, 5, 16), F32)
    wq, wk, wv = (make((16, 16), F32, low=-0.3, high=0.3, seed=s) for s in (1, 2, 3))
    w1, w2 = make((32, 16), F32, low=-0.3, high=0.3, seed=4), make((16, 32), F32, low=-0.3, high=0.3, seed=5)
    g, bb = make((16,), F32, seed=6), make((16,), F32, seed=7)
    tgt = torch.tensor([1, 3])

    def block(x, wq, wk, wv, w1, w2, g, bb):
        h = F.layer_norm(x, (16,), g, bb)
        q, k, v = h @ wq, h @ wk, h @ wv
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(16.0), dim=-1)
        mask = torch.triu(torch.ones(5, 5, dtype=torch.bool, device=x.device), 1)
        att = att.masked_fill(mask, 0.0)
        y = x + att @ v
        y = y + F.linear(F.gelu(F.linear(y, w1)), w2)
        return F.cross_entropy(y.mean(1), tgt.to(x.device))

    run_case(block, [x, wq, wk, wv, w1, w2, g, bb], F32, grad=True)


# ---------------------------------------------------------------- shape

@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL])
def test_shape_ops(dtype):
    grad = dtype == F32
    a, b = make((2, 3), dtype), make((4, 3), dtype, seed=1)
    run_case(lambda a, b: torch.cat([a, b]), [a, b], dtype, grad=grad)
    run_case(lambda a, b: torch.cat([a, b.t()], dim=-1), [a, make((3, 2), dtype)], dtype, grad=grad)
    run_case(lambda a, e: torch.cat([a, e, a]), [a, torch.zeros(0, dtype=dtype)], dtype)
    run_case(lambda a: torch.stack([a, a], dim=1), [a], dtype, grad=grad)
    run_case(lambda a: torch.flip(a, [0, 1]), [a], dtype, grad=grad)
    run_case(lambda a: torch.roll(a, 1, 1), [a], dtype, grad=grad)
    run_case(lambda a: torch.roll(a, -2), [a], dtype, grad=grad)
    run_case(lambda a: torch.tril(a), [make((3, 4), dtype)], dtype, grad=grad)
    run_case(lambda a: torch.triu(a, 1), [make((2, 3, 3), dtype)], dtype, grad=grad)
    run_case(lambda a: a.repeat(2, 1, 3), [a], dtype, grad=grad)
    if dtype != BOOL:
        run_case(lambda a: F.pad(a, (1, 2, 0, 1), value=3), [a], dtype, grad=grad)
        run_case(lambda a: F.pad(a, (-1, 1)), [a], dtype, grad=grad)
    idx = torch.tensor([[0, 2, 1], [1, 1, 0]])
    run_case(lambda a, i: torch.gather(a, 1, i), [a, idx], dtype, grad=grad)
    run_case(lambda a, i, s: a.scatter(1, i[:, :2], s), [a, idx, make((2, 3), dtype, seed=4)], dtype)
    if dtype != BOOL:
        run_case(lambda a, i, s: a.scatter_add(0, i % 2, s), [a, idx, make((2, 3), dtype, seed=4)], dtype, grad=grad)


@pytest.mark.parametrize("dtype", [F32, I64])
def test_indexing(dtype):
    grad = dtype == F32
    x = make((4, 5, 3), dtype)
    i = torch.tensor([3, 0, -1])
    run_case(lambda x, i: x[i], [x, i], dtype, grad=grad)
    run_case(lambda x, i: x[:, i], [x, i], dtype, grad=grad)
    run_case(lambda x, i: x[i, :, i % 3], [x, i], dtype, grad=grad)
    run_case(lambda x, i: x[1:, i[:2]], [x, i], dtype, grad=grad)

    def put(x, i, v):
        y = x.clone()
        y[i] = v
        return y

    run_case(put, [x, i, make((5, 3), dtype, seed=2)], dtype, grad=grad)
    run_case(lambda x, i, v: x.index_put((i,), v, accumulate=True), [x, torch.tensor([1, 1, 2]), make((3, 5, 3), dtype)],
             dtype, grad=grad)

    def mask_fill(x, m):
        y = x.clone()
        y[m] = 0
        return y

    run_case(mask_fill, [x, x > 0], dtype)


def test_sort_topk():
    x = make((3, 6), F32)
    run_case(lambda x: torch.sort(x, dim=1), [x], F32)
    run_case(lambda x: torch.sort(x, dim=0, descending=True), [x], F32)
    run_case(lambda x: torch.topk(x, 2, dim=1), [x], F32, grad=True)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_topk_partial_sort_matches_cpu(dtype):
    """topk of a floating tensor (a partial sort on the device): NaN of either sign rank above +inf, smallest-k,
    a middle dimension, k = the whole dimension; distinct values so that the indices are determined."""
    torch.manual_seed(0)
    x = (torch.randperm(7 * 9 * 5).reshape(7, 9, 5) / 4 - 40).to(dtype)  # exact in bfloat16 too
    x[0, 3, 1] = float("nan")
    x[2, 5, 4] = -float("nan")
    x[3, 0, 0] = float("inf")
    x[4, 1, 2] = -float("inf")
    t = x.to("tpu")
    for k, dim, largest in [(3, -1, True), (3, -1, False), (4, 1, True), (2, 0, False), (5, 2, True), (9, 1, False)]:
        ref = torch.topk(x, k, dim=dim, largest=largest)
        got = torch.topk(t, k, dim=dim, largest=largest)
        assert torch.equal(got.values.cpu().nan_to_num(1e4), ref.values.nan_to_num(1e4)), (k, dim, largest)
        assert torch.equal(got.indices.cpu(), ref.indices), (k, dim, largest)


# ---------------------------------------------------------------- factory / random

def test_factory():
    for dtype in (F32, BF16, I64, BOOL):
        torch_tpu.reset_fallback_counts()
        assert torch.equal(torch.full((2, 3), 7, dtype=dtype, device="tpu").cpu(), torch.full((2, 3), 7, dtype=dtype))
        assert not _fallbacks(), _fallbacks()
        x = torch.zeros(2, 3, dtype=dtype, device="tpu")
        x.fill_(1)
        assert torch.equal(x.cpu(), torch.ones(2, 3, dtype=dtype))
    for args in ((5,), (1, 4, 0.5), (-3, 3, 2), (0.0, 1.0, 0.1)):
        torch_tpu.reset_fallback_counts()
        torch.testing.assert_close(torch.arange(*args, device="tpu").cpu(), torch.arange(*args))
        assert not _fallbacks(), _fallbacks()
    torch.testing.assert_close(torch.arange(4, dtype=F32, device="tpu").cpu(), torch.arange(4, dtype=F32))


def test_random_ops_ranges_and_seed():
    torch.manual_seed(123)
    torch_tpu.reset_fallback_counts()
    u = torch.empty(10000, device="tpu").uniform_(-2, 3).cpu()
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.1
    n = torch.empty(10000, device="tpu").normal_(1, 2).cpu()
    assert abs(n.mean() - 1) < 0.1 and abs(n.std() - 2) < 0.1
    b = torch.empty(10000, device="tpu").bernoulli_(0.3).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.03
    r = torch.empty(10000, dtype=I64, device="tpu").random_(-2, 5).cpu()
    assert set(r.unique().tolist()) == set(range(-2, 5))
    d, = [F.dropout(torch.ones(10000, device="tpu"), 0.25, training=True).cpu()]
    assert all(v == 0 or abs(v - 4 / 3) < 1e-6 for v in d.unique().tolist()) and abs((d > 0).float().mean() - 0.75) < 0.03
    assert not _fallbacks(), _fallbacks()
    torch.manual_seed(7)
    a = torch.rand(5, device="tpu").cpu()
    torch.manual_seed(7)
    c = torch.rand(5, device="tpu").cpu()
    assert torch.equal(a, c)


# ---- regressions found by the soak test and the OpInfo sweep ----


def test_group_norm_matches_cpu_formula_with_infinite_weight():
    # CPU computes x * (rstd * w) + (b - mean * rstd * w): an infinite weight gives NaN there, not +-inf
    x = torch.randn(2, 4, 3, 4)
    w, b = torch.ones(4), torch.zeros(4)
    w[1] = float("inf")
    for dt in (F32, BF16):
        ref = F.group_norm(x.to(dt), 2, w.to(dt), b.to(dt))
        got = F.group_norm(x.to(dt).to("tpu"), 2, w.to(dt).to("tpu"), b.to(dt).to("tpu")).cpu()
        torch.testing.assert_close(got, ref, equal_nan=True, **tight_tol(dt))


def test_native_dropout_backward_of_bool_gradients_promotes():
    g = torch.tensor([True, True, False, False])
    m = torch.tensor([True, False, True, False])
    for scale in (2.0, 0.5):
        ref = torch.ops.aten.native_dropout_backward(g, m, scale)
        got = torch.ops.aten.native_dropout_backward(g.to("tpu"), m.to("tpu"), scale).cpu()
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got, ref)


def test_max_unpool_on_device():
    torch_tpu.reset_fallback_counts()
    for pool, unpool, shape in ((F.max_pool2d, F.max_unpool2d, (2, 3, 8, 6)),
                                (F.max_pool3d, F.max_unpool3d, (2, 2, 4, 6, 4))):
        x = torch.randn(shape)
        y, i = pool(x, 2, return_indices=True)
        ref = unpool(y, i, 2, output_size=shape[2:])
        got = unpool(y.to("tpu"), i.to("tpu"), 2, output_size=shape[2:]).cpu()
        torch.testing.assert_close(got, ref)
    assert torch_tpu.fallback_counts() == {}


@pytest.mark.parametrize("name,args,mean,std", [
    ("cauchy_", (1.0, 2.0), None, None),
    ("log_normal_", (0.5, 0.25), math.exp(0.5 + 0.25 ** 2 / 2), None),
    ("geometric_", (0.25,), 4.0, math.sqrt(0.75) / 0.25),
    ("exponential_", (2.0,), 0.5, 0.5),
    ("uniform_", (-3.0, 5.0), 1.0, 8 / math.sqrt(12)),
    ("normal_", (1.0, 3.0), 1.0, 3.0),
])
def test_random_fills_on_device(name, args, mean, std):
    torch.manual_seed(0)
    torch_tpu.reset_fallback_counts()
    x = getattr(torch.empty(200000, device="tpu"), name)(*args).cpu().double()
    assert torch_tpu.fallback_counts() == {}
    ref = getattr(torch.empty(200000, dtype=torch.float64), name)(*args)
    torch.testing.assert_close(x.median(), ref.median(), rtol=0.02, atol=0.02)
    if mean is not None:
        torch.testing.assert_close(x.mean(), torch.tensor(mean, dtype=torch.float64), rtol=0.02, atol=0.02)
    if std is not None:
        torch.testing.assert_close(x.std(), torch.tensor(std, dtype=torch.float64), rtol=0.02, atol=0.02)
    if name == "geometric_":
        assert bool((x >= 1).all()) and bool((x == x.round()).all())


def test_normal_with_tensor_mean_on_device():
    torch.manual_seed(0)
    torch_tpu.reset_fallback_counts()
    mean = torch.linspace(-5, 5, 100000, device="tpu")
    z = (torch.normal(mean, 0.5) - mean).cpu()
    assert torch_tpu.fallback_counts() == {}
    assert abs(z.mean().item()) < 0.01 and abs(z.std().item() - 0.5) < 0.01


def test_index_reduce_and_one_index_writes_match_cpu():
    """Integer index_reduce(mean) floors like CPU; one-index index_copy_/index_add_ (a KV cache update) write only
    their slice."""
    self_ = torch.tensor([[-7, 5, 3], [4, -9, 2], [1, 1, 1]])
    src = torch.tensor([[2, -4, 6], [-3, 3, 0]])
    idx = torch.tensor([0, 0])
    for include_self in (True, False):
        ref = self_.index_reduce(0, idx, src, "mean", include_self=include_self)
        got = self_.to("tpu").index_reduce(0, idx.to("tpu"), src.to("tpu"), "mean", include_self=include_self)
        assert torch.equal(got.cpu(), ref), include_self
    cache = torch.randn(2, 3, 8, 4)
    new = torch.randn(2, 3, 1, 4)
    t = cache.to("tpu")
    t.index_copy_(2, torch.tensor([5], device="tpu"), new.to("tpu"))
    t.index_add_(2, torch.tensor([7], device="tpu"), new.to("tpu"), alpha=2)
    ref = cache.clone().index_copy_(2, torch.tensor([5]), new).index_add_(2, torch.tensor([7]), new, alpha=2)
    torch.testing.assert_close(t.cpu(), ref)


def test_inference_products_read_packed_weights():
    """With autograd off, a product reading an nn.Linear weight transposed (addmm, mm) reads the weight's packed
    copy on the CPU plugin: results as on CPU, one copy per weight buffer, a fresh one after the weight is written,
    none with autograd on."""
    torch.manual_seed(0)
    w, bias, x = torch.randn(48, 32), torch.randn(48), torch.randn(5, 32)
    wt, bt, xt = w.to("tpu"), bias.to("tpu"), x.to("tpu")
    stats = lambda: torch_tpu.cache_stats()["packed_weights"]  # noqa: E731
    n0 = stats()
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(torch.nn.functional.linear(xt, wt, bt).cpu(), x @ w.t() + bias)
        assert stats() - n0 == 1
        torch.testing.assert_close((xt @ wt.t()).cpu(), x @ w.t())  # mm: the same copy
        assert stats() - n0 == 1
        wt.mul_(2)
        torch.testing.assert_close(torch.nn.functional.linear(xt, wt, bt).cpu(), x @ (2 * w).t() + bias)
        assert stats() - n0 == 2
    wg = wt.detach().clone().requires_grad_()
    torch.nn.functional.linear(xt, wg, bt).sum().backward()  # autograd on: the weight is read as it is
    assert stats() - n0 == 2
    torch.testing.assert_close(wg.grad.cpu(), torch.ones(5, 48).t() @ x)


@pytest.mark.parametrize("x,w,minlength", [
    ([1, 2, 2, 5], None, 0), ([1, 2, 2, 5], None, 10), ([0, 3, 3], [0.5, 1.5, 2.0], 0),
    ([0, 3, 3], torch.tensor([1, 2, 3]), 2), ([0, 3, 3], torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64), 0),
    ([0, 3, 3], torch.tensor([0.5, 1.5, 2.0], dtype=torch.half), 0), ([], None, 3)])
def test_bincount_on_device_as_cpu(strict_fallback, x, w, minlength):
    # bincount's size depends on the data: one host read of min/max, the counts on the device
    x = torch.tensor(x, dtype=torch.long)
    w = torch.tensor(w) if isinstance(w, list) else w
    expected = torch.bincount(x, w, minlength)
    got = torch.bincount(x.to("tpu"), None if w is None else w.to("tpu"), minlength)
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("x,w,minlength", [
    (torch.tensor([-1, 2]), None, 0), (torch.tensor([[1, 2]]), None, 0), (torch.tensor([1, 2]), None, -1),
    (torch.tensor([1, 2]), torch.tensor([1.0]), 0), (torch.tensor([1.0, 2.0]), None, 0)])
def test_bincount_errors_as_cpu(x, w, minlength):
    with pytest.raises(Exception) as cpu:
        torch.bincount(x, w, minlength)
    with pytest.raises(type(cpu.value)) as tpu:
        torch.bincount(x.to("tpu"), None if w is None else w.to("tpu"), minlength)
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_embedding_max_norm_renormalizes_on_device(strict_fallback, norm_type):
    # nn.Embedding(max_norm=...) renormalizes the looked-up rows of the weight in place (embedding_renorm_), each row
    # once however often it is named
    torch.manual_seed(0)
    w = torch.randn(10, 4) * 2
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])
    wc, wt = w.clone(), w.to("tpu")
    expected = F.embedding(idx, wc, max_norm=1.5, norm_type=norm_type)
    got = F.embedding(idx.to("tpu"), wt, max_norm=1.5, norm_type=norm_type)
    torch.testing.assert_close(wt.cpu(), wc, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got.cpu(), expected, atol=1e-6, rtol=1e-6)
    assert torch.equal(wt.cpu()[2], w[2])  # rows not named are untouched


_CORNERS = torch.tensor([-20.0, -6.0, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, 20.0])


@pytest.mark.parametrize("name,fn", [
    ("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid), ("hardtanh", F.hardtanh), ("relu6", F.relu6),
    ("relu", F.relu), ("hardshrink", lambda x: F.hardshrink(x, 0.5)), ("softshrink", lambda x: F.softshrink(x, 0.5)),
    ("threshold", lambda x: F.threshold(x, 1.0, 2.0)), ("leaky_relu", F.leaky_relu), ("elu", F.elu),
    ("celu", F.celu), ("selu", F.selu), ("softplus", lambda x: F.softplus(x, 2.0, 1.0)),
    ("clamp", lambda x: x.clamp(-1, 1)), ("abs", torch.abs),
])
def test_activation_gradients_at_their_corners(name, fn):
    # the gradient exactly at each breakpoint is CPU's (hardswish at -3 and 3: 0 and 1, as torch 2.13's kernel)
    grads = []
    for dev in ("cpu", "tpu"):
        x = _CORNERS.clone().to(dev).requires_grad_()
        fn(x).sum().backward()
        grads.append(x.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])
