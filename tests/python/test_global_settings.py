"""torch's global settings between two identical calls: every cache that decides a program or a result type (the
eager call signature, fused traces, compiled graphs and their shape specialisations) keys on the settings that
change the result (core/global_state.h), so a setting flipped between two identical calls gives CPU's result for
the new setting, not the program built under the old one.

Settings: the default dtype (Python floats and complex numbers in type promotion, integer division, factories),
deterministic mode (uninitialized memory filled as CPU does), float32 matmul precision, autocast.
"""

from __future__ import annotations

import pytest
import torch

import torch_tpu

TPU = "tpu"


@pytest.fixture(autouse=True)
def restore_settings():
    dtype = torch.get_default_dtype()
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    precision = torch.get_float32_matmul_precision()
    mode = torch_tpu.eager_mode()
    yield
    torch.set_default_dtype(dtype)
    torch.use_deterministic_algorithms(det, warn_only=warn_only)
    torch.set_float32_matmul_precision(precision)
    torch_tpu.set_eager_mode(mode)


# Each case: (inputs on a device, function of the inputs). The functions use Python numbers and factories whose
# result type follows the default dtype.
CASES = {
    "uint8_plus_float": (lambda d: [torch.arange(4, dtype=torch.uint8, device=d)], lambda x: x + 5.5),
    "int_div": (lambda d: [torch.tensor([3, 7, -9], device=d), torch.tensor([2, 4, 4], device=d)],
                lambda a, b: a / b),
    "int_true_divide_scalar": (lambda d: [torch.tensor([1, 2, 3], device=d)], lambda a: torch.div(a, 3)),
    "arange_float_step": (lambda d: [torch.ones(1, device=d)], lambda x: torch.arange(0, 1, 0.5, device=x.device)),
    "complex_times_ones": (lambda d: [torch.ones(2, 3, device=d)], lambda x: 1j * x),
    "int_times_tenth": (lambda d: [torch.arange(6, device=d)], lambda x: x * 0.1),
    "full_python_float": (lambda d: [torch.ones(1, device=d)],
                          lambda x: torch.full((3,), 1.0 / 3.0, device=x.device) + x.to(torch.int64)),
    "int_sqrt": (lambda d: [torch.arange(5, device=d)], lambda x: torch.sqrt(x)),
}


def _runner(mode: str, fn):
    if mode == "compiled":
        return torch.compile(fn, backend="tpu", dynamic=False)
    return fn


def _check(case: str, mode: str, fn, make):
    run = _runner(mode, fn)
    cpu = fn(*make("cpu"))
    got = run(*make(TPU))
    assert got.dtype == cpu.dtype, (case, mode, torch.get_default_dtype(), got.dtype, cpu.dtype)
    torch.testing.assert_close(got.cpu(), cpu, rtol=0, atol=0) if not cpu.is_floating_point() and not cpu.is_complex() \
        else torch.testing.assert_close(got.cpu(), cpu)


@pytest.mark.parametrize("mode", ["strict", "fused", "compiled"])
def test_default_dtype_flip(mode, fresh_dynamo):
    torch_tpu.set_eager_mode("fused" if mode == "fused" else "strict")
    for case, (make, fn) in CASES.items():
        # the same call under float32, float64, float32 again: each must give the CPU's result for that default
        for dtype in (torch.float32, torch.float64, torch.float32):
            torch.set_default_dtype(dtype)
            _check(case, mode, fn, make)
            if mode == "fused":
                torch.tpu.synchronize()


def test_default_dtype_fused_in_one_trace():
    """A fused trace recorded under one default and replayed under another: the per-op programs differ, so the
    trace key does."""
    torch_tpu.set_eager_mode("fused")
    x = torch.arange(4, device=TPU)
    xc = torch.arange(4)
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        torch.set_default_dtype(dtype)
        for _ in range(3):  # a loop: the trace repeats, and its fused program is built
            got = (x / 3 + 0.1).cpu()
            want = xc / 3 + 0.1
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want)


def test_shape_specialization_keys_on_default_dtype(fresh_dynamo):
    """dynamic=True graphs are specialised per input signature in Python: the default dtype is part of that key."""
    fn = torch.compile(lambda x: x * 0.5 + torch.arange(x.shape[0], device=x.device) / 7, backend="tpu",
                       dynamic=True)
    for dtype in (torch.float32, torch.float64, torch.float32):
        torch.set_default_dtype(dtype)
        for n in (3, 5):
            x = torch.arange(n, dtype=torch.int32)
            want = x * 0.5 + torch.arange(n) / 7
            got = fn(x.to(TPU))
            assert got.dtype == want.dtype, (dtype, got.dtype)
            torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_deterministic_fill_uninitialized(mode):
    """With torch.use_deterministic_algorithms(True), empty tensors and the elements resize_ adds are NaN (integers:
    their maximum), as on CPU; off again, the same calls give uninitialized memory again (no check of its values)."""
    torch_tpu.set_eager_mode(mode)
    for det in (False, True, False, True):
        torch.use_deterministic_algorithms(det)
        for dtype in (torch.float32, torch.int32, torch.bool, torch.bfloat16):
            got = torch.empty(5, dtype=dtype, device=TPU).cpu()
            if det:
                torch.testing.assert_close(got, torch.empty(5, dtype=dtype), equal_nan=True)
            got_s = torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=TPU).cpu()
            if det:
                torch.testing.assert_close(got_s, torch.empty_strided((2, 3), (1, 2), dtype=dtype), equal_nan=True)
        t = torch.ones(2, device=TPU)
        c = torch.ones(2)
        t.resize_(6)
        c.resize_(6)
        if det:
            torch.testing.assert_close(t.cpu(), c, equal_nan=True)
        else:
            assert t.cpu()[:2].tolist() == [1.0, 1.0]


def test_settings_change_the_eager_key():
    """Each setting is part of the eager call signature: flipping it misses the cache once, flipping it back hits."""
    torch_tpu.set_eager_mode("strict")
    x = torch.ones(3, 3, device=TPU)

    def misses_of(call):
        before = torch_tpu.cache_stats()["misses"]
        call()
        return torch_tpu.cache_stats()["misses"] - before

    call = lambda: torch.mm(x, x).add(1.5)  # noqa: E731
    call()
    assert misses_of(call) == 0
    flips = [
        (lambda: torch.use_deterministic_algorithms(True), lambda: torch.use_deterministic_algorithms(False)),
        (lambda: torch.use_deterministic_algorithms(True, warn_only=True),
         lambda: torch.use_deterministic_algorithms(False)),
        (lambda: torch.set_float32_matmul_precision("medium"),
         lambda: torch.set_float32_matmul_precision("highest")),
        (lambda: torch.set_default_dtype(torch.float64), lambda: torch.set_default_dtype(torch.float32)),
    ]
    torch.set_float32_matmul_precision("highest")
    call()
    for on, off in flips:
        on()
        assert misses_of(call) > 0
        assert misses_of(call) == 0
        off()
        assert misses_of(call) == 0


def test_autocast_flip_compiled(fresh_dynamo):
    """A compiled product called without and with torch.autocast("tpu"): the result dtype follows autocast, as
    CPU's does under torch.autocast("cpu")."""
    fn = torch.compile(lambda a, b: a @ b + 1, backend="tpu", dynamic=False)
    a, b = torch.randn(4, 8), torch.randn(8, 4)
    ta, tb = a.to(TPU), b.to(TPU)
    for on in (False, True, False):
        with torch.autocast(TPU, dtype=torch.bfloat16, enabled=on):
            got = fn(ta, tb)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
            want = a @ b + 1
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu().float(), want.float(), rtol=2e-2, atol=5e-2)
