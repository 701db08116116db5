"""torch.hash_tensor on tpu against CPU's kernel: the XOR of every element's 64 bits (a float's double, NaN payloads
and subnormals included; a bool's 0 or 1; an integer sign-extended), over all dims or some, keepdim, out=, compiled;
and CPU's errors for the calls it rejects.
"""
from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.usefixtures("strict_fallback")


def _bits32(vals):
    return torch.tensor([v - (1 << 32) if v >= 1 << 31 else v for v in vals], dtype=torch.int32)


def _bits16(vals):
    return torch.tensor([v - (1 << 16) if v >= 1 << 15 else v for v in vals], dtype=torch.int16)


SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -1e-45, 3e38, 1.0, -2.5]


def _inputs():
    g = torch.Generator().manual_seed(0)
    yield torch.randn(4, 5, generator=g)
    yield torch.randn(4, 5, generator=g, dtype=torch.float64)
    yield torch.randn(4, 5, generator=g).bfloat16()
    yield torch.randn(4, 5, generator=g).half()
    yield torch.randint(-100, 100, (4, 5), generator=g)
    yield torch.randint(-100, 100, (4, 5), generator=g, dtype=torch.int8)
    yield torch.randint(-5, 5, (4, 5), generator=g, dtype=torch.int16)
    yield torch.randint(-5, 5, (4, 5), generator=g, dtype=torch.int32)
    yield torch.randint(0, 255, (4, 5), generator=g, dtype=torch.uint8)
    yield torch.rand(4, 5, generator=g) > 0.5
    sp = torch.tensor(SPECIAL)
    yield from (sp, sp.double(), sp.bfloat16(), sp.half())
    # signaling and negative NaNs with payloads, subnormals of every width
    yield _bits32([0x7F800001, 0xFF812345, 0x7FC00001, 0x00000001, 0x807FFFFF]).view(torch.float32)
    yield _bits16([0x7C01, 0xFE01, 0x0001, 0x83FF]).view(torch.float16)
    yield _bits16([0x7F81, 0xFFC1, 0x0001, 0x8001]).view(torch.bfloat16)
    yield torch.tensor([0x7FF0000000000001, 0x0000000000000001], dtype=torch.int64).view(torch.float64)


@pytest.mark.parametrize("kw", [{}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": (0,)}, {"keepdim": True}])
def test_matches_cpu(kw):
    for x in _inputs():
        if x.dim() < 2 and kw.get("dim") == -1:
            continue
        want = torch.hash_tensor(x, **kw)
        got = torch.hash_tensor(x.to("tpu"), **kw)
        assert got.dtype == want.dtype == torch.uint64
        assert torch.equal(got.cpu(), want), (x.dtype, kw)


def test_dims_zero_d_out_and_compile():
    x = torch.randn(3, 4, 5)
    for dims in [(0, 2), (1,), (-1, 0), ()]:
        for keep in [False, True]:
            assert torch.equal(torch.hash_tensor(x.to("tpu"), dims, keepdim=keep).cpu(),
                               torch.hash_tensor(x, dims, keepdim=keep))
    s = torch.tensor(3.5)
    assert torch.equal(torch.hash_tensor(s.to("tpu")).cpu(), torch.hash_tensor(s))
    assert torch.equal(torch.hash_tensor(s.to("tpu"), 0).cpu(), torch.hash_tensor(s, 0))
    # an empty dim kept, another reduced: an empty result
    e = torch.empty(2, 0)
    assert torch.equal(torch.hash_tensor(e.to("tpu"), 0).cpu(), torch.hash_tensor(e, 0))
    out = torch.empty(3, dtype=torch.uint64, device="tpu")
    torch.hash_tensor(x[:, :, 0].to("tpu"), 1, out=out)
    assert torch.equal(out.cpu(), torch.hash_tensor(x[:, :, 0], 1))
    f = torch.compile(lambda t: torch.hash_tensor(t * 2, dim=1), backend="tpu", fullgraph=True)
    assert torch.equal(f(x.to("tpu")).cpu(), torch.hash_tensor(x * 2, dim=1))


@pytest.mark.parametrize("call", [
    lambda d: torch.hash_tensor(torch.randn(3, device=d), mode=1),
    lambda d: torch.hash_tensor(torch.empty(0, device=d)),
    lambda d: torch.hash_tensor(torch.empty(2, 0, device=d), 1),
    lambda d: torch.hash_tensor(torch.ones(2, dtype=torch.uint32, device=d)),
    lambda d: torch.hash_tensor(torch.ones(2, dtype=torch.complex64, device=d)),
])
def test_errors_as_cpu(call):
    with pytest.raises(Exception) as cpu_err:
        call("cpu")
    with pytest.raises(type(cpu_err.value)) as tpu_err:
        call("tpu")
    assert str(tpu_err.value) == str(cpu_err.value)
