"""``aten::_grouped_mm`` (``torch.nn.functional.grouped_mm``) on tpu: the shape function for every float dtype.

The grouped matmul of mixture-of-experts layers is lowered for float32, bfloat16 and float16 on tpu (the rule is
csrc/lowering/rules/grouped.cpp), as PyTorch's CPU kernel computes it. PyTorch's meta function, however, mirrors
the CUDA kernel: it accepts bfloat16 only and requires 16-byte aligned strides. Eager mode infers result types
with the meta function, and ``torch.compile`` traces with it (fake tensors), so on tpu a float32 MoE model (what
Transformers builds from a config by default) would fail in both. This module replaces the meta function with one
that applies the CPU kernel's checks (dtypes, ranks, offsets, bias, output dtype) and no layout requirement, for
meta tensors and tpu fake tensors (in the C++ dispatcher and in the Python dispatcher dynamo traces with); fake
tensors of any other device get PyTorch's own function unchanged.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import torch

_lib: Optional[torch.library.Library] = None
_HALF_OR_FLOAT = (torch.float32, torch.bfloat16, torch.float16)


def _torch_meta() -> Any:
    from torch import _meta_registrations as m

    return m.meta_grouped_mm


def _fake_device(t: Any) -> Optional[torch.device]:
    return getattr(t, "fake_device", None)


def _meta_grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: Optional[torch.Tensor] = None,
                     bias: Optional[torch.Tensor] = None, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    dev = _fake_device(mat_a) or _fake_device(mat_b)
    if dev is not None and dev.type != "tpu":
        return _torch_meta()(mat_a, mat_b, offs=offs, bias=bias, out_dtype=out_dtype)
    torch._check(mat_a.dtype in _HALF_OR_FLOAT,
                 lambda: f"Expected mat_a to be Float32, BFloat16 or Float16 matrix, got {mat_a.dtype}")
    torch._check(mat_b.dtype == mat_a.dtype,
                 lambda: f"expected mat_a and mat_b to have the same dtype, but got: {mat_a.dtype} != {mat_b.dtype}")
    torch._check(mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
                 lambda: f"Multiplicands must be 2D or 3D but got mat_a.dim()={mat_a.dim()} and "
                         f"mat_b.dim()={mat_b.dim()}")
    a2, b2 = mat_a.dim() == 2, mat_b.dim() == 2
    if not (a2 and b2):
        torch._check(mat_a.size(-1) == mat_b.size(-2), lambda: "contraction dimension of mat_a and mat_b must match")
    if a2 or b2:
        torch._check(offs is not None, lambda: f"Offsets tensor not provided, but is needed for {mat_a.dim()}D/"
                                               f"{mat_b.dim()}D multiplicand layouts.")
        assert offs is not None
        torch._check(offs.dim() == 1, lambda: f"Offsets tensor must be 1D, but got offs.dim()={offs.dim()}.")
        torch._check(offs.dtype == torch.int32, lambda: "Offsets have to be int32")
    else:
        torch._check(offs is None,
                     lambda: "Offsets tensor provided, but is not needed for 3D/3D multiplicand layouts.")
    torch._check(bias is None, lambda: "Bias not supported yet")
    torch._check(out_dtype is None or out_dtype == mat_a.dtype,
                 lambda: "Grouped gemm output dtype must match `mat_a` dtype")
    if a2 and b2:
        size = [offs.size(0), mat_a.size(0), mat_b.size(1)]
    elif a2:
        torch._check(offs.size(0) == mat_b.size(0), lambda: "matrix batch sizes have to match")
        size = [mat_a.size(0), mat_b.size(-1)]
    elif b2:
        torch._check(offs.size(0) == mat_a.size(0), lambda: "matrix batch sizes have to match")
        size = [mat_a.size(1), mat_b.size(1)]
    else:
        torch._check(mat_a.size(0) == mat_b.size(0), lambda: "batched dimension has to match")
        size = [mat_a.size(0), mat_a.size(1), mat_b.size(-1)]
    return mat_a.new_empty(size, dtype=out_dtype or mat_a.dtype)


def _install() -> None:
    r"""Registers the shape function (once). PyTorch warns when a kernel replaces another; this one is meant to."""
    global _lib
    if _lib is not None or not hasattr(torch.ops.aten, "_grouped_mm"):
        return
    _torch_meta()  # PyTorch's own function must exist before it is replaced
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.impl("_grouped_mm", _meta_grouped_mm, "Meta")
    # Under the Python dispatcher (dynamo's fake tensors) PyTorch's function is also registered as the op's Python
    # Meta kernel, which wins over the C++ registration above: replace it there too.
    op = torch.ops.aten._grouped_mm.default
    if torch._C.DispatchKey.Meta in op.py_kernels:
        op.py_kernels[torch._C.DispatchKey.Meta] = _meta_grouped_mm
        op._dispatch_cache.clear()
    _lib = lib
