"""out= into non-contiguous views: the op writes exactly the view's elements, in the view's logical order, and leaves
the rest of its storage alone, as on CPU. Output layouts: narrowed (an offset and a row stride), transposed
(permuted strides), strided (every other element). Factories with out= (arange, linspace, logspace, full, zeros,
ones, eye, randperm's shape) and a walk of the OpInfos that support out= (first sample) against CPU.
"""

from __future__ import annotations

import warnings

import pytest
import torch

TPU = "tpu"
SENTINEL = 7

LAYOUTS = ("narrowed", "transposed", "strided")


def _out_like(shape, dtype, device, layout):
    """A view of `shape` in `layout` over a larger storage filled with SENTINEL; returns (base, view)."""
    shape = tuple(shape)
    if len(shape) == 0:
        base = torch.full((3,), SENTINEL, dtype=dtype, device=device)
        return base, base[1]
    if layout == "narrowed":
        base = torch.full(shape[:-1] + (shape[-1] + 3,), SENTINEL, dtype=dtype, device=device)
        return base, base.narrow(-1, 1, shape[-1])
    if layout == "strided":
        base = torch.full(shape[:-1] + (shape[-1] * 2 + 1,), SENTINEL, dtype=dtype, device=device)
        return base, base[..., 1::2]
    # transposed: the storage holds the reversed dimensions (1-d: a column of a 2-d storage)
    if len(shape) == 1:
        base = torch.full((shape[0], 2), SENTINEL, dtype=dtype, device=device)
        return base, base[:, 1]
    base = torch.full(shape[::-1], SENTINEL, dtype=dtype, device=device)
    return base, base.permute(*reversed(range(len(shape))))


def _compare(got_base, want_base, what):
    got = got_base.cpu()
    assert got.dtype == want_base.dtype, what
    if got.is_floating_point() or got.is_complex():
        torch.testing.assert_close(got, want_base, equal_nan=True, atol=1e-4, rtol=1e-4, msg=what)
    else:
        assert torch.equal(got, want_base), f"{what}:\n{got}\nvs\n{want_base}"


def _run_out(fn, outs_cpu_shape_dtype, layout, wants=None):
    """Runs fn(out=...) on CPU and tpu with `layout` outputs and compares the whole storages with CPU's. Given `wants`
    (the functional results on CPU), the tpu may instead equal those copied into CPU views of the same layout: the
    reference for ops whose CPU out= kernel mishandles non-contiguous outputs (gelu, narrow_copy and avg_pool3d on
    torch 2.13 write nothing or write as if the view were contiguous)."""
    bases = {}
    for dev in ("cpu", TPU):
        made = [_out_like(s, d, dev, layout) for s, d in outs_cpu_shape_dtype]
        views = [v for _, v in made]
        out = views[0] if len(views) == 1 else tuple(views)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(dev, out)
        bases[dev] = [b for b, _ in made]
    correct = None
    if wants is not None:
        made = [_out_like(s, d, "cpu", layout) for s, d in outs_cpu_shape_dtype]
        for (_, v), w in zip(made, wants):
            v.copy_(w)
        correct = [b for b, _ in made]
    for i, (g, w) in enumerate(zip(bases[TPU], bases["cpu"])):
        try:
            _compare(g, w, f"{layout} output {i}")
        except AssertionError:
            if correct is None:
                raise
            _compare(g, correct[i], f"{layout} output {i} (neither CPU's out= result nor the functional result)")


# ---- factories with out= ----

FACTORIES = {
    "arange": (lambda d, out: torch.arange(4, out=out), [((2, 2), torch.int64)]),
    "arange_1d": (lambda d, out: torch.arange(1, 9, 2, out=out), [((4,), torch.float32)]),
    "arange_float": (lambda d, out: torch.arange(0.0, 3.0, 0.5, out=out), [((2, 3), torch.float32)]),
    "linspace": (lambda d, out: torch.linspace(-1, 1, 6, out=out), [((6,), torch.float32)]),
    "linspace_int": (lambda d, out: torch.linspace(1, 127, 50, out=out), [((50,), torch.int16)]),
    "linspace_2d": (lambda d, out: torch.linspace(0, 5, 6, out=out), [((2, 3), torch.float32)]),
    "logspace": (lambda d, out: torch.logspace(0, 2, 5, out=out), [((5,), torch.float32)]),
    "full": (lambda d, out: torch.full((2, 3), 2.5, out=out), [((2, 3), torch.float32)]),
    "zeros": (lambda d, out: torch.zeros((3, 2), out=out), [((3, 2), torch.float32)]),
    "ones": (lambda d, out: torch.ones((3, 2), out=out), [((3, 2), torch.int32)]),
    "eye": (lambda d, out: torch.eye(3, 4, out=out), [((3, 4), torch.float32)]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory_out_view(name, layout):
    fn, outs = FACTORIES[name]
    _run_out(fn, outs, layout)


def test_arange_out_narrow_issue_example():
    x = torch.zeros(2, 3, device=TPU)
    torch.arange(4, out=x.narrow(1, 1, 2))
    assert x.cpu().tolist() == [[0, 0, 1], [0, 2, 3]]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_randperm_out_view(layout):
    base, view = _out_like((6,), torch.int64, TPU, layout)
    torch.randperm(6, out=view)
    assert sorted(view.cpu().tolist()) == list(range(6))
    ids, vids = _out_like((6,), torch.int64, "cpu", layout)
    ids.copy_(torch.arange(ids.numel()).view(ids.shape))
    inside = set(vids.flatten().tolist())
    flat = base.cpu().flatten().tolist()
    assert all(v == SENTINEL for i, v in enumerate(flat) if i not in inside)


# ---- ops with out= (a fixed set here; every OpInfo below, marked slow) ----

def _opinfo_cases(names=None):
    from torch.testing._internal.common_methods_invocations import op_db

    skip = {"randn", "normal", "bernoulli", "multinomial", "empty", "hash_tensor", "histogram", "histogramdd",
            "sparse.sampled_addmm", "torch._scaled_mm", "torch._scaled_mm_v2", "geqrf", "linalg.eig",
            "linalg.eigvals", "linalg.lstsq", "svd", "linalg.svd", "qr", "linalg.qr", "lu", "linalg.lu",
            "linalg.lu_factor", "linalg.lu_factor_ex", "linalg.ldl_factor", "linalg.ldl_factor_ex", "linalg.eigh",
            "equal"}
    out = []
    for op in op_db:
        full = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
        if not op.supports_out or op.name in skip or full in skip:
            continue
        if names is not None and full not in names:
            continue
        out.append(pytest.param(op, id=full))
    return out


FAST_OPS = {"add", "neg", "exp", "where", "sum", "max.reduction_with_dim", "cumsum", "mm", "cat", "index_select",
            "sort", "softmax", "pow", "clamp", "aminmax"}


def _check_op_out(op, layout):
    dtype = torch.float32 if torch.float32 in op.supported_dtypes("cpu") else sorted(
        op.supported_dtypes("cpu"), key=str)[0]
    torch.manual_seed(0)
    sample = next(iter(op.sample_inputs("cpu", dtype, requires_grad=False)))

    def call(dev, out):
        s = sample.transform(lambda t: t.to(dev) if isinstance(t, torch.Tensor) else t)
        kwargs = dict(s.kwargs)
        if "device" in kwargs:  # factories' samples name the device they were made for
            kwargs["device"] = dev
        return op.op(s.input, *s.args, **kwargs, out=out)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = op.op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            return  # the functional call itself is not supported on CPU for this sample
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    if not all(isinstance(w, torch.Tensor) for w in wants):
        return
    outs = [(tuple(w.shape), w.dtype) for w in wants]
    if len(outs) == 1 and not isinstance(want, (tuple, list)):
        pass
    # CPU's verdict on the out= call decides the tpu's
    try:
        _out_like_cpu = [_out_like(s, d, "cpu", layout)[1] for s, d in outs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call("cpu", _out_like_cpu[0] if len(outs) == 1 and not isinstance(want, (tuple, list))
                 else tuple(_out_like_cpu))
    except Exception as e:
        with pytest.raises(type(e)):
            views = [_out_like(s, d, TPU, layout)[1] for s, d in outs]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call(TPU, views[0] if len(outs) == 1 and not isinstance(want, (tuple, list)) else tuple(views))
                torch.tpu.synchronize()
        return
    single = len(outs) == 1 and not isinstance(want, (tuple, list))
    _run_out(lambda dev, out: call(dev, out[0] if single and isinstance(out, tuple) else out), outs, layout,
             wants=wants)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", _opinfo_cases(FAST_OPS))
def test_op_out_view(op, layout):
    _check_op_out(op, layout)


def _rotating_cases():
    """Every OpInfo with out=, each in one of the three layouts in turn (the fixed set above runs all three): the walk
    compiles every op's programs afresh, and three layouts each would triple its share of the suite's time."""
    cases = _opinfo_cases()
    return [pytest.param(c.values[0], LAYOUTS[i % len(LAYOUTS)], id=f"{c.id}-{LAYOUTS[i % len(LAYOUTS)]}")
            for i, c in enumerate(cases)]


@pytest.mark.slow
@pytest.mark.parametrize("op,layout", _rotating_cases())
def test_every_opinfo_out_view(op, layout):
    _check_op_out(op, layout)
