"""complex32 (torch.chalf) tensors on tpu: held on the device as their raw bytes, ops computed as on CPU.

No plugin computes on complex32: a tpu complex32 storage's buffer holds the values' bytes (32-bit words), and ops on
complex32 tensors run on CPU's kernels (each fallback warns once). Results must equal CPU's bit for bit, and ops CPU
lacks for complex32 raise CPU's error.
"""

import subprocess
import sys
import warnings

import pytest
import torch

import torch_tpu  # noqa: F401


def _bits(t):
    return t.cpu().view(torch.int32)


def _same(a, b):
    assert a.dtype == b.dtype == torch.chalf and a.shape == b.shape
    assert torch.equal(_bits(a), _bits(b))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_round_trip_and_item():
    x = torch.randn(5, 3, dtype=torch.chalf)
    t = x.to("tpu")
    assert t.dtype == torch.chalf and t.device.type == "tpu" and t.element_size() == 4
    _same(t, x)
    assert t[2, 1].item() == x[2, 1].item()
    _same(t.t().contiguous(), x.t().contiguous())
    _same(t[:, 1], x[:, 1])


def test_experimental_warning_as_on_cpu():
    # PyTorch warns once per process: a fresh one, as test_torch's test_complex_half_experimental_warning expects
    code = (
        "import warnings, torch, torch_tpu\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    torch.empty(3, dtype=torch.chalf, device='tpu')\n"
        "print(any('ComplexHalf support is experimental' in str(x.message) for x in w))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().endswith("True"), out.stdout + out.stderr


@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.complex64, torch.int32, torch.bool])
def test_conversions_both_ways(src):
    x = torch.testing.make_tensor((4, 6), dtype=src, device="cpu", low=-9, high=9)
    t = x.to("tpu")
    _same(t.to(torch.chalf), x.to(torch.chalf))
    c = torch.randn(4, 6, dtype=torch.chalf)
    back = c.to("tpu").to(src)
    assert back.device.type == "tpu"
    torch.testing.assert_close(back.cpu(), c.to(src), rtol=0, atol=0)
    # copy_ into an existing tensor of the other dtype, and into a strided view
    dst = torch.zeros(6, 4, dtype=torch.chalf, device="tpu").t()
    dst.copy_(t)
    ref = torch.zeros(6, 4, dtype=torch.chalf).t()
    ref.copy_(x)
    _same(dst, ref)


def test_ops_equal_cpu():
    a = torch.randn(3, 4, dtype=torch.chalf)
    b = torch.randn(3, 4, dtype=torch.chalf)
    ta, tb = a.to("tpu"), b.to("tpu")
    _same(ta * tb, a * b)
    _same(ta + tb, a + b)
    _same(torch.cat([ta, tb]), torch.cat([a, b]))
    _same(ta.conj().resolve_conj(), a.conj().resolve_conj())
    _same(torch.zeros(2, 3, dtype=torch.chalf, device="tpu"), torch.zeros(2, 3, dtype=torch.chalf))
    f = torch.empty(2, 2, dtype=torch.chalf, device="tpu").fill_(2 - 1j)
    _same(f, torch.full((2, 2), 2 - 1j, dtype=torch.chalf))
    w = ta.clone()
    w[1] = 5
    r = a.clone()
    r[1] = 5
    _same(w, r)
    _same(ta, a)  # the clone did not write through


def test_views_alias_the_bytes():
    x = torch.randn(4, dtype=torch.chalf)
    t = x.to("tpu")
    # view_as_real and dtype views read the complex32 bytes on the device
    assert torch.equal(torch.view_as_real(t).cpu(), torch.view_as_real(x))
    assert torch.equal(t.view(torch.float16).cpu(), x.view(torch.float16))
    assert torch.equal(t.view(torch.int32).cpu(), x.view(torch.int32))
    # a write through the real view is seen by the complex32 tensor
    torch.view_as_real(t)[:, 1].zero_()
    x2 = x.clone()
    torch.view_as_real(x2)[:, 1].zero_()
    _same(t, x2)


@pytest.mark.parametrize("op", ["sum", "exp", "sin", "mm", "cumsum", "abs", "mul_scalar", "div"])
def test_device_ops_cpu_lacks(op):
    # As on CUDA: complex32 ops compute in complex64 and round the result to complex32 (CPU has no kernel for most)
    fns = {
        "sum": lambda x: x.sum(0),
        "exp": torch.exp,
        "sin": torch.sin,
        "mm": lambda x: x @ x,
        "cumsum": lambda x: x.cumsum(1),
        "abs": torch.abs,
        "mul_scalar": lambda x: x * (0.5 + 2j),
        "div": lambda x: x / (x + 3),
    }
    x = (torch.randn(4, 4, dtype=torch.cfloat) / 2).to(torch.chalf)
    before = torch_tpu.fallback_counts()
    got = fns[op](x.to("tpu"))
    ref = fns[op](x.to(torch.cfloat))
    ref = ref.to(torch.chalf) if ref.is_complex() else ref.to(torch.half)
    assert got.dtype == ref.dtype and got.device.type == "tpu"
    torch.testing.assert_close(got.cpu().to(torch.cfloat if got.is_complex() else torch.float),
                               ref.to(torch.cfloat if ref.is_complex() else torch.float), rtol=2e-3, atol=2e-3)
    assert torch_tpu.fallback_counts() == before  # computed on the device


def test_rounding_bit_exact():
    # the store rounds each component to half as c10::Half does (nearest even), subnormals and infinities included
    vals = torch.tensor([1 + 1j, 1.0009765625 + 2j, 65520 - 1j, 6e-8 + 1e-5j, -0.0 + 3.14159j, float("inf") + 0j,
                         float("nan") + 1j, 1e-30 - 1e30j], dtype=torch.cfloat)
    got = vals.to("tpu").to(torch.chalf)
    ref = vals.to(torch.chalf)
    assert torch.equal(_bits(got), _bits(ref))
    assert torch.equal(got.to(torch.cfloat).cpu().view(torch.int64), ref.to(torch.cfloat).view(torch.int64))


def test_compiled_and_fused():
    x = torch.randn(8, dtype=torch.chalf)
    def f(a):
        return (a * a + 1).conj()
    ref = f(x.to("tpu"))
    got = torch.compile(f, backend="tpu", fullgraph=True)(x.to("tpu"))
    assert got.dtype == torch.chalf
    # one program: no rounding to complex32 between the ops (as Inductor computes half types), so within a rounding
    torch.testing.assert_close(got.cpu().to(torch.cfloat), ref.cpu().to(torch.cfloat), rtol=1e-3, atol=1e-3)
    torch_tpu.set_eager_mode("fused")
    try:
        fused = f(x.to("tpu"))
        fused = fused.resolve_conj().cpu()
    finally:
        torch_tpu.set_eager_mode("strict")
    assert torch.equal(fused.view(torch.int32), _bits(ref.resolve_conj()))




def test_complex_of_half_parts_on_the_device(strict_fallback):
    # torch.complex(half, half) makes complex32 (it ran on the CPU fallback), the parts broadcast
    g = torch.Generator().manual_seed(0)
    re = torch.randn(4, 3, generator=g).half()
    im = torch.randn(3, generator=g).half()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.complex(re, im)
        actual = torch.complex(re.to("tpu"), im.to("tpu"))
    assert actual.dtype == torch.complex32
    assert torch.equal(actual.cpu().view(torch.float16), expected.view(torch.float16))
