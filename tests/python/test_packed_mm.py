"""Weight-only quantized products on tpu: _convert_weight_to_int4pack / _weight_int4pack_mm (CUDA's int4 kernels, the
ones torchao's int4 weight-only layout calls) and _weight_int8pack_mm (CPU's and CUDA's), against CPU's kernels and a
float64 dequantize-then-multiply reference; their argument checks; and the same ops in a compiled graph.
"""
from __future__ import annotations

import pytest
import torch

import torch_tpu
from torch.testing._internal.common_quantization import _group_quantize_tensor

pytestmark = pytest.mark.usefixtures("strict_fallback")


def _nibbles(q: torch.Tensor) -> torch.Tensor:
    return (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)  # even k in the high nibble


def _reference(a, q, sz, group):
    k = q.shape[1]
    scale = sz[:, :, 0].t().repeat_interleave(group, 1)[:, :k].double()
    zero = sz[:, :, 1].t().repeat_interleave(group, 1)[:, :k].double()
    w = ((q.double() - 8) * scale + zero).to(a.dtype)  # the weights dequantized to x's dtype, as the kernels do
    return a.double() @ w.double().t()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("m,k,n,group,inner", [(1, 64, 16, 32, 2), (5, 256, 32, 64, 4), (3, 256, 24, 128, 8),
                                                (2, 512, 8, 256, 2)])
def test_int4pack_mm_matches_cpu_kernel_and_reference(dtype, m, k, n, group, inner):
    gen = torch.Generator().manual_seed(k + n)
    w = torch.randn(k, n, generator=gen)
    a = torch.randn(m, k, generator=gen).to(dtype)
    q, sz = _group_quantize_tensor(w, n_bit=4, q_group_size=group)
    sz = sz.to(dtype)
    packed = torch._convert_weight_to_int4pack(_nibbles(q).to("tpu"), inner)
    assert packed.shape == (n // 8, k // (16 * inner), 32, inner // 2) and packed.dtype == torch.int32
    got = torch._weight_int4pack_mm(a.to("tpu"), packed, group, sz.to("tpu"))
    assert got.dtype == dtype and got.shape == (m, n)
    ref = _reference(a, q, sz, group)
    tol = dict(rtol=2e-2, atol=5e-2) if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.cpu().double(), ref, **tol)
    if n % 16 == 0:  # CPU's kernel packs 16 rows at a time (CUDA's and tpu's 8)
        cpu = torch._weight_int4pack_mm_for_cpu(a, torch._convert_weight_to_int4pack_for_cpu(q, inner), group, sz)
        # CPU's kernel rounds in other places (bfloat16 and half results may differ from it by a few of their ulps)
        torch.testing.assert_close(got.cpu(), cpu, **(dict(rtol=5e-2, atol=1e-1) if dtype != torch.float32 else tol))


def test_int4pack_is_the_weights_bytes():
    q = torch.randint(0, 16, (16, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    u8 = _nibbles(q)
    packed = torch._convert_weight_to_int4pack(u8.to("tpu"), 2).cpu()
    assert torch.equal(packed.view(torch.uint8).flatten(), u8.flatten())


def test_int8pack_mm_matches_cpu():
    gen = torch.Generator().manual_seed(3)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        a = torch.randn(4, 32, generator=gen).to(dtype)
        w = torch.randint(-128, 128, (12, 32), generator=gen, dtype=torch.int8)
        s = (torch.rand(12, generator=gen) / 50).to(dtype)
        want = torch._weight_int8pack_mm(a, w, s)
        got = torch._weight_int8pack_mm(a.to("tpu"), w.to("tpu"), s.to("tpu"))
        tol = dict(rtol=1e-2, atol=1e-2) if dtype != torch.float32 else dict(rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got.cpu(), want, **tol)


def test_argument_errors_are_cudas():
    u8 = torch.zeros(16, 32, dtype=torch.uint8, device="tpu")
    with pytest.raises(RuntimeError, match="innerKTiles need to be 2, 4, or 8, got 3"):
        torch._convert_weight_to_int4pack(u8, 3)
    with pytest.raises(RuntimeError, match="multiple of 8"):
        torch._convert_weight_to_int4pack(torch.zeros(12, 32, dtype=torch.uint8, device="tpu"), 2)
    with pytest.raises(RuntimeError, match="expected w to be uint8|expect weight to be kByte"):
        torch._convert_weight_to_int4pack(torch.zeros(16, 32, dtype=torch.int32, device="tpu"), 2)
    packed = torch._convert_weight_to_int4pack(u8, 2)
    a = torch.zeros(2, 64, dtype=torch.bfloat16, device="tpu")
    sz = torch.ones(2, 16, 2, dtype=torch.bfloat16, device="tpu")
    with pytest.raises(RuntimeError, match="expect qGroupSize to be 32, 64, 128 or 256, got 16"):
        torch._weight_int4pack_mm(a, packed, 16, sz)
    with pytest.raises(RuntimeError, match="qScaleAndZeros to be 3d tensor with sizes \\[2, 16, 2\\]"):
        torch._weight_int4pack_mm(a, packed, 32, sz[:, :8])
    with pytest.raises(RuntimeError, match="A.size\\(1\\) == 64"):
        torch._weight_int4pack_mm(a[:, :32], packed, 32, sz)
    w8 = torch.zeros(4, 64, dtype=torch.int8, device="tpu")
    with pytest.raises(RuntimeError) as cpu_err:
        torch._weight_int8pack_mm(a.cpu(), w8.cpu(), torch.ones(3, dtype=torch.bfloat16))
    torch_tpu.set_fallback_strict(False)  # the CPU kernel raises its own error
    try:
        with pytest.raises(RuntimeError) as tpu_err:
            torch._weight_int8pack_mm(a, w8, torch.ones(3, dtype=torch.bfloat16, device="tpu"))
    finally:
        torch_tpu.set_fallback_strict(True)
    assert str(tpu_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]


def test_compiled_graph_runs_the_packed_products():
    gen = torch.Generator().manual_seed(5)
    q, sz = _group_quantize_tensor(torch.randn(64, 16, generator=gen), n_bit=4, q_group_size=32)
    sz = sz.to(torch.bfloat16)
    w8 = torch.randint(-128, 128, (16, 64), generator=gen, dtype=torch.int8)
    s8 = (torch.rand(16, generator=gen) / 50).to(torch.bfloat16)
    a = torch.randn(3, 64, generator=gen).to(torch.bfloat16)

    def f(a, u8, sz, w8, s8):
        packed = torch._convert_weight_to_int4pack(u8, 2)
        return torch._weight_int4pack_mm(a, packed, 32, sz) + torch._weight_int8pack_mm(a, w8, s8)

    args = [t.to("tpu") for t in (a, _nibbles(q), sz, w8, s8)]
    eager = f(*args)
    compiled = torch.compile(f, backend="tpu", fullgraph=True)(*args)
    torch.testing.assert_close(compiled.cpu(), eager.cpu(), rtol=1e-2, atol=1e-2)
