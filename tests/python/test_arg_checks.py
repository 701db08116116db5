"""Argument checks and warnings PyTorch's CPU kernels give (not only their meta kernels): the same call on tpu raises
the same exception type, or gives the same warning, as on CPU; valid neighbours of each bad call still run on the
device. Each bad call is made twice (a cached program must not skip a check that depends on values).
"""

from __future__ import annotations

import warnings

import pytest
import torch

TPU = "tpu"


def _outcome(fn, device):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(device)
            if isinstance(r, torch.Tensor) and r.device.type == TPU:
                r = r.cpu()
            err = None
        except Exception as e:  # noqa: BLE001
            r, err = None, e
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning) and "tpu:" not in str(x.message)]
    return r, err, msgs


def _same_as_cpu(fn, compare_values=True):
    r_cpu, e_cpu, w_cpu = _outcome(fn, "cpu")
    for _ in range(2):
        r, e, w = _outcome(fn, TPU)
        if e_cpu is not None:
            assert e is not None and type(e) is type(e_cpu), f"CPU raised {e_cpu!r}; tpu: {e!r}"
        else:
            assert e is None, f"tpu raised {e!r}; CPU did not"
            if compare_values and isinstance(r_cpu, torch.Tensor):
                torch.testing.assert_close(r, r_cpu)
        for m in w_cpu:
            assert any(m[:40] in x for x in w), f"CPU warned {m!r}; tpu warned {w}"
    return e_cpu, w_cpu


RANDOM_CASES = {
    "random_uint8_to_300": lambda d: torch.empty(3, dtype=torch.uint8, device=d).random_(0, 300),
    "random_uint8_from_neg": lambda d: torch.empty(3, dtype=torch.uint8, device=d).random_(-1, 100),
    "random_int8_to": lambda d: torch.empty(3, dtype=torch.int8, device=d).random_(300),
    "random_half_to": lambda d: torch.empty(3, dtype=torch.float16, device=d).random_(0, 70000),
    "random_float_beyond_digits": lambda d: torch.empty(3, device=d).random_(0, 2**25),
    "random_empty_range": lambda d: torch.empty(3, device=d).random_(5, 5),
    "random_to_zero": lambda d: torch.empty(3, device=d).random_(0),
    "random_bool": lambda d: torch.empty(3, dtype=torch.bool, device=d).random_(0, 3),
    "uniform_half_bounds": lambda d: torch.empty(3, dtype=torch.float16, device=d).uniform_(-1e6, 1e6),
    "uniform_float_bounds": lambda d: torch.empty(3, device=d).uniform_(-1e39, 1),
    "uniform_range_overflow": lambda d: torch.empty(3, device=d).uniform_(-3e38, 3e38),
    "uniform_reversed": lambda d: torch.empty(3, device=d).uniform_(2, 1),
}


@pytest.mark.parametrize("name", sorted(RANDOM_CASES))
def test_random_bounds(name):
    e, w = _same_as_cpu(RANDOM_CASES[name], compare_values=False)
    assert e is not None or w, "the case must be one CPU rejects or warns about"


def test_random_bounds_valid_neighbours_run_on_device():
    torch.manual_seed(0)
    x = torch.empty(1000, dtype=torch.uint8, device=TPU).random_(0, 256).cpu()
    assert x.min() >= 0 and x.max() <= 255 and x.max() > 200
    h = torch.empty(1000, dtype=torch.float16, device=TPU).uniform_(-30000, 30000).cpu()
    assert h.abs().max() <= 30000 and h.abs().max() > 1000
    i = torch.empty(100, dtype=torch.int8, device=TPU).random_(-128, 128).cpu()
    assert i.min() >= -128 and i.max() <= 127


CHECK_CASES = {
    "add_bool_float_alpha": lambda d: torch.add(torch.tensor([True], device=d), torch.tensor([True], device=d),
                                                alpha=1.1),
    "add_int_float_alpha": lambda d: torch.add(torch.tensor([1], device=d), torch.tensor([1], device=d), alpha=1.5),
    "sub_int_float_alpha": lambda d: torch.sub(torch.tensor([1], device=d), torch.tensor([1], device=d), alpha=0.5),
    "repeat_interleave_negative": lambda d: torch.repeat_interleave(torch.tensor([1, 2], device=d),
                                                                    torch.tensor([1, -1], device=d)),
    "unary_out_cannot_cast": lambda d: torch.sin(torch.tensor([1, 2], device=d),
                                                 out=torch.empty(2, dtype=torch.long, device=d)),
    "exp_out_cannot_cast": lambda d: torch.exp(torch.tensor([1.5], device=d),
                                               out=torch.empty(1, dtype=torch.int32, device=d)),
    "index_size0_dim": lambda d: torch.empty(2, 0, device=d)[:, [0, 1]],
    # in-place ops never resize self: a broadcast shape other than self's is an error (not a silent resize)
    **{f"inplace_broadcast_{op}": (lambda op: lambda d: getattr(torch.zeros(1, 3, device=d), op)(
        torch.ones(2, 3, device=d)))(op) for op in ("add_", "atan2_", "eq_", "fmod_", "lt_", "remainder_", "mul_")},
    "index_fill_complex_scalar": lambda d: torch.tensor([[1, 2], [4, 5]], device=d).index_fill_(
        1, torch.tensor([0], device=d), 1 + 1j),
    "index_fill_complex_scalar_float": lambda d: torch.ones(2, 2, device=d).index_fill_(
        0, torch.tensor([1], device=d), 2j),
    "uint8_mask_index": lambda d: torch.tensor([1, 2, 3], device=d)[torch.tensor([1, 0, 1], dtype=torch.uint8,
                                                                                 device=d)],
}


@pytest.mark.parametrize("name", sorted(CHECK_CASES))
def test_cpu_checks(name):
    e, w = _same_as_cpu(CHECK_CASES[name])
    assert e is not None or w, "the case must be one CPU rejects or warns about"


def test_valid_neighbours():
    for fn in (lambda d: torch.add(torch.tensor([1], device=d), torch.tensor([1], device=d), alpha=2),
               lambda d: torch.add(torch.tensor([1.0], device=d), torch.tensor([1.0], device=d), alpha=1.5),
               lambda d: torch.repeat_interleave(torch.tensor([1, 2], device=d), torch.tensor([2, 0], device=d)),
               lambda d: torch.sin(torch.tensor([1, 2], device=d), out=torch.empty(2, device=d)),
               lambda d: torch.empty(2, 3, device=d)[:, [0, 1]].shape,
               lambda d: torch.tensor([1, 2, 3], device=d)[torch.tensor([True, False, True], device=d)],
               lambda d: torch.ones(2, 2, dtype=torch.complex64, device=d).index_fill_(
                   0, torch.tensor([1], device=d), 2j),
               lambda d: torch.ones(2, 2, device=d).index_fill_(0, torch.tensor([1], device=d), 2.5)):
        e, w = _same_as_cpu(fn, compare_values=False)
        assert e is None


def test_index_ops_reject_index_aliasing_self():
    # PyTorch's index_fill_/index_add_/index_copy_ reject an index that is the written tensor itself (any overlap,
    # not only partial); aliasing that CPU accepts (x.mul_(x)) still runs.
    for dev in ("cpu", "tpu"):
        ind = torch.tensor([2, 1, 0], device=dev)
        for f in (lambda: ind.index_fill_(0, ind, 0), lambda: ind.index_add_(0, ind, ind.clone()),
                  lambda: ind.index_add_(0, ind.clone(), ind), lambda: ind.index_copy_(0, ind, ind.clone())):
            with pytest.raises(RuntimeError, match="unsupported operation"):
                f()
        assert ind.tolist() == [2, 1, 0]
    x = torch.full((3,), 3.0, device="tpu")
    x.mul_(x)
    x.add_(x)
    assert x.tolist() == [18.0, 18.0, 18.0]


def test_index_put_into_expanded_tensor_writes_through_aliasing():
    # PyTorch's index_put_ into an expanded tensor warns (deprecated) and writes through the shared memory.
    def f(d):
        x = torch.arange(3.0, device=d).reshape(1, 3).expand(2, 3)
        x.index_put_((torch.tensor([0, 1], device=d),), torch.tensor([[7.0, 8, 9], [4, 5, 6]], device=d))
        x.index_put_((torch.tensor([1], device=d), torch.tensor([2], device=d)), torch.tensor(100.0, device=d),
                     accumulate=True)
        return x.contiguous()

    e, w = _same_as_cpu(f)
    assert e is None and any("expanded tensors" in m for m in w)


def test_overlap_error_comes_before_the_dtype_error_on_fallback_ops():
    # A CPU-fallback op writing through a partial overlap: CPU's overlap check comes before its dtype dispatch.
    def f(d):
        x = torch.arange(4.0, device=d)
        x[:-1] <<= x[1:]
        return x

    e, _ = _same_as_cpu(f)
    assert "unsupported operation" in str(e)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8])
def test_shift_operators_run_on_the_device(dtype):
    import torch_tpu

    torch_tpu.reset_fallback_counts()
    out = {}
    for d in ("cpu", TPU):
        y = torch.tensor([1, 2, 3, -4], device=d).to(dtype)
        s = torch.tensor([1, 2, 0, 1], device=d).to(dtype)
        a = y.clone()
        a <<= s
        b = y.clone()
        b >>= 1
        out[d] = [t.cpu() for t in (y << 2, y >> 1, y << s, y >> s, a, b)]
    for r, c in zip(out[TPU], out["cpu"]):
        torch.testing.assert_close(r, c)
    assert not [k for k in torch_tpu.fallback_counts() if "shift" in k], torch_tpu.fallback_counts()


def test_index_put_rejects_values_or_indices_overlapping_self():
    for f in (lambda y, i: y.index_put_((i,), y[0]), lambda y, i: y.index_put_((i,), y[3:6]),
              lambda y, i: i.index_put_((i.clone(),), i), lambda y, i: i.index_put_((i,), i.clone())):
        for dev in ("cpu", TPU):
            y, i = torch.arange(6.0, device=dev), torch.tensor([2, 1, 0], device=dev)
            with pytest.raises(RuntimeError, match="unsupported operation"):
                f(y, i)
    y = torch.arange(6.0, device=TPU)
    y.index_put_((torch.tensor([2, 1, 0], device=TPU),), y[:3].clone())
    assert y.tolist() == [2.0, 1.0, 0.0, 3.0, 4.0, 5.0]


def test_out_dtype_mismatch_of_composite_out_forms_raises_like_cpu():
    # logcumsumexp(out=) with another dtype: CPU raises "expected scalar_type Double but found Float".
    def f(d):
        return torch.logcumsumexp(torch.randn(5, 2, dtype=torch.float64, device=d), 0,
                                  out=torch.zeros(5, 2, device=d))

    e, _ = _same_as_cpu(f)
    assert e is not None and "scalar_type" in str(e)


def test_is_set_to():
    t1 = torch.empty(3, 4, device=TPU)
    t2 = torch.empty(3, 4, device=TPU)
    t3 = torch.tensor([], device=TPU).set_(t1)
    assert t1.is_set_to(t3) and t3.is_set_to(t1) and not t1.is_set_to(t2)
    assert not t1.is_set_to(t3.clone().resize_(12))


def test_put_alerts_under_deterministic_algorithms_like_cpu():
    def f(d):
        a = torch.randn(10, device=d)
        return a.put_(torch.tensor([0, 0], device=d), torch.tensor([0.0, 1.0], device=d))

    torch.use_deterministic_algorithms(True)
    try:
        e, _ = _same_as_cpu(f)
        assert e is not None and "deterministic" in str(e)
        _same_as_cpu(lambda d: torch.zeros(3, device=d).put_(torch.tensor([0, 0], device=d),
                                                             torch.ones(2, device=d), accumulate=True))
        torch.use_deterministic_algorithms(True, warn_only=True)
        e, w = _same_as_cpu(f, compare_values=False)
        assert e is None and any("deterministic" in m for m in w)
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.uint8, torch.bool])
def test_all_any_out_must_be_bool_or_uint8(dtype):
    for fn in (torch.all, torch.any):
        def f(d, fn=fn):
            x = torch.tensor([[1, 0], [2, 3]], device=d).to(dtype)
            return fn(x, 1, out=torch.empty(0, dtype=dtype, device=d))

        e, _ = _same_as_cpu(f)
        assert (e is None) == (dtype in (torch.uint8, torch.bool))


def test_reductions_over_more_than_64_dims_raise_like_cpu():
    t = {d: torch.ones([1] * 65, device=d) for d in ("cpu", TPU)}
    for fn in (lambda d: torch.argmin(t[d], dim=0), lambda d: t[d].sum(0), lambda d: t[d].amax(0)):
        e, _ = _same_as_cpu(fn)
        assert e is not None and "64 dims" in str(e)
    for fn in (lambda d: torch.argmin(t[d]), lambda d: (t[d] + 1).sum()):
        e, _ = _same_as_cpu(fn)
        assert e is None


def _raises_as_cpu(call):
    """call(device) raises a RuntimeError on CPU, and on tpu the same with the same first line."""
    with pytest.raises(RuntimeError) as cpu:
        call("cpu")
    with pytest.raises(RuntimeError) as tpu:
        call(TPU)
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def _bools(d):
    return torch.ones(3, dtype=torch.bool, device=d)


def _longs(d):
    return torch.ones(3, dtype=torch.long, device=d)


@pytest.mark.parametrize("call", [
    lambda d: _bools(d) - 1, lambda d: 1 - _bools(d), lambda d: _longs(d).sub_(_bools(d)), lambda d: _longs(d) - True,
    lambda d: torch.subtract(_longs(d), _bools(d)), lambda d: torch.sub(_longs(d), _bools(d), out=_longs(d)),
    lambda d: _bools(d) - _bools(d),
    lambda d: torch._foreach_sub([torch.ones(1, 1, device=d, dtype=torch.bool).expand(2, 1, 3)], 1),
    lambda d: torch._foreach_sub([torch.ones(3, device=d)], True),
    lambda d: torch._foreach_sub_([_bools(d)], 1),
    lambda d: torch._foreach_sub([_bools(d)], [_bools(d)]),
])
def test_subtraction_with_bool_raises_as_cpu(call):
    # PyTorch's meta kernels accept it (tpu returned integers, also for _foreach_sub: test_foreach); CPU's kernels
    # raise
    _raises_as_cpu(call)


@pytest.mark.parametrize("call", [
    lambda d: torch.ones(2, device=d).add_(torch.ones(2, dtype=torch.cfloat, device=d)),
    lambda d: torch.ones(2, device=d).add_(1j),
    lambda d: torch.ones(2, dtype=torch.long, device=d).add_(torch.ones(2, device=d)),
    lambda d: torch._foreach_add_([torch.ones(2, device=d)], 1j),
    lambda d: torch._foreach_mul_([torch.ones(2, dtype=torch.long, device=d)], 1.5),
    lambda d: torch._foreach_mul_([torch.ones(2, dtype=torch.long, device=d)], [1.5]),
    lambda d: torch.zeros(3, dtype=torch.long, device=d).index_add_(0, torch.tensor([0], device=d),
                                                                     torch.ones(1, device=d)),
])
def test_in_place_result_type_must_cast_into_self(call):
    # float.add_(complex) dropped the imaginary part on tpu; index_add_ took a float source into a long self
    _raises_as_cpu(call)


def test_in_place_casts_that_cpu_allows_still_run():
    a = torch.ones(2, device="tpu")
    a.add_(torch.ones(2, dtype=torch.long, device="tpu")).add_(torch.ones(2, dtype=torch.double, device="tpu"))
    assert a.dtype == torch.float32 and a.tolist() == [3.0, 3.0]
    c = torch.ones(2, dtype=torch.cfloat, device="tpu").add_(1j)
    assert c.tolist() == [1 + 1j, 1 + 1j]
