"""``torch_tpu._internal.pallas.pallas``: TorchTPU's module of ``jax_op`` (the object ``torch.tpu.pallas.jax_op``
and ``torch_tpu.pallas.jax_op`` name): ``jax_op("ns::name", fn, donate_argnums=...)`` makes the JAX (or Pallas)
function ``fn`` the custom op ``torch.ops.ns.name`` (see :func:`torch_tpu.jax_op`)."""

from ..._jax import custom_jax_kernel, custom_kernel, jax_op

__all__ = ["custom_jax_kernel", "custom_kernel", "jax_op"]
