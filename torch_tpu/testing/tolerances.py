"""The tolerance table: how close a tpu result must be to PyTorch CPU's, per dtype.

One table for every comparison against CPU: the OpInfo, ModuleInfo and OptimInfo sweeps (opinfo.py, modules.py,
optims.py), the randomized soak test (soak.py), and the tests that compare hand-made calls (tests/python).

- ``tol(dtype)``: results of arbitrary ops on generated inputs. XLA reassociates reductions and fuses
  elementwise chains, and gradients accumulate a few more roundings than forwards, so float32 allows a few units in
  the last place more than torch.testing's defaults.
- ``tight_tol(dtype)``: single, well-conditioned ops on tame inputs (torch.testing's float32 defaults, scaled by 10
  in rtol): for tests that check one kernel's arithmetic closely.

Integers, bool and the float8 types compare bit for bit in both.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch

# dtype -> (rtol, atol)
TOLERANCES: Dict[torch.dtype, Tuple[float, float]] = {
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (4e-3, 2e-3),  # 10 bits of mantissa: a few units in the last place
    torch.float32: (1e-4, 3e-4),
    torch.complex64: (1e-4, 3e-4),
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
}

TIGHT: Dict[torch.dtype, Tuple[float, float]] = {
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-2, 2e-2),
    torch.float32: (1.3e-5, 1e-5),
    torch.complex64: (1.3e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
}


def tol(dtype: torch.dtype) -> Dict[str, float]:
    """rtol/atol keywords for torch.testing.assert_close (or opinfo's _close) at `dtype`."""
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    return dict(rtol=rtol, atol=atol)


def tight_tol(dtype: torch.dtype) -> Dict[str, float]:
    rtol, atol = TIGHT.get(dtype, (0.0, 0.0))
    return dict(rtol=rtol, atol=atol)
