"""Integer results as PyTorch CPU computes them: float -> integer conversions of out-of-range values and NaN (x86's
"integer indefinite", then the low bits for narrower types), and integer linspace/logspace (computed in double and
truncated), through the plain and the out= paths, eager and compiled.
"""

from __future__ import annotations

import pytest
import torch

TPU = "tpu"

VALUES = [float("nan"), float("inf"), -float("inf"), 1e10, -1e10, 3e9, -3e9, 2.0**31, -2.0**31 - 1e3, 300.0, -1.0,
          -129.0, 65541.0, 2.0**63, -2.0**63, 1e19, -1e19, 1e30, 255.7, -0.5, 40000.0, -40000.0, 70000.0, 0.0, 7.9,
          -7.9, 2.0**31 - 1, -2.0**31, 127.5, -128.5, 3.9e9, 5e9, 2.0**32, 2.0**32 - 1, 1.7e19, 2.0**64 + 4096,
          65535.9, 2.0**63 + 2.0**20]

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("src", FLOATS, ids=str)
@pytest.mark.parametrize("dst", INTS, ids=str)
def test_float_to_int_cast(src, dst):
    x = torch.tensor(VALUES, dtype=torch.float64).to(src)
    want = x.to(dst)
    got = x.to(TPU).to(dst).cpu()
    assert torch.equal(got, want), f"{src}->{dst}\n{x.tolist()}\n{got.tolist()}\n{want.tolist()}"


@pytest.mark.parametrize("dst", [torch.uint8, torch.int32, torch.int64], ids=str)
def test_cast_inside_ops_and_compiled(dst):
    x = torch.tensor(VALUES, dtype=torch.float32)
    want = (x * 2).to(dst) + 1
    got = ((x.to(TPU) * 2).to(dst) + 1).cpu()
    assert torch.equal(got, want)
    fn = torch.compile(lambda t: (t * 2).to(dst) + 1, backend="tpu", dynamic=False)
    assert torch.equal(fn(x.to(TPU)).cpu(), want)


def test_complex_to_int_cast():
    z = torch.tensor([complex(3e9, 1), complex(float("nan"), 0), complex(-5.5, 2)], dtype=torch.complex64)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = z.to(torch.int32)
        got = z.to(TPU).to(torch.int32).cpu()
    assert torch.equal(got, want)


SPACED = [
    (torch.linspace, (1, 127, 50), torch.int16),
    (torch.linspace, (1, 127, 7), torch.int32),
    (torch.linspace, (-10, 10, 9), torch.int64),
    (torch.linspace, (0, 255, 37), torch.uint8),
    (torch.linspace, (-3, 100, 101), torch.int8),
    (torch.logspace, (0, 3, 13), torch.int32),
    (torch.logspace, (0, 2, 21), torch.int64),
    (torch.linspace, (0, 1, 11), torch.float64),
]


@pytest.mark.parametrize("fn,args,dtype", SPACED, ids=[f"{f.__name__}{a}-{d}" for f, a, d in SPACED])
def test_integer_spacing(fn, args, dtype):
    want = fn(*args, dtype=dtype)
    got = fn(*args, dtype=dtype, device=TPU).cpu()
    assert torch.equal(got, want), f"{got.tolist()}\n{want.tolist()}"
    out = torch.empty(args[2], dtype=dtype, device=TPU)
    fn(*args, out=out)
    assert torch.equal(out.cpu(), want), "out= path"
    cfn = torch.compile(lambda x: fn(*args, dtype=dtype, device=x.device) + x, backend="tpu", dynamic=False)
    assert torch.equal(cfn(torch.zeros((), dtype=dtype, device=TPU)).cpu(), want), "compiled"


_CONSTANT_DIVISIONS = r'''
import sys
import torch, torch_tpu

def compiled(fn):
    return torch.compile(fn, backend="tpu")

case = sys.argv[1]
if case == "empty":  # an empty storage is a constant zero in the program
    for dt in (torch.uint8, torch.int8, torch.int32, torch.int64):
        a = torch.empty(0, dtype=dt, device="tpu")
        for r in (a // a, torch.remainder(a, a), torch.fmod(a, a), torch.div(a, a, rounding_mode="trunc")):
            assert r.cpu().numel() == 0
elif case == "values":  # constant operands that divide fine still give CPU's values
    for dt in (torch.uint8, torch.int16, torch.int64):
        f = compiled(lambda: (torch.full((3,), 7, dtype=dt, device="tpu") // torch.full((3,), 2, dtype=dt, device="tpu"),
                              torch.remainder(torch.full((3,), 7, dtype=dt, device="tpu"), torch.full((3,), 3, dtype=dt, device="tpu"))))
        q, r = f()
        assert q.cpu().tolist() == [3, 3, 3] and r.cpu().tolist() == [1, 1, 1], (dt, q, r)
    f = compiled(lambda: torch.full((2,), -2**31, dtype=torch.int32, device="tpu") // torch.full((2,), -1, dtype=torch.int32, device="tpu"))
    assert f().cpu().tolist() == [-2**31, -2**31]  # wraps, as CUDA
    f = compiled(lambda: torch.fmod(torch.full((2,), -2**31, dtype=torch.int32, device="tpu"), torch.full((2,), -1, dtype=torch.int32, device="tpu")))
    assert f().cpu().tolist() == [0, 0]
else:  # a constant zero divisor: CPU's ZeroDivisionError, raised as a device-side check
    dt = {"uint8": torch.uint8, "int32": torch.int32}[case]
    op = {"uint8": lambda a, b: a // b, "int32": torch.remainder}[case]
    f = compiled(lambda: op(torch.ones(3, dtype=dt, device="tpu"), torch.zeros(3, dtype=dt, device="tpu")))
    try:
        f().cpu()
    except RuntimeError as e:
        assert "ZeroDivisionError" in str(e), e
    else:
        raise AssertionError("no ZeroDivisionError")
print("ok")
'''


@pytest.mark.parametrize("case", ["empty", "values", "uint8", "int32"])
def test_integer_division_of_constants_does_not_crash(case):
    # the plugin's constant folder divides constant integer operands natively: a zero divisor (or INT_MIN / -1)
    # killed the process with SIGFPE (empty tensors in eager mode, zeros in compiled code)
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _CONSTANT_DIVISIONS, case], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), (p.returncode, p.stdout[-2000:], p.stderr[-3000:])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_integer_pow_and_lcm_wrap_as_cpu(dtype):
    # x^e exact modulo 2^bits ((-55)^127 in int64 differed), and lcm's abs taken before 8/16-bit narrowing
    g = torch.Generator().manual_seed(0)
    lo = 0 if dtype == torch.uint8 else -128
    a = torch.randint(lo, 127, (300,), generator=g).to(dtype)
    e = torch.randint(0, 127, (300,), generator=g).to(dtype)
    assert torch.equal((a.to("tpu") ** e.to("tpu")).cpu(), a ** e)
    assert torch.equal((a.to("tpu") ** 127).cpu(), a ** 127)
    assert torch.equal(torch.lcm(a.to("tpu"), e.to("tpu")).cpu(), torch.lcm(a, e))
    if dtype != torch.uint8:
        n = torch.tensor([2, 3, -1, 1, 0, -1], dtype=dtype)
        m = torch.tensor([-1, -2, -3, -5, 0, -4], dtype=dtype)
        assert torch.equal((n.to("tpu") ** m.to("tpu")).cpu(), n ** m)
