"""``torch_tpu._internal.precision``: TorchTPU's module path of the float32 matmul precision context.

``Precision`` and ``precision`` are ``torch.tpu.Precision`` / ``torch.tpu.precision`` (the same objects): the
context sets PyTorch's ``torch.set_float32_matmul_precision`` for its block (see :mod:`torch_tpu.device`).
"""

from . import precision as _submodule  # noqa: F401  (imported first: the name `precision` below is the context)
from ...device import Precision, precision  # noqa: E402

__all__ = ["Precision", "precision"]
