"""Pallas and JAX kernels on tpu, under the module path TorchTPU kernel libraries import.

- :func:`custom_jax_kernel`: a JAX function (a ``pallas_call`` included) as a PyTorch op (see
  :func:`torch_tpu.jax_op`), with ``input_output_aliases``; :func:`jax_op` (``jax_op("ns::name", fn)``: a custom
  op taking ``register_autograd`` / ``register_fake``); :func:`custom_kernel` (a Pallas kernel body with a shape
  function).
- :mod:`.tpu_torch_pallas`: the interface PyTorch's inductor Pallas code generator calls for device ``tpu``.
"""

from ..._jax import custom_jax_kernel, custom_kernel, jax_op
from . import tpu_torch_pallas

__all__ = ["custom_jax_kernel", "custom_kernel", "jax_op", "tpu_torch_pallas"]
